/* checker: a small strict JSON reader for certificates (DSSE envelope and
 * in-toto statement). Bounded depth and size; anything malformed is an
 * error, never a partial result. Fuzzed by tests/fuzz/fuzz_cert.c. */
#include <stdlib.h>
#include <string.h>

#include "checker/checker_int.h"

#define JSON_DEPTH 32

struct jp {
	const char *p, *end;
	int depth;
};

static void ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static struct jv *jv_new(int type)
{
	struct jv *v = calloc(1, sizeof(*v));

	if (v)
		v->type = type;
	return v;
}

void jv_free(struct jv *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		jv_free(v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->s);
	free(v);
}

static char *parse_str(struct jp *j, size_t *outlen)
{
	size_t cap = 32, n = 0;
	char *s = malloc(cap);

	if (!s || j->p >= j->end || *j->p != '"')
		goto bad;
	j->p++;
	while (j->p < j->end && *j->p != '"') {
		unsigned char c = (unsigned char)*j->p++;
		char enc[4];
		size_t el = 1;

		if (c < 0x20)
			goto bad;
		enc[0] = (char)c;
		if (c == '\\') {
			/* the one-letter escapes and what they stand for */
			static const char esc_in[] = "\"\\/bfnrt", esc_out[] = "\"\\/\b\f\n\r\t";
			const char *x;

			if (j->p >= j->end)
				goto bad;
			c = (unsigned char)*j->p++;
			if (c && (x = strchr(esc_in, c)) != NULL) {
				enc[0] = esc_out[x - esc_in];
			} else if (c == 'u') {
				unsigned u = 0;

				if (j->end - j->p < 4)
					goto bad;
				for (int k = 0; k < 4; k++) {
					int h = pc_hex_digit(j->p[k]);

					if (h < 0)
						goto bad;
					u = u * 16 + (unsigned)h;
				}
				j->p += 4;
				/* surrogates are not needed by our documents: refuse */
				if (u == 0 || (u >= 0xd800 && u <= 0xdfff))
					goto bad;
				if (u < 0x80) {
					enc[0] = (char)u;
				} else if (u < 0x800) {
					enc[0] = (char)(0xc0 | (u >> 6));
					enc[1] = (char)(0x80 | (u & 0x3f));
					el = 2;
				} else {
					enc[0] = (char)(0xe0 | (u >> 12));
					enc[1] = (char)(0x80 | ((u >> 6) & 0x3f));
					enc[2] = (char)(0x80 | (u & 0x3f));
					el = 3;
				}
			} else {
				goto bad;
			}
		}
		if (n + el + 1 > cap) {
			char *q = realloc(s, cap * 2);

			if (!q)
				goto bad;
			s = q;
			cap *= 2;
		}
		memcpy(s + n, enc, el);
		n += el;
	}
	if (j->p >= j->end)
		goto bad;
	j->p++;
	s[n] = 0;
	*outlen = n;
	return s;
bad:
	free(s);
	return NULL;
}

static struct jv *parse_val(struct jp *j);

static int push(struct jv *v, char *key, struct jv *item)
{
	struct jv **ni;
	char **nk = NULL;

	ni = realloc(v->items, (v->n + 1) * sizeof(*ni));
	if (!ni)
		return -1;
	v->items = ni;
	if (v->type == JV_OBJECT) {
		nk = realloc(v->keys, (v->n + 1) * sizeof(*nk));
		if (!nk)
			return -1;
		v->keys = nk;
		v->keys[v->n] = key;
	}
	v->items[v->n++] = item;
	return 0;
}

static struct jv *parse_container(struct jp *j, int type)
{
	struct jv *v = jv_new(type);
	char close = type == JV_OBJECT ? '}' : ']';

	if (!v || ++j->depth > JSON_DEPTH)
		goto bad;
	j->p++;
	ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		j->depth--;
		return v;
	}
	for (;;) {
		char *key = NULL;
		struct jv *item;

		ws(j);
		if (type == JV_OBJECT) {
			size_t kl;

			key = parse_str(j, &kl);
			if (!key || strlen(key) != kl)
				goto badkey;
			ws(j);
			if (j->p >= j->end || *j->p != ':')
				goto badkey;
			j->p++;
		}
		if (key && jv_get(v, key))
			goto badkey; /* duplicate keys: ambiguous, refused */
		item = parse_val(j);
		if (!item || push(v, key, item) < 0) {
			jv_free(item);
			goto badkey;
		}
		ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == close) {
			j->p++;
			j->depth--;
			return v;
		}
		goto bad;
	badkey:
		free(key);
		goto bad;
	}
bad:
	jv_free(v);
	return NULL;
}

static struct jv *parse_val(struct jp *j)
{
	struct jv *v;

	ws(j);
	if (j->p >= j->end)
		return NULL;
	switch (*j->p) {
	case '{':
		return parse_container(j, JV_OBJECT);
	case '[':
		return parse_container(j, JV_ARRAY);
	case '"':
		v = jv_new(JV_STRING);
		if (v && !(v->s = parse_str(j, &v->slen))) {
			jv_free(v);
			return NULL;
		}
		return v;
	case 't':
	case 'f':
	case 'n': {
		static const char *lit[] = {"true", "false", "null"};
		static const int ty[] = {JV_TRUE, JV_FALSE, JV_NULL};

		for (int i = 0; i < 3; i++) {
			size_t l = strlen(lit[i]);

			if ((size_t)(j->end - j->p) >= l && memcmp(j->p, lit[i], l) == 0) {
				j->p += l;
				return jv_new(ty[i]);
			}
		}
		return NULL;
	}
	default: {
		const char *s = j->p;

		if (*j->p == '-')
			j->p++;
		while (j->p < j->end &&
		       ((*j->p >= '0' && *j->p <= '9') || *j->p == '.' || *j->p == 'e' ||
			*j->p == 'E' || *j->p == '+' || *j->p == '-'))
			j->p++;
		if (j->p == s || (j->p - s == 1 && *s == '-'))
			return NULL;
		v = jv_new(JV_NUMBER);
		if (!v)
			return NULL;
		v->s = strndup(s, (size_t)(j->p - s));
		if (!v->s) {
			jv_free(v);
			return NULL;
		}
		v->slen = strlen(v->s);
		return v;
	}
	}
}

struct jv *jv_parse(const char *buf, size_t len)
{
	struct jp j = {buf, buf + len, 0};
	struct jv *v = parse_val(&j);

	ws(&j);
	if (v && j.p != j.end) {
		jv_free(v);
		return NULL;
	}
	return v;
}

const struct jv *jv_get(const struct jv *o, const char *key)
{
	if (!o || o->type != JV_OBJECT)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->keys[i], key) == 0)
			return o->items[i];
	return NULL;
}

const char *jv_str(const struct jv *v)
{
	return v && v->type == JV_STRING ? v->s : NULL;
}
