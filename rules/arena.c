/* The arena rules/ allocates parse trees and compiled policies from: many
 * small, immutable objects that die together, freed with one call. */
#include "rules/rules_int.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_CHUNK (64u << 10)

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

void *arena_alloc(struct arena *a, size_t size)
{
	struct arena_chunk *c = a->head;
	const size_t al = alignof(max_align_t);
	void *p;

	if (size > SIZE_MAX / 2)
		return NULL;
	size = (size + al - 1) & ~(al - 1);
	if (size == 0)
		size = al;
	if (!c || c->cap - c->used < size) {
		size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		if (a->head && size > ARENA_CHUNK) {
			/* A big block gets a chunk of its own behind the current
			 * one, which keeps its free space for small objects. */
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = a->head;
			a->head = c;
		}
	}
	p = c->data + c->used;
	c->used += size;
	memset(p, 0, size);
	return p;
}

void *arena_calloc(struct arena *a, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / 2 / size)
		return NULL;
	return arena_alloc(a, n * size);
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

void arena_free(struct arena *a)
{
	if (!a)
		return;
	while (a->head) {
		struct arena_chunk *next = a->head->next;

		free(a->head);
		a->head = next;
	}
}
