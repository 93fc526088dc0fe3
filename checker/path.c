/* checker: the path of a packet entering from a sandbox port through the
 * netfilter hooks (netdev ingress, bridge, inet/ip/ip6 in priority order,
 * NAT at the NAT core's priority, local delivery vs forwarding), walked with
 * nft(8) semantics: accept ends only its base chain, drop is final, equal
 * priorities run in either order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter_bridge.h>
#include <linux/netfilter_ipv4.h>

#include "checker/checker_int.h"

static bool chain_is_ours(const struct ck_walk *w, const struct ck_chain *c)
{
	return (c->family == NFPROTO_INET || c->family == NFPROTO_BRIDGE) &&
	       strcmp(c->table, w->ex->table) == 0;
}

void ck_walk_note_accept(struct ck_walk *w, const struct ck_chain *c, const struct ck_rule *r,
			 const char *how)
{
	char loc[600];

	if (w->why[0] || c->family != NFPROTO_INET)
		return; /* the first way past our inet table is the one to name */
	ck_rule_where(c, r, loc, sizeof(loc));
	snprintf(w->why, sizeof(w->why), "%s: %s without an engine decision", loc, how);
}

static int policy_bits(struct ck_walk *w, const struct ck_chain *c, int state)
{
	if (c->policy == NF_DROP)
		return CK_O_DROP;
	if (state == CK_UNDECIDED && chain_is_ours(w, c))
		ck_walk_note_accept(w, c, NULL, "policy accept");
	return CK_O_ACC(state);
}

/* Index of c in the ruleset's chains, or -1 (then nothing is memoized). */
static long chain_index(const struct ck_walk *w, const struct ck_chain *c)
{
	const struct ck_chain *base = w->st->nft.chains;

	if (!w->memo || c < base || c >= base + w->n_memo)
		return -1;
	return (long)(c - base);
}

static int walk_chain(struct ck_walk *w, const struct ck_chain *c, int state);

int ck_walk_chain(struct ck_walk *w, const struct ck_chain *c, int state)
{
	long i;
	int out;

	if (w->depth == 0 && w->memo) {
		/* a new base chain: a new context */
		for (size_t k = 0; k < w->n_memo * CK_NSTATES; k++)
			w->memo[k] = -1;
		memset(w->busy, 0, w->n_memo * sizeof(*w->busy));
	}
	i = chain_index(w, c);
	if (i >= 0 && w->memo[i * CK_NSTATES + state] >= 0)
		return w->memo[i * CK_NSTATES + state];
	if (i >= 0 && w->busy[i]) {
		char loc[600];

		/* the kernel refuses jump loops: a dump with one is not understood */
		ck_rule_where(c, NULL, loc, sizeof(loc));
		ck_find(w->res, CK_OB_MODEL, CHECKER_DOUBT, "%s: reached again by its own jumps",
			loc);
		return CK_O_ACC_U;
	}
	if (i >= 0)
		w->busy[i] = true;
	out = walk_chain(w, c, state);
	if (i >= 0) {
		w->busy[i] = false;
		w->memo[i * CK_NSTATES + state] = out;
	}
	return out;
}

static int walk_chain(struct ck_walk *w, const struct ck_chain *c, int state)
{
	bool saved = w->ours;
	int cur = 1 << state, out = 0;

	if (++w->depth > 32) {
		char loc[600];

		ck_rule_where(c, NULL, loc, sizeof(loc));
		ck_find(w->res, CK_OB_MODEL, CHECKER_DOUBT, "%s: jumps nested deeper than 32", loc);
		w->depth--;
		return CK_O_ACC_U;
	}
	w->ours = chain_is_ours(w, c);
	for (size_t i = 0; i < c->n_rules && cur; i++) {
		int next = 0;

		for (int s = 0; s < CK_NSTATES; s++) {
			struct ck_rule_out ro;

			if (!(cur & (1 << s)))
				continue;
			ck_rule_eval(w, c, &c->rules[i], s, &ro);
			out |= ro.bits;
			next |= ro.cont;
		}
		cur = next;
	}
	for (int s = 0; s < CK_NSTATES; s++) {
		if (!(cur & (1 << s)))
			continue;
		if (c->base)
			out |= policy_bits(w, c, s);
		else
			out |= CK_O_RET(s);
	}
	if (c->base && (out & CK_O_RET_ANY)) {
		/* "return" in a base chain applies the policy */
		for (int s = 0; s < CK_NSTATES; s++)
			if (out & CK_O_RET(s))
				out |= policy_bits(w, c, s);
		out &= ~CK_O_RET_ANY;
	}
	w->ours = saved;
	w->depth--;
	return out;
}

