/* The one growable byte and text buffer every module writes text with
 * (canonical policy, log records, syslog lines, certificates, metrics,
 * request heads): appends never fail loudly, the first failure sticks in
 * b->err so a caller checks once at the end, and a hard size limit keeps
 * hostile input from growing it without bound. */
#include "common/pc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pc_buf_init(struct pc_buf *b, size_t max, unsigned flags)
{
	memset(b, 0, sizeof(*b));
	b->max = max;
	b->flags = flags & PC_BUF_SECRET;
}

void pc_buf_init_fixed(struct pc_buf *b, void *mem, size_t size, unsigned flags)
{
	memset(b, 0, sizeof(*b));
	b->p = mem;
	b->cap = size;
	b->max = size;
	b->flags = flags & PC_BUF_SECRET;
	b->fixed = true;
	if (size)
		b->p[0] = '\0';
}

static size_t buf_max(const struct pc_buf *b)
{
	if (b->fixed)
		return b->cap; /* a fixed buffer of size 0 holds nothing */
	return b->max ? b->max : PC_BUF_MAX_DEFAULT;
}

static void buf_fail(struct pc_buf *b, int code)
{
	if (!b->err)
		b->err = code;
}

/* Wipe what a secret buffer held before its memory is given back. */
static void buf_wipe(const struct pc_buf *b)
{
	if (b->p && b->flags & PC_BUF_SECRET)
		explicit_bzero(b->p, b->cap);
}

int pc_buf_reserve(struct pc_buf *b, size_t n)
{
	size_t need, cap;
	char *np;

	if (b->err)
		return b->err;
	if (n > buf_max(b) - b->len) {
		buf_fail(b, PC_EINVAL);
		return b->err;
	}
	if (b->fixed)
		return 0;
	/* a growable buffer always has room for the NUL after the text */
	need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	/* never more than the limit and a NUL: pc_buf_put's inline check of
	 * the room then also keeps the limit */
	if (buf_max(b) < SIZE_MAX && cap > buf_max(b) + 1)
		cap = buf_max(b) + 1;
	if (b->flags & PC_BUF_SECRET) {
		/* realloc could leave a copy behind in freed memory */
		np = malloc(cap);
		if (np && b->p) {
			memcpy(np, b->p, b->len + 1);
			buf_wipe(b);
		}
		if (np)
			free(b->p);
	} else {
		np = realloc(b->p, cap);
	}
	if (!np) {
		buf_fail(b, PC_ENOMEM);
		return b->err;
	}
	if (!b->p)
		np[0] = '\0';
	b->p = np;
	b->cap = cap;
	return 0;
}

static void buf_terminate(struct pc_buf *b)
{
	if (b->len < b->cap)
		b->p[b->len] = '\0';
}

void pc_buf_put_grow(struct pc_buf *b, const void *data, size_t n)
{
	if (b->err)
		return;
	if (!n) {
		/* a growable buffer that was written is a string, even empty */
		pc_buf_reserve(b, 0);
		return;
	}
	if (pc_buf_reserve(b, n) < 0)
		return;
	memcpy(b->p + b->len, data, n);
	b->len += n;
	buf_terminate(b);
}

void pc_buf_vprintf(struct pc_buf *b, const char *fmt, va_list ap)
{
	for (;;) {
		size_t room;
		va_list aq;
		int n;

		if (b->err || pc_buf_reserve(b, 0) < 0)
			return;
		room = b->p ? b->cap - b->len : 0;
		va_copy(aq, ap);
		n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, aq);
		va_end(aq);
		if (n < 0) {
			buf_fail(b, PC_EINVAL);
			break;
		}
		if ((size_t)n < room) {
			if (pc_buf_reserve(b, (size_t)n) == 0)
				b->len += (size_t)n;
			break;
		}
		/* did not fit: grow (a fixed buffer fails here) and again */
		if (b->fixed) {
			buf_fail(b, PC_EINVAL);
			break;
		}
		if (pc_buf_reserve(b, (size_t)n) < 0)
			break;
	}
	buf_terminate(b);
}

void pc_buf_printf(struct pc_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pc_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

void pc_buf_u64(struct pc_buf *b, uint64_t v)
{
	char t[20];
	size_t n = sizeof(t);

	/* by hand: snprintf was a tenth of logd's time per record */
	do {
		t[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	pc_buf_put(b, t + n, sizeof(t) - n);
}

void pc_buf_hex(struct pc_buf *b, const void *data, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *d = data;

	if (pc_buf_reserve(b, n > SIZE_MAX / 2 ? SIZE_MAX : 2 * n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		char e[2] = {hex[d[i] >> 4], hex[d[i] & 15]};

		pc_buf_put(b, e, 2);
	}
}

const char *pc_buf_str(const struct pc_buf *b)
{
	return b->p && b->len < b->cap ? b->p : "";
}

void pc_buf_reset(struct pc_buf *b)
{
	buf_wipe(b); /* all of it: a failed printf may have written past len */
	b->len = 0;
	b->err = 0;
	if (b->cap)
		b->p[0] = '\0';
}

char *pc_buf_take(struct pc_buf *b, size_t *len)
{
	char *p = NULL;

	if (b->fixed)
		buf_fail(b, PC_EINVAL);
	else
		pc_buf_reserve(b, 0); /* an empty buffer gives "" */
	if (!b->err) {
		p = b->p;
		if (len)
			*len = b->len;
		b->p = NULL;
		b->len = b->cap = 0;
	}
	pc_buf_free(b);
	return p;
}

void pc_buf_free(struct pc_buf *b)
{
	if (!b)
		return;
	buf_wipe(b);
	if (!(b->fixed))
		free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
	b->err = 0;
	b->fixed = false;
}

/* The (char **, size_t *) appenders the engine's status JSON still uses
 * (engine/control.c and the pieces it gathers), over the buffer and the
 * escaper above: the text is malloc'ed, exactly *len bytes and a NUL. */
int pc_buf_appendf(char **buf, size_t *len, const char *fmt, ...)
{
	struct pc_buf b = {.p = *buf, .len = *len, .cap = *buf ? *len + 1 : 0};
	va_list ap;

	va_start(ap, fmt);
	pc_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (b.err)
		return b.err; /* *buf is still valid: the buffer only grows */
	*buf = b.p;
	*len = b.len;
	return 0;
}

int pc_buf_append_json(char **buf, size_t *len, const char *s)
{
	struct pc_buf b = {.p = *buf, .len = *len, .cap = *buf ? *len + 1 : 0};

	pc_json_quote(&b, s);
	if (b.err)
		return b.err;
	*buf = b.p;
	*len = b.len;
	return 0;
}
