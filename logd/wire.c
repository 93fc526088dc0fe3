/* The wire form between the guard processes and portcullis-logd:
 * versioned, length-checked binary messages, one or more back to back per
 * SOCK_SEQPACKET datagram (layout in docs/logd.md, "Wire form"); the header
 * and the field readers are the framing all local protocols share
 * (common/msg.c). */
#include "logd/logd_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Field tags of a RECORD message, in the (strictly increasing) order they
 * must appear. Never renumber: the numbers are the wire form. */
enum {
	TAG_ACTION = 1,
	TAG_VERDICT = 2,
	TAG_SANDBOX = 3,
	TAG_POLICY = 4,
	TAG_REASON = 5,
	TAG_RULE = 6,
	TAG_SRC_ADDR = 7,
	TAG_SRC_PORT = 8,
	TAG_DST_ADDR = 9,
	TAG_DST_PORT = 10,
	TAG_TRANSPORT = 11,
	TAG_DOMAIN = 12,
	TAG_DNS_NAME = 13,
	TAG_DNS_TYPE = 14,
	TAG_DNS_ANSWERS = 15,
	TAG_SNI = 16,
	TAG_HTTP_METHOD = 17,
	TAG_HTTP_PATH = 18,
	TAG_HTTP_STATUS = 19,
	TAG_SECRETS = 20,
	TAG_MESSAGE = 21,
	TAG_CODE = 22,	    /* event.code (issue 18: set where the sender decides) */
	TAG_DNS_RCODE = 23, /* dns.response_code */
	TAG_DNS_TTL = 24,   /* portcullis.dns.ttl (issue 35) */
	TAG_HELD = 25,	    /* portcullis.held.bytes: what a refused held flow's bytes were */
	TAG_HELD_MS = 26,   /* portcullis.held.ms: how long it had been held */
	TAG_QUOTA = 27,	    /* portcullis.quota: the share that was full */
	TAG_PLEDGE = 28,    /* held by logd under this id, not written (issue 34) */
	TAG_REDEEMS = 29,   /* takes the place of the pledge of this id */
};

/* logd's protocol id in the shared header (common/msg.c): 0, the bytes
 * that were "reserved, zero" before the framing was shared. */
#define LOGWIRE_PROTO 0

int logwire_next(const uint8_t *buf, size_t len, size_t *msg_len, struct pc_err *err)
{
	uint32_t total;

	if (len < LOGWIRE_HDR_LEN)
		return pc_err_set(err, PC_EPARSE, "message of %zu bytes is shorter than its header",
				  len);
	total = pc_msg_get32(buf + 4);
	if (total < LOGWIRE_HDR_LEN || total > len || total > LOGWIRE_MAX)
		return pc_err_set(err, PC_EPARSE,
				  "header says %u bytes, %zu are there (a message has %d to %d)",
				  total, len, LOGWIRE_HDR_LEN, LOGWIRE_MAX);
	*msg_len = total;
	return 0;
}

static int hdr_check(const uint8_t *buf, size_t len, enum logwire_type type, struct pc_msg_r *r,
		     struct pc_err *err)
{
	uint8_t t;

	if (pc_msg_open(r, buf, len, LOGWIRE_PROTO, LOGWIRE_VERSION, &t, err) < 0)
		return PC_EPARSE;
	if (t != type)
		return pc_err_set(err, PC_EPARSE, "message type %u, expected %u", t, type);
	return 0;
}

/* Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF) and no NUL:
 * every string goes into JSON and syslog, which need text. */
static bool utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp;

		/* ASCII without NUL, eight bytes at a time (the usual case) */
		if (n - i >= 8) {
			uint64_t w;

			memcpy(&w, s + i, 8);
			if (!(w & 0x8080808080808080ULL) &&
			    !((w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL)) {
				i += 8;
				continue;
			}
		}

		if (c == 0)
			return false;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			k = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i <= k)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

static int w_str(struct pc_msg_w *w, uint8_t tag, const char *s, struct pc_err *err)
{
	size_t n;

	if (!s || !*s)
		return 0;
	n = strlen(s);
	if (!utf8_valid((const uint8_t *)s, n))
		return pc_err_set(err, PC_EINVAL, "record field %u is not valid UTF-8", tag);
	pc_msg_put_tlv(w, tag, s, n);
	return 0;
}

