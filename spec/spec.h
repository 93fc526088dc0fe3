/* The executable model of docs/spec.md: for an abstract packet and the
 * guard's abstract state, the verdicts the guard may give and the record it
 * must leave. Written from the spec's rows, not from engine/decide.c; it
 * shares only the compiled policy (rules/) and the address helpers of
 * common/ with the engine, and depends on nothing above logd/ (whose
 * record actions it names). Used by tests/unit/check_engine_spec.c and
 * tests/fuzz/fuzz_spec.c (through tests/spec/driver.c) and by
 * `portcullis log audit` (cli/audit.c), never by a daemon. */
#ifndef PC_SPEC_H
#define PC_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"
#include "rules/rules.h"

/* ---- the packet, as the spec classifies it ---------------------------------- */

enum spec_dir {
	SPEC_OUT = 1, /* from a sandbox port (prerouting) */
	SPEC_IN,      /* toward a sandbox (forward) */
};

/* Conntrack's own state of the packet, before portcullis's marks. */
enum spec_ct { SPEC_CT_NEW = 1, SPEC_CT_EST, SPEC_CT_INVALID };

enum spec_payload {
	SPEC_PL_NONE = 0,
	SPEC_PL_DNS_QUERY, /* one well-formed query (qname, qtype) */
	SPEC_PL_DNS_BAD,   /* not a DNS message */
	SPEC_PL_DNS_ANSWER,
	SPEC_PL_STREAM, /* bytes of a TCP stream described by stream_* */
	SPEC_PL_DATA,	/* anything else (for port 53 over TCP: an incomplete message) */
	/* a query (qname, qtype) whose shape the guard refuses: opcode,
	 * sections, EDNS, size, class (docs/dnsguard.md's table; S9) */
	SPEC_PL_DNS_SHAPE,
};

/* What the first message of a held flow's stream is, whole. */
enum spec_stream {
	SPEC_ST_CH = 1, /* a ClientHello naming stream_sni */
	SPEC_ST_NOSNI,	/* a ClientHello without server_name */
	SPEC_ST_TLSBAD, /* a handshake record that is not a ClientHello */
	SPEC_ST_PLAIN,	/* not TLS */
};

#define SPEC_ANSWER_MAX                                                                            \
	16 /* an answer record names at most this many addresses the audit replays */

struct spec_pkt {
	enum spec_dir dir;
	/* SPEC_OUT: who sent it as the engine knows it (port "" when the
	 * stamp names a port the engine does not know: port_known false) */
	struct policy_src from;
	bool port_known;
	struct pc_addr src, dst;
	uint8_t proto;
	uint16_t sport, dport;
	uint8_t tcp_flags;
	uint32_t seq, ack;
	uint16_t urp; /* the urgent pointer (with or without URG in tcp_flags) */
	/* TCP: its options name MPTCP (kind 30), or do not read to their end
	 * (a receiver's reading of them; which bytes make it so is the
	 * driver's, not modelled) */
	bool mptcp;
	enum spec_ct ct;
	/* S3: malformed at the IP or transport layer, or a fragment (the
	 * parser's verdict; what makes it so is not modelled) */
	bool malformed;
	bool tcp_framed; /* DNS over TCP: payload is the message after its length */
	enum spec_payload pl;
	const uint8_t *data; /* the L4 payload */
	size_t len;
	/* DNS_QUERY / DNS_ANSWER */
	size_t msg_at; /* DNS over TCP: the framed message these describe starts
			  here in data; before it, bytes of the stream sent again */
	uint16_t dns_id, qtype;
	char qname[POLICY_HOST_MAX];
	struct pc_addr answer[SPEC_ANSWER_MAX];
	size_t n_answer;
	uint32_t answer_ttl; /* seconds, the same for every record */
	/* STREAM */
	enum spec_stream stream;
	char stream_sni[POLICY_HOST_MAX];
	const uint8_t *stream_all; /* the whole first message this is a slice of */
	size_t stream_all_len;
};

/* ---- what the guard may do ------------------------------------------------- */

enum spec_out {
	SPEC_V_FAST = 1 << 0,	 /* accepted by the ruleset's fast path, not queued */
	SPEC_V_RDROP = 1 << 1,	 /* dropped by the ruleset, not queued */
	SPEC_V_DROP = 1 << 2,	 /* the engine drops it */
	SPEC_V_PASS = 1 << 3,	 /* this packet */
	SPEC_V_ALLOW = 1 << 4,	 /* the flow */
	SPEC_V_VAULT = 1 << 5,	 /* the flow, through the vault */
	SPEC_V_HOLD = 1 << 6,	 /* the SYN of a held flow */
	SPEC_V_REJECT = 1 << 7,	 /* RST / ICMP prohibited */
	SPEC_V_REFUSED = 1 << 8, /* dropped, with a synthesized DNS answer */
};

enum spec_rec { SPEC_REC_NONE = 0, SPEC_REC_MUST, SPEC_REC_MAY };