/* ---- hooks ------------------------------------------------------------------ */

enum stage_kind { ST_DEV_INGRESS, ST_BRIDGE, ST_INET, ST_DEV_EGRESS };

struct sc {
	const struct ck_chain *c;
	int eff; /* effective priority */
};

static int sc_cmp(const void *a, const void *b)
{
	const struct sc *x = a, *y = b;

	if (x->eff != y->eff)
		return x->eff < y->eff ? -1 : 1;
	if (x->c->prio != y->c->prio)
		return x->c->prio < y->c->prio ? -1 : 1;
	return 0;
}

static bool has_dev(const struct ck_chain *c, const char *dev)
{
	for (size_t i = 0; i < c->n_devs; i++)
		if (strcmp(c->devs[i], dev) == 0)
			return true;
	return false;
}

/* The base chains at one hook, in the order the kernel runs them. nat chains
 * run inside the NAT core's hook (prerouting/output -100, input/postrouting
 * 100) whatever priority they declare. */
static size_t stage_collect(const struct ck_state *st, enum stage_kind k, uint32_t hook, int l3,
			    const char *dev, struct sc **out)
{
	const struct ck_ruleset *rs = &st->nft;
	struct sc *v = calloc(rs->n_chains ? rs->n_chains : 1, sizeof(*v));
	size_t n = 0;

	if (!v)
		return (size_t)-1;
	for (size_t i = 0; i < rs->n_chains; i++) {
		const struct ck_chain *c = &rs->chains[i];
		bool take = false;
		int eff = c->prio;

		if (!c->base)
			continue;
		switch (k) {
		case ST_DEV_INGRESS:
			take = ((c->family == NFPROTO_NETDEV && c->hook == NF_NETDEV_INGRESS) ||
				(c->family == NFPROTO_INET && c->hook == NF_INET_INGRESS)) &&
			       has_dev(c, dev);
			break;
		case ST_DEV_EGRESS:
			take = c->family == NFPROTO_NETDEV && c->hook == 1 /* NF_NETDEV_EGRESS */;
			break;
		case ST_BRIDGE:
			take = c->family == NFPROTO_BRIDGE && c->hook == hook;
			break;
		case ST_INET:
			take = (c->family == NFPROTO_INET || (uint32_t)l3 == c->family) &&
			       c->hook == hook && hook != NF_INET_INGRESS;
			if (take && strcmp(c->type, "nat") == 0)
				eff = (hook == NF_INET_PRE_ROUTING || hook == NF_INET_LOCAL_OUT)
					  ? NF_IP_PRI_NAT_DST
					  : NF_IP_PRI_NAT_SRC;
			break;
		}
		if (take) {
			v[n].c = c;
			v[n].eff = eff;
			n++;
		}
	}
	qsort(v, n, sizeof(*v), sc_cmp);
	*out = v;
	return n;
}

static const char *l3name(int l3)
{
	return l3 == NFPROTO_IPV6 ? "IPv6" : "IPv4";
}

