/* The engine's nftables objects, built without a kernel: both queue-rule
 * encoders (native `queue`, xt NFQUEUE v3 through nft_compat) round-trip
 * through the netlink encoding; the ruleset has the layout docs/engine.md
 * describes, merges address sets correctly, and its canonical text is
 * stable and survives the netlink round trip (what a kernel dump gives). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/x_tables.h>
#include <linux/netfilter/xt_NFQUEUE.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>

#include "nft/nft_int.h"
#include "rules/rules_int.h"
#include "tests/unit/agents.h"
#include "tests/unit/gateway.h"
#include "tests/unit/unit.h"

/* nft_*_text into a malloc'ed string (the tests compare strings). */
static int rule_text(const struct nftnl_rule *r, char **out)
{
	struct pc_buf b = {0};
	int rc = nft_rule_text(r, &b);

	*out = pc_buf_take(&b, NULL);
	return rc;
}

static int set_obj_text(const struct nftnl_set *s, char **out)
{
	struct pc_buf b = {0};
	int rc = nft_set_text(s, &b);

	*out = pc_buf_take(&b, NULL);
	return rc;
}

static struct nftnl_rule *rule_with(struct nftnl_expr *e)
{
	struct nftnl_rule *r = nftnl_rule_alloc();

	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_nonnull(e);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, "portcullis");
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, "prerouting");
	nftnl_rule_add_expr(r, e);
	return r;
}

/* Encode as the kernel would receive it, decode as a dump would give it. */
static struct nftnl_rule *roundtrip(const struct nftnl_rule *r)
{
	static char buf[1 << 16];
	struct nlmsghdr *nlh;
	struct nftnl_rule *o = nftnl_rule_alloc();

	ck_assert_ptr_nonnull(o);
	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWRULE,
				    (uint16_t)nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY),
				    NLM_F_CREATE, 1);
	nftnl_rule_nlmsg_build_payload(nlh, (struct nftnl_rule *)r);
	ck_assert_int_ge(nftnl_rule_nlmsg_parse(nlh, o), 0);
	return o;
}

static struct nftnl_expr *first_expr(struct nftnl_rule *r)
{
	struct nftnl_expr_iter *it = nftnl_expr_iter_create(r);
	struct nftnl_expr *e = nftnl_expr_iter_next(it);

	nftnl_expr_iter_destroy(it);
	return e;
}

START_TEST(queue_native_encoder)
{
	struct nftnl_rule *r = rule_with(nft_expr_queue_native(100, 4)), *o = roundtrip(r);
	struct nftnl_expr *e = first_expr(o);

	ck_assert_str_eq(nftnl_expr_get_str(e, NFTNL_EXPR_NAME), "queue");
	ck_assert_uint_eq(nftnl_expr_get_u16(e, NFTNL_EXPR_QUEUE_NUM), 100);
	ck_assert_uint_eq(nftnl_expr_get_u16(e, NFTNL_EXPR_QUEUE_TOTAL), 4);
	/* never bypass (fail open), never CPU fanout (flows stay on one thread) */
	ck_assert_uint_eq(nftnl_expr_get_u16(e, NFTNL_EXPR_QUEUE_FLAGS), 0);
	nftnl_rule_free(r);
	nftnl_rule_free(o);
	r = rule_with(nft_expr_queue_native(7, 0)); /* 0 queues means one */
	o = roundtrip(r);
	ck_assert_uint_eq(nftnl_expr_get_u16(first_expr(o), NFTNL_EXPR_QUEUE_TOTAL), 1);
	nftnl_rule_free(r);
	nftnl_rule_free(o);
}
END_TEST

