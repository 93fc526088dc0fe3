/* ldns as the EVA drivers see it (tests/prove, docs/prove.md). ldns itself
 * is not analysed: these stubs state what dnsguard/wire.c assumes of it, as
 * code EVA runs, and over-approximate it.
 *
 * - ldns_read_uint16: ldns's own definition (an inline in ldns/util.h).
 * - ldns_wire2rr / ldns_wire2pkt: may fail (any status); may read any byte
 *   of wire[0, max) (compression pointers reach back), and no other; on
 *   success advance *pos by at least one byte and to at most max, and hand
 *   out an object whose RR type is any value. The objects are one static
 *   each and the frees do nothing: wire.c frees what it gets exactly once
 *   on every path (read in review; a leak or double free is not what this
 *   proof is about: the fuzz targets run under ASan for that).
 * - ldns_rdf_*: the rdf is the driver's own (a dname of size bytes).
 * (ldns_rdf2str, used only by dg_dname_shown, is not stubbed: that
 * function is not analysed, see docs/prove.md.) */
#include "__fc_builtin.h"
#include <stdlib.h>

#include "ldns/ldns.h"

struct ldns_struct_rdf {
	ldns_rdf_type type;
	size_t size;
	uint8_t *data;
};

struct ldns_struct_rr {
	ldns_rr_type type;
};

struct ldns_struct_pkt {
	int unused;
};

volatile uint8_t prove_ldns_sink;

uint16_t ldns_read_uint16(const void *src)
{
	const uint8_t *p = src;

	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

ldns_rdf_type ldns_rdf_get_type(const ldns_rdf *rd)
{
	return rd->type;
}

size_t ldns_rdf_size(const ldns_rdf *rd)
{
	return rd->size;
}

uint8_t *ldns_rdf_data(const ldns_rdf *rd)
{
	return rd->data;
}

/* Reads one byte anywhere in wire[0, max): what ldns may touch. */
static void wire_touch(const uint8_t *wire, size_t max)
{
	if (max)
		prove_ldns_sink = wire[Frama_C_size_t_interval(0, max - 1)];
}

static ldns_rr prove_rr;
static ldns_pkt prove_pkt;

ldns_status ldns_wire2rr(ldns_rr **rr, const uint8_t *wire, size_t max, size_t *pos,
			 ldns_pkt_section section)
{
	size_t np;

	(void)section;
	*rr = &prove_rr; /* also on failure: more than ldns does */
	if (*pos >= max || Frama_C_nondet(0, 1))
		return LDNS_STATUS_ERR;
	wire_touch(wire, max);
	np = Frama_C_size_t_interval(0, max);
	if (np <= *pos)
		return LDNS_STATUS_ERR;
	prove_rr.type = (ldns_rr_type)Frama_C_unsigned_int_interval(0, 65535);
	*pos = np;
	*rr = &prove_rr;
	return LDNS_STATUS_OK;
}

ldns_rr_type ldns_rr_get_type(const ldns_rr *rr)
{
	return rr->type;
}

void ldns_rr_free(ldns_rr *rr)
{
	(void)rr;
}

ldns_status ldns_wire2pkt(ldns_pkt **packet, const uint8_t *data, size_t len)
{
	*packet = &prove_pkt; /* also on failure: more than ldns does */
	if (Frama_C_nondet(0, 1))
		return LDNS_STATUS_ERR;
	wire_touch(data, len);
	return LDNS_STATUS_OK;
}

void ldns_pkt_free(ldns_pkt *packet)
{
	(void)packet;
}

/* for the driver: an rdf holding a dname of size bytes at data */
ldns_rdf *prove_rdf(uint8_t *data, size_t size);
ldns_rdf *prove_rdf(uint8_t *data, size_t size)
{
	ldns_rdf *r = malloc(sizeof(*r));

	if (!r)
		exit(0);
	r->type = LDNS_RDF_TYPE_DNAME;
	r->size = size;
	r->data = data;
	return r;
}
