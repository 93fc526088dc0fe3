/* Unit tests of the checker's pass-restricted obligation (checker/pass.c):
 * the engine's own ruleset, as nft_ruleset_build makes it and as the
 * checker's netlink reader parses it, keeps what the engine released
 * (PASS) to the resolvers' port 53 and held flows; the forward rule before
 * issue 16 ("iifname B meta mark == PASS accept") and other ways of
 * widening it are named. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include "nft/nft.h"
#include "checker/checker_int.h"
#include "rules/rules_int.h"
#include "tests/unit/agents.h"
#include "tests/unit/gateway.h"
#include "tests/unit/nftexpr.h"
#include "tests/unit/unit.h"

static const char policy_yaml[] = AGENT1_HEAD "  - host: api.github.test\n"
					      "    ports: [443]\n";

static struct config cfg;
static struct policy *pol;
static struct ck_state st;
static struct checker_expect ex;
static const struct nft_port ports[] = {{"pcv1", 4}};

static void setup(void)
{
	gw_config(&cfg);
	pol = gw_policy(policy_yaml, &cfg);
	memset(&st, 0, sizeof(st));
	memset(&ex, 0, sizeof(ex));
	strcpy(ex.table, NFT_TABLE);
	ex.mark_mask = NFT_MARK_MASK;
	ex.mark_decided = NFT_MARK_ALLOW | NFT_MARK_HELD | NFT_MARK_PASS;
	ex.mark_pass = NFT_MARK_PASS;
	ex.ct_exempt = NFT_MARK_ALLOW | NFT_MARK_HELD;
	ex.resolvers = cfg.dns.resolvers;
	ex.n_resolvers = cfg.dns.n_resolvers;
	nx_bridge_links(&st);
}

static void teardown(void)
{
	ck_state_free(&st);
	policy_unref(pol);
	pol = NULL;
}

/* ---- rules by hand ----------------------------------------------------------- */

static struct nftnl_rule *rule_new(const char *chain)
{
	struct nftnl_rule *r = nftnl_rule_alloc();

	ck_assert_ptr_nonnull(r);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, NFT_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	return r;
}

static void e_iif_bridge(struct nftnl_rule *r)
{
	char br[16] = "pcbr0";

	nx_load(r, "meta", NFT_META_IIFNAME);
	nx_cmp(r, NFT_CMP_EQ, br, 16);
}

static void e_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("payload");

	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
	nftnl_rule_add_expr(r, e);
}

/* The forward rule before issue 16: anything released, anywhere. */
static struct nftnl_rule *old_pass_rule(void)
{
	struct nftnl_rule *r = rule_new("forward");

	e_iif_bridge(r);
	nx_mark(r, false, NFT_MARK_MASK, NFT_MARK_PASS);
	nx_verdict(r, NF_ACCEPT);
	return r;
}

/* "iifname B meta mark == PASS ip daddr 198.51.100.53 <then>": a resolver,
 * but no protocol or port: any port of the resolver. */
static struct nftnl_rule *resolver_any_port_rule(void)
{
	struct nftnl_rule *r = rule_new("forward");
	uint8_t a[4] = {198, 51, 100, 53}, v4 = NFPROTO_IPV4;

	e_iif_bridge(r);
	nx_mark(r, false, NFT_MARK_MASK, NFT_MARK_PASS);
	nx_load(r, "meta", NFT_META_NFPROTO);
	nx_cmp(r, NFT_CMP_EQ, &v4, 1);
	e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4);
	nx_cmp(r, NFT_CMP_EQ, a, 4);
	nx_verdict(r, NF_ACCEPT);
	return r;
}

/* ---- the engine's ruleset through the checker's netlink reader -------------- */

static char nlbuf[1 << 21];

struct extra {
	const char *chain; /* insert before this chain's rule number at */
	size_t at;
	struct nftnl_rule *r;
	bool drop_rest; /* leave out the chain's rules from at on */
};