START_TEST(queue_compat_encoder)
{
	struct nftnl_rule *r = rule_with(nft_expr_queue_compat(100, 2)), *o = roundtrip(r);
	struct nftnl_expr *e = first_expr(o);
	const struct xt_NFQ_info_v3 *info;
	uint32_t len = 0;
	char *t1 = NULL, *t2 = NULL;

	ck_assert_str_eq(nftnl_expr_get_str(e, NFTNL_EXPR_NAME), "target");
	ck_assert_str_eq(nftnl_expr_get_str(e, NFTNL_EXPR_TG_NAME), "NFQUEUE");
	ck_assert_uint_eq(nftnl_expr_get_u32(e, NFTNL_EXPR_TG_REV), 3);
	info = nftnl_expr_get(e, NFTNL_EXPR_TG_INFO, &len);
	ck_assert_ptr_nonnull(info);
	ck_assert_uint_eq(len, XT_ALIGN(sizeof(struct xt_NFQ_info_v3)));
	ck_assert_uint_eq(info->queuenum, 100);
	ck_assert_uint_eq(info->queues_total, 2);
	ck_assert_uint_eq(info->flags & NFQ_FLAG_BYPASS, 0);
	ck_assert_uint_eq(info->flags, 0);
	/* the canonical text carries the info bytes, so a live rule with
	 * another queue number or the bypass flag would not compare equal */
	ck_assert_int_eq(rule_text(r, &t1), 0);
	ck_assert_int_eq(rule_text(o, &t2), 0);
	ck_assert_str_eq(t1, t2);
	ck_assert_ptr_nonnull(strstr(t1, "info 6400020000000000"));
	free(t1);
	free(t2);
	nftnl_rule_free(r);
	nftnl_rule_free(o);
}
END_TEST

/* ---- the ruleset ------------------------------------------------------------ */

static const char policy_yaml[] = AGENT1_HEAD ALLOW_SSH /* and: */
    "---\n"
    "sandbox: agent-2\n"
    "match: { source: [10.0.0.0/25, 10.0.0.128/25], mac: \"02:00:00:cb:00:0c\" }\n"
    "limits: { new_flows_per_second: 50, new_flows_burst: 100 }\n"
    "allow:\n"
    "  - host: api.github.test\n"
    "    ports: [443]\n"
    "---\n"
    "sandbox: top\n"
    "match: { source: [255.255.255.255/32, \"fd00::/64\"], port: pcv3 }\n"
    "allow: []\n"
    "---\n"
    "sandbox: inner\n"
    "match: { source: [10.0.0.5/32, \"fd00::1/128\"], port: pcv2, mac: \"02:00:00:cb:00:0d\" }\n"
    "allow: []\n";

static struct config cfg;
static struct policy *pol;
static const struct nft_port ports[] = {{"pcv1", 4}, {"pcv2", 5}, {"huge", 0x1000000}};

static void setup(void)
{
	gw_config(&cfg);
	pol = gw_policy(policy_yaml, &cfg);
}

static void teardown(void)
{
	policy_unref(pol);
	pol = NULL;
}

static struct nft_ruleset *build(enum nft_queue_path q, size_t nports)
{
	struct nft_ruleset_params p = {&cfg, pol, ports, nports, q};
	struct nft_ruleset *rs = NULL;
	struct pc_err err = {0};

	if (nft_ruleset_build(&p, &rs, &err) < 0)
		ck_abort_msg("build: %s", err.msg);
	return rs;
}

static char *text(const struct nft_ruleset *rs)
{
	char *t = NULL;

	ck_assert_int_eq(nft_ruleset_text(rs, &t, NULL), 0);
	return t;
}

static const struct nftnl_chain *chain_named(const struct nft_ruleset *rs, uint16_t fam,
					     const char *name)
{
	for (size_t i = 0; i < nft_ruleset_count(rs); i++) {
		const struct nft_obj *o = nft_ruleset_at(rs, i);

		if (o->kind == NFT_CHAIN_OBJ && o->family == fam &&
		    strcmp(nftnl_chain_get_str(o->u.chain, NFTNL_CHAIN_NAME), name) == 0)
			return o->u.chain;
	}
	return NULL;
}

