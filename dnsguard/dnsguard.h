/* dnsguard: judges every DNS query a sandbox sends, learns from the
 * resolvers' answers which addresses the allowed names mean for that
 * sandbox, and answers the engine's question "may this sandbox open a flow
 * to this address and port, and under which name?". Messages are parsed with
 * ldns; nothing here trusts a byte from a sandbox or a resolver.
 *
 * Threads: one struct dnsguard is shared by all of the engine's queue
 * threads; every function here is safe to call concurrently (internal
 * locking, documented in dnsguard/learn.c). Policy pointers passed in are
 * borrowed for the duration of the call only: the learned state is keyed by
 * sandbox name, so it survives a policy reload and every flow decision
 * re-checks the names against the policy in force. */
#ifndef PC_DNSGUARD_H
#define PC_DNSGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"
#include "rules/rules.h"

struct dnsguard;

int dnsguard_new(const struct config *cfg, struct dnsguard **out, struct pc_err *err);
void dnsguard_free(struct dnsguard *g);

/* A DNS message's transport as seen on the wire. proto is IPPROTO_UDP or
 * IPPROTO_TCP; for TCP, msg excludes the two-byte length prefix. */
struct dns_flow {
	struct pc_endpoint src, dst;
	uint8_t proto;
};

enum dnsguard_verdict {
	DNSG_ALLOW,  /* let the message through (queries: to the resolver) */
	DNSG_REFUSE, /* queries only: answer the sandbox with res->reply, drop the query */
	DNSG_DROP,   /* drop silently and count (malformed, unsolicited) */
};

#define DNSG_REPLY_MAX 1232 /* a synthesized answer never exceeds this */

struct dnsguard_query_res {
	enum dnsguard_verdict verdict;
	char qname[POLICY_HOST_MAX]; /* lower case, no trailing dot; "" if unparsable */
	/* For the log, when qname is "" because the question's name is not a
	 * host name (odd bytes, a dot inside a label): the name as sent, in
	 * DNS presentation form (every byte that is not printable ASCII as
	 * \DDD, '.' '\' ';' '(' ')' inside labels escaped: printable ASCII
	 * only, no spaces), no trailing dot; cut to "...<end>" at 253
	 * characters. "" otherwise. */
	char qname_shown[POLICY_HOST_MAX];
	uint16_t qtype;
	const char *reason;		 /* static text for the log */
	const char *code;		 /* its event.code (static; logd/reason.c) */
	const struct policy_allow *rule; /* entry that allowed the name, or NULL */
	const char *rcode;		 /* REFUSE: reply's rcode ("REFUSED"), static */
	/* deferred: the id its record is pledged under (never 0; unique in
	 * the process), which the record that takes its place names
	 * (docs/logd.md, "Pledges") */
	uint64_t pledge;
	uint8_t reply[DNSG_REPLY_MAX]; /* REFUSE: DNS message to send back */
	size_t reply_len;
};

/* The verdict record of an allowed query, deferred to its answer: one record
 * per query instead of one for the query and one for the answer
 * (docs/dnsguard.md, "One record per query"). What the record needs that
 * the answer does not carry is kept with the outstanding query. */
#define DNSG_POLICY_MAX 80
struct dnsguard_owed {
	char sandbox[POLICY_NAME_MAX];
	char rule[96];			     /* the allow entry's name, "" if none */
	char policy[DNSG_POLICY_MAX];	     /* policy hash at the query's verdict */
	struct pc_endpoint client, resolver; /* the query's source and destination */
	uint8_t proto;
	uint16_t qtype;
	char qname[POLICY_HOST_MAX];
	const char *why; /* static: what became of the query (no answer, ...) */
	uint64_t pledge; /* the id its record was pledged under */
	uint64_t sb_gen; /* which state of its sandbox its share counts in */
};

/* Judge a query from sandbox sb (NULL: sender is no sandbox -> refuse).
 * An allowed query is remembered (id, name, type, ports, resolver) so that
 * only its answer is accepted later. Always fills res (when res is not
 * NULL); returns 0, or <0 on an internal failure (then res->verdict is
 * DNSG_DROP: fail closed). res->reply is filled only for DNSG_REFUSE; it is
 * a bare DNS message: over TCP the engine adds the two-byte length. The
 * checks, in order, and their reasons are listed in docs/dnsguard.md.
 *
 * When the query is allowed, is the first of its kind (not a
 * retransmission of an outstanding one) and policy (the hash of the
 * policy judging it, copied) is not NULL, its record is deferred:
 * *deferred is set (always written when not NULL), the caller writes no
 * record now, and the record is owed — by the answer
 * (dnsguard_answer_judge sets res->query_owed) or, when no answer comes
 * (10 s, evicted, the sandbox pruned), by dnsguard_owed_take. A sandbox
 * may owe at most its share of such records (DG_OWED_MAX over n_sandboxes,
 * the policy's count); past it, a query that would be deferred is refused
 * instead (DNSG_OWED_REASON) until records drain: no record is dropped to
 * make room. */