/* Walk every base chain of a stage; returns the states that go on. */
static int walk_stage(struct ck_walk *w, enum stage_kind k, uint32_t hook, const char *dev, int S,
		      bool evidence)
{
	struct sc *v = NULL;
	size_t n = stage_collect(w->st, k, hook, w->ctx.l3, dev, &v);
	int our_eff = 0;
	bool have_ours = false;

	if (n == (size_t)-1) {
		ck_find(w->res, CK_OB_MODEL, CHECKER_DOUBT, "out of memory while ordering chains");
		return S;
	}
	for (size_t i = 0; i < n; i++) {
		if (chain_is_ours(w, v[i].c) && !have_ours) {
			have_ours = true;
			our_eff = v[i].eff;
		}
	}
	for (size_t i = 0; i < n && S; i++) {
		const struct ck_chain *c = v[i].c;
		int next = 0;
		bool ours = chain_is_ours(w, c);

		if (evidence) {
			const char *rel = ours		       ? "ours"
					  : !have_ours	       ? "no chain of ours at this hook"
					  : v[i].eff < our_eff ? "runs before ours"
					  : v[i].eff == our_eff
					      ? "same priority as ours: either order considered"
					      : "runs after ours";

			ck_evid(w->res, CK_OB_ORDER,
				"%s %s: table %s %s chain %s type %s priority %d%s%d (%s)",
				l3name(w->ctx.l3), ck_hook_name(c->family, c->hook),
				ck_family_name(c->family), c->table, c->name,
				c->type[0] ? c->type : "filter", c->prio,
				v[i].eff != c->prio ? ", runs at NAT priority " : ", effective ",
				v[i].eff, rel);
		}
		for (int s = 0; s < CK_NSTATES; s++) {
			if (S & (1 << s))
				next |= ck_walk_chain(w, c, s) & CK_O_ACC_ANY;
		}
		S = next;
		if (ours && k == ST_INET && hook == NF_INET_PRE_ROUTING)
			w->after_ours = true;
	}
	free(v);
	return S;
}

static bool sysctl_on(const struct ck_state *st, const char *key)
{
	const char *v = ck_sysctl_get(st, key);

	/* unreadable counts as on: the path stays open in the model */
	return !v || !v[0] || strcmp(v, "0") != 0;
}

static void undecided_exit(struct ck_walk *w, const char *where_to)
{
	const char *why = w->why[0] ? w->why : "no chain of ours decided them";
	enum checker_oblig ob = w->ctx.l3 == NFPROTO_IPV6 ? CK_OB_IPV6 : CK_OB_PATHS;

	ck_find(w->res, ob, CHECKER_EXIT,
		"%s packets from port %s are %s without passing our queue (%s)", l3name(w->ctx.l3),
		w->ctx.port->name, where_to, why);
	if (ob == CK_OB_IPV6)
		w->res->ob[CK_OB_PATHS].failed = true;
}

