/* dnsguard internals shared by its files: the guard object, the per-sandbox
 * state (learned addresses and outstanding queries) and the DNS helpers.
 * Nothing here is part of the interface; see dnsguard.h. */
#ifndef PC_DNSGUARD_INT_H
#define PC_DNSGUARD_INT_H

#include <ldns/ldns.h>
#include <pthread.h>
#include <stdatomic.h>

#include "dnsguard/dnsguard.h"

#define DG_PENDING_MS	  10000u /* an unanswered query is forgotten after this */
#define DG_PENDING_PER_SB 1024u	 /* outstanding queries remembered per sandbox */
#define DG_PENDING_DUPS	  4u	 /* answers accepted for one query retransmitted */
#define DG_NAMES_PER_ADDR 16u	 /* names remembered for one (sandbox, address) */
#define DG_CHAIN_MAX	  8u	 /* CNAME links followed from the question */
#define DG_QUERY_MAX	  512u	 /* longest query judged (padding included) */
#define DG_SB_BUCKETS	  256u	 /* sandbox directory buckets (sandboxes are few) */

struct dg_addr;

/* One binding (sandbox, address) -> name. Lives in its address's list and in
 * the sandbox's learning-order list. */
struct dg_bind {
	struct dg_bind *anext;	       /* next name of the same address */
	struct dg_bind *lprev, *lnext; /* learning order: head is the oldest */
	struct dg_addr *addr;
	uint64_t learned_ms;
	uint64_t expires_ms; /* new flows allowed before this; existing + grace */
	char name[];	     /* lower case, no trailing dot */
};

struct dg_addr {
	struct dg_addr *hnext;
	uint64_t hash;
	struct pc_addr addr;
	struct dg_bind *binds;
	unsigned nbinds;
};

/* One outstanding allowed query, waiting for its answer. */
struct dg_pend {
	struct dg_pend *hnext;
	struct dg_pend *qprev, *qnext; /* insertion order = expiry order */
	uint64_t hash;
	uint64_t expires_ms;
	struct pc_addr resolver, client;
	uint16_t port, id, qtype;
	uint8_t proto;
	uint8_t count;	 /* retransmissions seen: that many answers accepted */
	bool owed;	 /* its verdict record is deferred to its answer */
	const char *why; /* on the owed list: what became of it (static) */
	char rule[96], policy[DNSG_POLICY_MAX]; /* for that record */
	char sandbox[POLICY_NAME_MAX];
	uint16_t dport;	 /* the resolver's port */
	uint64_t sb_gen; /* owed: the dg_sb whose share it counts in (its gen) */
	uint64_t pledge; /* owed: the id its record was pledged under (never 0) */
	char qname[];
};

/* Deferred records the guard may owe at once, shared out equally between
 * the policy's sandboxes (dg_owed_share): a sandbox whose share is used
 * gets its new queries refused, so no record is ever dropped for room and
 * no sandbox can use up another's. */
#define DG_OWED_MAX 65536u

/* Everything dnsguard knows about one sandbox, guarded by mu. */
struct dg_sb {
	struct dg_sb *next; /* directory chain */
	pthread_mutex_t mu;
	char name[POLICY_NAME_MAX];

	struct dg_addr **abuckets; /* learned addresses, power-of-two sized */
	size_t nabuckets, naddrs;
	struct dg_bind *lru_head, *lru_tail;
	uint32_t nbinds;
	/* learned_ms of lru_head (UINT64_MAX when empty), kept under mu but
	 * read without it by the total-cap eviction to choose a victim. */
	_Atomic uint64_t oldest_ms;

	struct dg_pend **pbuckets; /* DG_PENDING_PER_SB buckets, allocated lazily */
	struct dg_pend *pq_head, *pq_tail;
	uint32_t npend;
	/* Its deferred records not yet in the log: outstanding (owed set)
	 * and on the guard's owed list. gen tells this sandbox's entries on
	 * that list from those of a namesake a reload removed before. */
	uint32_t n_owed;
	uint64_t gen;
};

struct dnsguard {
	/* Copied from the configuration at dnsguard_new; read-only after. */
	struct pc_addr resolvers[RULES_MAX_RESOLVERS];
	size_t n_resolvers;
	uint32_t ttl_min, ttl_max;
	uint64_t grace_ms;
	uint32_t cap_sb, cap_total;
	uint8_t hkey[16]; /* SipHash key: addresses come from answers a
			     sandbox can influence, so bucket choice is keyed */
	/* dns.routable */
	struct pc_prefix routable[RULES_MAX_ROUTABLE];
	size_t n_routable;

