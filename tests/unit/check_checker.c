/* Unit tests of the checker's path model on synthetic rulesets (built with
 * libnftnl, no kernel), its JSON reader and the DSSE PAE/sign/verify. */
#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <linux/netfilter.h>
#include <linux/rtnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/xt_CT.h>
#include <linux/netfilter/xt_HMARK.h>
#include <linux/netfilter/xt_connmark.h>
#include <linux/netfilter/xt_mark.h>
#include <sodium.h>

#include "checker/checker_int.h"
#include "tests/unit/nftexpr.h"
#include "tests/unit/unit.h"

static struct ck_state st;
static struct checker_expect ex;

static void base_state(void)
{
	struct ck_link *p;

	memset(&st, 0, sizeof(st));
	memset(&ex, 0, sizeof(ex));
	strcpy(ex.table, "portcullis");
	ex.mark_mask = 0xff000000u;
	ex.mark_decided = 0x80000000u;
	ex.queue_lo = 100;
	ex.queue_hi = 101;
	ex.listen_ports[0] = 8443;
	ex.n_listen = 1;
	ex.br_nf_call = -1;
	p = nx_bridge_links(&st);
	p->link_netns = true;
	p->isolated = 1;
}

static struct ck_chain *chain(uint32_t fam, const char *table, const char *name, int hook, int prio,
			      uint32_t policy, const char *type)
{
	struct ck_chain *c =
	    ck_grow(&st.nft.chains, &st.nft.n_chains, &st.nft.cap_chains, sizeof(*c));
	c->family = fam;
	strcpy(c->table, table);
	strcpy(c->name, name);
	if (hook >= 0) {
		c->base = true;
		c->hook = (uint32_t)hook;
		c->prio = prio;
		c->policy = policy;
		strcpy(c->type, type);
	}
	return c;
}

static struct nftnl_rule *rule(struct ck_chain *c)
{
	struct ck_rule *r = ck_grow(&c->rules, &c->n_rules, &c->cap_rules, sizeof(*r));

	r->r = nftnl_rule_alloc();
	r->handle = c->n_rules;
	return r->r;
}

static void e_queue(struct nftnl_rule *r, uint16_t num, uint16_t flags)
{
	struct nftnl_expr *e = nftnl_expr_alloc("queue");

	nftnl_expr_set_u16(e, NFTNL_EXPR_QUEUE_NUM, num);
	nftnl_expr_set_u16(e, NFTNL_EXPR_QUEUE_TOTAL, 2);
	nftnl_expr_set_u16(e, NFTNL_EXPR_QUEUE_FLAGS, flags);
	nftnl_rule_add_expr(r, e);
}

/* Our guard: decided flows accept, new ones queue, the rest drops. */
static void our_guard(uint16_t qflags)
{
	struct ck_chain *c = chain(NFPROTO_INET, "portcullis", "prerouting", NF_INET_PRE_ROUTING,
				   -190, NF_DROP, "filter");
	struct nftnl_rule *r = rule(c);
	char br[16] = "pcbr0";

	nx_load(r, "meta", NFT_META_IIFNAME);
	nx_cmp(r, NFT_CMP_NEQ, br, 16);
	nx_verdict(r, NF_ACCEPT);
	r = rule(c);
	nx_mark(r, true, 0x80000000u, 0x80000000u);
	nx_verdict(r, NF_ACCEPT);
	r = rule(c);
	e_queue(r, 100, qflags);
	nx_verdict(rule(c), NF_DROP);
}

static struct checker_result *analyze(void)
{
	struct checker_result *res = calloc(1, sizeof(*res));

	ck_paths_check(&st, &ex, "pcbr0", res);
	return res;
}

static bool has(const struct checker_result *r, const char *needle)
{
	for (size_t i = 0; i < r->n_findings; i++)
		if (strstr(r->findings[i].text, needle))
			return true;
	return false;
}

static void teardown(void)
{
	ck_state_free(&st);
}

/* The analysis of st ends in status (any, if negative) and names needle
 * among its findings; st is freed. */
static void expect_status(int status, const char *needle)
{
	struct checker_result *r = analyze();

	if (status >= 0)
		ck_assert_int_eq(r->status, status);
	ck_assert_msg(has(r, needle), "no finding \"%s\" (%zu findings)", needle, r->n_findings);
	checker_result_free(r);
	teardown();
}

static void expect_finding(const char *needle)
{
	expect_status(-1, needle);
}

/* The analysis of st proves the guarded path; st is freed. */
static void expect_proven(void)
{
	struct checker_result *r = analyze();

	ck_assert_msg(r->status == CHECKER_PROVEN, "status %d: %s", (int)r->status,
		      r->n_findings ? r->findings[0].text : "");
	checker_result_free(r);
	teardown();
}