static void walk_path(struct ck_walk *w, const struct ck_link *port, int l3)
{
	const struct ck_link *br = w->ctx.br;
	char key[128];
	int S = 1 << CK_UNDECIDED, SL, SF = 0;
	bool fwd, ev = port == w->ctx.port && w->ctx.port != NULL;

	w->ctx.l3 = l3;
	w->ctx.port = port;
	w->why[0] = 0;
	w->after_ours = false;
	w->queued = false;

	w->ctx.fam = NFPROTO_NETDEV;
	w->ctx.hook = NF_NETDEV_INGRESS;
	w->ctx.iif = port;
	S = walk_stage(w, ST_DEV_INGRESS, 0, port->name, S, false);
	w->ctx.fam = NFPROTO_BRIDGE;
	w->ctx.hook = NF_BR_PRE_ROUTING;
	S = walk_stage(w, ST_BRIDGE, NF_BR_PRE_ROUTING, NULL, S, false);
	w->ctx.hook = NF_BR_LOCAL_IN;
	S = walk_stage(w, ST_BRIDGE, NF_BR_LOCAL_IN, NULL, S, false);
	w->ctx.fam = NFPROTO_NETDEV;
	w->ctx.hook = NF_NETDEV_INGRESS;
	w->ctx.iif = br;
	S = walk_stage(w, ST_DEV_INGRESS, 0, br->name, S, false);

	if (l3 == NFPROTO_IPV6) {
		snprintf(key, sizeof(key), "net.ipv6.conf.%s.disable_ipv6", br->name);
		if (ck_sysctl_get(w->st, key) && strcmp(ck_sysctl_get(w->st, key), "1") == 0) {
			ck_evid(
			    w->res, CK_OB_IPV6,
			    "IPv6 is disabled on %s (%s = 1): no IPv6 packet from a sandbox port "
			    "reaches the IPv6 stack",
			    br->name, key);
			return;
		}
	}
	w->ctx.fam = NFPROTO_INET;
	w->ctx.hook = NF_INET_PRE_ROUTING;
	S = walk_stage(w, ST_INET, NF_INET_PRE_ROUTING, NULL, S, ev);
	w->ctx.hook = NF_INET_LOCAL_IN;
	SL = walk_stage(w, ST_INET, NF_INET_LOCAL_IN, NULL, S, false);

	if (l3 == NFPROTO_IPV4) {
		snprintf(key, sizeof(key), "net.ipv4.conf.%s.forwarding", br->name);
		fwd = sysctl_on(w->st, key);
	} else {
		char k2[128];

		snprintf(key, sizeof(key), "net.ipv6.conf.%s.force_forwarding", br->name);
		snprintf(k2, sizeof(k2), "net.ipv6.conf.%s.forwarding", br->name);
		fwd = sysctl_on(w->st, "net.ipv6.conf.all.forwarding") ||
		      (ck_sysctl_get(w->st, key) && sysctl_on(w->st, key)) || sysctl_on(w->st, k2);
	}
	if (fwd) {
		w->ctx.hook = NF_INET_FORWARD;
		SF = walk_stage(w, ST_INET, NF_INET_FORWARD, NULL, S, false);
		w->ctx.hook = NF_INET_POST_ROUTING;
		SF = walk_stage(w, ST_INET, NF_INET_POST_ROUTING, NULL, SF, false);
		w->ctx.fam = NFPROTO_NETDEV;
		w->ctx.hook = 1;
		w->ctx.iif = NULL;
		SF = walk_stage(w, ST_DEV_EGRESS, 1, NULL, SF, false);
	}
	if (SL & (1 << CK_UNDECIDED))
		undecided_exit(w, "delivered locally");
	if (SF & (1 << CK_UNDECIDED))
		undecided_exit(w, "forwarded");
	if (SF & (1 << CK_LINKLOCAL))
		ck_find(
		    w->res, l3 == NFPROTO_IPV6 ? CK_OB_IPV6 : CK_OB_PATHS, CHECKER_EXIT,
		    "%s neighbour discovery packets from port %s, accepted by our table for the "
		    "gateway itself, are forwarded",
		    l3name(l3), port->name);
	if (ev) {
		enum checker_oblig ob = l3 == NFPROTO_IPV6 ? CK_OB_IPV6 : CK_OB_PATHS;

		ck_evid(w->res, ob, "%s from port %s: local delivery %s; forwarding %s%s",
			l3name(l3), port->name,
			SL & 1	 ? "UNDECIDED"
			: SL & 2 ? "only after a decision"
			: SL	 ? "only on-link neighbour discovery"
				 : "never (dropped)",
			!fwd	 ? "disabled"
			: SF & 5 ? "UNDECIDED"
			: SF	 ? "only after a decision"
				 : "never (dropped)",
			w->queued ? "; new flows are queued to the engine" : "");
	}
}

/* Writes to our mark bits anywhere outside our tables: a conntrack entry
 * marked "decided" by anyone else lets its flow skip the queue, whichever
 * interface the marking packet came from. */
