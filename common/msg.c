/* The framing every local binary protocol shares (logd.sock, engine.sock,
 * the check helper channel): the 8-byte header, and bounds-checked writing
 * and reading of fixed fields and length-prefixed strings behind it. */
#include "common/pc.h"

#include <string.h>

void pc_msg_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void pc_msg_put32(uint8_t *p, uint32_t v)
{
	pc_msg_put16(p, (uint16_t)(v >> 16));
	pc_msg_put16(p + 2, (uint16_t)v);
}

uint16_t pc_msg_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

uint32_t pc_msg_get32(const uint8_t *p)
{
	return (uint32_t)pc_msg_get16(p) << 16 | pc_msg_get16(p + 2);
}

/* ---- writing ---------------------------------------------------------------
 * A writer that ran out of room only sets overflow: the encoders write every
 * field unchecked and ask once, in pc_msg_finish. */

void pc_msg_w_init(struct pc_msg_w *w, uint8_t *buf, size_t cap)
{
	w->p = buf;
	w->cap = cap;
	w->off = PC_MSG_HDR_LEN;
	w->overflow = !buf || cap < PC_MSG_HDR_LEN;
}

/* Room for n more bytes, or overflow. */
static bool w_room(struct pc_msg_w *w, size_t n)
{
	if (w->overflow || w->cap - w->off < n)
		w->overflow = true;
	return !w->overflow;
}

void pc_msg_put_u8(struct pc_msg_w *w, uint8_t v)
{
	if (w_room(w, 1))
		w->p[w->off++] = v;
}

void pc_msg_put_u16(struct pc_msg_w *w, uint16_t v)
{
	if (!w_room(w, 2))
		return;
	pc_msg_put16(w->p + w->off, v);
	w->off += 2;
}

void pc_msg_put_u32(struct pc_msg_w *w, uint32_t v)
{
	if (!w_room(w, 4))
		return;
	pc_msg_put32(w->p + w->off, v);
	w->off += 4;
}

void pc_msg_put_u64(struct pc_msg_w *w, uint64_t v)
{
	pc_msg_put_u32(w, (uint32_t)(v >> 32));
	pc_msg_put_u32(w, (uint32_t)v);
}

void pc_msg_put_str(struct pc_msg_w *w, const char *s, size_t n)
{
	if (n > UINT32_MAX || !w_room(w, 4 + n))
		return;
	pc_msg_put32(w->p + w->off, (uint32_t)n);
	if (n)
		memcpy(w->p + w->off + 4, s, n);
	w->off += 4 + n;
}

void pc_msg_put_tlv(struct pc_msg_w *w, uint8_t tag, const void *v, size_t n)
{
	if (n > UINT16_MAX || !w_room(w, 3 + n))
		return;
	w->p[w->off] = tag;
	pc_msg_put16(w->p + w->off + 1, (uint16_t)n);
	memcpy(w->p + w->off + 3, v, n);
	w->off += 3 + n;
}

int pc_msg_finish(struct pc_msg_w *w, uint16_t proto, uint8_t version, uint8_t type, size_t max)
{
	if (w->overflow || w->off > max || w->off > UINT32_MAX)
		return PC_EINVAL;
	w->p[0] = version;
	w->p[1] = type;
	pc_msg_put16(w->p + 2, proto);
	pc_msg_put32(w->p + 4, (uint32_t)w->off);
	return (int)w->off;
}

/* ---- reading ------------------------------------------------------------ */

int pc_msg_open(struct pc_msg_r *r, const uint8_t *buf, size_t len, uint16_t proto, uint8_t version,
		uint8_t *type, struct pc_err *err)
{
	if (!buf || len < PC_MSG_HDR_LEN)
		return pc_err_set(err, PC_EPARSE, "message of %zu bytes is shorter than its header",
				  buf ? len : 0);
	/* the protocol first: a message of another protocol has no version of ours */
	if (pc_msg_get16(buf + 2) != proto)
		return pc_err_set(err, PC_EPARSE, "protocol id 0x%04x, expected 0x%04x",
				  pc_msg_get16(buf + 2), proto);
	if (buf[0] != version)
		return pc_err_set(err, PC_EUNSUPP, "wire version %u, expected %u", buf[0], version);
	if (pc_msg_get32(buf + 4) != len)
		return pc_err_set(err, PC_EPARSE, "header says %u bytes, message has %zu",
				  pc_msg_get32(buf + 4), len);
	r->p = buf;
	r->len = len;
	r->off = PC_MSG_HDR_LEN;
	*type = buf[1];
	return 0;
}