static void w_u8(struct pc_msg_w *w, uint8_t tag, uint8_t v)
{
	if (v)
		pc_msg_put_tlv(w, tag, &v, 1);
}

static void w_u16(struct pc_msg_w *w, uint8_t tag, uint16_t v)
{
	uint8_t b[2];

	if (!v)
		return;
	pc_msg_put16(b, v);
	pc_msg_put_tlv(w, tag, b, 2);
}

static void w_u32(struct pc_msg_w *w, uint8_t tag, uint32_t v)
{
	uint8_t b[4];

	if (!v)
		return;
	pc_msg_put32(b, v);
	pc_msg_put_tlv(w, tag, b, 4);
}

static void w_u64(struct pc_msg_w *w, uint8_t tag, uint64_t v)
{
	uint8_t b[8];

	if (!v)
		return;
	pc_msg_put32(b, (uint32_t)(v >> 32));
	pc_msg_put32(b + 4, (uint32_t)v);
	pc_msg_put_tlv(w, tag, b, 8);
}

static int w_endpoint(struct pc_msg_w *w, uint8_t atag, uint8_t ptag, const struct pc_endpoint *e,
		      struct pc_err *err)
{
	size_t alen = pc_addr_len(&e->addr);

	if (e->addr.family == 0) {
		if (e->port)
			return pc_err_set(err, PC_EINVAL, "record has a port without an address");
		return 0;
	}
	if (alen == 0)
		return pc_err_set(err, PC_EINVAL, "record address has unknown family %u",
				  e->addr.family);
	pc_msg_put_tlv(w, atag, e->addr.a, alen);
	w_u16(w, ptag, e->port);
	return 0;
}

int logrec_encode(const struct logrec *rec, uint8_t *buf, size_t len, struct pc_err *err)
{
	struct pc_msg_w w;
	int rc = PC_EINVAL, n;

	if (!rec || !buf)
		return pc_err_set(err, PC_EINVAL, "logrec_encode: no record or buffer");
	pc_msg_w_init(&w, buf, len);
	if (rec->action < 1 || rec->action >= LOGREC_ACTION_MAX)
		return pc_err_set(err, PC_EINVAL, "record action %d is not defined", rec->action);
	if (rec->verdict < LOGREC_NONE || rec->verdict > LOGREC_REFUSED)
		return pc_err_set(err, PC_EINVAL, "record verdict %d is not defined", rec->verdict);
	if (rec->pledge && rec->redeems)
		return pc_err_set(err, PC_EINVAL, "a pledge redeems none");
	w_u8(&w, TAG_ACTION, (uint8_t)rec->action);
	w_u8(&w, TAG_VERDICT, (uint8_t)rec->verdict);
	if (w_str(&w, TAG_SANDBOX, rec->sandbox, err) < 0 ||
	    w_str(&w, TAG_POLICY, rec->policy, err) < 0 ||
	    w_str(&w, TAG_REASON, rec->reason, err) < 0 ||
	    w_str(&w, TAG_RULE, rec->rule, err) < 0 ||
	    w_endpoint(&w, TAG_SRC_ADDR, TAG_SRC_PORT, &rec->src, err) < 0 ||
	    w_endpoint(&w, TAG_DST_ADDR, TAG_DST_PORT, &rec->dst, err) < 0)
		return rc;
	w_u8(&w, TAG_TRANSPORT, rec->transport);
	if (w_str(&w, TAG_DOMAIN, rec->domain, err) < 0 ||
	    w_str(&w, TAG_DNS_NAME, rec->dns_name, err) < 0)
		return rc;
	w_u16(&w, TAG_DNS_TYPE, rec->dns_type);
	if (w_str(&w, TAG_DNS_ANSWERS, rec->dns_answers, err) < 0 ||
	    w_str(&w, TAG_SNI, rec->sni, err) < 0 ||
	    w_str(&w, TAG_HTTP_METHOD, rec->http_method, err) < 0 ||
	    w_str(&w, TAG_HTTP_PATH, rec->http_path, err) < 0)
		return rc;
	w_u16(&w, TAG_HTTP_STATUS, rec->http_status);
	if (w_str(&w, TAG_SECRETS, rec->secrets, err) < 0 ||
	    w_str(&w, TAG_MESSAGE, rec->message, err) < 0 ||
	    w_str(&w, TAG_CODE, rec->code, err) < 0 ||
	    w_str(&w, TAG_DNS_RCODE, rec->dns_rcode, err) < 0)
		return rc;
	w_u32(&w, TAG_DNS_TTL, rec->dns_ttl);
	if (w_str(&w, TAG_HELD, rec->held_bytes, err) < 0)
		return rc;
	w_u32(&w, TAG_HELD_MS, rec->held_ms);
	w_u32(&w, TAG_QUOTA, rec->quota);
	w_u64(&w, TAG_PLEDGE, rec->pledge);
	w_u64(&w, TAG_REDEEMS, rec->redeems);
	n = pc_msg_finish(&w, LOGWIRE_PROTO, LOGWIRE_VERSION, LOGWIRE_RECORD, LOGWIRE_MAX);
	if (n >= 0)
		return n;
	return pc_err_set(err, PC_EINVAL, "record does not fit in %zu bytes",
			  len < LOGWIRE_MAX ? len : (size_t)LOGWIRE_MAX);
}