static void scan_marks(struct ck_walk *w)
{
	const struct ck_ruleset *rs = &w->st->nft;

	w->marks_only = true;
	memset(&w->ctx, 0, sizeof(w->ctx));
	w->ctx.l3 = NFPROTO_IPV4;
	for (size_t i = 0; i < rs->n_chains; i++) {
		const struct ck_chain *c = &rs->chains[i];

		if (chain_is_ours(w, c))
			continue;
		w->ctx.fam = c->family == NFPROTO_IPV4 || c->family == NFPROTO_IPV6 ? NFPROTO_INET
										    : c->family;
		for (size_t j = 0; j < c->n_rules; j++) {
			struct ck_rule_out ro;

			w->ours = false;
			ck_rule_eval(w, c, &c->rules[j], CK_UNDECIDED, &ro);
		}
	}
	w->marks_only = false;
}

void ck_paths_check(const struct ck_state *st, const struct checker_expect *ex, const char *br,
		    struct checker_result *res)
{
	struct ck_walk w;
	const struct ck_link *brl = ck_link_by_name(st, br);
	size_t nports = 0;

	memset(&w, 0, sizeof(w));
	w.st = st;
	w.ex = ex;
	w.res = res;
	if (!brl)
		return; /* reported by the membership obligation */
	if (st->nft.n_chains) {
		w.memo = calloc(st->nft.n_chains * CK_NSTATES, sizeof(*w.memo));
		w.busy = calloc(st->nft.n_chains, sizeof(*w.busy));
		if (!w.memo || !w.busy) {
			free(w.memo);
			free(w.busy);
			ck_find(res, CK_OB_MODEL, CHECKER_DOUBT,
				"out of memory while walking chains");
			return;
		}
		w.n_memo = st->nft.n_chains;
	}
	for (size_t i = 0; i < st->nft.n_bad; i++)
		ck_find(res, CK_OB_MODEL, CHECKER_DOUBT,
			"table %s %s chain %s rule handle %llu: rule could not be parsed (an "
			"expression this checker's libnftnl does not know)",
			ck_family_name(st->nft.bad[i].family), st->nft.bad[i].table,
			st->nft.bad[i].chain, (unsigned long long)st->nft.bad[i].handle);
	if (st->nft.n_orphans)
		ck_find(res, CK_OB_MODEL, CHECKER_DOUBT,
			"%zu rule(s) belong to chains the dump did not contain", st->nft.n_orphans);
	if (st->legacy[0])
		ck_find(res, CK_OB_MODEL, CHECKER_DOUBT,
			"iptables-legacy tables are loaded (%s): legacy tables are not modelled",
			st->legacy);
	if (st->nf_bpf_links != 0)
		ck_find(
		    res, CK_OB_MODEL, CHECKER_DOUBT,
		    st->nf_bpf_links < 0
			? "netfilter BPF links could not be enumerated (bpf() refused)"
			: "a BPF program is attached to a netfilter hook (BPF link): not modelled");
	scan_marks(&w);
	w.ctx.br = brl;
	for (size_t i = 0; i < st->n_links; i++) {
		const struct ck_link *p = &st->links[i];

		if (p->master != brl->ifindex)
			continue;
		/* the first port carries the evidence lines; every port is walked */
		w.ctx.port = nports == 0 ? p : NULL;
		walk_path(&w, p, NFPROTO_IPV4);
		w.ctx.port = nports == 0 ? p : NULL;
		walk_path(&w, p, NFPROTO_IPV6);
		nports++;
	}
	if (nports == 0)
		ck_evid(res, CK_OB_PATHS, "bridge %s has no ports: no sandbox path to walk", br);
	ck_evid(res, CK_OB_MODEL,
		"%zu tables, %zu chains, %zu rules, %zu sets read; %zu sandbox port(s) walked for "
		"IPv4 and IPv6",
		st->nft.n_tables, st->nft.n_chains, st->nft.n_rules, st->nft.n_sets, nports);
	free(w.memo);
	free(w.busy);
}
