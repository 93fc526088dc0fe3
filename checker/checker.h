/* checker: proves from the live kernel state (nftables, links, bridge ports,
 * routes, tc, XDP, sysctls; read over netlink) that every packet entering
 * from a sandbox port is queued to the engine, sent to the guard's own
 * listeners, or dropped — or names each other way out — and issues the
 * signed certificate (`portcullis check`, `portcullis cert`). docs/checker.md
 * describes the model, the obligations and the certificate format. */
#ifndef PC_CHECKER_H
#define PC_CHECKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"
#include "rules/rules.h"

struct config;
struct policy;

/* The version of the containment model (docs/checker.md: what it assumes
 * and what it reads). A certificate names it; `cert verify --live` calls a
 * certificate proven under another model stale. Bump it whenever what the
 * checker reads or how it judges changes.
 * 2: every interface is a way in (issue 23).
 * 3: devices of every network namespace stacked on the sandbox side, and
 *    the bridge's promiscuity (issue 31). */
#define CK_MODEL_VERSION "portcullis-containment-model/3"

/* Result of a check: PROVEN only when every obligation held and nothing was
 * left unmodelled. */
enum checker_status {
	CHECKER_PROVEN = 0,
	CHECKER_EXIT_FOUND = 1, /* at least one way out (and perhaps doubts) */
	CHECKER_UNPROVEN = 2,	/* no way out found, but something not modelled */
};

enum checker_kind {
	CHECKER_EXIT = 1,  /* "second exit: ..." a way out exists */
	CHECKER_DOUBT = 2, /* "unproven: ..." could not be modelled */
};

/* The proof obligations, in report order (ids in checker_oblig_id). */
enum checker_oblig {
	CK_OB_TABLE = 0, /* our tables present and identical to the engine's */
	CK_OB_ORDER,	 /* our base chains run before anything that could undo them */
	CK_OB_PATHS,	 /* every path ends in our queue, our listeners or a drop */
	CK_OB_QUEUE,	 /* no queue rule with bypass / to another queue */
	CK_OB_MEMBERS,	 /* only sandbox ports on the sandbox bridge */
	CK_OB_ISOLATED,	 /* every port isolated */
	CK_OB_TCXDP,	 /* no tc/XDP program redirects or mirrors */
	CK_OB_LOCAL,	 /* no extra local address on the bridge */
	CK_OB_IPV6,	 /* IPv6 as guarded as IPv4 */
	CK_OB_BRNF,	 /* bridge-netfilter settings as the ruleset expects */
	CK_OB_PASS,	 /* what the engine released goes only to a resolver's port 53 */
	CK_OB_MODEL,	 /* everything on the path was modelled */
	CK_OB_COUNT
};

struct checker_finding {
	enum checker_oblig ob;
	enum checker_kind kind;
	char *text; /* "second exit: tc filter on port vmtap3 ingress: ..." */
};

struct checker_result {
	enum checker_status status;
	char bridge[PC_IFNAMSIZ];
	uint64_t time_ms; /* wall clock when the state was read */
	struct checker_finding *findings;
	size_t n_findings, cap_findings;
	struct {
		char **lines; /* evidence, one fact per line */
		size_t n, cap;
		bool failed;
	} ob[CK_OB_COUNT];
	/* Canonical dumps (owned) and their "sha256:<hex>" digests: the whole
	 * ruleset, our tables alone, and the link/address/route/tc/sysctl
	 * snapshot. These are the certificate's first two subjects. */
	char *ruleset_canon, *snapshot_canon;
	size_t ruleset_len, snapshot_len;
	char ruleset_digest[80], table_digest[80], snapshot_digest[80];
};
void checker_result_free(struct checker_result *r);

/* What the guard's own configuration looks like: the names of our tables,
 * our mark bits, our queues, our listeners and what the ruleset expects of
 * bridge netfilter. checker_expect_from_policy() derives it from the
 * configuration and the engine (nft/nft.h); tests set it by hand. */
struct checker_expect {
	char table[64];		     /* "portcullis" (inet and bridge families) */
	uint32_t mark_mask;	     /* every mark bit the engine owns */
	uint32_t mark_decided;	     /* the bit(s) meaning "the engine decided" */
	uint16_t queue_lo, queue_hi; /* our NFQUEUE numbers, inclusive */
	uint16_t listen_ports[4];    /* our listeners (vault), host order */
	size_t n_listen;
	int br_nf_call;			 /* bridge-nf-call-ip(6)tables: 0 off, 1 on, -1 either */
	const char *const *policy_ports; /* match.port names of the policy (borrowed) */
	size_t n_policy_ports;
	/* Canonical dump (ck_nft_canon form) of the tables the engine installs;
	 * NULL when not available (then identity is unproven). Borrowed. */
	const char *canon;
	size_t canon_len;
	/* pass-restricted (docs/checker.md): the packet mark (within
	 * mark_mask) of what the engine released, the ct mark bits of the flows
	 * it allowed or holds (their packets are exempt) and the configured
	 * resolvers (borrowed). checker_run fills what is left 0 from the
	 * engine's constants and the configuration; mark_pass 0: unproven. */
	uint32_t mark_pass, ct_exempt;
	const struct pc_addr *resolvers;
	size_t n_resolvers;
	/* the configuration's uplinks: upstream-facing whatever their routes
	 * say (besides those with a gateway or default route through them) */
	char uplinks[RULES_MAX_UPLINKS][PC_IFNAMSIZ];
	size_t n_uplinks;
};
/* Fill ex from cfg (queues, listeners), the engine's constants (mark bits,
 * table name) and what the engine's ruleset builder makes for cfg, the
 * policy pol (borrowed; NULL: the one in cfg->rules_dir) and the bridge's
 * current ports. The engine's own check passes the policy it enforces: it
 * compares the live tables with that, not with files an admin may be
 * editing (engine/checkrun.c). *owned holds what ex borrows; free it with
 * checker_expect_free after ex's last use. */
int checker_expect_from_policy(const struct config *cfg, const struct policy *pol,
			       const char *bridge, struct checker_expect *ex, void **owned,
			       struct pc_err *err);
void checker_expect_free(void *owned);

/* Read the live state of this network namespace and prove containment for
 * the sandbox bridge `bridge` (NULL: cfg->bridge). ex NULL: derived from
 * cfg. On success (the state was read; the answer may still be negative)
 * *out is a result the caller frees; <0 when the state could not be read.
 * The engine calls this at start and after each ruleset change. */
int checker_run(const struct config *cfg, const struct checker_expect *ex, const char *bridge,
		struct checker_result **out, struct pc_err *err);

/* Render a result: the human form (one line per finding, then evidence;
 * checker_result_json in checker_int.h: JSON). Returns a malloc'd
 * NUL-terminated string or NULL (no memory). */
char *checker_result_text(const struct checker_result *r, bool verbose);

/* Can a route that an input route lookup finds forward the packet (type
 * RTN_*, destination dst/dst_len of family AF_INET/AF_INET6)? What the
 * routing half reads table local by (checker/routing.c), and the engine
 * the routes added to it (engine/cutoff.c): one answer for both. */
bool checker_route_forwards(uint8_t family, uint8_t type, const uint8_t *dst, uint8_t dst_len);

/* `portcullis check` and `portcullis cert ...` (argv[0] is the command). */
int checker_cli(int argc, char **argv, const char *config);

#endif