START_TEST(guarded_path_is_proven)
{
	struct checker_result *r;

	base_state();
	our_guard(0);
	r = analyze();
	ck_assert_int_eq(r->status, CHECKER_PROVEN);
	ck_assert_uint_eq(r->n_findings, 0);
	checker_result_free(r);
	teardown();
}
END_TEST

START_TEST(no_table_means_undecided_exit)
{
	base_state();
	expect_status(CHECKER_EXIT_FOUND,
		      "IPv4 packets from port pcv1 are forwarded without passing our queue");
}
END_TEST

START_TEST(policy_accept_is_named)
{
	base_state();
	our_guard(0);
	st.nft.chains[0].policy = NF_ACCEPT;
	nftnl_rule_free(st.nft.chains[0].rules[3].r);
	nftnl_rule_free(st.nft.chains[0].rules[2].r);
	st.nft.chains[0].n_rules = 2; /* queue and final drop removed */
	expect_finding("policy accept without an engine decision");
}
END_TEST

START_TEST(bypass_queue_is_an_exit)
{
	base_state();
	our_guard(NFT_QUEUE_FLAG_BYPASS);
	expect_finding("queue 100-101 with bypass");
}
END_TEST

START_TEST(accept_elsewhere_does_not_bypass_us)
{
	struct ck_chain *c;

	base_state();
	our_guard(0);
	/* an earlier chain that accepts everything: nft semantics say our chain
	 * still runs (accept ends only its own base chain) */
	c = chain(NFPROTO_IPV4, "early", "pre", NF_INET_PRE_ROUTING, -300, NF_ACCEPT, "filter");
	nx_verdict(rule(c), NF_ACCEPT);
	expect_proven();
}
END_TEST

START_TEST(foreign_mark_write_is_an_exit)
{
	struct ck_chain *c;
	struct nftnl_expr *e;
	struct nftnl_rule *ru;
	uint32_t v = 0x80000000u;

	base_state();
	our_guard(0);
	c = chain(NFPROTO_IPV4, "m", "out", NF_INET_LOCAL_OUT, 0, NF_ACCEPT, "filter");
	ru = rule(c);
	nx_imm(ru, &v, 4);
	e = nftnl_expr_alloc("ct");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_MARK);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_SREG, NFT_REG_1);
	nftnl_rule_add_expr(ru, e);
	expect_finding(
	    "table ip m chain out rule handle 1: ct mark set may set the engine's mark bits");
}
END_TEST

START_TEST(unknown_expression_is_unproven)
{
	struct ck_chain *c;

	base_state();
	our_guard(0);
	c = chain(NFPROTO_INET, "fw", "pre", NF_INET_PRE_ROUTING, 0, NF_ACCEPT, "filter");
	nftnl_rule_add_expr(rule(c), nftnl_expr_alloc("osf"));
	expect_status(
	    CHECKER_UNPROVEN,
	    "unproven: table inet fw chain pre rule handle 1: expression 'osf' not modelled");
}
END_TEST

static void e_jump(struct nftnl_rule *r, const char *chain)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");

	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)NFT_JUMP);
	nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
	nftnl_rule_add_expr(r, e);
}

/* Jumps fanning out through many chains (2^24 paths here, found by the
 * fuzzer as a timeout): each chain is walked once per base chain and state,
 * not once per path to it. */
START_TEST(jump_fanout_is_walked_once_per_chain)
{
	char name[16], next[16];

	base_state();
	our_guard(0);
	chain(NFPROTO_IPV4, "fan", "pre", NF_INET_PRE_ROUTING, -300, NF_ACCEPT, "filter");
	for (int i = 0; i < 24; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		chain(NFPROTO_IPV4, "fan", name, -1, 0, 0, "");
	}
	/* rules only once every chain exists: chain() may move the array */
	for (int i = -1; i < 23; i++) {
		struct ck_chain *c;

		snprintf(name, sizeof(name), "c%d", i);
		snprintf(next, sizeof(next), "c%d", i + 1);
		c = (struct ck_chain *)ck_chain_find(&st.nft, NFPROTO_IPV4, "fan",
						     i < 0 ? "pre" : name);
		ck_assert_ptr_nonnull(c);
		e_jump(rule(c), next);
		e_jump(rule(c), next);
	}
	/* c23 is empty: every call returns, so both jumps of each chain run */
	expect_proven(); /* an accept does not get past us */
}
END_TEST

/* The kernel refuses jump loops; a state with one is not understood. */
START_TEST(jump_loop_is_unproven)
{
	struct ck_chain *c;

	base_state();
	our_guard(0);
	chain(NFPROTO_IPV4, "l", "pre", NF_INET_PRE_ROUTING, -300, NF_ACCEPT, "filter");
	chain(NFPROTO_IPV4, "l", "a", -1, 0, 0, "");
	c = (struct ck_chain *)ck_chain_find(&st.nft, NFPROTO_IPV4, "l", "pre");
	e_jump(rule(c), "a");
	c = (struct ck_chain *)ck_chain_find(&st.nft, NFPROTO_IPV4, "l", "a");
	e_jump(rule(c), "a");
	expect_status(CHECKER_UNPROVEN, "table ip l chain a: reached again by its own jumps");
}
END_TEST