/* n more bytes are there, or a parse error naming what was cut. */
static int r_need(const struct pc_msg_r *r, size_t n, const char *what, struct pc_err *err)
{
	if (r->len - r->off < n)
		return pc_err_set(err, PC_EPARSE, "%s at byte %zu: %zu bytes past the end", what,
				  r->off, n - (r->len - r->off));
	return 0;
}

int pc_msg_get_u8(struct pc_msg_r *r, uint8_t *v, struct pc_err *err)
{
	if (r_need(r, 1, "8-bit field", err) < 0)
		return PC_EPARSE;
	*v = r->p[r->off++];
	return 0;
}

int pc_msg_get_u16(struct pc_msg_r *r, uint16_t *v, struct pc_err *err)
{
	if (r_need(r, 2, "16-bit field", err) < 0)
		return PC_EPARSE;
	*v = pc_msg_get16(r->p + r->off);
	r->off += 2;
	return 0;
}

int pc_msg_get_u32(struct pc_msg_r *r, uint32_t *v, struct pc_err *err)
{
	if (r_need(r, 4, "32-bit field", err) < 0)
		return PC_EPARSE;
	*v = pc_msg_get32(r->p + r->off);
	r->off += 4;
	return 0;
}

int pc_msg_get_u64(struct pc_msg_r *r, uint64_t *v, struct pc_err *err)
{
	if (r_need(r, 8, "64-bit field", err) < 0)
		return PC_EPARSE;
	*v = (uint64_t)pc_msg_get32(r->p + r->off) << 32 | pc_msg_get32(r->p + r->off + 4);
	r->off += 8;
	return 0;
}

int pc_msg_get_str(struct pc_msg_r *r, size_t max, const char **s, size_t *n, struct pc_err *err)
{
	size_t at = r->off;
	uint32_t l;

	if (r_need(r, 4, "string length", err) < 0)
		return PC_EPARSE;
	l = pc_msg_get32(r->p + at);
	if (r->len - at - 4 < l)
		return pc_err_set(err, PC_EPARSE,
				  "string at byte %zu claims %u bytes, %zu remain (unterminated)",
				  at, l, r->len - at - 4);
	if (l > max)
		return pc_err_set(err, PC_EPARSE, "string at byte %zu has %u bytes, at most %zu",
				  at, l, max);
	/* text, never binary: a NUL would cut it short for every C reader */
	if (l && memchr(r->p + at + 4, '\0', l))
		return pc_err_set(err, PC_EPARSE, "string at byte %zu holds a NUL", at);
	*s = (const char *)r->p + at + 4;
	*n = l;
	r->off = at + 4 + l;
	return 0;
}

int pc_msg_get_tlv(struct pc_msg_r *r, uint8_t *tag, const uint8_t **v, size_t *n,
		   struct pc_err *err)
{
	size_t at = r->off, l;

	if (r->len - at < 3)
		return pc_err_set(err, PC_EPARSE, "truncated field header at byte %zu", at);
	l = pc_msg_get16(r->p + at + 1);
	if (r->len - at - 3 < l)
		return pc_err_set(err, PC_EPARSE,
				  "field %u at byte %zu claims %zu bytes, %zu remain", r->p[at], at,
				  l, r->len - at - 3);
	*tag = r->p[at];
	*v = r->p + at + 3;
	*n = l;
	r->off = at + 3 + l;
	return 0;
}

bool pc_msg_more(const struct pc_msg_r *r)
{
	return r->off < r->len;
}

int pc_msg_end(const struct pc_msg_r *r, struct pc_err *err)
{
	if (r->off != r->len)
		return pc_err_set(err, PC_EPARSE, "%zu bytes after the last field at byte %zu",
				  r->len - r->off, r->off);
	return 0;
}

int pc_msg_get_strcpy(struct pc_msg_r *r, char *out, size_t size, struct pc_err *err)
{
	const char *s;
	size_t n;

	if (size == 0 || pc_msg_get_str(r, size - 1, &s, &n, err) < 0)
		return PC_EPARSE;
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}