/* Action bits (1 << enum logrec_action). */
#define SPEC_ACT(a) (1u << (a))

/* Reason classes: docs/spec.md, "Verdicts and records". */
enum spec_reason {
	SPEC_R_ANY = 0,
	SPEC_R_UNKNOWN_PORT,
	SPEC_R_MALFORMED,
	SPEC_R_NOT_SANDBOX,
	SPEC_R_NOT_RESOLVER,
	SPEC_R_DNS_MALFORMED,
	SPEC_R_NO_CONN,
	SPEC_R_PROTO,
	SPEC_R_SANDBOXES,
	SPEC_R_CIDR,
	SPEC_R_HOST,
	SPEC_R_SNI,
	SPEC_R_NO_SNI,
	SPEC_R_TLS_BAD,
	SPEC_R_NOT_TLS,
	SPEC_R_TAMPER,
	SPEC_R_TIMEOUT,
	SPEC_R_QUOTA,
	SPEC_R_SPECIAL,
	SPEC_R_RELOAD,
	SPEC_R_FASTOPEN,
	SPEC_R_URGENT,
	SPEC_R_OVERLAP,	  /* DNS over TCP: overlapping bytes differ, data past the FIN */
	SPEC_R_NO_STREAM, /* DNS over TCP: no stream from the SYN */
	SPEC_R_MPTCP,	  /* MPTCP in a SYN of a stream judged by its bytes */
	SPEC_R_MAX
};

struct spec_verdict {
	unsigned may;	     /* enum spec_out bits the guard may give */
	enum spec_rec rec;   /* must / may / must not leave a record */
	unsigned actions;    /* SPEC_ACT bits the record's action may be */
	int outcome;	     /* enum logrec_verdict it must have */
	bool outcome_either; /* ... or any (dns-learn of a refused address) */
	enum spec_reason reason;
	enum spec_reason reason2; /* another class that will do (SPEC_R_ANY: none) */
	const char *row;	  /* the spec row: "S7", "H8" */
	/* a flow the guard allows on this packet: one allowed connect record is
	 * owed for it over the sequence (H11/H13) */
	bool approval_owed_here;
};

/* Does this reason string belong to class c? */
bool spec_reason_is(enum spec_reason c, const char *reason);
const char *spec_reason_name(enum spec_reason c);
/* "FAST|PASS" into buf. */
const char *spec_out_str(unsigned may, char *buf, size_t n);

/* ---- the abstract state ---------------------------------------------------- */

#define SPEC_PENDING_MAX 512
#define SPEC_LEARNED_MAX 512
#define SPEC_FLOWS_MAX	 64
#define SPEC_STREAM_KEEP 2048  /* the driver sends less in one DNS-over-TCP stream */
#define SPEC_KEEP_MAX	 16384 /* a held flow's judged bytes (docs/spec.md H11) */

struct spec_pending {
	char sandbox[POLICY_NAME_MAX];
	struct pc_addr client, resolver;
	uint16_t cport;
	uint8_t proto;
	uint16_t id, qtype;
	char qname[POLICY_HOST_MAX];
	uint64_t expires_ms; /* an unanswered query is forgotten 10 s on */
	bool owed;	     /* its record was deferred to its answer */
};

struct spec_learned {
	char sandbox[POLICY_NAME_MAX];
	struct pc_addr addr;
	char name[POLICY_HOST_MAX];
	uint64_t expires_ms; /* + dns.grace for flows that already exist */
};

enum spec_flow_state {
	SPEC_F_HELD = 1, /* waiting for its first bytes */
	SPEC_F_APPROVED, /* judged bytes approved, not yet acknowledged by the server */
	SPEC_F_ACKED,	 /* acknowledged: ALLOW from now on */
	SPEC_F_ALLOWED,	 /* ct mark ALLOW */
	SPEC_F_FAILED,	 /* refused: every later packet of it is refused too */
	SPEC_F_CUT,	 /* promoted from held, then cut by a reload (R1) */
};

enum spec_via { SPEC_VIA_CIDR = 1, SPEC_VIA_HOST, SPEC_VIA_SNI };

struct spec_flow {
	bool used;
	uint8_t proto;
	struct pc_addr sbaddr, peer; /* the sandbox's side, the other side */
	uint16_t sbport, peerport;
	enum spec_flow_state st;
	enum spec_via via;
	bool vault;
	char sandbox[POLICY_NAME_MAX];
	char name[POLICY_HOST_MAX]; /* learned name (HOST) or SNI (SNI) */
	struct policy_src from;	    /* the sender at the SYN */
	uint32_t isn;
	uint32_t snd_max; /* the end of what the sandbox sent and the guard let through */
	bool fin_seen;	  /* a FIN went through: the stream ends at fin_at (from isn+1) */
	uint32_t fin_at;
	bool srv_known; /* a SYN-ACK acknowledged isn: the server's sequence space */
	uint32_t srv_isn, srv_nxt;
	bool srv_first; /* SNI: the server's first bytes came and are no HelloRetryRequest */
	uint64_t deadline_ms;
	uint64_t promoted_ms; /* when the server's ACK promoted it (0: never) */
	uint8_t *kept;	      /* judged bytes from isn+1 (malloc'ed, SPEC_KEEP_MAX) */
	size_t kept_len;
	uint64_t born; /* the world's count of flows made, when it was (S23's oldest) */
};