static size_t put_rule(size_t off, struct nftnl_rule *r, uint64_t handle)
{
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(
	    nlbuf + off, NFT_MSG_NEWRULE, (uint16_t)nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY),
	    NLM_F_CREATE, 1);

	nftnl_rule_set_u64(r, NFTNL_RULE_HANDLE, handle);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	return off + NLMSG_ALIGN(nlh->nlmsg_len);
}

/* Build the engine's ruleset for cfg/pol (queue path q), encode it as a
 * dump would give it, with x put in (or NULL), and parse it into st. */
static void load(enum nft_queue_path q, const struct extra *x)
{
	struct nft_ruleset_params p = {&cfg, pol, ports, 1, q};
	struct nft_ruleset *rs = NULL;
	struct pc_err err = {0};
	size_t off = 0, nth = 0;
	uint64_t handle = 1;

	if (nft_ruleset_build(&p, &rs, &err) < 0)
		ck_abort_msg("build: %s", err.msg);
	for (size_t i = 0; i < nft_ruleset_count(rs); i++) {
		const struct nft_obj *o = nft_ruleset_at(rs, i);
		struct nlmsghdr *nlh;

		ck_assert_uint_lt(off, sizeof(nlbuf) - 65536);
		switch (o->kind) {
		case NFT_TABLE_OBJ:
			nlh = nftnl_nlmsg_build_hdr(nlbuf + off, NFT_MSG_NEWTABLE, o->family,
						    NLM_F_CREATE, 1);
			nftnl_table_nlmsg_build_payload(nlh, o->u.table);
			off += NLMSG_ALIGN(nlh->nlmsg_len);
			break;
		case NFT_CHAIN_OBJ:
			nlh = nftnl_nlmsg_build_hdr(nlbuf + off, NFT_MSG_NEWCHAIN, o->family,
						    NLM_F_CREATE, 1);
			nftnl_chain_nlmsg_build_payload(nlh, o->u.chain);
			off += NLMSG_ALIGN(nlh->nlmsg_len);
			break;
		case NFT_SET_OBJ:
			nlh = nftnl_nlmsg_build_hdr(nlbuf + off, NFT_MSG_NEWSET, o->family,
						    NLM_F_CREATE, 1);
			nftnl_set_nlmsg_build_payload(nlh, o->u.set);
			off += NLMSG_ALIGN(nlh->nlmsg_len);
			/* an interval set's elements as libnftnl encodes a request
			 * are not what a dump gives (the screen refuses them);
			 * none is read by this obligation (left unread) */
			if (nftnl_set_get_u32(o->u.set, NFTNL_SET_FLAGS) & NFT_SET_INTERVAL)
				break;
			nlh = nftnl_nlmsg_build_hdr(nlbuf + off, NFT_MSG_NEWSETELEM, o->family,
						    NLM_F_CREATE, 1);
			nftnl_set_elems_nlmsg_build_payload(nlh, o->u.set);
			off += NLMSG_ALIGN(nlh->nlmsg_len);
			break;
		case NFT_RULE_OBJ: {
			const char *chain = nftnl_rule_get_str(o->u.rule, NFTNL_RULE_CHAIN);
			bool that = x && o->family == NFPROTO_INET && strcmp(chain, x->chain) == 0;

			if (that && nth == x->at && x->r)
				off = put_rule(off, x->r, handle++);
			if (that && x->drop_rest && nth >= x->at) {
				nth++;
				break;
			}
			nth += that;
			off = put_rule(off, o->u.rule, handle++);
			break;
		}
		default:
			break;
		}
	}
	nft_ruleset_free(rs);
	if (ck_nft_parse(&st.nft, nlbuf, off, &err) < 0)
		ck_abort_msg("parse: %s", err.msg);
	ck_assert_uint_eq(st.nft.n_bad, 0);
}

static struct checker_result *run(void)
{
	struct checker_result *r = calloc(1, sizeof(*r));

	ck_assert_ptr_nonnull(r);
	ck_pass_check(&st, &ex, "pcbr0", r);
	return r;
}

