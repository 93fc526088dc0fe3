/* DNS helpers on top of ldns: a name as the policy spells it, and a walk
 * over a message's records that knows where each one sits on the wire
 * (ldns_wire2pkt merges OPT records and hides offsets; the checks on
 * queries and the in-place ech rewrite need both). */
#include "dnsguard/dnsguard_int.h"

#include <stdlib.h>
#include <string.h>

int dg_dname_str(const ldns_rdf *d, char *out, size_t outlen)
{
	/* Zeroed: the grammar reads text[0..o), which the walk fills; zeroing
	 * makes "no unwritten byte is read" hold without relating the two. */
	uint8_t text[PC_HOST_MAX + 1] = {0};
	struct pc_host h = {.len = 0};
	const uint8_t *p;
	size_t n, i = 0, o = 0;

	if (!d || ldns_rdf_get_type(d) != LDNS_RDF_TYPE_DNAME)
		return PC_EINVAL;
	p = ldns_rdf_data(d);
	n = ldns_rdf_size(d);
	/* ldns hands out the uncompressed form: length-prefixed labels
	 * ending in the root label; still, every index is checked, each
	 * against its own bound (the label's end e, the text's size), so
	 * that EVA proves every access without relating i, o and l
	 * (docs/prove.md). */
	while (i < n) {
		uint8_t l = p[i++];
		size_t e = i + l;

		if (l == 0)
			break;
		if (l > 63 || e > n)
			return PC_EINVAL;
		if (o && o + 1 >= sizeof(text))
			return PC_EINVAL;
		if (o)
			text[o++] = '.';
		if (o + l >= sizeof(text))
			return PC_EINVAL;
		for (size_t k = i; k < e; k++) {
			/* A dot inside a label would read as two labels in
			 * the text form; every other byte is the grammar's. */
			if (p[k] == '.' || o + 1 >= sizeof(text)) /* the latter: never */
				return PC_EINVAL;
			text[o++] = p[k];
		}
		i = e;
	}
	if (o == 0 || o >= sizeof(text) || i != n) /* the second: never */
		return PC_EINVAL;
	/* The name as the policy reads it (common/hostname.c): a query for
	 * what no rule can name is refused as not a host name. */
	if (pc_host_parse(text, 0, o, PC_HOST_NAME, &h, NULL) < 0)
		return PC_EINVAL;
	if (h.len >= outlen || h.len > PC_HOST_MAX)
		return PC_EINVAL;
	for (size_t k = 0; k < h.len; k++)
		out[k] = h.name[k];
	out[h.len] = '\0';
	return 0;
}

void dg_dname_shown(const ldns_rdf *d, char *out, size_t outlen)
{
	char *text;
	size_t n;

	if (!out || outlen == 0)
		return;
	out[0] = '\0';
	if (!d || ldns_rdf_get_type(d) != LDNS_RDF_TYPE_DNAME || outlen < 8)
		return;
	/* ldns escapes every byte that is not a graphic ASCII character as
	 * \DDD and the name's own special characters with a backslash. */
	text = ldns_rdf2str(d);
	if (!text)
		return;
	n = strlen(text);
	if (n > 1 && text[n - 1] == '.') /* the root's: ldns always ends with it */
		text[--n] = '\0';
	if (n < outlen) {
		memcpy(out, text, n + 1);
	} else {
		/* Keep the end (the domain it was sent to) whole, and do not
		 * start in the middle of an escape. */
		size_t keep = outlen - 4, from = n - keep;

		while (from < n &&
		       (text[from - 1] == '\\' || (from >= 2 && text[from - 2] == '\\') ||
			(from >= 3 && text[from - 3] == '\\')))
			from++;
		memcpy(out, "...", 3);
		memcpy(out + 3, text + from, n - from + 1);
	}
	free(text);
}

/* Move *p past the name at msg[*p] (labels, ending in the root label or a
 * compression pointer). ldns_wire2rr has already parsed this name, so only
 * its length is wanted here — without ldns_wire2dname's allocation, once
 * per record of every message. */