/* Fixed-size fields: the exact length each numeric tag must have. */
static int tag_numlen(unsigned tag)
{
	switch (tag) {
	case TAG_ACTION:
	case TAG_VERDICT:
	case TAG_TRANSPORT:
		return 1;
	case TAG_SRC_PORT:
	case TAG_DST_PORT:
	case TAG_DNS_TYPE:
	case TAG_HTTP_STATUS:
		return 2;
	case TAG_DNS_TTL:
	case TAG_HELD_MS:
	case TAG_QUOTA:
		return 4;
	case TAG_PLEDGE:
	case TAG_REDEEMS:
		return 8;
	default:
		return 0;
	}
}

static const char **tag_str(struct logrec *r, unsigned tag)
{
	switch (tag) {
	case TAG_SANDBOX:
		return &r->sandbox;
	case TAG_POLICY:
		return &r->policy;
	case TAG_REASON:
		return &r->reason;
	case TAG_RULE:
		return &r->rule;
	case TAG_DOMAIN:
		return &r->domain;
	case TAG_DNS_NAME:
		return &r->dns_name;
	case TAG_DNS_ANSWERS:
		return &r->dns_answers;
	case TAG_SNI:
		return &r->sni;
	case TAG_HTTP_METHOD:
		return &r->http_method;
	case TAG_HTTP_PATH:
		return &r->http_path;
	case TAG_SECRETS:
		return &r->secrets;
	case TAG_MESSAGE:
		return &r->message;
	case TAG_CODE:
		return &r->code;
	case TAG_DNS_RCODE:
		return &r->dns_rcode;
	case TAG_HELD:
		return &r->held_bytes;
	default:
		return NULL;
	}
}

static int addr_set(struct pc_addr *a, const uint8_t *v, size_t n)
{
	if (n != 4 && n != 16)
		return -1;
	memset(a, 0, sizeof(*a));
	a->family = n == 4 ? AF_INET : AF_INET6;
	memcpy(a->a, v, n);
	return 0;
}