	/* dnsguard_local_set's set, replaced whole under local_lock (a
	 * leaf lock: nothing else is taken while it is held). */
	pthread_rwlock_t local_lock;
	struct dnsguard_local *local;
	size_t n_local;

	/* The sandbox directory. Readers (every call) take it shared; only
	 * creating a sandbox's state and dnsguard_prune take it exclusive,
	 * so a struct dg_sb found under the read lock stays valid until it
	 * is released. Lock order: dir, then one dg_sb.mu; never two sb
	 * locks at once. */
	pthread_rwlock_t dir;
	struct dg_sb *sbs[DG_SB_BUCKETS];

	/* Counters: atomics, updated without locks (relaxed: they are
	 * statistics, nothing is ordered by them). */
	_Atomic uint64_t q_allowed, q_refused, q_malformed;
	_Atomic uint64_t a_released, a_dropped;
	_Atomic uint64_t learned, evicted, ech_stripped;
	_Atomic uint64_t pending, pending_evicted;

	/* Deferred query records whose answer never came, for
	 * dnsguard_owed_take (struct dg_pend, oldest first). Lock order:
	 * a dg_sb.mu, then owed_mu. */
	pthread_mutex_t owed_mu;
	struct dg_pend *owed_head, *owed_tail;
	size_t n_owed;
	_Atomic uint64_t sb_gen; /* the last dg_sb.gen given */
	_Atomic uint64_t pledge; /* the last pledge id given (one per deferred query) */
	_Atomic uint64_t owed_refused;
};

#define DG_INC(g, field) atomic_fetch_add_explicit(&(g)->field, 1, memory_order_relaxed)

/* ---- the guard's calls for tests (query.c, answer.c, learn.c) ------------ */

/* dnsguard_query_defer that never defers (dnsguard.h). */
int dnsguard_query(struct dnsguard *g, const struct policy_sandbox *sb, const struct dns_flow *f,
		   const uint8_t *msg, size_t len, uint64_t now_ms, struct dnsguard_query_res *res);
/* dnsguard_answer_judge and dnsguard_learn_commit at once: what the answer
 * teaches is learned before this returns. */
int dnsguard_answer(struct dnsguard *g, const struct policy_sandbox *sb, const struct dns_flow *f,
		    const uint8_t *msg, size_t len, uint64_t now_ms,
		    struct dnsguard_answer_res *res);
/* Names dst was learned for by sandbox sb_name (unexpired, or within the
 * grace period), most recent first, comma separated into buf (the unit
 * tests look at what was learned with it). Only whole names are written; buf is always terminated
 * when len > 0. Returns the number of names written (with buf NULL or len
 * 0: the number there are). */
size_t dnsguard_names(struct dnsguard *g, const char *sb_name, const struct pc_addr *dst,
		      uint64_t now_ms, char *buf, size_t len);

/* ---- guard.c: the sandbox directory --------------------------------------- */

/* Take g->dir shared and return the state of name, creating it if needed
 * (create=true). On success the caller holds g->dir shared and must release
 * it with pthread_rwlock_unlock. NULL (and no lock held) when absent and
 * not created, or on allocation failure (*enomem set). */
struct dg_sb *dg_sb_get(struct dnsguard *g, const char *name, bool create, bool *enomem);
uint64_t dg_hash(const struct dnsguard *g, const void *data, size_t len);
bool dg_is_resolver(const struct dnsguard *g, const struct pc_addr *a);

/* ---- learn.c ------------------------------------------------------------- */

/* Learn (sb, addr) -> name until expires_ms; g->dir held shared, s->mu not
 * held. Evicts for the per-sandbox and total caps. */
int dg_learn(struct dnsguard *g, struct dg_sb *s, const struct pc_addr *addr, const char *name,
	     uint64_t expires_ms, uint64_t now_ms);
/* Free everything sb has learned (s->mu held or s unreachable). */
void dg_learn_clear(struct dnsguard *g, struct dg_sb *s);

/* ---- pending.c ----------------------------------------------------------- */