/* A redirect: port (host order) into register 1, then redir to it. */
static void e_redirect(struct nftnl_rule *r, uint16_t port)
{
	struct nftnl_expr *e;
	uint16_t be = htons(port);

	nx_imm(r, &be, sizeof(be));
	e = nftnl_expr_alloc("redir");
	nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
	nftnl_rule_add_expr(r, e);
}

/* docs/checker.md: our own table's redirect to a listener of the guard is
 * the guarded path; to any other port, or in any other table, it is a way
 * out. */
START_TEST(redirect_to_our_listener_only_in_our_table)
{
	static const struct {
		const char *table;
		uint16_t port;
		const char *finding; /* NULL: proven */
	} cases[] = {
	    {"portcullis", 8443, NULL},
	    {"portcullis", 9999, "redirect to port 9999: not one of our listeners"},
	    {"other", 8443, "redirect to port 8443 changes the destination after our decision"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct checker_result *r;

		base_state();
		our_guard(0);
		e_redirect(rule(chain(NFPROTO_INET, cases[i].table, "dstnat", NF_INET_PRE_ROUTING,
				      -100, NF_ACCEPT, "nat")),
			   cases[i].port);
		r = analyze();
		if (!cases[i].finding)
			ck_assert_msg(r->status == CHECKER_PROVEN, "case %zu: %s", i,
				      r->n_findings ? r->findings[0].text : "");
		else
			ck_assert_msg(r->status == CHECKER_EXIT_FOUND && has(r, cases[i].finding),
				      "case %zu: %s", i, r->n_findings ? r->findings[0].text : "");
		checker_result_free(r);
		teardown();
	}
}
END_TEST

START_TEST(other_interface_rules_do_not_match_sandbox)
{
	struct ck_chain *c;
	struct nftnl_rule *ru;
	char up[16] = "eth0";

	base_state();
	our_guard(0);
	c = chain(NFPROTO_NETDEV, "x", "in", NF_NETDEV_INGRESS, 0, NF_ACCEPT, "filter");
	c->devs = calloc(1, sizeof(*c->devs));
	strcpy(c->devs[0], "pcv1");
	c->n_devs = 1;
	ru = rule(c);
	nx_load(ru, "meta", NFT_META_IIFNAME);
	nx_cmp(ru, NFT_CMP_EQ, up, 16); /* never true on pcv1 */
	nftnl_rule_add_expr(ru, nftnl_expr_alloc("fwd"));
	expect_proven();
}
END_TEST

/* ---- issue 23: what the model no longer takes as harmless ---------------- */

/* a foreign prerouting chain at -300 with one rule built by fn */
static struct nftnl_rule *foreign_rule(void)
{
	struct ck_chain *c =
	    chain(NFPROTO_IPV4, "f", "pre", NF_INET_PRE_ROUTING, -300, NF_ACCEPT, "filter");

	return rule(c);
}

static void e_meta_set(struct nftnl_rule *r, uint32_t key)
{
	struct nftnl_expr *e = nftnl_expr_alloc("meta");

	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_SREG, NFT_REG_1);
	nftnl_rule_add_expr(r, e);
}

START_TEST(mark_copy_from_conntrack_is_an_exit)
{
	struct nftnl_rule *ru;

	base_state();
	our_guard(0);
	ru = foreign_rule(); /* meta mark set ct mark */
	nx_load(ru, "ct", NFT_CT_MARK);
	e_meta_set(ru, NFT_META_MARK);
	expect_finding("meta mark set may set the engine's mark bits");
}
END_TEST

START_TEST(masked_mark_copy_is_harmless)
{
	struct nftnl_rule *ru;
	uint32_t m = 0x0000ff00u;

	base_state();
	our_guard(0);
	ru = foreign_rule(); /* meta mark set ct mark and 0xff00 */
	nx_load(ru, "ct", NFT_CT_MARK);
	nx_and(ru, m);
	e_meta_set(ru, NFT_META_MARK);
	expect_proven();
}
END_TEST

START_TEST(pkttype_host_is_an_exit)
{
	struct nftnl_rule *ru;
	uint8_t host = 0; /* PACKET_HOST */

	base_state();
	our_guard(0);
	ru = foreign_rule();
	nx_imm(ru, &host, 1);
	e_meta_set(ru, NFT_META_PKTTYPE);
	expect_finding("meta pkttype set host");
}
END_TEST

