/* The ruleset's shape does not grow with the number of sandboxes (issue
 * 34): at 1,000 sandboxes the per-sandbox sets and rules made a reload take
 * 2.5 s, a check 25 s, and every frame walk thousands of rules. Built
 * without a kernel for 2, 20 and 200 sandboxes, each bound to its own port
 * (and some to a MAC): the tables have the same rules and sets, and each
 * sandbox is only elements; what the limit drops is still counted per
 * sandbox. */
#include <netinet/in.h>
#include <linux/netfilter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnftnl/set.h>

#include "nft/nft_int.h"
#include "rules/rules_int.h"
#include "tests/unit/gateway.h"
#include "tests/unit/unit.h"

/* n sandboxes (every fourth with a limit of its own: two limits in all)
 * sandbox k sends from 10.20.<k/250>.<k%250+1> and
 * fd00:203::1:<k>, on port pcs<k>; every third is bound to a MAC too. The
 * last two share an address (told apart by their ports). */
static char *policy_of(size_t n)
{
	struct pc_buf b = {0};

	for (size_t k = 0; k < n; k++) {
		size_t a = k + 1 == n && n > 1 ? k - 1 : k;

		pc_buf_printf(&b,
			      "%ssandbox: sb%zu\n"
			      "match: { source: [10.20.%zu.%zu/32, \"fd00:203::1:%zx/128\"], "
			      "port: pcs%zu",
			      k ? "---\n" : "", k, a / 250, a % 250 + 1, k, k);
		if (k % 3 == 0)
			pc_buf_printf(&b, ", mac: \"02:00:00:00:%02zx:%02zx\"", k / 256, k % 256);
		pc_buf_printf(&b, " }\n");
		if (k % 4 == 1)
			pc_buf_printf(
			    &b, "limits: { new_flows_per_second: 50, new_flows_burst: 100 }\n");
		pc_buf_printf(&b, "allow: []\n");
	}
	return pc_buf_take(&b, NULL);
}

struct shape {
	size_t rules[2], sets[2], elems[2]; /* [0] inet, [1] bridge */
};

static struct shape shape_of(size_t n, struct nft_ruleset **keep)
{
	struct config cfg;
	struct policy *pol;
	char *yaml = policy_of(n);
	struct nft_ruleset_params p;
	struct nft_ruleset *rs = NULL;
	struct pc_err err = {0};
	struct shape s;

	memset(&s, 0, sizeof(s));
	gw_config(&cfg);
	pol = gw_policy(yaml, &cfg);
	p = (struct nft_ruleset_params){&cfg, pol, NULL, 0, NFT_QUEUE_COMPAT};
	if (nft_ruleset_build(&p, &rs, &err) < 0)
		ck_abort_msg("build: %s", err.msg);
	for (size_t i = 0; i < nft_ruleset_count(rs); i++) {
		const struct nft_obj *o = nft_ruleset_at(rs, i);
		int t = o->family == NFPROTO_BRIDGE;

		if (o->kind == NFT_RULE_OBJ)
			s.rules[t]++;
		if (o->kind == NFT_SET_OBJ) {
			struct nftnl_set_elems_iter *it = nftnl_set_elems_iter_create(o->u.set);

			s.sets[t]++;
			while (it && nftnl_set_elems_iter_next(it))
				s.elems[t]++;
			nftnl_set_elems_iter_destroy(it);
		}
	}
	if (keep)
		*keep = rs;
	else
		nft_ruleset_free(rs);
	policy_unref(pol);
	free(yaml);
	return s;
}

START_TEST(bridge_table_size_does_not_grow_with_sandboxes)
{
	struct shape a = shape_of(2, NULL), b = shape_of(20, NULL), c = shape_of(200, NULL);

	ck_assert_uint_eq(a.rules[1], b.rules[1]);
	ck_assert_uint_eq(a.rules[1], c.rules[1]);
	ck_assert_uint_eq(a.sets[1], b.sets[1]);
	ck_assert_uint_eq(a.sets[1], c.sets[1]);
	/* the sandboxes are there, as elements */
	ck_assert_uint_gt(c.elems[1], b.elems[1]);
	ck_assert_uint_gt(b.elems[1], a.elems[1]);
}
END_TEST