START_TEST(layout_and_hooks)
{
	struct nft_ruleset *rs = build(NFT_QUEUE_COMPAT, 2);
	static const struct {
		uint16_t fam;
		const char *name, *type;
		int hook, prio;
		uint32_t policy;
	} want[] = {
	    {NFPROTO_INET, "prerouting", "filter", NF_INET_PRE_ROUTING, -190, NF_DROP},
	    {NFPROTO_INET, "input", "filter", NF_INET_LOCAL_IN, -190, NF_ACCEPT},
	    {NFPROTO_INET, "forward", "filter", NF_INET_FORWARD, -190, NF_ACCEPT},
	    {NFPROTO_INET, "output_raw", "filter", NF_INET_LOCAL_OUT, -300, NF_ACCEPT},
	    {NFPROTO_INET, "output", "filter", NF_INET_LOCAL_OUT, -190, NF_ACCEPT},
	    {NFPROTO_INET, "nat_prerouting", "nat", NF_INET_PRE_ROUTING, -100, NF_ACCEPT},
	    {NFPROTO_BRIDGE, "prerouting", "filter", 0, -350, NF_ACCEPT},
	    {NFPROTO_BRIDGE, "forward", "filter", 2, -350, NF_ACCEPT},
	};
	const struct nft_obj *o = nft_ruleset_at(rs, 0);

	ck_assert_int_eq(o->kind, NFT_TABLE_OBJ);
	ck_assert_int_eq(o->family, NFPROTO_INET);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct nftnl_chain *c = chain_named(rs, want[i].fam, want[i].name);

		ck_assert_msg(c != NULL, "chain %s", want[i].name);
		ck_assert_str_eq(nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE), want[i].type);
		ck_assert_uint_eq(nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM),
				  (uint32_t)want[i].hook);
		ck_assert_int_eq(nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO), want[i].prio);
		ck_assert_uint_eq(nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY), want[i].policy);
	}
	/* the regular chains the bridge prerouting chain jumps to exist, and
	 * are created before it (the kernel resolves jumps at insertion) */
	for (size_t i = 0, seen = 0; i < nft_ruleset_count(rs); i++) {
		o = nft_ruleset_at(rs, i);
		if (o->kind != NFT_CHAIN_OBJ || o->family != NFPROTO_BRIDGE)
			continue;
		if (nftnl_chain_is_set(o->u.chain, NFTNL_CHAIN_HOOKNUM))
			ck_assert_uint_eq(seen, 3);
		else
			seen++;
	}
	nft_ruleset_free(rs);
}
END_TEST

START_TEST(queue_rules_never_bypass)
{
	for (int q = NFT_QUEUE_NATIVE; q <= NFT_QUEUE_COMPAT; q++) {
		struct nft_ruleset *rs = build(q, 2);
		char *t = text(rs);
		size_t queues = 0;

		for (char *p = t; (p = strstr(p, q == NFT_QUEUE_NATIVE ? "[ queue " : "NFQUEUE"));
		     p++)
			queues++;
		/* DNS udp+tcp, held flows, new flows; 4 answer rules in forward and
		 * output; held flows' replies in forward */
		ck_assert_uint_eq(queues, 13);
		if (q == NFT_QUEUE_COMPAT)
			ck_assert_ptr_null(strstr(t, "[ queue "));
		else
			ck_assert_ptr_null(strstr(t, "NFQUEUE"));
		ck_assert_ptr_null(strstr(t, "bypass"));
		free(t);
		nft_ruleset_free(rs);
	}
}
END_TEST

START_TEST(text_is_stable_and_survives_netlink)
{
	struct nft_ruleset *a = build(NFT_QUEUE_COMPAT, 2), *b = build(NFT_QUEUE_COMPAT, 2);
	struct nft_ruleset *c = build(NFT_QUEUE_COMPAT, 1), *n = build(NFT_QUEUE_NATIVE, 2);
	char *ta = text(a), *tb = text(b), *tc = text(c), *tn = text(n);
	char da[80], db[80], dc[80];

	ck_assert_str_eq(ta, tb);
	ck_assert_str_ne(ta, tc); /* ports are part of what is installed */
	ck_assert_str_ne(ta, tn);
	ck_assert_int_eq(nft_ruleset_digest(a, da, sizeof(da)), 0);
	ck_assert_int_eq(nft_ruleset_digest(b, db, sizeof(db)), 0);
	ck_assert_int_eq(nft_ruleset_digest(c, dc, sizeof(dc)), 0);
	ck_assert_str_eq(da, db);
	ck_assert_str_ne(da, dc);
	ck_assert_int_eq(strncmp(da, "sha256:", 7), 0);
	ck_assert_uint_eq(strlen(da), 7 + 64);
	for (size_t i = 0; i < nft_ruleset_count(a); i++) {
		const struct nft_obj *o = nft_ruleset_at(a, i);
		struct nftnl_rule *rt;
		char *t1 = NULL, *t2 = NULL;

		if (o->kind != NFT_RULE_OBJ)
			continue;
		rt = roundtrip(o->u.rule);
		ck_assert_int_eq(rule_text(o->u.rule, &t1), 0);
		ck_assert_int_eq(rule_text(rt, &t2), 0);
		ck_assert_str_eq(t1, t2);
		free(t1);
		free(t2);
		nftnl_rule_free(rt);
	}
	free(ta);
	free(tb);
	free(tc);
	free(tn);
	nft_ruleset_free(a);
	nft_ruleset_free(b);
	nft_ruleset_free(c);
	nft_ruleset_free(n);
}
END_TEST