static void e_ct_target(struct nftnl_rule *r, const char *helper)
{
	struct nftnl_expr *e = nftnl_expr_alloc("target");
	/* libnftnl takes the target's data as it is (and frees it) */
	struct xt_ct_target_info_v1 *info = calloc(1, sizeof(*info));

	if (helper)
		strcpy(info->helper, helper);
	else
		info->flags = XT_CT_NOTRACK;
	nftnl_expr_set_str(e, NFTNL_EXPR_TG_NAME, "CT");
	nftnl_expr_set_u32(e, NFTNL_EXPR_TG_REV, 1);
	nftnl_expr_set(e, NFTNL_EXPR_TG_INFO, info, sizeof(*info));
	nftnl_rule_add_expr(r, e);
}

START_TEST(ct_helper_is_an_exit_notrack_is_not)
{
	struct checker_result *r;

	base_state();
	our_guard(0);
	e_ct_target(foreign_rule(), NULL);
	r = analyze();
	ck_assert_msg(r->status == CHECKER_PROVEN, "%s", r->n_findings ? r->findings[0].text : "");
	checker_result_free(r);
	e_ct_target(foreign_rule(), "irc");
	expect_finding("conntrack helper 'irc'");
}
END_TEST

/* An xt target whose data libnftnl takes as it is (and frees). */
static void e_xt(struct nftnl_rule *r, const char *name, uint32_t rev, const void *info, size_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("target");
	void *d = calloc(1, len);

	memcpy(d, info, len);
	nftnl_expr_set_str(e, NFTNL_EXPR_TG_NAME, name);
	nftnl_expr_set_u32(e, NFTNL_EXPR_TG_REV, rev);
	nftnl_expr_set(e, NFTNL_EXPR_TG_INFO, d, (uint32_t)len);
	nftnl_rule_add_expr(r, e);
}

/* A rule of an uplink's mangle prerouting chain (iifname "up0": never a
 * sandbox packet, so off the sandbox path). */
static struct nftnl_rule *uplink_rule(struct ck_chain *c)
{
	struct nftnl_rule *r = rule(c);
	char up[16] = "up0";

	nx_load(r, "meta", NFT_META_IIFNAME);
	nx_cmp(r, NFT_CMP_EQ, up, 16);
	return r;
}

static struct ck_chain *mangle(void)
{
	return chain(NFPROTO_IPV4, "mangle", "PREROUTING", NF_INET_PRE_ROUTING, -150, NF_ACCEPT,
		     "filter");
}

/* Issue 31, 2: HMARK's mark is hash % mod + offset; with offset 0x80000000
 * every answer on the uplink carries ALLOW. A range below our byte is
 * harmless. */
START_TEST(xt_hmark_off_the_path_is_an_exit)
{
	struct xt_hmark_info h;
	struct checker_result *r;

	memset(&h, 0, sizeof(h));
	h.hmodulus = 256;
	h.hoffset = 0x100;
	base_state();
	our_guard(0);
	e_xt(uplink_rule(mangle()), "HMARK", 1, &h, sizeof(h));
	r = analyze();
	ck_assert_msg(r->status == CHECKER_PROVEN, "%s", r->n_findings ? r->findings[0].text : "");
	checker_result_free(r);
	teardown();
	h.hmodulus = 1;
	h.hoffset = 0x80000000u;
	base_state();
	our_guard(0);
	e_xt(uplink_rule(mangle()), "HMARK", 1, &h, sizeof(h));
	expect_status(CHECKER_EXIT_FOUND,
		      "table ip mangle chain PREROUTING rule handle 1: xt HMARK --hmark-offset "
		      "0x80000000 --hmark-mod 1 set may set the engine's mark bits");
}
END_TEST

/* Issue 31, 3: MARK sets a low bit, CONNMARK --save-mark shifts it onto
 * ALLOW in the ct mark. A shift whose ct mask keeps it below our byte is
 * harmless. */
static void mark_then_save(uint8_t shift, uint32_t nfmask, uint32_t ctmask)
{
	struct ck_chain *c = mangle();
	struct xt_mark_tginfo2 mk = {.mark = 1, .mask = 0xff};
	struct xt_connmark_tginfo2 cm = {.ctmask = ctmask,
					 .nfmask = nfmask,
					 .shift_dir = D_SHIFT_LEFT,
					 .shift_bits = shift,
					 .mode = XT_CONNMARK_SAVE};

	e_xt(uplink_rule(c), "MARK", 2, &mk, sizeof(mk));
	e_xt(uplink_rule(c), "CONNMARK", 2, &cm, sizeof(cm));
}

START_TEST(xt_connmark_shift_off_the_path_is_an_exit)
{
	struct checker_result *r;

	base_state();
	our_guard(0);
	mark_then_save(8, 0xff, 0xff00);
	r = analyze();
	ck_assert_msg(r->status == CHECKER_PROVEN, "%s", r->n_findings ? r->findings[0].text : "");
	checker_result_free(r);
	teardown();
	base_state();
	our_guard(0);
	mark_then_save(31, 0xffffffffu, 0xffffffffu);
	expect_status(CHECKER_EXIT_FOUND, "rule handle 2: xt CONNMARK --save-mark "
					  "--left-shift-mark 31 (bits 0x80000000) set may set");
}
END_TEST

