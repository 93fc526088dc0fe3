/* checker: the path model's internal types, shared by path.c (hooks, chain
 * order, the walk) and rule_eval.c (one rule). Private to checker/. */
#ifndef PC_CHECKER_PATH_H
#define PC_CHECKER_PATH_H

#include "checker/internal.h"

enum { CK_NO = 0, CK_MAYBE = 1, CK_YES = 2 };

/* Abstract packet state: has the engine (or our table) decided its flow?
 * LINKLOCAL: accepted by our table as on-link control traffic (ICMPv6
 * neighbour discovery with hop limit 255): fine to deliver locally, an exit
 * if forwarded. */
enum { CK_UNDECIDED = 0, CK_DECIDED = 1, CK_LINKLOCAL = 2, CK_NSTATES = 3 };

/* Outcomes of a chain or rule, as a bit set: accepted (the base chain
 * ends) or returned (to the caller) in a state, dropped, stolen. */
#define CK_O_ACC(s)  (1 << (s))
#define CK_O_RET(s)  (1 << (4 + (s)))
#define CK_O_ACC_ANY 0x0f
#define CK_O_RET_ANY 0xf0
#define CK_O_ACC_U   CK_O_ACC(CK_UNDECIDED)
#define CK_O_ACC_D   CK_O_ACC(CK_DECIDED)
#define CK_O_DROP    (1 << 8) /* dropped or rejected: final */
#define CK_O_STOLEN  (1 << 9) /* taken elsewhere (fwd): reported as an exit */

struct ck_ctx {
	int l3;	      /* NFPROTO_IPV4 or NFPROTO_IPV6 */
	uint32_t fam; /* hook family being walked: NETDEV, BRIDGE or INET */
	uint32_t hook;
	const struct ck_link *iif, *port, *br;
};

struct ck_walk {
	const struct ck_state *st;
	const struct checker_expect *ex;
	struct checker_result *res;
	struct ck_ctx ctx;
	bool ours;	 /* the chain being walked is in our table */
	bool after_ours; /* our prerouting guard has run on this path */
	bool queued;	 /* a queue rule of ours was reached */
	bool marks_only; /* global scan: report only writes to our mark bits */
	int depth;
	char why[1200]; /* how an undecided packet got past our table */
	/* Within one base chain's walk (the context is fixed) a regular chain
	 * reached again from the same state has the same outcome: memo[i *
	 * CK_NSTATES + state] holds it (-1: not yet), so jumps fanning out
	 * through many chains cost each chain once, not once per path to it.
	 * busy[i]: chain i is being walked (a jump back to it is a loop). */
	int *memo;
	bool *busy;
	size_t n_memo;
};

struct ck_rule_out {
	int bits; /* CK_O_* outcomes that end the chain */
	int cont; /* (1 << state) for each state that goes on to the next rule */
};

void ck_rule_eval(struct ck_walk *w, const struct ck_chain *c, const struct ck_rule *r, int state,
		  struct ck_rule_out *out);
/* Walk a chain (base or regular) from state; returns CK_O_* bits. */
int ck_walk_chain(struct ck_walk *w, const struct ck_chain *c, int state);
/* Remember how an undecided packet was accepted by our table. */
void ck_walk_note_accept(struct ck_walk *w, const struct ck_chain *c, const struct ck_rule *r,
			 const char *how);
void ck_rule_where(const struct ck_chain *c, const struct ck_rule *r, char *buf, size_t len);

#endif