int logrec_decode_into(const uint8_t *buf, size_t len, struct logrec *out, char *strbuf,
		       size_t strbuf_len, struct pc_err *err)
{
	struct logrec r;
	struct pc_msg_r m;
	size_t soff = 0;
	unsigned last = 0;

	if (!buf || !out || !strbuf)
		return pc_err_set(err, PC_EINVAL, "logrec_decode: missing argument");
	if (hdr_check(buf, len, LOGWIRE_RECORD, &m, err) < 0)
		return PC_EPARSE;
	if (len > LOGWIRE_MAX)
		return pc_err_set(err, PC_EPARSE, "message of %zu bytes exceeds %d", len,
				  LOGWIRE_MAX);
	memset(&r, 0, sizeof(r));
	while (pc_msg_more(&m)) {
		size_t off = m.off, n;
		const uint8_t *v;
		const char **sp;
		uint8_t tag8;
		unsigned tag;
		int want;

		if (pc_msg_get_tlv(&m, &tag8, &v, &n, err) < 0)
			return PC_EPARSE;
		tag = tag8;
		/* Strictly increasing tags: no duplicates, one canonical form. */
		if (tag <= last)
			return pc_err_set(err, PC_EPARSE, "field %u at byte %zu out of order", tag,
					  off);
		last = tag;
		if (n == 0)
			return pc_err_set(err, PC_EPARSE, "field %u at byte %zu is empty", tag,
					  off);
		want = tag_numlen(tag);
		if (want && n != (size_t)want)
			return pc_err_set(err, PC_EPARSE, "field %u has %zu bytes, expected %d",
					  tag, n, want);
		sp = tag_str(&r, tag);
		if (sp) {
			if (!utf8_valid(v, n))
				return pc_err_set(err, PC_EPARSE, "field %u is not valid UTF-8",
						  tag);
			if (strbuf_len - soff < n + 1)
				return pc_err_set(err, PC_EPARSE, "strings exceed the buffer");
			memcpy(strbuf + soff, v, n);
			strbuf[soff + n] = '\0';
			*sp = strbuf + soff;
			soff += n + 1;
		} else {
			switch (tag) {
			case TAG_ACTION:
				if (v[0] < 1 || v[0] >= LOGREC_ACTION_MAX)
					return pc_err_set(err, PC_EPARSE, "unknown action %u",
							  v[0]);
				r.action = (enum logrec_action)v[0];
				break;
			case TAG_VERDICT:
				/* none is written by leaving the field out */
				if (v[0] < LOGREC_ALLOWED || v[0] > LOGREC_REFUSED)
					return pc_err_set(err, PC_EPARSE, "unknown verdict %u",
							  v[0]);
				r.verdict = (enum logrec_verdict)v[0];
				break;
			case TAG_TRANSPORT:
				if (v[0] == 0)
					return pc_err_set(err, PC_EPARSE, "field %u is zero", tag);
				r.transport = v[0];
				break;
			case TAG_SRC_ADDR:
			case TAG_DST_ADDR:
				if (addr_set(tag == TAG_SRC_ADDR ? &r.src.addr : &r.dst.addr, v,
					     n) < 0)
					return pc_err_set(err, PC_EPARSE,
							  "address field %u has %zu bytes", tag, n);
				break;
			case TAG_SRC_PORT:
			case TAG_DST_PORT:
			case TAG_DNS_TYPE:
			case TAG_HTTP_STATUS: {
				uint16_t x = pc_msg_get16(v);

				if (x == 0)
					return pc_err_set(err, PC_EPARSE, "field %u is zero", tag);
				if (tag == TAG_SRC_PORT)
					r.src.port = x;
				else if (tag == TAG_DST_PORT)
					r.dst.port = x;
				else if (tag == TAG_DNS_TYPE)
					r.dns_type = x;
				else
					r.http_status = x;
				break;
			}
			case TAG_DNS_TTL:
			case TAG_HELD_MS:
			case TAG_QUOTA: {
				uint32_t x = pc_msg_get32(v);

				if (x == 0)
					return pc_err_set(err, PC_EPARSE, "field %u is zero", tag);
				if (tag == TAG_DNS_TTL)
					r.dns_ttl = x;
				else if (tag == TAG_HELD_MS)
					r.held_ms = x;
				else
					r.quota = x;
				break;
			}
			case TAG_PLEDGE:
			case TAG_REDEEMS: {
				uint64_t x = (uint64_t)pc_msg_get32(v) << 32 | pc_msg_get32(v + 4);

				if (x == 0)
					return pc_err_set(err, PC_EPARSE, "field %u is zero", tag);
				if (tag == TAG_PLEDGE)
					r.pledge = x;
				else if (r.pledge)
					return pc_err_set(err, PC_EPARSE, "a pledge redeems none");
				else
					r.redeems = x;
				break;
			}
			default:
				return pc_err_set(err, PC_EPARSE, "unknown field %u at byte %zu",
						  tag, off);
			}
			if ((tag == TAG_SRC_PORT && !r.src.addr.family) ||
			    (tag == TAG_DST_PORT && !r.dst.addr.family))
				return pc_err_set(err, PC_EPARSE,
						  "port field %u without an address", tag);
		}
	}
	if (!r.action)
		return pc_err_set(err, PC_EPARSE, "record has no action");
	/* SIEM rules key on the codes: only the documented ones */
	if (r.code && logrec_code_index(r.code) < 0)
		return pc_err_set(err, PC_EPARSE, "unknown event code %.40s", r.code);
	if (r.dns_rcode && !logrec_dns_rcode_known(r.dns_rcode))
		return pc_err_set(err, PC_EPARSE, "unknown DNS response code %.40s", r.dns_rcode);
	if (r.held_bytes && logrec_held_index(r.held_bytes) < 0)
		return pc_err_set(err, PC_EPARSE, "unknown held-flow class %.40s", r.held_bytes);
	*out = r;
	return 0;
}

