/* The server_name of a TLS ClientHello at the start of a TCP stream (RFC
 * 8446 sections 5.1 and 4.1.2, RFC 6066 section 3). The handshake message
 * may be split over several records and those over several segments; the
 * caller gathers bytes until this stops asking for more. Every length is
 * checked against what encloses it; anything irregular is PC_EPARSE.
 *
 * Limits (see docs/dnsguard.md): a ClientHello without server_name returns
 * 0 and the engine refuses host-rule flows without SNI; the name is
 * checked as common/hostname.c says (a trailing dot refused, RFC 6066); with ECH the name
 * seen here is the outer (public) one, and dnsguard strips ech from HTTPS
 * answers so that clients have no ECH configuration to use. */
#include "dnsguard/dnsguard.h"

#include <string.h>

#define TLS_MAX_STREAM	    16384 /* the most bytes gathered to find the SNI */
#define TLS_REC_HDR	    5
#define TLS_CT_HANDSHAKE    22
#define TLS_HS_CLIENT_HELLO 1
#define TLS_EXT_SERVER_NAME 0
#define TLS_SNI_HOST_NAME   0

/* Encrypted Client Hello (RFC 9849: 0xfe0d; its drafts 0xfe08-0xfe0c and
 * 0xff02; ech_outer_extensions 0xfd00) and its predecessor ESNI (0xffce).
 * With one of them the client-facing server may decrypt an inner
 * ClientHello and serve the name in it, which nobody else can read: the
 * outer server_name the guard checks says nothing. */
static bool tls_ext_hides_name(size_t type)
{
	return (type >= 0xfe08 && type <= 0xfe0d) || type == 0xff02 || type == 0xfd00 ||
	       type == 0xffce;
}

/* A bounds-checked reader over the reassembled handshake message. A part
 * of it (an extension, a name) is the same buffer with other bounds, never
 * a pointer of its own: every index then stays below the end of the whole
 * message by itself, which is what lets Frama-C's EVA prove every read for
 * every input without relating a pointer to a length (docs/prove.md). For
 * the same reason each test is "off + n > end", not "end - off < n". */
struct rd {
	const uint8_t *p;
	size_t end, off; /* off <= end; p[off..end) is what is left */
};

static bool rd_u8(struct rd *r, size_t *v)
{
	if (r->off + 1 > r->end)
		return false;
	*v = r->p[r->off++];
	return true;
}

static bool rd_u16(struct rd *r, size_t *v)
{
	if (r->off + 2 > r->end)
		return false;
	*v = (size_t)r->p[r->off] << 8 | r->p[r->off + 1];
	r->off += 2;
	return true;
}

static bool rd_skip(struct rd *r, size_t n)
{
	if (r->off + n > r->end)
		return false;
	r->off += n;
	return true;
}

/* The name p[start..end), checked by the one host-name grammar the
 * policy and the vault use (common/hostname.c, form SNI: no trailing dot),
 * into out lower-cased. 1 when found, as sni_ext's callers expect. */
static int sni_copy(const uint8_t *p, size_t start, size_t end, char *out, size_t outlen)
{
	struct pc_host h = {.len = 0};

	if (pc_host_parse(p, start, end, PC_HOST_SNI, &h, NULL) < 0)
		return PC_EPARSE;
	if (h.len >= outlen || h.len > PC_HOST_MAX)
		return PC_EINVAL;
	/* A byte copy bounded by len alone, so that the caller's last byte
	 * provably stays 0 (EVA, docs/prove.md). */
	for (size_t o = 0; o < h.len; o++)
		out[o] = h.name[o];
	out[h.len] = '\0';
	return 1;
}

/* The server_name extension body, p[start..end): exactly one host_name
 * entry. */
static int sni_ext(const uint8_t *p, size_t start, size_t end, char *out, size_t outlen)
{
	struct rd r = {p, end, start};
	size_t list = 0, type = 0, hl = 0; /* set before use; EVA cannot tell */
	bool found = false;
	int rc = PC_EPARSE;

	if (!rd_u16(&r, &list) || r.off + list != end || list == 0)
		return PC_EPARSE;
	while (r.off < r.end) {
		size_t e;

		if (!rd_u8(&r, &type) || !rd_u16(&r, &hl))
			return PC_EPARSE;
		e = r.off + hl;
		if (e > r.end)
			return PC_EPARSE;
		if (type == TLS_SNI_HOST_NAME) {
			if (found)
				return PC_EPARSE; /* RFC 6066: one name per type */
			found = true;
			rc = sni_copy(p, r.off, e, out, outlen);
			if (rc < 0)
				return rc;
		}
		r.off = e;
	}
	return found ? rc : 0;
}