struct spec_world {
	const struct config *cfg;
	const struct policy *pol;
	uint64_t now_ms;
	/* the gateway's own addresses and the bridge's subnets (special) */
	struct pc_addr gateway[4];
	size_t n_gateway;
	struct pc_prefix bridge[4];
	size_t n_bridge;
	struct spec_pending pending[SPEC_PENDING_MAX];
	size_t n_pending;
	/* learned names: slots, and their order from the oldest
	 * (learned_order[0]) to the newest; learned_key[slot] folds the
	 * slot's address, so that a scan compares 4 bytes a slot (the audit
	 * scans for every flow it replays) */
	struct spec_learned learned[SPEC_LEARNED_MAX];
	uint16_t learned_order[SPEC_LEARNED_MAX];
	uint32_t learned_key[SPEC_LEARNED_MAX];
	size_t n_learned;
	struct spec_flow flows[SPEC_FLOWS_MAX];
	/* per queue thread: the tables' sizes (0: unbounded) and the
	 * DNS-over-TCP streams being put together (S12, S14) */
	size_t held_cap, dnstcp_cap;
	uint64_t flows_born; /* flows made (spec_flow.born) */
	/* an allowed query's record may be deferred to its answer (the
	 * queue thread's records are being acknowledged; docs/dnsguard.md) */
	bool dns_defer;
	struct {
		char sandbox[POLICY_NAME_MAX];
		uint8_t proto;
		struct pc_addr a, b;
		uint16_t ap, bp;
		/* the sandbox's queries, from the SYN on (S12a): the bytes
		 * from base in order; clean while each was one whole message
		 * placed at the next byte (then every kept byte was judged) */
		bool syn, clean, fin, lost; /* lost: past SPEC_STREAM_KEEP */
		bool confirmed;		    /* the resolver's SYN-ACK acknowledged base */
		uint32_t base;
		size_t len, fin_at;
		uint8_t kept[SPEC_STREAM_KEEP];
		/* the resolver's answers on the same connection (S42b), from
		 * its ISN + 1 (ans_base, known at its SYN-ACK): the next
		 * message starts at ans_next while clean (every answer so far
		 * one whole message at that byte) */
		bool ans_known, ans_clean;
		uint32_t ans_base;
		size_t ans_next;
	} streams[SPEC_FLOWS_MAX];
	size_t n_streams;
};

void spec_world_init(struct spec_world *w, const struct config *cfg, const struct policy *pol);
/* Forget the flows (held and allowed); learned names and queries stay. */
void spec_world_forget_flows(struct spec_world *w);
void spec_world_free(struct spec_world *w);

/* One packet: the verdicts the spec allows and the record it requires;
 * the state moves as the spec says it does (the model never looks at what
 * the engine did). */
void spec_judge(struct spec_world *w, const struct spec_pkt *p, struct spec_verdict *v);

/* R1: would the flow whose sandbox side is (a, ap) and other side (b, bp)
 * still be allowed after w->pol was replaced by the new policy? Drops it
 * from the state when not; true when no such allowed flow exists. */
bool spec_reload_keeps(struct spec_world *w, uint8_t proto, const struct pc_addr *a, uint16_t ap,
		       const struct pc_addr *b, uint16_t bp);
/* Put a new policy in force (R1-R3); spec_reload_keeps judges each flow. */
void spec_world_reload(struct spec_world *w, const struct policy *pol);

/* ---- the vault's requests, as their records state them (V1, V3, V4) -------
 * The model has no vault connection; what it judges is a request the
 * vault let through (an allowed http-request record): the sandbox (which
 * its source address must belong to), the server name, the original
 * destination and its port, the names of the secrets injected. */
struct spec_vreq {
	const char *sandbox;
	struct pc_addr src, dst;
	uint16_t port;
	const char *sni;
	const char *secrets; /* comma separated; NULL or "": none */
};
/* NULL when V1 and V3 allow the request to go upstream with those
 * secrets; else the row that refuses it ("V1", "V3", "V4"), why saying
 * what (a secret bound elsewhere, a name not allowed, a destination not
 * learned for the secret's host). */
const char *spec_vault_refuses(const struct spec_world *w, const struct spec_vreq *q, char *why,
			       size_t n);

/* Does the model describe what this packet does to a held flow? false when
 * it would add bytes after a TLS record header that are not the rest of
 * the message it says it belongs to (two messages mixed: only the real
 * parser knows what that is). The fuzz target sends only described ones. */
bool spec_describes(struct spec_world *w, const struct spec_pkt *p);

#endif
