/* DNS message builders shared by the dnsguard unit tests: real messages made
 * with ldns and turned into wire bytes, every step asserted. */
#ifndef PC_TEST_DNSMSG_H
#define PC_TEST_DNSMSG_H

#include "common/pc.h"
#include "dnsguard/dnsguard.h"
#include "tests/unit/unit.h"

#include <ldns/ldns.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The address written s; the test fails on a bad one. */
static inline struct pc_addr dm_addr(const char *s)
{
	struct pc_addr a;

	ck_assert_int_eq(pc_addr_parse(s, &a), 0);
	return a;
}

/* The tests' upstream hosts live in the documentation ranges, which are
 * special-purpose: declare them routable, as the lab's configuration does
 * (dns.routable), so that answers there are learned. */
static inline void dm_routable_testnets(struct config *cfg)
{
	static const char *const nets[] = {"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24",
					   "2001:db8::/32"};

	for (size_t i = 0; i < sizeof(nets) / sizeof(nets[0]); i++)
		ck_assert_int_eq(pc_prefix_parse(nets[i], &cfg->dns.routable[i]), 0);
	cfg->dns.n_routable = sizeof(nets) / sizeof(nets[0]);
}

/* The flow src:sport -> dst:dport over proto (IPPROTO_UDP or IPPROTO_TCP). */
static inline struct dns_flow dm_flow(const char *src, uint16_t sport, const char *dst,
				      uint16_t dport, uint8_t proto)
{
	struct dns_flow f = {.src = {.addr = dm_addr(src), .port = sport},
			     .dst = {.addr = dm_addr(dst), .port = dport},
			     .proto = proto};

	return f;
}

/* The reply direction of f. */
static inline struct dns_flow dm_reversed(const struct dns_flow *f)
{
	struct dns_flow r = {.src = f->dst, .dst = f->src, .proto = f->proto};

	return r;
}

/* A query for (name, t, c) with id and RD set; the caller owns it. */
static inline ldns_pkt *dm_query(uint16_t id, const char *name, ldns_rr_type t, ldns_rr_class c)
{
	ldns_pkt *p = ldns_pkt_query_new(ldns_dname_new_frm_str(name), t, c, LDNS_RD);

	ck_assert_ptr_nonnull(p);
	ldns_pkt_set_id(p, id);
	return p;
}

/* Adds the record rr (presentation form) to section s of p. */
static inline void dm_push(ldns_pkt *p, ldns_pkt_section s, const char *rr)
{
	ldns_rr *r;

	ck_assert_msg(ldns_rr_new_frm_str(&r, rr, 0, NULL, NULL) == LDNS_STATUS_OK, "rr %s", rr);
	ldns_pkt_push_rr(p, s, r);
}

/* p's wire form into buf (at most cap bytes); frees p; returns the length. */
static inline size_t dm_wire(ldns_pkt *p, uint8_t *buf, size_t cap)
{
	uint8_t *w;
	size_t n;

	ck_assert_int_eq(ldns_pkt2wire(&w, p, &n), LDNS_STATUS_OK);
	ck_assert_uint_le(n, cap);
	memcpy(buf, w, n);
	free(w);
	ldns_pkt_free(p);
	return n;
}

#endif