/* Off the path, an xt target the vocabulary does not know may write a
 * mark: unproven (it was ignored); one it knows writes nothing, proven. */
START_TEST(unknown_xt_target_off_the_path_is_unproven)
{
	static const uint8_t info[8];
	struct checker_result *r;

	base_state();
	our_guard(0);
	e_xt(uplink_rule(mangle()), "TTL", 0, info, sizeof(info));
	r = analyze();
	ck_assert_msg(r->status == CHECKER_PROVEN, "%s", r->n_findings ? r->findings[0].text : "");
	checker_result_free(r);
	teardown();
	base_state();
	our_guard(0);
	e_xt(uplink_rule(mangle()), "FOOMARK", 0, info, sizeof(info));
	expect_status(CHECKER_UNPROVEN, "xt target 'FOOMARK' not modelled");
}
END_TEST

/* iifname != @guarded dnat: with a constant set holding pcbr0 the dnat never
 * applies to sandbox packets; with timeouts (or a rule writing the set) it
 * may; and an interval or concatenated set (the guard's own bindings and
 * limit sets are such, issue 34) is never read as deciding: the rule may
 * match. */
static void set_dnat_rule(uint32_t set_flags, bool written)
{
	struct ck_chain *c =
	    chain(NFPROTO_IPV4, "n", "pre", NF_INET_PRE_ROUTING, -100, NF_ACCEPT, "nat");
	struct ck_set *s = ck_grow(&st.nft.sets, &st.nft.n_sets, &st.nft.cap_sets, sizeof(*s));
	struct ck_elem *el = ck_grow(&s->elems, &s->n_elems, &s->cap_elems, sizeof(*el));
	struct nftnl_rule *ru = rule(c);
	struct nftnl_expr *e;
	uint32_t a = htonl(0xcb00714d); /* 203.0.113.77 */

	s->family = NFPROTO_IPV4;
	strcpy(s->table, "n");
	strcpy(s->name, "guarded");
	s->flags = set_flags;
	s->key_len = 16;
	s->elems_read = true;
	s->written = written;
	strcpy((char *)el->key, "pcbr0");
	el->klen = 16;
	nx_load(ru, "meta", NFT_META_IIFNAME);
	e = nftnl_expr_alloc("lookup");
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, "guarded");
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
	nftnl_rule_add_expr(ru, e);
	nx_imm(ru, &a, 4);
	e = nftnl_expr_alloc("nat");
	nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FAMILY, NFPROTO_IPV4);
	nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG_1);
	nftnl_rule_add_expr(ru, e);
}

START_TEST(only_constant_sets_decide_a_lookup)
{
	static const struct {
		uint32_t flags;
		bool written;
		bool proven;
	} cases[] = {{0, false, true},
		     {NFT_SET_TIMEOUT, false, false},
		     {NFT_SET_EVAL, false, false},
		     {0, true, false},
		     {NFT_SET_INTERVAL, false, false},
		     {NFT_SET_INTERVAL | NFT_SET_CONCAT, false, false}};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct checker_result *r;

		base_state();
		our_guard(0);
		set_dnat_rule(cases[i].flags, cases[i].written);
		r = analyze();
		ck_assert_msg((r->status == CHECKER_PROVEN) == cases[i].proven, "case %zu", i);
		if (!cases[i].proven)
			ck_assert(has(r, "dnat to 203.0.113.77"));
		checker_result_free(r);
		teardown();
	}
}
END_TEST

static struct ck_link *add_link(int ifindex, const char *name, const char *kind, int master)
{
	struct ck_link *l = ck_grow(&st.links, &st.n_links, &st.cap_links, sizeof(*l));

	l->ifindex = ifindex;
	l->master = master;
	l->link_nsid = -1;
	l->stp_state = 3;
	l->isolated = 1;
	pc_strlcpy(l->name, name, sizeof(l->name));
	pc_strlcpy(l->kind, kind, sizeof(l->kind));
	return l;
}

/* every interface is a way in: the sandbox-facing devices the model finds
 * without a ruleset (ck_analyze over links only) */
