/* JSON text: the one string escaper (the policy hash, log records, the
 * checker's results and certificates, replies all escape the same way) and
 * a small writer that places the commas and colons. Writes into a
 * struct pc_buf, whose sticky error the caller checks once at the end. */
#include "common/pc.h"

#include <string.h>

/* Bytes a JSON string must escape: control characters, quote, backslash,
 * and DEL (kept out of terminals). NUL is in the table so that one test
 * per byte ends a run at the end of a C string too. */
static const bool esc_tab[256] = {
    [0x00] = 1, [0x01] = 1, [0x02] = 1, [0x03] = 1, [0x04] = 1, [0x05] = 1, [0x06] = 1,
    [0x07] = 1, [0x08] = 1, [0x09] = 1, [0x0a] = 1, [0x0b] = 1, [0x0c] = 1, [0x0d] = 1,
    [0x0e] = 1, [0x0f] = 1, [0x10] = 1, [0x11] = 1, [0x12] = 1, [0x13] = 1, [0x14] = 1,
    [0x15] = 1, [0x16] = 1, [0x17] = 1, [0x18] = 1, [0x19] = 1, [0x1a] = 1, [0x1b] = 1,
    [0x1c] = 1, [0x1d] = 1, [0x1e] = 1, [0x1f] = 1, ['"'] = 1,	[0x5c] = 1, [0x7f] = 1,
};

/* The escape of c (one that esc_tab marks) into e; its length. */
static size_t esc_one(unsigned char c, char e[6])
{
	static const char hex[] = "0123456789abcdef";

	e[0] = '\\';
	switch (c) {
	case '"':
	case '\\':
		e[1] = (char)c;
		return 2;
	case '\n':
		e[1] = 'n';
		return 2;
	case '\t':
		e[1] = 't';
		return 2;
	case '\r':
		e[1] = 'r';
		return 2;
	default:
		memcpy(e + 1, "u00", 3);
		e[4] = hex[c >> 4];
		e[5] = hex[c & 15];
		return 6;
	}
}

void pc_json_escape(struct pc_buf *b, const char *s, size_t n)
{
	const char *end = s + n;

	while (s < end) {
		const char *run = s;
		char e[6];

		while (s < end && !esc_tab[(unsigned char)*s])
			s++;
		pc_buf_put(b, run, (size_t)(s - run));
		if (s == end)
			return;
		pc_buf_put(b, e, esc_one((unsigned char)*s++, e));
	}
}

void pc_json_quote(struct pc_buf *b, const char *s)
{
	pc_buf_putc(b, '"');
	/* one pass to the NUL, which the table marks: no strlen first (this
	 * is every string of every log record) */
	for (; s;) {
		const char *run = s;
		char e[6];

		while (!esc_tab[(unsigned char)*s])
			s++;
		pc_buf_put(b, run, (size_t)(s - run));
		if (!*s)
			break;
		pc_buf_put(b, e, esc_one((unsigned char)*s++, e));
	}
	pc_buf_putc(b, '"');
}

void pc_json_init(struct pc_json *j, struct pc_buf *b)
{
	memset(j, 0, sizeof(*j));
	j->b = b;
}

/* The separator before a value or a key: none after a key or first in its
 * container, a comma otherwise. */
static void sep(struct pc_json *j)
{
	uint32_t bit = 1u << (j->depth & 31);

	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (j->depth && j->more & bit)
		pc_buf_putc(j->b, ',');
	j->more |= bit;
}

static void nest(struct pc_json *j, char c)
{
	sep(j);
	pc_buf_putc(j->b, c);
	if (j->depth >= PC_JSON_DEPTH) {
		if (!j->b->err)
			j->b->err = PC_EINVAL;
		return;
	}
	j->depth++;
	j->more &= ~(1u << j->depth);
}

static void unnest(struct pc_json *j, char c)
{
	pc_buf_putc(j->b, c);
	if (!j->depth || j->after_key) {
		if (!j->b->err)
			j->b->err = PC_EINVAL; /* unbalanced: a writer bug */
		return;
	}
	j->depth--;
}

void pc_json_obj(struct pc_json *j)
{
	nest(j, '{');
}

void pc_json_obj_end(struct pc_json *j)
{
	unnest(j, '}');
}

void pc_json_arr(struct pc_json *j)
{
	nest(j, '[');
}

void pc_json_arr_end(struct pc_json *j)
{
	unnest(j, ']');
}

void pc_json_key(struct pc_json *j, const char *key)
{
	sep(j);
	pc_json_quote(j->b, key);
	pc_buf_putc(j->b, ':');
	j->after_key = true;
}

void pc_json_str(struct pc_json *j, const char *s)
{
	sep(j);
	pc_json_quote(j->b, s);
}

void pc_json_strn(struct pc_json *j, const char *s, size_t n)
{
	sep(j);
	pc_buf_putc(j->b, '"');
	pc_json_escape(j->b, s, n);
	pc_buf_putc(j->b, '"');
}

void pc_json_u64(struct pc_json *j, uint64_t v)
{
	sep(j);
	pc_buf_u64(j->b, v);
}

void pc_json_i64(struct pc_json *j, int64_t v)
{
	sep(j);
	if (v < 0) {
		pc_buf_putc(j->b, '-');
		pc_buf_u64(j->b, (uint64_t)0 - (uint64_t)v);
	} else {
		pc_buf_u64(j->b, (uint64_t)v);
	}
}

void pc_json_bool(struct pc_json *j, bool v)
{
	sep(j);
	pc_buf_puts(j->b, v ? "true" : "false");
}

void pc_json_null(struct pc_json *j)
{
	sep(j);
	pc_buf_puts(j->b, "null");
}

void pc_json_raw(struct pc_json *j, const char *json)
{
	sep(j);
	pc_buf_puts(j->b, json);
}

void pc_json_kstr(struct pc_json *j, const char *key, const char *s)
{
	pc_json_key(j, key);
	pc_json_str(j, s);
}

void pc_json_ku64(struct pc_json *j, const char *key, uint64_t v)
{
	pc_json_key(j, key);
	pc_json_u64(j, v);
}
