/* The differential driver: one abstract packet becomes real IPv4/IPv6
 * bytes, goes through an emulation of the ruleset in front of the engine
 * (docs/spec.md, A2-A5: conntrack, ct marks, what is queued) and the
 * engine's real decide_packet() with a real policy, DNS guard and flow
 * tables, and through the model (spec/model.c); any verdict or record the
 * model does not allow is a disagreement, named by its spec row.
 * Shared by tests/unit/check_engine_spec.c and tests/fuzz/fuzz_spec.c. */
#ifndef PC_SPEC_DRIVER_H
#define PC_SPEC_DRIVER_H

#include "spec/spec.h"

/* Bridge port stamps: the engine knows 4 (pcv1) and 5 (pcv2); 9 is a port
 * the kernel stamped but the engine does not know (yet). */
#define DRV_PORT1	 4
#define DRV_PORT2	 5
#define DRV_PORT_UNKNOWN 9

struct drv_pkt {
	/* the caller fills dir, src, dst, proto, sport, dport, tcp_flags, seq,
	 * ack, pl with its fields, and data/len (built with the helpers
	 * below); the driver fills from, port_known, ct, tcp_framed */
	struct spec_pkt s;
	uint32_t stamp;	     /* SPEC_OUT: the bridge port's ifindex */
	uint8_t tcp_opt_len; /* bytes of TCP options (NOPs), a multiple of 4 */
	uint16_t v6_dstopt;  /* IPv6 TCP: a destination options header of this many
				bytes (a multiple of 8, 8..2048) before TCP */
	uint8_t ip_proto;    /* for s.proto other than TCP/UDP/ICMP: the IP protocol */
	/* TCP options as a stack sends them, in place of tcp_opt_len's NOPs:
	 * with s.mptcp, the form that carries MPTCP or cannot be read to its
	 * end (DRV_OPT_MPC when none of those is named); without it,
	 * DRV_OPT_DECOY or nothing */
	uint8_t opt_form;
};

enum drv_opt {
	DRV_OPT_NONE,
	DRV_OPT_MPC,	/* MP_CAPABLE alone */
	DRV_OPT_LINUX,	/* MSS, SACK permitted, timestamps, NOP, window scale, MP_CAPABLE */
	DRV_OPT_JOIN,	/* MP_JOIN of a SYN */
	DRV_OPT_BADLEN, /* MSS, then an option whose length runs past the header */
	DRV_OPT_LEN1,	/* an option of length 1 */
	DRV_OPT_DECOY,	/* no MPTCP: 30s inside a timestamp's value and after the end of list */
	DRV_OPT_N
};

struct drv;

/* A world from a config's resolvers and a policy's YAML text (two
 * sandboxes agent-1 on pcv1, agent-2 on pcv2 are expected). */
struct drv *drv_new(const char *yaml, bool dns_defer);
void drv_free(struct drv *d);
/* Forget every flow: held and DNS-over-TCP tables, conntrack, the model's
 * flows (DNS state, learned and pending, stays). */
void drv_reset_flows(struct drv *d);
void drv_advance(struct drv *d, uint64_t ms);
/* Conntrack forgets every connection (a RST closed it, its timeout ran
 * out, a flush): the next packet of those addresses and ports is NEW. The
 * engine's and the model's flows stay. */
void drv_ct_forget(struct drv *d);
/* Make the held-flow and DNS-over-TCP tables this small (the flows are
 * forgotten), so that quotas (S14, S23) are reached. */
void drv_set_capacity(struct drv *d, size_t held, size_t dnstcp);

/* One packet. Returns 0 when the engine did what the model allows, 1 on a
 * disagreement (*row: the spec row; why: what happened, the packet). */
int drv_step(struct drv *d, struct drv_pkt *p, const char **row, char *why, size_t whylen);
/* spec_describes for this packet (spec/model.h). */
bool drv_describes(struct drv *d, const struct drv_pkt *p);
/* The engine's last verdict, for sequences that follow it ("FAST"...). */
unsigned drv_last(const struct drv *d);

/* Put a new policy in force as a reload does; every allowed flow is
 * judged again by decide_rejudge and by the model (R1). Returns the
 * number of disagreements (reported through report, may be NULL). */
int drv_reload(struct drv *d, const char *yaml,
	       void (*report)(void *arg, const char *row, const char *why), void *arg);

/* Payload builders: return the length written to b (b: 4096 bytes). */
size_t drv_dns_query(uint8_t *b, uint16_t id, const char *name, uint16_t qtype);
size_t drv_dns_answer(uint8_t *b, uint16_t id, const char *name, uint16_t qtype,
		      const struct pc_addr *addrs, size_t n);
size_t drv_client_hello(uint8_t *b, const char *sni); /* sni NULL: no server_name */
/* drv_client_hello (with an SNI) and one more extension of len bytes */
size_t drv_client_hello_ext(uint8_t *b, const char *sni, uint16_t type, size_t len);
size_t drv_tls_bad(uint8_t *b); /* a ServerHello in a handshake record */
/* Two-byte length prefix in front of a message of n bytes at b+2. */
size_t drv_tcp_frame(uint8_t *b, size_t n);

/* A one-line description of a packet, for reports. */
const char *drv_pkt_str(const struct drv_pkt *p, char *buf, size_t n);

#endif
