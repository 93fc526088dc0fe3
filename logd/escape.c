/* Record text for people to read: `portcullis log show` (and `top`, through
 * the same record summary) and the syslog export. A record's strings come
 * from the sandbox (a DNS name, an HTTP host or path), so every code point
 * that does not print is escaped, one list for every output: otherwise a
 * record could move a terminal's cursor, recolour it, rewrite the line
 * above, or reorder what a reader sees (bidi controls). The forms differ
 * only in how an escape is written (docs/logd.md, "Display escaping"). */
#include "logd/logd_int.h"

#include <stdio.h>

bool logesc_nonprinting(uint32_t cp)
{
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || /* C0, DEL, C1 */
	       cp == 0x061c ||						/* Arabic letter mark */
	       cp == 0x200e || cp == 0x200f ||				/* LRM, RLM */
	       (cp >= 0x202a && cp <= 0x202e) ||			/* LRE RLE PDF LRO RLO */
	       (cp >= 0x2066 && cp <= 0x2069) ||			/* LRI RLI FSI PDI */
	       cp == 0x2028 || cp == 0x2029; /* line, paragraph separator */
}

/* The code point at s (n bytes left): its length, 1 to 4, or 0 when s[0]
 * starts no well-formed UTF-8 sequence (a stray continuation byte, an
 * overlong form, a surrogate, past U+10FFFF, or cut short). */
static size_t u8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	uint32_t c = s[0], min;
	size_t len;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, c &= 0x1f, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, c &= 0x0f, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, c &= 0x07, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* For each byte, bit 1 << form when form writes it as it is: printable
 * ASCII but for the characters the form escapes. A table made by the
 * compiler: the run below is most of what the syslog export costs. */
#define PLAIN_(c) ((c) >= 0x20 && (c) < 0x7f)
#define PLAIN(c)                                                                                   \
	(PLAIN_(c) ? (1u << LOGESC_JSON_LINE) | ((c) != '\\' ? 1u << LOGESC_TEXT : 0u) |           \
			 ((c) != '\\' && (c) != '"' ? 1u << LOGESC_JSON : 0u) |                    \
			 ((c) != '\\' && (c) != '"' && (c) != ']' ? 1u << LOGESC_SD : 0u)          \
		   : 0u)
#define PLAIN4(c)  PLAIN(c), PLAIN((c) + 1), PLAIN((c) + 2), PLAIN((c) + 3)
#define PLAIN16(c) PLAIN4(c), PLAIN4((c) + 4), PLAIN4((c) + 8), PLAIN4((c) + 12)
#define PLAIN64(c) PLAIN16(c), PLAIN16((c) + 16), PLAIN16((c) + 32), PLAIN16((c) + 48)
static const uint8_t plain[256] = {PLAIN64(0), PLAIN64(64), PLAIN64(128), PLAIN64(192)};

/* How many bytes from p form f writes as they are: most of a record's
 * text, put as one run rather than a code point at a time. */
static size_t plain_run(const unsigned char *p, const unsigned char *end, enum logesc_form f)
{
	const unsigned char *q = p;
	const uint8_t bit = (uint8_t)(1u << f);

	while (q < end && (plain[*q] & bit))
		q++;
	return (size_t)(q - p);
}

/* Each piece (a code point, or its escape) is put whole or not at all: a
 * fixed buffer that fills keeps what came before, never half an escape or
 * half a character. */
void logesc_put(struct pc_buf *o, const char *s, size_t n, enum logesc_form f)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	bool json = f == LOGESC_JSON || f == LOGESC_JSON_LINE;
	char e[16];

	while (p < end && !o->err) {
		uint32_t cp;
		size_t len = plain_run(p, end, f);
		int el;

		if (len > 1 && len < o->cap - o->len) {
			/* it fits as it is (one-byte pieces: where it would not,
			 * the loop below keeps as many as fit, as before) */
			pc_buf_put(o, p, len);
			p += len;
			continue;
		}
		len = u8_next(p, (size_t)(end - p), &cp);

		if (!len) { /* not UTF-8: the byte, never the byte itself */
			if (json)
				pc_buf_put(o, "\\ufffd", 6);
			else if ((el = snprintf(e, sizeof(e), "\\x{%02X}", *p)) > 0)
				pc_buf_put(o, e, (size_t)el);
			p++;
			continue;
		}
		if (logesc_nonprinting(cp)) {
			if (f == LOGESC_JSON && (cp == '\n' || cp == '\t' || cp == '\r'))
				el = snprintf(e, sizeof(e), "\\%c",
					      cp == '\n'   ? 'n'
					      : cp == '\t' ? 't'
							   : 'r');
			else
				el = snprintf(e, sizeof(e), json ? "\\u%04x" : "\\u{%04X}",
					      (unsigned)cp);
			if (el > 0)
				pc_buf_put(o, e, (size_t)el);
		} else if (len == 1 && f != LOGESC_JSON_LINE &&
			   (cp == '\\' || (cp == '"' && f != LOGESC_TEXT) ||
			    (cp == ']' && f == LOGESC_SD))) {
			e[0] = '\\';
			e[1] = (char)cp;
			pc_buf_put(o, e, 2);
		} else {
			pc_buf_put(o, p, len);
		}
		p += len;
	}
}