static bool has(const struct checker_result *r, const char *needle)
{
	for (size_t i = 0; i < r->n_findings; i++)
		if (strstr(r->findings[i].text, needle))
			return true;
	return false;
}

static void dump(const struct checker_result *r)
{
	for (size_t i = 0; i < r->n_findings; i++)
		fprintf(stderr, "  finding: %s\n", r->findings[i].text);
	for (size_t i = 0; i < r->ob[CK_OB_PASS].n; i++)
		fprintf(stderr, "  evidence: %s\n", r->ob[CK_OB_PASS].lines[i]);
}

START_TEST(engine_ruleset_holds)
{
	for (int q = NFT_QUEUE_NATIVE; q <= NFT_QUEUE_COMPAT; q++) {
		struct checker_result *r;

		ck_ruleset_free(&st.nft);
		memset(&st.nft, 0, sizeof(st.nft));
		load((enum nft_queue_path)q, NULL);
		r = run();
		if (r->ob[CK_OB_PASS].failed)
			dump(r);
		ck_assert(!r->ob[CK_OB_PASS].failed);
		ck_assert_uint_eq(r->n_findings, 0);
		/* forward and input, IPv4 and IPv6 */
		ck_assert_uint_eq(r->ob[CK_OB_PASS].n, 4);
		ck_assert_ptr_nonnull(
		    strstr(r->ob[CK_OB_PASS].lines[0], "chain forward rule handle"));
		checker_result_free(r);
	}
}
END_TEST

START_TEST(old_forward_rule_is_named)
{
	struct extra x = {"forward", 2, old_pass_rule(), false};
	struct checker_result *r;
	char want[160];

	load(NFT_QUEUE_NATIVE, &x);
	r = run();
	ck_assert(r->ob[CK_OB_PASS].failed);
	ck_assert_int_eq(r->status, CHECKER_EXIT_FOUND);
	/* the inserted rule has the handle after the chain's first two */
	for (size_t i = 0; i < st.nft.n_chains; i++) {
		const struct ck_chain *c = &st.nft.chains[i];

		if (c->family == NFPROTO_INET && strcmp(c->name, "forward") == 0)
			snprintf(want, sizeof(want),
				 "table inet portcullis chain forward rule handle %llu: accepts "
				 "IPv4 packets the engine released",
				 (unsigned long long)c->rules[2].handle);
	}
	ck_assert_msg(has(r, want), "no finding '%s'", want);
	ck_assert(has(r, "accepts IPv6 packets the engine released"));
	checker_result_free(r);
	nftnl_rule_free(x.r);
}
END_TEST

START_TEST(resolver_on_any_port_is_named)
{
	struct extra x = {"forward", 2, resolver_any_port_rule(), false};
	struct checker_result *r;

	load(NFT_QUEUE_NATIVE, &x);
	r = run();
	ck_assert(r->ob[CK_OB_PASS].failed);
	ck_assert(has(r, "accepts IPv4 packets the engine released"));
	ck_assert(!has(r, "accepts IPv6")); /* an IPv4 address: IPv6 never matches it */
	checker_result_free(r);
	nftnl_rule_free(x.r);
}
END_TEST

/* The resolver sets hold an address that is not a configured resolver (the
 * configuration and the table disagree): the DNS rules no longer bound it. */
START_TEST(set_with_another_address_is_named)
{
	struct checker_result *r;

	load(NFT_QUEUE_NATIVE, NULL);
	ex.n_resolvers = 1; /* 2001:db8:53::53 is in resolvers6 but no longer a resolver */
	r = run();
	ck_assert(r->ob[CK_OB_PASS].failed);
	ck_assert(has(r, "accepts IPv6 packets the engine released"));
	ck_assert(!has(r, "accepts IPv4"));
	checker_result_free(r);
}
END_TEST

/* Without the final drops the chain's policy (accept) takes them. */
START_TEST(policy_accept_is_named)
{
	struct extra x = {"forward", 2, NULL, true};
	struct checker_result *r;

	load(NFT_QUEUE_NATIVE, &x);
	r = run();
	ck_assert(r->ob[CK_OB_PASS].failed);
	ck_assert(has(r, "chain forward: policy accept takes IPv4 packets the engine released"));
	checker_result_free(r);
}
END_TEST