static char *set_text(const struct nft_ruleset *rs, uint16_t fam, const char *name)
{
	for (size_t i = 0; i < nft_ruleset_count(rs); i++) {
		const struct nft_obj *o = nft_ruleset_at(rs, i);
		char *t = NULL;

		if (o->kind == NFT_SET_OBJ && o->family == fam &&
		    strcmp(nftnl_set_get_str(o->u.set, NFTNL_SET_NAME), name) == 0) {
			ck_assert_int_eq(set_obj_text(o->u.set, &t), 0);
			return t;
		}
	}
	ck_abort_msg("no set %s", name);
	return NULL;
}

START_TEST(address_sets_merge)
{
	struct nft_ruleset *rs = build(NFT_QUEUE_COMPAT, 3);
	char *t;

	/* 10.0.0.0/25 + 10.0.0.128/25 + 10.0.0.5 = [10.0.0.0, 10.0.1.0); .11 alone;
	 * 255.255.255.255 reaches the top: no end element */
	t = set_text(rs, NFPROTO_BRIDGE, "src4");
	ck_assert_str_eq(t, "set bridge portcullis src4 flags 0x4 keytype 7 keylen 4\n"
			    "  elem 0a000000 flags 0x0\n"
			    "  elem 0a000100 flags 0x1\n"
			    "  elem 0acb000b flags 0x0\n"
			    "  elem 0acb000c flags 0x1\n"
			    "  elem ffffffff flags 0x0\n");
	free(t);
	/* fd00::/64 swallows fd00::1 */
	t = set_text(rs, NFPROTO_BRIDGE, "src6");
	ck_assert_ptr_nonnull(strstr(t, "elem fd000000000000000000000000000000 flags 0x0\n"
					"  elem fd000000000000010000000000000000 flags 0x1\n"));
	ck_assert_ptr_null(strstr(t, "fd000000000000000000000000000001"));
	free(t);
	/* the port set: ifindexes (host order), the one too large to stamp left out */
	t = set_text(rs, NFPROTO_BRIDGE, "ports");
	ck_assert_str_eq(t, "set bridge portcullis ports flags 0x0 keytype 20 keylen 4\n"
			    "  elem 04000000 flags 0x0\n"
			    "  elem 05000000 flags 0x0\n");
	free(t);
	/* the bindings as concatenated ranges, "who . first-last" (flags
	 * interval|concat): agent-1's port, agent-2's MAC */
	t = set_text(rs, NFPROTO_BRIDGE, "p_pair4");
	ck_assert_ptr_nonnull(strstr(t, "flags 0x84 "));
	ck_assert_ptr_nonnull(strstr(t, "0acb000b-"));
	ck_assert_ptr_nonnull(strstr(t, "0acb000b flags 0x0"));
	free(t);
	t = set_text(rs, NFPROTO_BRIDGE, "m_pair4");
	ck_assert_ptr_nonnull(strstr(t, "00000a000000-"));
	free(t);
	t = set_text(rs, NFPROTO_INET, "resolvers6");
	ck_assert_ptr_nonnull(strstr(t, "elem 20010db8005300000000000000000053"));
	free(t);
	nft_ruleset_free(rs);
}
END_TEST

/* The rules of inet prerouting, in order, as text (one string per rule). */
static size_t prerouting_rules(const struct nft_ruleset *rs, char **out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < nft_ruleset_count(rs) && n < max; i++) {
		const struct nft_obj *o = nft_ruleset_at(rs, i);

		if (o->kind != NFT_RULE_OBJ || o->family != NFPROTO_INET ||
		    strcmp(nftnl_rule_get_str(o->u.rule, NFTNL_RULE_CHAIN), "prerouting") != 0)
			continue;
		out[n] = NULL;
		ck_assert_int_eq(rule_text(o->u.rule, &out[n]), 0);
		n++;
	}
	return n;
}