int dnsguard_query_defer(struct dnsguard *g, const struct policy_sandbox *sb,
			 const struct dns_flow *f, const uint8_t *msg, size_t len, uint64_t now_ms,
			 const char *policy, size_t n_sandboxes, struct dnsguard_query_res *res,
			 bool *deferred);
/* The reason of a query refused because its sandbox owes its share of
 * deferred records (DNSG_REFUSE, REFUSED whatever dns_refuse says: the
 * name may well exist; code "dns_owed_quota"). */
#define DNSG_OWED_REASON                                                                           \
	"DNS: the sandbox's share of queries awaiting their record is used up (engine quota)"

/* Copy up to max owed records of queries that got no answer (their
 * outstanding entry expired, was evicted or its sandbox pruned; with all,
 * every outstanding deferred query too: the engine is stopping), oldest
 * first, to out; returns how many. They stay owed — and counted in their
 * sandbox's share — until dnsguard_owed_done says they are in the log, so a
 * logd that does not take them loses none. One caller at a time (the
 * engine's control thread). */
size_t dnsguard_owed_peek(struct dnsguard *g, uint64_t now_ms, bool all, struct dnsguard_owed *out,
			  size_t max);
/* The first n records the last dnsguard_owed_peek copied are in the log. */
void dnsguard_owed_done(struct dnsguard *g, size_t n);
/* The record of o — an answer's query record (dnsguard_answer_res.query)
 * that logd did not take — is owed again, on the owed list with why
 * (static) and in its sandbox's share, for the control thread to write:
 * the query left, so its record must not go with the answer that was
 * dropped. 0, or PC_ENOMEM (then the caller says so with the name). */
int dnsguard_owed_again(struct dnsguard *g, const struct dnsguard_owed *o, const char *why);
/* Every record owed now — deferred queries still outstanding and those on
 * the owed list — copied into a malloc'ed array (*out, freed by the
 * caller; NULL when none); returns how many, or -1 (PC_ENOMEM: nothing
 * copied). For pledging them again to a logd that does not hold them
 * (docs/logd.md, "Pledges"); nothing changes. */
long dnsguard_owed_all(struct dnsguard *g, struct dnsguard_owed **out);
/* dnsguard_owed_peek, then dnsguard_owed_done of what it copied. */
size_t dnsguard_owed_take(struct dnsguard *g, uint64_t now_ms, bool all, struct dnsguard_owed *out,
			  size_t max);

#define DNSG_LEARN_MAX	     32
#define DNSG_UNLEARNED_SHOWN 8

struct dnsguard_answer_res {
	enum dnsguard_verdict verdict; /* ALLOW (release) or DROP */
	const char *reason;
	char qname[POLICY_HOST_MAX];
	uint16_t qtype;
	struct pc_addr learned[DNSG_LEARN_MAX]; /* addresses learned from it */
	size_t n_learned;
	uint32_t ttl;		       /* effective TTL applied (s) */
	uint32_t ttls[DNSG_LEARN_MAX]; /* each learned address's TTL (s), clamped */
	/* The query this answers had its record deferred (dnsguard_query_defer):
	 * the caller writes it now, with the answer's addresses. */
	bool query_owed;
	struct dnsguard_owed query;
	/* Addresses of the answer that were not learned: special-purpose
	 * ones (common/special.c), the sandbox bridge's subnets and the
	 * gateway's own addresses (dnsguard_local_set), unless a cidr entry
	 * of the sandbox covers them (docs/dnsguard.md, "Special-purpose
	 * addresses"). n_unlearned counts them all; the first
	 * DNSG_UNLEARNED_SHOWN are listed with why, for the record. */
	size_t n_unlearned;
	struct {
		struct pc_addr addr;
		char why[120]; /* "link-local (RFC 3927), special-purpose" */
	} unlearned[DNSG_UNLEARNED_SHOWN];
	/* When the answer had to be changed (an HTTPS/SVCB "ech" parameter
	 * stripped), the new message; caller frees with free(). The engine
	 * releases this instead of the original. NULL when unchanged. */
	uint8_t *rewritten;
	size_t rewritten_len;
};