START_TEST(sandbox_facing_devices_are_named)
{
	struct checker_result *r = calloc(1, sizeof(*r));
	struct pc_err err = {0};
	struct ck_link *l;
	static const char *const pol[] = {"pcv9"};

	base_state();
	our_guard(0);
	st.links[1].link_nsid = 7; /* pcv1's peer: sandbox namespace 7 */
	st.links[1].stp_state = 3;
	l = add_link(5, "pcv1.42", "vlan", 0); /* stacked on the port */
	l->link = 4;
	l = add_link(6, "virbr0-nic", "veth", 9); /* a second NIC of sandbox 7 */
	l->link_netns = true;
	l->link_nsid = 7;
	add_link(9, "virbr0", "bridge", 0);
	l = add_link(10, "pcv9", "veth", 0); /* a policy port off every bridge */
	l->link_netns = true;
	l->link_nsid = 8;
	ex.policy_ports = pol;
	ex.n_policy_ports = 1;
	ck_assert_int_eq(ck_analyze(&st, &ex, "pcbr0", r, &err), 0);
	ck_assert(has(r, "interface pcv1.42 (vlan) is stacked on sandbox port pcv1"));
	ck_assert(has(r, "sandbox-facing interface pcv1.42"));
	ck_assert(has(r, "sandbox-facing interface virbr0-nic (its peer is in the namespace of "
			 "sandbox port pcv1's peer"));
	ck_assert(has(r, "sandbox-facing interface pcv9 (named by the policy"));
	ck_assert(!has(r, "interface virbr0 "));
	checker_result_free(r);
	teardown();

	r = calloc(1, sizeof(*r));
	base_state();
	our_guard(0);
	st.links[1].stp_state = 0; /* disabled */
	st.links[1].flags |= IFF_UP | 0x10000 /* IFF_LOWER_UP: a carrier */;
	ck_assert_int_eq(ck_analyze(&st, &ex, "pcbr0", r, &err), 0);
	ck_assert(has(r, "bridge port pcv1 is not in forwarding state (STP state 0)"));
	checker_result_free(r);
	teardown();

	/* up, but no carrier (its peer down, a tap no one holds): a port
	 * being set up receives nothing yet */
	r = calloc(1, sizeof(*r));
	base_state();
	our_guard(0);
	st.links[1].stp_state = 0;
	st.links[1].flags |= IFF_UP;
	st.links[1].flags &= ~(unsigned)0x10000;
	ck_assert_int_eq(ck_analyze(&st, &ex, "pcbr0", r, &err), 0);
	ck_assert(!has(r, "bridge port pcv1 is not in forwarding state"));
	checker_result_free(r);
	teardown();

	/* the same port with its device down (the engine's cut-off): it
	 * receives nothing, state disabled is no way out */
	r = calloc(1, sizeof(*r));
	base_state();
	our_guard(0);
	st.links[1].stp_state = 0;
	st.links[1].flags &= ~(unsigned)IFF_UP;
	ck_assert_int_eq(ck_analyze(&st, &ex, "pcbr0", r, &err), 0);
	ck_assert(!has(r, "bridge port pcv1 is not in forwarding state"));
	checker_result_free(r);
	teardown();
}
END_TEST

/* A u32 filter on ifindex whose one action is skbedit (the caller sets
 * what it edits). */
static struct ck_tcfilter *skbedit_filter(int ifindex)
{
	struct ck_tcfilter *f = ck_grow(&st.filters, &st.n_filters, &st.cap_filters, sizeof(*f));

	f->ifindex = ifindex;
	strcpy(f->kind, "u32");
	strcpy(f->acts[0].kind, "skbedit");
	f->n_acts = 1;
	return f;
}

/* skbedit setting the engine's ALLOW bit (a mark write) on ifindex */
static void skbedit_mark(int ifindex)
{
	struct ck_tcfilter *f = skbedit_filter(ifindex);

	f->acts[0].has_mark = true;
	f->acts[0].mark = 0x80000000u;
	f->acts[0].mark_mask = 0xffffffffu;
}

/* tc where marks can be set: the uplink (a default route through it), and
 * a packet-type rewrite on a port */
START_TEST(tc_on_uplink_and_ptype_on_port_are_named)
{
	struct checker_result *r = calloc(1, sizeof(*r));
	struct pc_err err = {0};
	struct ck_route *rt;
	struct ck_tcfilter *f;

	base_state();
	our_guard(0);
	st.links[1].stp_state = 3;
	add_link(2, "up0", "veth", 0)->link_netns = true;
	rt = ck_grow(&st.routes, &st.n_routes, &st.cap_routes, sizeof(*rt));
	rt->family = AF_INET;
	rt->type = RTN_UNICAST;
	rt->table = RT_TABLE_MAIN;
	rt->has_gw = true;
	rt->oif = 2; /* default via up0 */
	skbedit_mark(2);
	f = skbedit_filter(4); /* pcv1 */
	f->acts[0].has_ptype = true;
	f->acts[0].ptype = 0; /* PACKET_HOST */
	ck_assert_int_eq(ck_analyze(&st, &ex, "pcbr0", r, &err), 0);
	ck_assert(has(r, "on uplink up0"));
	ck_assert(has(r, "skbedit sets the engine's mark bits"));
	ck_assert(has(r, "on port pcv1"));
	ck_assert(has(r, "skbedit ptype host"));
	checker_result_free(r);
	teardown();
}
END_TEST