struct dg_pend_key {
	struct pc_addr resolver, client;
	uint16_t port, id, qtype;
	uint16_t dport; /* the resolver's port (not part of the match) */
	uint8_t proto;
	const char *qname; /* lower case */
};
/* Remember an allowed query (s->mu not held). With policy not NULL and
 * the query new (not a retransmission), its record is deferred: *deferred
 * set to its pledge id (never 0; 0: not deferred), rule and policy kept for
 * it — unless the sandbox owes its share of records already (DG_OWED_MAX
 * over n_sandboxes): then PC_EREFUSED and nothing is remembered. */
int dg_pending_add(struct dnsguard *g, struct dg_sb *s, const struct dg_pend_key *k,
		   uint64_t now_ms, const char *rule, const char *policy, size_t n_sandboxes,
		   uint64_t *deferred);
/* Consume the query an answer matches; false when none (s->mu not held).
 * When its record was deferred, *owed_out is filled and *owed set. */
bool dg_pending_take(struct dnsguard *g, struct dg_sb *s, const struct dg_pend_key *k,
		     uint64_t now_ms, struct dnsguard_owed *owed_out, bool *owed);
/* Forget every outstanding query (s->mu held or s unreachable); with owe,
 * deferred ones move to the owed list (why: static text). */
void dg_pending_clear(struct dnsguard *g, struct dg_sb *s, bool owe, const char *why);

/* ---- wire.c: names and message walking ------------------------------------- */

/* A domain name rdf as a lower-case string without the trailing dot.
 * Fails (PC_EINVAL) on the root name, on a '.' inside a label and on any
 * name that is not a host name by common/hostname.c (PC_HOST_NAME). */
int dg_dname_str(const ldns_rdf *d, char *out, size_t outlen);
/* Any domain name rdf as presentation text for the log (see qname_shown in
 * dnsguard.h): out is always terminated; "" when it cannot be made. */
void dg_dname_shown(const ldns_rdf *d, char *out, size_t outlen);

/* ldns_wire2pkt(out, msg, len), except that a message with more than one
 * TSIG record in its additional section is refused (PC_EPARSE) before ldns
 * sees it: ldns 1.8.3 keeps only the last one and leaks the others, so a
 * sandbox could make the engine leak memory with every query. 0 and *out
 * (caller frees with ldns_pkt_free) on success; PC_EPARSE otherwise. */
int dg_wire2pkt(ldns_pkt **out, const uint8_t *msg, size_t len);

/* One resource record's place in the message, as found by dg_wire_walk_sel. */
struct dg_wire_rr {
	ldns_pkt_section section;
	size_t start, end; /* the whole RR */
	size_t rdata;	   /* offset of its RDATA (end for questions) */
	uint16_t type;
	const ldns_rr *rr; /* parsed with ldns, valid during the callback */
};
typedef int (*dg_wire_fn)(void *arg, const struct dg_wire_rr *w);
/* Walk every question and RR of msg, calling fn for each record want()
 * selects (by type and section; want NULL: every one), parsed with
 * ldns_wire2rr (fn returns 0 to go on, anything else stops the walk and is
 * returned); the others are only stepped over by their fixed fields (their
 * ends and the message's end are still checked). PC_EPARSE when the
 * message is malformed or has bytes after its last RR. */
typedef bool (*dg_wire_want)(uint16_t type, ldns_pkt_section section);
int dg_wire_walk_sel(const uint8_t *msg, size_t len, dg_wire_want want, dg_wire_fn fn, void *arg);

/* ---- svcb.c -------------------------------------------------------------- */

#define DG_HINTS_MAX DNSG_LEARN_MAX
struct dg_svcb_hints {
	struct pc_addr a[DG_HINTS_MAX];
	size_t n;
};
/* In the SvcParams at msg[off, off+len): check their form, and when
 * hints is not NULL collect ipv4hint/ipv6hint addresses. *has_ech set when
 * an ech parameter is present. PC_EPARSE when malformed. */
int dg_svcb_params_scan(const uint8_t *p, size_t len, bool *has_ech, struct dg_svcb_hints *hints);
/* Rewrite the SvcParams at p[0, len) in place without ech, keeping their
 * length (see svcb.c for how). PC_EPARSE when it cannot. */
int dg_svcb_params_strip_ech(uint8_t *p, size_t len);

#endif
