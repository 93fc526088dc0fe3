/* The world the spec checks run in: two sandboxes, policies with exact
 * names, a wildcard, cidr entries (one over a special-purpose range), an
 * address shared by an allowed and a refused name, a secret-bound host;
 * the classes of sources and destinations of docs/spec.md as addresses;
 * and the packets of the abstract space, built for the driver. Shared by
 * tests/unit/check_engine_spec.c and tests/fuzz/fuzz_spec.c. */
#ifndef PC_SPEC_SCENARIO_H
#define PC_SPEC_SCENARIO_H

#include "tests/spec/driver.h"

extern const char sc_policy[];	/* in force at start */
extern const char sc_policy2[]; /* a reload that takes names and a cidr away */

enum sc_src {
	SC_SB1,	    /* agent-1 from its port */
	SC_SB2,	    /* agent-2 from its port */
	SC_SPOOF,   /* agent-2's address from agent-1's port: no sandbox */
	SC_UNKNOWN, /* an address no sandbox has, from agent-1's port */
	SC_BADPORT, /* agent-1's address from a port the engine does not know */
	SC_NSRC
};

enum sc_dst {
	SC_RESOLVER, /* dns.resolvers */
	SC_GATEWAY,  /* the gateway itself (bridge subnet) */
	SC_NEVER,    /* an address nobody learned */
	SC_SHARED,   /* api.allowed.test (both sandboxes) = evil.test's address */
	SC_OTHER2,   /* learned by agent-2 only */
	SC_UDPH,     /* dns.udp.test: allowed on UDP 5353 only */
	SC_VAULT,    /* vault.test: secret-bound on 443 */
	SC_CIDR,     /* inside agent-1's cidr entry (port 22) */
	SC_META,     /* meta.test answered with the metadata address */
	SC_NEAR,     /* near.test: special, but inside agent-1's cidr entry (8443) */
	SC_LOOP,     /* loop.test: loopback */
	SC_TWIN,     /* twin.test: agent-2's own address */
	SC_WILD,     /* x.wild.test */
	SC_NDST
};

/* fam: 4 or 6. */
void sc_src(int fam, enum sc_src s, struct pc_addr *a, uint32_t *stamp);
void sc_dst(int fam, enum sc_dst d, struct pc_addr *a);
const char *sc_src_name(enum sc_src s);
const char *sc_dst_name(enum sc_dst d);

/* Reports a disagreement (row, text). */
typedef void (*sc_report_fn)(void *arg, const char *row, const char *why);

struct sc {
	struct drv *d;
	sc_report_fn report;
	void *arg;
	unsigned long packets, bad;
	/* how many packets each row decided (agreeing or not), by row name */
	struct {
		char row[8];
		unsigned long n;
	} rows[64];
	size_t n_rows;
	uint16_t next_id, next_port;
	bool trace; /* SPEC_TRACE set: every packet, its row and the verdict, on stderr */
};

/* dns_defer: allowed queries' records deferred to their answers. */
void sc_init(struct sc *c, const char *yaml, bool dns_defer, sc_report_fn report, void *arg);
void sc_fini(struct sc *c);
/* Judge one packet; false on a disagreement (reported). */
bool sc_step(struct sc *c, struct drv_pkt *p);
/* Every name of the policy resolved by its sandboxes over fam (the answers
 * the guard learns from, and the special-purpose ones it must not). */
void sc_prelude(struct sc *c, int fam);

/* Packet makers. Payload pointers must outlive the step. */
struct drv_pkt sc_out(int fam, enum sc_src s, const struct pc_addr *dst, uint8_t proto,
		      uint16_t sport, uint16_t dport);
struct drv_pkt sc_in(const struct pc_addr *src, uint16_t sport, const struct pc_addr *dst,
		     uint16_t dport, uint8_t proto);
void sc_tcp(struct drv_pkt *p, uint8_t flags, uint32_t seq, uint32_t ack);
void sc_payload(struct drv_pkt *p, enum spec_payload pl, const uint8_t *data, size_t len);
void sc_stream(struct drv_pkt *p, enum spec_stream st, const char *sni, const uint8_t *data,
	       size_t len);
/* A DNS query from sandbox s (over UDP or TCP, framed) in buf. */
void sc_query(struct drv_pkt *p, uint8_t *buf, uint16_t id, const char *name, uint16_t qtype,
	      bool tcp);
/* The answer to it, toward the sandbox. */
void sc_answer(struct drv_pkt *p, uint8_t *buf, uint16_t id, const char *name, uint16_t qtype,
	       const struct pc_addr *addrs, size_t n, bool tcp);

#endif