static int dg_name_skip(const uint8_t *msg, size_t len, size_t *p)
{
	size_t i = *p;

	for (;;) {
		uint8_t l;

		if (i >= len)
			return PC_EPARSE;
		l = msg[i];
		if ((l & 0xc0) == 0xc0) {
			if (i + 2 > len)
				return PC_EPARSE;
			*p = i + 2;
			return 0;
		}
		if (l & 0xc0)
			return PC_EPARSE;
		i += 1 + (size_t)l;
		if (l == 0) {
			*p = i;
			return 0;
		}
	}
}

int dg_wire_walk_sel(const uint8_t *msg, size_t len, dg_wire_want want, dg_wire_fn fn, void *arg)
{
	static const ldns_pkt_section sections[] = {LDNS_SECTION_QUESTION, LDNS_SECTION_ANSWER,
						    LDNS_SECTION_AUTHORITY,
						    LDNS_SECTION_ADDITIONAL};
	size_t pos = LDNS_HEADER_SIZE;
	int rc = 0;

	if (!msg || len < LDNS_HEADER_SIZE)
		return PC_EPARSE;
	for (size_t si = 0; si < 4; si++) {
		unsigned count = ldns_read_uint16(msg + 4 + 2 * si);

		for (unsigned i = 0; i < count; i++) {
			struct dg_wire_rr w = {.section = sections[si], .start = pos};
			bool q = sections[si] == LDNS_SECTION_QUESTION;
			ldns_rr *rr = NULL;
			size_t p = pos;

			/* Where it ends and its type, from the fixed fields
			 * (a branch each, so that each bound is checked where
			 * it is used: EVA, docs/prove.md). */
			if (dg_name_skip(msg, len, &p) != 0)
				return PC_EPARSE;
			if (q) {
				if (p + 4 > len)
					return PC_EPARSE;
				w.type = ldns_read_uint16(msg + p);
				w.rdata = w.end = p + 4;
			} else {
				if (p + 10 > len)
					return PC_EPARSE;
				w.type = ldns_read_uint16(msg + p);
				w.rdata = p + 10;
				w.end = w.rdata + ldns_read_uint16(msg + p + 8);
			}
			if (w.end > len)
				return PC_EPARSE;
			if (want && !want(w.type, sections[si])) {
				pos = w.end; /* the caller parses the message with ldns too */
				continue;
			}
			if (ldns_wire2rr(&rr, msg, len, &pos, sections[si]) != LDNS_STATUS_OK)
				return PC_EPARSE;
			if (pos != w.end || (uint16_t)ldns_rr_get_type(rr) != w.type) {
				ldns_rr_free(rr);
				return PC_EPARSE;
			}
			w.rr = rr;
			rc = fn ? fn(arg, &w) : 0;
			ldns_rr_free(rr);
			if (rc)
				return rc;
		}
	}
	if (pos != len)
		return PC_EPARSE; /* bytes after the last record */
	return 0;
}

static bool dg_want_tsig(uint16_t type, ldns_pkt_section section)
{
	return section == LDNS_SECTION_ADDITIONAL && type == LDNS_RR_TYPE_TSIG;
}

static int dg_tsig_count(void *arg, const struct dg_wire_rr *w)
{
	if (w->section == LDNS_SECTION_ADDITIONAL && w->type == LDNS_RR_TYPE_TSIG)
		++*(unsigned *)arg;
	return 0;
}

int dg_wire2pkt(ldns_pkt **out, const uint8_t *msg, size_t len)
{
	unsigned tsig = 0;

	if (!msg || len < LDNS_HEADER_SIZE)
		return PC_EPARSE;
	/* Two TSIG records need two additional records: only then is the
	 * extra walk worth its cost. */
	if (ldns_read_uint16(msg + 10) >= 2 &&
	    (dg_wire_walk_sel(msg, len, dg_want_tsig, dg_tsig_count, &tsig) != 0 || tsig > 1))
		return PC_EPARSE;
	if (ldns_wire2pkt(out, msg, len) != LDNS_STATUS_OK)
		return PC_EPARSE;
	return 0;
}