/* A jump to a chain that accepts is followed; a write is not modelled. */
START_TEST(jumps_followed_writes_unproven)
{
	struct ck_chain *c = ck_grow(&st.nft.chains, &st.nft.n_chains, &st.nft.cap_chains,
				     sizeof(*c)),
			*t;
	struct ck_rule *rl;
	struct nftnl_expr *e;
	struct checker_result *r;

	c->family = NFPROTO_INET;
	strcpy(c->table, NFT_TABLE);
	strcpy(c->name, "forward");
	c->base = true;
	c->hook = NF_INET_FORWARD;
	c->policy = NF_DROP;
	rl = ck_grow(&c->rules, &c->n_rules, &c->cap_rules, sizeof(*rl));
	rl->handle = 1;
	rl->r = rule_new("forward");
	e = nftnl_expr_alloc("immediate");
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)NFT_JUMP);
	nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, "sub");
	nftnl_rule_add_expr(rl->r, e);
	t = ck_grow(&st.nft.chains, &st.nft.n_chains, &st.nft.cap_chains, sizeof(*t));
	c = &st.nft.chains[0]; /* (moved) */
	t->family = NFPROTO_INET;
	strcpy(t->table, NFT_TABLE);
	strcpy(t->name, "sub");
	rl = ck_grow(&t->rules, &t->n_rules, &t->cap_rules, sizeof(*rl));
	rl->handle = 7;
	rl->r = rule_new("sub");
	nx_mark(rl->r, false, NFT_MARK_MASK, NFT_MARK_PASS);
	nx_verdict(rl->r, NF_ACCEPT);
	/* an input chain that writes the ct mark of what it sees */
	t = ck_grow(&st.nft.chains, &st.nft.n_chains, &st.nft.cap_chains, sizeof(*t));
	t->family = NFPROTO_INET;
	strcpy(t->table, NFT_TABLE);
	strcpy(t->name, "input");
	t->base = true;
	t->hook = NF_INET_LOCAL_IN;
	t->policy = NF_DROP;
	rl = ck_grow(&t->rules, &t->n_rules, &t->cap_rules, sizeof(*rl));
	rl->handle = 9;
	rl->r = rule_new("input");
	nx_load(rl->r, "ct", NFT_CT_MARK);
	e = nftnl_expr_alloc("ct");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_MARK);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_SREG, NFT_REG_1);
	nftnl_rule_add_expr(rl->r, e);
	r = run();
	ck_assert(r->ob[CK_OB_PASS].failed);
	ck_assert(has(r, "chain sub rule handle 7: accepts IPv4"));
	ck_assert(has(r, "unproven: table inet portcullis chain input rule handle 9"));
	(void)c;
	checker_result_free(r);
}
END_TEST

/* No PASS mark known (an expectation that does not say): never "held". */
START_TEST(unknown_mark_is_unproven)
{
	struct checker_result *r;

	load(NFT_QUEUE_NATIVE, NULL);
	ex.mark_pass = 0;
	r = run();
	ck_assert(r->ob[CK_OB_PASS].failed);
	ck_assert_int_eq(r->status, CHECKER_UNPROVEN);
	checker_result_free(r);
}
END_TEST

static Suite *pass_suite(void)
{
	Suite *s = suite_create("checker_pass");
	TCase *tc = tcase_create("pass");

	tcase_add_checked_fixture(tc, setup, teardown);
	PC_UNIT_TESTS(tc, engine_ruleset_holds, old_forward_rule_is_named,
		      resolver_on_any_port_is_named, set_with_another_address_is_named,
		      policy_accept_is_named, jumps_followed_writes_unproven,
		      unknown_mark_is_unproven);
	suite_add_tcase(s, tc);
	return s;
}

PC_UNIT_MAIN(pass_suite)