/* The guard as the engine installs it, its port forwarding: what the
 * tests below add one thing to. */
static void guarded(void)
{
	base_state();
	our_guard(0);
	st.links[1].stp_state = 3;
}

/* ck_analyze over st (every obligation the links decide), which must run. */
static struct checker_result *analyze_gateway(void)
{
	struct checker_result *r = calloc(1, sizeof(*r));
	struct pc_err err = {0};

	ck_assert_int_eq(ck_analyze(&st, &ex, "pcbr0", r, &err), 0);
	return r;
}

static void sysctl_set(const char *key, const char *val)
{
	struct ck_sysctl *sc = ck_grow(&st.sysctls, &st.n_sysctls, &st.cap_sysctls, sizeof(*sc));

	pc_strlcpy(sc->key, key, sizeof(sc->key));
	pc_strlcpy(sc->val, val, sizeof(sc->val));
}

/* A bpf filter on an HTB class of a port: what its program matches is
 * unknown (a doubt), and its mirred is judged all the same, the class named
 * (tc_read.c reads each class's own block). */
START_TEST(tc_bpf_filter_on_a_class_has_its_actions_judged)
{
	struct checker_result *r;
	struct ck_tcfilter *f;

	guarded();
	f = ck_grow(&st.filters, &st.n_filters, &st.cap_filters, sizeof(*f));
	f->ifindex = 4;	     /* pcv1 */
	f->parent = 0x10010; /* class 1:10 */
	strcpy(f->kind, "bpf");
	strcpy(f->acts[0].kind, "mirred");
	f->acts[0].mirred_eaction = 1; /* TCA_EGRESS_REDIR */
	f->acts[0].mirred_ifindex = 4;
	f->n_acts = 1;
	r = analyze_gateway();
	ck_assert(has(r, "tc filter on port pcv1 egress class 1:10: bpf program"));
	ck_assert(has(r, "tc filter on port pcv1 egress class 1:10: mirred egress redirect dev"));
	checker_result_free(r);
	teardown();
}
END_TEST

/* MPLS input on the bridge or a port: the label table forwards what no
 * inet hook or policy rule sees. On an uplink it is the operator's. */
START_TEST(mpls_input_facing_is_an_exit)
{
	static const char *const devs[] = {"pcbr0", "pcv1", "up0"};

	for (size_t i = 0; i < 3; i++) {
		struct checker_result *r;
		char key[64];

		guarded();
		add_link(2, "up0", "veth", 0)->link_netns = true;
		snprintf(key, sizeof(key), "net.mpls.conf.%s.input", devs[i]);
		sysctl_set(key, "1");
		r = analyze_gateway();
		ck_assert_msg(has(r, "takes MPLS") == (i < 2), "%s", devs[i]);
		checker_result_free(r);
		teardown();
	}
}
END_TEST

/* A tunnel that takes packets from anyone and forwards them is a way out
 * once the ruleset is gone; one that forwards nothing, or authenticates
 * (WireGuard), or is down, is not. */
START_TEST(open_tunnel_that_forwards_is_an_exit)
{
	static const struct {
		const char *kind, *fwd;
		bool up, exit;
	} c[] = {{"vxlan", "1", true, true},
		 {"ipip", "1", true, true},
		 {"vxlan", "0", true, false},
		 {"vxlan", "1", false, false},
		 {"wireguard", "1", true, false}};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct checker_result *r;

		guarded();
		add_link(7, "cktun0", c[i].kind, 0)->flags = c[i].up ? IFF_UP : 0;
		sysctl_set("net.ipv4.conf.cktun0.forwarding", c[i].fwd);
		r = analyze_gateway();
		ck_assert_msg(has(r, "cktun0") == c[i].exit && has(r, "decapsulates") == c[i].exit,
			      "%s forwarding %s up %d", c[i].kind, c[i].fwd, c[i].up);
		checker_result_free(r);
		teardown();
	}
	/* moved into another namespace (no lower device: its socket is here) */
	for (int open = 0; open < 2; open++) {
		struct checker_result *r;
		struct ck_xdev *x;

		guarded();
		x = ck_grow(&st.xdevs, &st.n_xdevs, &st.cap_xdevs, sizeof(*x));
		strcpy(x->name, "ckvx9");
		strcpy(x->kind, open ? "vxlan" : "wireguard");
		strcpy(x->where, "/run/netns/ck");
		r = analyze_gateway();
		ck_assert(has(r, "ckvx9 (vxlan) in another network namespace") == (open == 1));
		checker_result_free(r);
		teardown();
	}
}
END_TEST

/* An uplink the configuration declares is upstream-facing even with no
 * route through it: tc on it is judged like a routed uplink's. */