START_TEST(new_flow_limit_before_the_queue)
{
	struct nft_ruleset *rs = build(NFT_QUEUE_COMPAT, 2);
	char *r[64], *t;
	size_t n = prerouting_rules(rs, r, 64), first_limit = n, first_queue = n, unstamped = n;
	size_t limits = 0;

	for (size_t i = 0; i < n; i++) {
		if (strstr(r[i], "[ dynset ") && first_limit == n)
			first_limit = i;
		if (strstr(r[i], "[ dynset "))
			limits++;
		if (strstr(r[i], "NFQUEUE") && first_queue == n)
			first_queue = i;
		if (strstr(r[i], "[ cmp eq reg 1 0x00000000 ]") && strstr(r[i], "0x00ffffff") &&
		    strstr(r[i], "drop") && unstamped == n)
			unstamped = i;
	}
	/* after the stamp check, before anything is queued (DNS included) */
	ck_assert_uint_lt(unstamped, first_limit);
	ck_assert_uint_lt(first_limit, first_queue);
	/* per family of each limit's sandboxes' sources (the config's 1000/s:
	 * agent-1, inner and top, 4+6; agent-2's own 50/s, 4): what conntrack
	 * has no flow for, UDP DNS on an established 5-tuple, segments of DNS
	 * over TCP and of held flows */
	ck_assert_uint_eq(limits, 4 * 3);
	for (size_t i = first_limit; i < first_limit + limits; i++) {
		/* keyed by the port stamp, over the limit: counted and dropped —
		 * never an accept */
		ck_assert_ptr_nonnull(strstr(r[i], "[ meta load mark => reg 1 ]\n"
						   "  [ bitwise reg 1 = ( reg 1 & 0x00ffffff ) ^ "
						   "0x00000000 ]\n"
						   "  [ dynset "));
		ck_assert_ptr_nonnull(strstr(r[i], "[ counter ]\n  [ immediate reg 0 drop ]\n"));
		ck_assert_ptr_null(strstr(r[i], "accept"));
		ck_assert_ptr_nonnull(strstr(r[i], "flags 0x1")); /* NFT_LIMIT_F_INV: "over" */
		/* what is dropped is counted for the sandbox of its source */
		ck_assert_ptr_nonnull(strstr(r[i], "set limsb"));
	}
	/* limits in the order of their first sandbox (name order): agent-1's
	 * (lim0) the config's 1000/s burst 2000, agent-2's (lim1) its own
	 * 50/s burst 100 */
	ck_assert_ptr_nonnull(strstr(r[first_limit], "set lim0 "));
	ck_assert_ptr_nonnull(strstr(r[first_limit], "lookup reg 1 set lim0_src4"));
	ck_assert_ptr_nonnull(strstr(r[first_limit], "rate 1000/second burst 2000 type packets"));
	/* new, invalid and untracked alike: ct state & 0x49 (untracked 0x40,
	 * new 0x08, invalid 0x01) != 0 */
	ck_assert_ptr_nonnull(strstr(r[first_limit], "[ ct load state => reg 1 ]\n"
						     "  [ bitwise reg 1 = ( reg 1 & 0x00000049 ) ^ "
						     "0x00000000 ]"));
	ck_assert_ptr_nonnull(strstr(r[first_limit + 1], "set lim0 "));
	/* segments of DNS over TCP and of held flows: their own meter, four
	 * packets per token of the new-flow limit */
	ck_assert_ptr_nonnull(strstr(r[first_limit + 2], "set seg0 "));
	ck_assert_ptr_nonnull(
	    strstr(r[first_limit + 2], "rate 4000/second burst 8000 type packets"));
	ck_assert_ptr_nonnull(strstr(r[first_limit + 3], "set seg0 "));
	ck_assert_ptr_nonnull(strstr(r[first_limit + 3], "[ ct load mark => reg 1 ]"));
	ck_assert_ptr_nonnull(strstr(r[first_limit + 8], "set lim1 "));
	ck_assert_ptr_nonnull(strstr(r[first_limit + 8], "rate 50/second burst 100 type packets"));
	ck_assert_ptr_nonnull(
	    strstr(r[first_limit + 11], "rate 200/second burst 400 type packets"));
	ck_assert_ptr_null(strstr(r[first_limit + 12], "set lim1 ")); /* agent-2: no IPv6 */
	for (size_t i = 0; i < n; i++)
		free(r[i]);
	/* the meter: dynamic (its elements are traffic, not configuration),
	 * keyed by a mark; the source sets as the policy says */
	t = set_text(rs, NFPROTO_INET, "lim1");
	ck_assert_str_eq(t, "set inet portcullis lim1 flags 0x30 keytype 19 keylen 4\n");
	free(t);
	t = set_text(rs, NFPROTO_INET, "lim1_src4");
	ck_assert_str_eq(t, "set inet portcullis lim1_src4 flags 0x4 keytype 7 keylen 4\n"
			    "  elem 0a000000 flags 0x0\n"
			    "  elem 0a000100 flags 0x1\n");
	free(t);
	/* every source, in pieces that each belong to one sandbox (and count
	 * its drops): agent-2's 10.0.0.0/24 holds inner's 10.0.0.5, which is
	 * inner's alone */
	t = set_text(rs, NFPROTO_INET, "limsb4");
	ck_assert_ptr_nonnull(strstr(t, "flags 0x4 keytype 7 keylen 4\n"));
	ck_assert_ptr_nonnull(strstr(t, "  elem 0a000000 flags 0x0\n"
					"  elem 0a000005 flags 0x0\n"
					"  elem 0a000005 flags 0x1\n"
					"  elem 0a000006 flags 0x0\n"
					"  elem 0a000006 flags 0x1\n"
					"  elem 0a000100 flags 0x1\n"));
	free(t);
	nft_ruleset_free(rs);
}
END_TEST

