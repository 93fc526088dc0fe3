/* EVA driver for dnsguard/wire.c on len unknown bytes, for every len a DNS
 * message may have (query.c and answer.c refuse more than 65535): the
 * record walk (dg_wire_walk_sel, without and with a filter), the TSIG
 * check (dg_wire2pkt), and the name as the policy spells it (dg_dname_str)
 * on a name of the same bytes. ldns is stubbed: tests/prove/stubs/ldns.c.
 * dg_dname_shown is not analysed: its input is ldns's own text rendering
 * of a name, not the sandbox's bytes (docs/prove.md). */
#include "tests/prove/prove.h"

#include "dnsguard/dnsguard_int.h"

ldns_rdf *prove_rdf(uint8_t *data, size_t size);

static const uint8_t *msg_seen;
volatile uint8_t prove_sink;

/* What a caller does with a record: reads up to its rdata and its end
 * (each must lie inside the message). */
static int walk_fn(void *arg, const struct dg_wire_rr *w)
{
	(void)arg;
	if (w->rdata > 0)
		prove_sink = msg_seen[w->rdata - 1];
	if (w->end > 0)
		prove_sink = msg_seen[w->end - 1];
	return Frama_C_nondet(0, 1);
}

static bool want_fn(uint16_t type, ldns_pkt_section section)
{
	return type == 1 || section == LDNS_SECTION_QUESTION;
}

int main(void)
{
	size_t len = prove_len();
	char name[POLICY_HOST_MAX];
	uint8_t *buf;
	ldns_pkt *pkt = NULL;
	ldns_rdf *rdf;
	int rc;

#ifdef PROVE_EXACT
	//@ split len;
#endif
	buf = prove_buf(len);
	msg_seen = buf;
	rc = dg_wire_walk_sel(buf, len, NULL, walk_fn, NULL);
	rc = dg_wire_walk_sel(buf, len, want_fn, walk_fn, NULL);
	rc = dg_wire2pkt(&pkt, buf, len);
	if (rc == 0)
		ldns_pkt_free(pkt);
	/* a dname is at most 255 bytes on the wire (RFC 1035 3.1) */
	if (len <= 255) {
		rdf = prove_rdf(buf, len);
		rc = dg_dname_str(rdf, name, sizeof(name));
	}
	(void)rc;
	return 0;
}