static char *set_text_of(const struct nft_ruleset *rs, const char *name)
{
	for (size_t i = 0; i < nft_ruleset_count(rs); i++) {
		const struct nft_obj *o = nft_ruleset_at(rs, i);
		struct pc_buf b = {0};

		if (o->kind != NFT_SET_OBJ || o->family != NFPROTO_BRIDGE ||
		    strcmp(nftnl_set_get_str(o->u.set, NFTNL_SET_NAME), name) != 0)
			continue;
		ck_assert_int_eq(nft_set_text(o->u.set, &b), 0);
		return pc_buf_take(&b, NULL);
	}
	ck_abort_msg("no set %s", name);
	return NULL;
}

START_TEST(inet_table_size_does_not_grow_with_sandboxes)
{
	struct shape a = shape_of(2, NULL), b = shape_of(20, NULL), c = shape_of(200, NULL);

	/* one group of limit rules per distinct limit, not per sandbox */
	ck_assert_uint_eq(a.rules[0], b.rules[0]);
	ck_assert_uint_eq(a.rules[0], c.rules[0]);
	ck_assert_uint_eq(a.sets[0], b.sets[0]);
	ck_assert_uint_eq(a.sets[0], c.sets[0]);
	ck_assert_uint_gt(c.elems[0], b.elems[0]);
	ck_assert_uint_gt(b.elems[0], a.elems[0]);
}
END_TEST

/* Every piece of limsb4/6 counts for the sandbox nft_prefix_owner names
 * for its first address, the one whose source holds it: the shared
 * 10.20.0.2 is sb1's (the first of the two), the others each their own. */
START_TEST(limit_drops_count_for_the_source_sandbox)
{
	struct config cfg;
	char *yaml = policy_of(3);
	struct policy *pol;
	struct pc_addr a;

	gw_config(&cfg);
	pol = gw_policy(yaml, &cfg);
	ck_assert_int_eq(pc_addr_parse("10.20.0.1", &a), 0);
	ck_assert_int_eq(nft_prefix_owner(pol, &a), 0);
	ck_assert_int_eq(pc_addr_parse("10.20.0.2", &a), 0);
	ck_assert_int_eq(nft_prefix_owner(pol, &a), 1);
	ck_assert_int_eq(pc_addr_parse("fd00:203::1:2", &a), 0);
	ck_assert_int_eq(nft_prefix_owner(pol, &a), 2);
	ck_assert_int_eq(pc_addr_parse("10.9.9.9", &a), 0);
	ck_assert_int_eq(nft_prefix_owner(pol, &a), -1);
	policy_unref(pol);
	free(yaml);
}
END_TEST

START_TEST(bindings_are_elements)
{
	struct nft_ruleset *rs = NULL;
	char *t;

	shape_of(3, &rs);
	/* each port with its address: "pcs1" . 10.20.0.2-10.20.0.2 */
	t = set_text_of(rs, "p_pair4");
	ck_assert_ptr_nonnull(strstr(t, "flags 0x84 "));
	ck_assert_ptr_nonnull(strstr(t, "elem 70637331000000000000000000000000"
					"0a140002-70637331000000000000000000000000"
					"0a140002 flags 0x0\n"));
	free(t);
	/* sb1 and sb2 share 10.20.0.2: it comes from neither port */
	t = set_text_of(rs, "p_dup4");
	ck_assert_str_eq(t, "set bridge portcullis p_dup4 flags 0x4 keytype 7 keylen 4\n"
			    "  elem 0a140002 flags 0x0\n"
			    "  elem 0a140003 flags 0x1\n");
	free(t);
	/* sb0's MAC with its IPv6 address; and its ARP sender hardware address */
	t = set_text_of(rs, "m_pair6");
	ck_assert_ptr_nonnull(strstr(t, "elem 020000000000"
					"0000"
					"fd000203000000000000000000010000-"));
	free(t);
	t = set_text_of(rs, "m_sha");
	ck_assert_ptr_nonnull(strstr(t, "elem 0200000000000000"
					"0200000000000000 flags 0x0\n"));
	free(t);
	nft_ruleset_free(rs);
}
END_TEST

PC_UNIT_SUITE("nft_scale", "shape", 60, bridge_table_size_does_not_grow_with_sandboxes,
	      inet_table_size_does_not_grow_with_sandboxes,
	      limit_drops_count_for_the_source_sandbox, bindings_are_elements)