START_TEST(meter_text_leaves_out_its_elements)
{
	struct nft_ruleset *rs = build(NFT_QUEUE_COMPAT, 2);
	uint32_t key = 4;
	char *t = NULL;

	for (size_t i = 0; i < nft_ruleset_count(rs); i++) {
		const struct nft_obj *o = nft_ruleset_at(rs, i);
		struct nftnl_set_elem *e;

		if (o->kind != NFT_SET_OBJ ||
		    strcmp(nftnl_set_get_str(o->u.set, NFTNL_SET_NAME), "lim0") != 0)
			continue;
		/* what a dump of the live set holds after traffic from port 4 */
		e = nftnl_set_elem_alloc();
		ck_assert_ptr_nonnull(e);
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, &key, sizeof(key));
		nftnl_set_elem_add(o->u.set, e);
		ck_assert_int_eq(set_obj_text(o->u.set, &t), 0);
	}
	ck_assert_str_eq(t, "set inet portcullis lim0 flags 0x30 keytype 19 keylen 4\n");
	free(t);
	nft_ruleset_free(rs);
}
END_TEST

START_TEST(marks_are_ours_only)
{
	struct nft_ruleset *rs = build(NFT_QUEUE_COMPAT, 2);
	char *t = text(rs);

	/* the bits fit the mask, do not overlap each other or the port stamp */
	ck_assert_uint_eq((NFT_MARK_ALLOW | NFT_MARK_VAULT | NFT_MARK_HELD | NFT_MARK_PASS |
			   NFT_MARK_REJECT | NFT_MARK_DNSREPLY | NFT_MARK_TLS) &
			      ~NFT_MARK_MASK,
			  0);
	ck_assert_uint_eq(NFT_MARK_ALLOW + NFT_MARK_VAULT + NFT_MARK_HELD + NFT_MARK_PASS +
			      NFT_MARK_REJECT + NFT_MARK_DNSREPLY + NFT_MARK_TLS,
			  NFT_MARK_ALLOW | NFT_MARK_VAULT | NFT_MARK_HELD | NFT_MARK_PASS |
			      NFT_MARK_REJECT | NFT_MARK_DNSREPLY | NFT_MARK_TLS);
	ck_assert_uint_eq(NFT_MARK_MASK & NFT_MARK_PORT_MASK, 0);
	/* ct marks are set keeping every bit outside our mask */
	ck_assert_ptr_nonnull(strstr(t, "[ bitwise reg 1 = ( reg 1 & 0x00ffffff ) ^ 0x80000000 ]"));
	/* the stamp: input port index, every other mark bit cleared */
	ck_assert_ptr_nonnull(strstr(t,
				     "[ meta load iif => reg 1 ]\n"
				     "  [ bitwise reg 1 = ( reg 1 & 0x00ffffff ) ^ 0x00000000 ]\n"
				     "  [ meta set mark with reg 1 ]"));
	free(t);
	nft_ruleset_free(rs);
}
END_TEST