/* An answer from a resolver to sandbox sb (f->src is the resolver). It is
 * released only if it answers an outstanding allowed query (and consumes
 * it); its A/AAAA records reached through the CNAME chain of the question
 * (and HTTPS/SVCB address hints) are learned for (sandbox, address) ->
 * qname before the answer is released, so the sandbox's first SYN can
 * never race the learning — in two steps, so that what an answer teaches
 * is learned only once its record is in the log: judge (match, consume the
 * query, collect res->learned and res->ttls; nothing learned yet), then,
 * after the record was acknowledged and before the answer is released,
 * commit. A judged answer that is not committed teaches nothing.
 *
 * judge always fills res; returns 0, or <0 on an internal failure (then
 * DNSG_DROP). res->rewritten (caller frees) is set only with DNSG_ALLOW and
 * always has the original's length: ech is replaced in place, so a TCP
 * answer keeps its framing and sequence numbers. commit returns 0 or
 * PC_ENOMEM (then refuse the answer). */
int dnsguard_answer_judge(struct dnsguard *g, const struct policy_sandbox *sb,
			  const struct dns_flow *f, const uint8_t *msg, size_t len, uint64_t now_ms,
			  struct dnsguard_answer_res *res);
int dnsguard_learn_commit(struct dnsguard *g, const char *sb_name,
			  const struct dnsguard_answer_res *res, uint64_t now_ms);

/* Addresses that are the gateway's own or its sandboxes' (the bridge's
 * subnets, the gateway's interface addresses), which no DNS answer may
 * teach, like the special-purpose ranges. The engine reads them from the
 * kernel at start and whenever an address changes, and hands the whole set
 * over; it replaces the previous one. what is static text for the log. */
struct dnsguard_local {
	struct pc_prefix prefix;
	const char *what; /* "the sandbox bridge's subnet", "an address of the gateway" */
};
int dnsguard_local_set(struct dnsguard *g, const struct dnsguard_local *l, size_t n,
		       struct pc_err *err);

struct dnsguard_flow_res {
	bool allowed;
	bool vault; /* name is the bound host of one of sb's secrets
		       on this port: redirect to the vault */
	const struct policy_allow *rule;
	char name[POLICY_HOST_MAX]; /* allowed name the address was learned for */
	const char *reason;	    /* why refused, or why allowed */
};

/* May sandbox sb open a flow to dst:port over proto through a host entry?
 * True when an unexpired learned name of dst for sb is allowed by
 * policy_host_allows() (existing: also within the grace period). Fills res
 * (rule borrowed from sb's policy, reason static); returns 0, or PC_EINVAL
 * when res is NULL. A name bound to one of sb's secrets on this port (TCP)
 * is preferred and sets vault. */
int dnsguard_flow(struct dnsguard *g, const struct policy_sandbox *sb, const struct pc_addr *dst,
		  uint8_t proto, uint16_t port, bool existing, uint64_t now_ms,
		  struct dnsguard_flow_res *res);

/* The SNI check for TLS flows on host entries: sni must be one of the names
 * learned for dst by sb (unexpired or within grace: the flow was admitted
 * at its SYN), and allowed on this port. Case and one trailing dot are
 * ignored. *rule (may be NULL) is set when true. */
bool dnsguard_sni_allowed(struct dnsguard *g, const struct policy_sandbox *sb,
			  const struct pc_addr *dst, uint8_t proto, uint16_t port, const char *sni,
			  uint64_t now_ms, const struct policy_allow **rule);

/* Forget everything learned for sandboxes not in p (after a reload; NULL:
 * forget everything). Names of kept sandboxes stay: every flow decision
 * asks the policy in force anyway. */
void dnsguard_prune(struct dnsguard *g, const struct policy *p);

/* Counters since dnsguard_new; learned_entries and pending_queries are
 * current sizes. */
struct dnsguard_stats {
	uint64_t queries_allowed, queries_refused, queries_malformed;
	uint64_t answers_released, answers_dropped;
	uint64_t learned_entries, learned_evicted;
	uint64_t ech_stripped;
	uint64_t pending_queries, pending_evicted; /* allowed queries awaiting
						      their answer */
	uint64_t owed_refused; /* queries refused: their sandbox owed its share of
				  deferred records (DNSG_OWED_REASON) */
};
void dnsguard_stats(struct dnsguard *g, struct dnsguard_stats *st);

/* ---- TLS ClientHello ---------------------------------------------------- */

/* Find the server_name of a TLS ClientHello at the start of a TCP stream.
 * Returns 1 and writes the lower-cased name; 0 when the stream is TLS but
 * carries no SNI; PC_EAGAIN when more bytes are needed (*need = total bytes
 * wanted, bounded by 16 KiB); PC_EPARSE when it is not a well-formed
 * ClientHello (or not TLS at all; bytes that cannot start a handshake are
 * refused at once, not waited for); PC_EINVAL when sni (snilen) cannot hold
 * the name; PC_EREFUSED when a well-formed ClientHello carries Encrypted
 * Client Hello (or ESNI): the server may serve an inner name the guard
 * cannot read. The limits (no SNI, ECH) are in docs/dnsguard.md. */
int tls_clienthello_sni(const uint8_t *data, size_t len, char *sni, size_t snilen, size_t *need);

#endif