/* The ClientHello body, hs[start..end). */
static int ch_parse(const uint8_t *hs, size_t start, size_t end, char *sni, size_t snilen)
{
	struct rd r = {hs, end, start};
	size_t v = 0, l = 0, ext_total = 0, ext_end; /* set before use; EVA cannot tell */
	bool seen_sni = false, hidden = false;
	int rc = 0;

	/* legacy_version, random, session id, cipher suites, compression */
	if (!rd_u16(&r, &v) || (v >> 8) != 3 || !rd_skip(&r, 32))
		return PC_EPARSE;
	if (!rd_u8(&r, &l) || l > 32 || !rd_skip(&r, l))
		return PC_EPARSE;
	if (!rd_u16(&r, &l) || l < 2 || (l & 1) || !rd_skip(&r, l))
		return PC_EPARSE;
	if (!rd_u8(&r, &l) || l < 1 || !rd_skip(&r, l))
		return PC_EPARSE;
	if (r.off == r.end)
		return 0; /* no extensions at all: TLS without SNI */
	if (!rd_u16(&r, &ext_total) || r.off + ext_total != r.end)
		return PC_EPARSE;
	ext_end = r.end;
	while (r.off < ext_end) {
		size_t type = 0, el = 0, e;

		if (!rd_u16(&r, &type) || !rd_u16(&r, &el))
			return PC_EPARSE;
		e = r.off + el;
		if (e > ext_end)
			return PC_EPARSE;
		if (type == TLS_EXT_SERVER_NAME) {
			if (seen_sni)
				return PC_EPARSE; /* RFC 8446 4.2: no duplicates */
			seen_sni = true;
			rc = sni_ext(hs, r.off, e, sni, snilen);
			if (rc < 0)
				return rc;
		}
		hidden |= tls_ext_hides_name(type);
		r.off = e;
	}
	return hidden ? PC_EREFUSED : rc;
}

int tls_clienthello_sni(const uint8_t *data, size_t len, char *sni, size_t snilen, size_t *need)
{
	uint8_t hs[TLS_MAX_STREAM];
	size_t have = 0, want = 0, pos = 0;
	/* Zeroed: sni_copy writes at most 253 bytes and a NUL, so the last
	 * byte stays 0 and the copy out is bounded on every path. */
	char name[POLICY_HOST_MAX] = {0};
	int rc;

	if (!data && len)
		return PC_EINVAL;
	/* Zeroed: the copy below fills hs up to have, ch_parse reads below
	 * want == have; zeroing makes "no stale stack byte is ever read" hold
	 * without relating the two (docs/prove.md). */
	memset(hs, 0, sizeof(hs));
	/* Reassemble the handshake message from consecutive records. pos <=
	 * len and have < pos hold throughout; each test below is written to
	 * bound its own variable (see struct rd). */
	for (;;) {
		size_t rlen, end;

		if (pos + TLS_REC_HDR > len) {
			/* Reject early what cannot be TLS, so that a plain
			 * protocol is not held waiting for more bytes. */
			if ((len > pos && data[pos] != TLS_CT_HANDSHAKE) ||
			    (len > pos + 1 && data[pos + 1] != 3) ||
			    (len > pos + 2 && data[pos + 2] > 4))
				return PC_EPARSE;
			goto more;
		}
		if (data[pos] != TLS_CT_HANDSHAKE || data[pos + 1] != 3 || data[pos + 2] > 4)
			return PC_EPARSE;
		rlen = (size_t)data[pos + 3] << 8 | data[pos + 4];
		end = pos + TLS_REC_HDR + rlen;
		if (rlen == 0 || rlen > 16384 || end > TLS_MAX_STREAM)
			return PC_EPARSE;
		if (end > len) {
			pos = end;
			goto more_to;
		}
		/* A byte loop, each index checked on its own, where memcpy's
		 * have + rlen <= sizeof(hs) would follow only from have < pos. */
		for (size_t q = pos + TLS_REC_HDR; q < end; q++) {
			if (have >= sizeof(hs))
				return PC_EPARSE; /* not reached: have < pos */
			hs[have++] = data[q];
		}
		pos = end;
		if (have >= 4 && want == 0) {
			if (hs[0] != TLS_HS_CLIENT_HELLO)
				return PC_EPARSE;
			want = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
			if (want > TLS_MAX_STREAM - TLS_REC_HDR)
				return PC_EPARSE;
		}
		if (want && have >= want)
			break;
		if (pos + TLS_REC_HDR > TLS_MAX_STREAM)
			return PC_EPARSE; /* larger than we are willing to hold */
	}
	/* Bytes of the same record after the ClientHello belong to later
	 * handshake messages; a client sends none before the server speaks. */
	if (have != want)
		return PC_EPARSE;
	rc = ch_parse(hs, 4, want, name, sizeof(name));
	if (rc == 1) {
		if (!sni || pc_strlcpy(sni, name, snilen) >= snilen)
			return PC_EINVAL;
	}
	return rc;
more:
	pos += TLS_REC_HDR;
more_to:
	if (pos > TLS_MAX_STREAM)
		return PC_EPARSE;
	if (need)
		*need = pos;
	return PC_EAGAIN;
}