int logrec_decode(const uint8_t *buf, size_t len, struct logrec_decoded *out, struct pc_err *err)
{
	struct logrec r;
	char *s;
	int rc;

	if (!out)
		return pc_err_set(err, PC_EINVAL, "logrec_decode: no output");
	/* Every string costs at least its 3-byte field header, which pays for
	 * its NUL: len bytes always suffice. */
	s = malloc(len ? len : 1);
	if (!s)
		return pc_err_set(err, PC_ENOMEM, "decoding a record: out of memory");
	rc = logrec_decode_into(buf, len, &r, s, len ? len : 1, err);
	if (rc < 0) {
		free(s);
		return rc;
	}
	out->rec = r;
	out->strings = s;
	return 0;
}

void logrec_decoded_free(struct logrec_decoded *d)
{
	if (!d)
		return;
	free(d->strings);
	d->strings = NULL;
}

int logwire_ack_encode(uint32_t count, uint64_t seq, uint8_t *buf, size_t len)
{
	struct pc_msg_w w;

	pc_msg_w_init(&w, buf, len);
	pc_msg_put_u32(&w, count);
	pc_msg_put_u64(&w, seq);
	return pc_msg_finish(&w, LOGWIRE_PROTO, LOGWIRE_VERSION, LOGWIRE_ACK, LOGWIRE_ACK_LEN);
}

int logwire_ack_decode(const uint8_t *buf, size_t len, uint32_t *count, uint64_t *seq,
		       struct pc_err *err)
{
	struct pc_msg_r m;
	uint32_t c;
	uint64_t s;

	if (hdr_check(buf, len, LOGWIRE_ACK, &m, err) < 0)
		return PC_EPARSE;
	if (len != LOGWIRE_ACK_LEN)
		return pc_err_set(err, PC_EPARSE, "acknowledgement of %zu bytes, expected %d", len,
				  LOGWIRE_ACK_LEN);
	if (pc_msg_get_u32(&m, &c, err) < 0 || pc_msg_get_u64(&m, &s, err) < 0)
		return PC_EPARSE;
	if (c == 0)
		return pc_err_set(err, PC_EPARSE, "acknowledgement of zero records");
	*count = c;
	*seq = s;
	return 0;
}

int logwire_ring_encode(uint8_t *buf, size_t len)
{
	struct pc_msg_w w;

	pc_msg_w_init(&w, buf, len);
	pc_msg_put_u32(&w, LOGRING_DATA);
	return pc_msg_finish(&w, LOGWIRE_PROTO, LOGWIRE_VERSION, LOGWIRE_RING, LOGRING_REG_LEN);
}

int logwire_ring_decode(const uint8_t *buf, size_t len, struct pc_err *err)
{
	struct pc_msg_r m;
	uint32_t size;

	if (hdr_check(buf, len, LOGWIRE_RING, &m, err) < 0)
		return PC_EPARSE;
	if (pc_msg_get_u32(&m, &size, err) < 0 || pc_msg_end(&m, err) < 0)
		return PC_EPARSE;
	/* one size both sides were built with: nothing to negotiate */
	if (size != LOGRING_DATA)
		return pc_err_set(err, PC_EPARSE, "ring of %u bytes, logd maps %u", size,
				  LOGRING_DATA);
	return 0;
}

int logwire_bell_encode(uint8_t *buf, size_t len)
{
	struct pc_msg_w w;

	pc_msg_w_init(&w, buf, len);
	return pc_msg_finish(&w, LOGWIRE_PROTO, LOGWIRE_VERSION, LOGWIRE_BELL, LOGWIRE_HDR_LEN);
}

int logwire_bell_decode(const uint8_t *buf, size_t len, struct pc_err *err)
{
	struct pc_msg_r m;

	if (hdr_check(buf, len, LOGWIRE_BELL, &m, err) < 0)
		return PC_EPARSE;
	return pc_msg_end(&m, err) < 0 ? PC_EPARSE : 0;
}

int logwire_type(const uint8_t *buf, size_t len)
{
	return len >= LOGWIRE_HDR_LEN ? buf[1] : -1;
}