/* The ct mark TLS (a held flow's ClientHello judged allowed) is set in one
 * place, from the engine's PASS|TLS verdict and only on a held flow, and
 * read in one: forward's four rules that pass the server's bare ACKs of
 * such a flow, each guarded by HELD|TLS and the reply direction. */
static size_t count(const char *t, const char *needle)
{
	size_t n = 0;

	for (const char *p = t; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

START_TEST(tls_bit_only_on_held_flows)
{
	struct nft_ruleset *rs = build(NFT_QUEUE_COMPAT, 2);
	char *t = text(rs);

	ck_assert_uint_eq(count(t, "[ cmp eq reg 1 0x12000000 ]\n"
				   "  [ ct load mark => reg 1 ]\n"
				   "  [ bitwise reg 1 = ( reg 1 & 0xa0000000 ) ^ 0x00000000 ]\n"
				   "  [ cmp eq reg 1 0x20000000 ]\n"
				   "  [ ct load mark => reg 1 ]\n"
				   "  [ bitwise reg 1 = ( reg 1 & 0x00ffffff ) ^ 0x22000000 ]\n"
				   "  [ ct set mark with reg 1 ]\n"
				   "  [ meta load mark => reg 1 ]\n"
				   "  [ bitwise reg 1 = ( reg 1 & 0x00000000 ) ^ 0x10000000 ]\n"
				   "  [ meta set mark with reg 1 ]\n"
				   "  [ immediate reg 0 accept ]"),
			  1);
	ck_assert_uint_eq(count(t, "^ 0x22000000 ]"), 1);
	ck_assert_uint_eq(count(t, "0x02000000"), 0);
	ck_assert_uint_eq(count(t, "[ bitwise reg 1 = ( reg 1 & 0xa2000000 ) ^ 0x00000000 ]\n"
				   "  [ cmp eq reg 1 0x22000000 ]\n"
				   "  [ ct load direction => reg 1 ]\n"
				   "  [ cmp eq reg 1 0x00000001 ]\n"),
			  4);
	ck_assert_uint_eq(count(t, "0xa2000000"), 4);
	free(t);
	nft_ruleset_free(rs);
}
END_TEST

START_TEST(bad_parameters)
{
	struct nft_ruleset_params p = {&cfg, pol, NULL, 0, 0};
	struct nft_ruleset *rs = NULL;
	struct pc_err err = {0};

	ck_assert_int_eq(nft_ruleset_build(&p, &rs, &err), PC_EINVAL);
	p.qpath = NFT_QUEUE_COMPAT;
	p.policy = NULL;
	ck_assert_int_eq(nft_ruleset_build(&p, &rs, &err), PC_EINVAL);
	p.policy = pol;
	cfg.queue.base = 65535;
	cfg.queue.count = 2;
	ck_assert_int_eq(nft_ruleset_build(&p, &rs, &err), PC_EINVAL);
	cfg.queue.base = 100;
	cfg.bridge[0] = '\0';
	ck_assert_int_eq(nft_ruleset_build(&p, &rs, &err), PC_EINVAL);
	ck_assert_ptr_null(rs);
}
END_TEST

static Suite *nft_suite(void)
{
	Suite *s = suite_create("nft");
	TCase *enc = tcase_create("encoders"), *rs = tcase_create("ruleset");

	PC_UNIT_TESTS(enc, queue_native_encoder, queue_compat_encoder);
	tcase_add_checked_fixture(rs, setup, teardown);
	PC_UNIT_TESTS(rs, layout_and_hooks, queue_rules_never_bypass,
		      text_is_stable_and_survives_netlink, new_flow_limit_before_the_queue,
		      meter_text_leaves_out_its_elements, address_sets_merge, marks_are_ours_only,
		      tls_bit_only_on_held_flows, bad_parameters);
	suite_add_tcase(s, enc);
	suite_add_tcase(s, rs);
	return s;
}

PC_UNIT_MAIN(nft_suite)
