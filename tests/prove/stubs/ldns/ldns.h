/* The slice of ldns's interface that dnsguard/dnsguard_int.h and dnsguard/wire.c
 * use, for the EVA drivers only (tests/prove): Frama-C parses the project
 * against its own libc, which the system's ldns headers do not fit. The
 * types are opaque here as in ldns (wire.c only reaches them through these
 * functions); the values are ldns's own. What each function is assumed to
 * do is in tests/prove/stubs/ldns.c and docs/prove.md. */
#ifndef PROVE_LDNS_H
#define PROVE_LDNS_H

#include <stddef.h>
#include <stdint.h>

#define LDNS_HEADER_SIZE 12

typedef enum { LDNS_STATUS_OK = 0, LDNS_STATUS_ERR = 1 } ldns_status;
typedef enum {
	LDNS_SECTION_QUESTION = 0,
	LDNS_SECTION_ANSWER = 1,
	LDNS_SECTION_AUTHORITY = 2,
	LDNS_SECTION_ADDITIONAL = 3,
	LDNS_SECTION_ANY = 4,
	LDNS_SECTION_ANY_NOQUESTION = 5
} ldns_pkt_section;
typedef enum { LDNS_RDF_TYPE_NONE = 0, LDNS_RDF_TYPE_DNAME = 1 } ldns_rdf_type;
typedef enum { LDNS_RR_TYPE_TSIG = 250 } ldns_rr_type;

typedef struct ldns_struct_rdf ldns_rdf;
typedef struct ldns_struct_rr ldns_rr;
typedef struct ldns_struct_pkt ldns_pkt;

uint16_t ldns_read_uint16(const void *src);
ldns_rdf_type ldns_rdf_get_type(const ldns_rdf *rd);
size_t ldns_rdf_size(const ldns_rdf *rd);
uint8_t *ldns_rdf_data(const ldns_rdf *rd);
char *ldns_rdf2str(const ldns_rdf *rdf);
ldns_status ldns_wire2rr(ldns_rr **rr, const uint8_t *wire, size_t max, size_t *pos,
			 ldns_pkt_section section);
ldns_rr_type ldns_rr_get_type(const ldns_rr *rr);
void ldns_rr_free(ldns_rr *rr);
ldns_status ldns_wire2pkt(ldns_pkt **packet, const uint8_t *data, size_t len);
void ldns_pkt_free(ldns_pkt *packet);
ldns_status ldns_wire2dname(ldns_rdf **dname, const uint8_t *wire, size_t max, size_t *pos);

#endif