START_TEST(declared_uplink_without_route_is_an_uplink)
{
	struct pc_err err = {0};

	for (int declared = 0; declared < 2; declared++) {
		struct checker_result *r = calloc(1, sizeof(*r));

		base_state();
		our_guard(0);
		st.links[1].stp_state = 3;
		add_link(2, "mgmt0", "veth", 0)->link_netns = true;
		skbedit_mark(2);
		ex.n_uplinks = 0;
		if (declared) {
			strcpy(ex.uplinks[0], "mgmt0");
			ex.n_uplinks = 1;
		}
		ck_assert_int_eq(ck_analyze(&st, &ex, "pcbr0", r, &err), 0);
		ck_assert_msg(has(r, "on uplink mgmt0") == (declared == 1), "declared %d",
			      declared);
		ex.n_uplinks = 0;
		checker_result_free(r);
		teardown();
	}
}
END_TEST

START_TEST(json_strict)
{
	struct jv *v = jv_parse("{\"a\":[1,\"x\\u00e9\",true,null]}", 29);

	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(jv_str(jv_get(v, "a")->items[1]), "x\xc3\xa9");
	jv_free(v);
	ck_assert_ptr_null(jv_parse("{\"a\":1,\"a\":2}", 13));
	ck_assert_ptr_null(jv_parse("{\"a\":1} x", 9));
	ck_assert_ptr_null(jv_parse("[1,]", 4));
}
END_TEST

START_TEST(dsse_round_trip)
{
	uint8_t pk[32], sk[64];
	char *env = NULL;
	struct cert_env e;
	size_t len;
	uint8_t *pae = dsse_pae("t", (const uint8_t *)"ab", 2, &len);
	const char *stmt = "{\"_type\":\"x\"}";

	ck_assert_int_eq(len, strlen("DSSEv1 1 t 2 ab"));
	ck_assert(memcmp(pae, "DSSEv1 1 t 2 ab", len) == 0);
	free(pae);
	ck_assert_int_ge(sodium_init(), 0);
	crypto_sign_keypair(pk, sk);
	ck_assert_int_eq(cert_env_sign(stmt, strlen(stmt), sk, pk, &env, NULL), 0);
	ck_assert_int_eq(cert_env_parse(env, strlen(env), &e, NULL), 0);
	ck_assert_int_eq(cert_env_verify(&e, pk, NULL), 0);
	e.payload[2] ^= 1;
	ck_assert_int_eq(cert_env_verify(&e, pk, NULL), PC_ETAMPER);
	cert_env_free(&e);
	free(env);
	/* A certificate has one spelling: a '/' of its signature written as
	 * a byte from 0x80 (which libsodium alone reads as '/') is refused.
	 * Statements are signed until a signature holds a '/' (3 in 4 do). */
	for (int i = 0; i < 64; i++) {
		char text[64], *sig, *slash;

		snprintf(text, sizeof(text), "{\"_type\":\"x\",\"n\":%d}", i);
		ck_assert_int_eq(cert_env_sign(text, strlen(text), sk, pk, &env, NULL), 0);
		sig = strstr(env, "\"sig\":\"");
		ck_assert_ptr_nonnull(sig);
		slash = strchr(sig + 7, '/');
		if (slash && slash < strchr(sig + 7, '"')) {
			*slash = (char)0xaf;
			ck_assert_int_ne(cert_env_parse(env, strlen(env), &e, NULL), 0);
			free(env);
			return;
		}
		free(env);
	}
	ck_abort_msg("no signature of 64 held a '/'");
}
END_TEST

PC_UNIT_SUITE("checker", "model", 0, guarded_path_is_proven, no_table_means_undecided_exit,
	      policy_accept_is_named, bypass_queue_is_an_exit, accept_elsewhere_does_not_bypass_us,
	      foreign_mark_write_is_an_exit, unknown_expression_is_unproven,
	      other_interface_rules_do_not_match_sandbox, jump_fanout_is_walked_once_per_chain,
	      jump_loop_is_unproven, redirect_to_our_listener_only_in_our_table,
	      mark_copy_from_conntrack_is_an_exit, masked_mark_copy_is_harmless,
	      pkttype_host_is_an_exit, ct_helper_is_an_exit_notrack_is_not,
	      xt_hmark_off_the_path_is_an_exit, xt_connmark_shift_off_the_path_is_an_exit,
	      unknown_xt_target_off_the_path_is_unproven, only_constant_sets_decide_a_lookup,
	      sandbox_facing_devices_are_named, tc_on_uplink_and_ptype_on_port_are_named,
	      tc_bpf_filter_on_a_class_has_its_actions_judged, mpls_input_facing_is_an_exit,
	      open_tunnel_that_forwards_is_an_exit, declared_uplink_without_route_is_an_uplink,
	      json_strict, dsse_round_trip)
