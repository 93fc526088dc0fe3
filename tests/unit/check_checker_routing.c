/* The routing half of paths-guarded (checker/routing.c) on synthetic rule
 * dumps and route tables: what must hold when the ruleset is gone (engine
 * killed, `nft flush ruleset`). Each hole of issue 31 (a unicast route in
 * table local, a blackhole default with a tos or a source prefix, our
 * found-all rule narrowed) is found; the kernel's own local routes, an
 * AnyIP local route and extra drops are not. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>

#include "checker/checker_int.h"
#include "nft/nft.h"
#include "tests/unit/unit.h"

#define BR "pcbr0"

static struct ck_state st;
static uint8_t dump[16384];
static size_t dump_len;

struct rspec {
	uint8_t fam;
	uint32_t prio, table;
	const char *iif;
	uint32_t mark;
	uint8_t tos;
	bool uid;
	uint32_t uid_lo, uid_hi;
	bool suppress0; /* suppress_prefixlength 0 */
};

static void add_rule(const struct rspec *s)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(dump + dump_len);
	struct fib_rule_hdr *h = mnl_nlmsg_put_extra_header(nlh, sizeof(*h));

	nlh->nlmsg_type = RTM_NEWRULE;
	h->family = s->fam;
	h->action = FR_ACT_TO_TBL;
	h->table = s->table < 256 ? (uint8_t)s->table : RT_TABLE_UNSPEC;
	h->tos = s->tos;
	mnl_attr_put_u32(nlh, FRA_PRIORITY, s->prio);
	mnl_attr_put_u32(nlh, FRA_TABLE, s->table);
	if (s->iif)
		mnl_attr_put_strz(nlh, FRA_IIFNAME, s->iif);
	if (s->mark) {
		mnl_attr_put_u32(nlh, FRA_FWMARK, s->mark);
		mnl_attr_put_u32(nlh, FRA_FWMASK, s->mark);
	}
	if (s->uid) {
		struct fib_rule_uid_range u = {.start = s->uid_lo, .end = s->uid_hi};

		mnl_attr_put(nlh, FRA_UID_RANGE, sizeof(u), &u);
	}
	/* the kernel dumps it on every rule, -1 when not set */
	mnl_attr_put_u32(nlh, FRA_SUPPRESS_PREFIXLEN, s->suppress0 ? 0 : UINT32_MAX);
	dump_len += nlh->nlmsg_len;
	ck_assert_uint_lt(dump_len, sizeof(dump) - 512);
}

static struct ck_route *add_route(uint8_t fam, uint32_t table, uint8_t type, const char *dst,
				  uint8_t len)
{
	struct ck_route *r = ck_grow(&st.routes, &st.n_routes, &st.cap_routes, sizeof(*r));

	ck_assert_ptr_nonnull(r);
	r->family = fam;
	r->table = table;
	r->type = type;
	r->dst_len = len;
	ck_assert_int_eq(inet_pton(fam, dst, r->dst), 1);
	return r;
}

/* Rules in kernel order as the engine leaves them (rule 0 lookup local,
 * our mark rules, our found-all, main, default) and the tables the kernel
 * and the engine fill: local routes of the gateway, our blackholes. Rules
 * at prio 500 (extra) come between rule 0 and ours. */
static void gateway(const struct rspec *extra, size_t n_extra, bool catch_rule)
{
	static const uint32_t marks[NFT_ROUTE_N_MARKS] = NFT_ROUTE_MARKS;
	static const uint8_t fams[2] = {AF_INET, AF_INET6};

	free(st.routes);
	memset(&st, 0, sizeof(st));
	dump_len = 0;
	for (int f = 0; f < 2; f++) {
		uint8_t fam = fams[f];

		add_rule(&(struct rspec){.fam = fam, .prio = 0, .table = RT_TABLE_LOCAL});
		for (size_t i = 0; i < n_extra; i++)
			if (extra[i].fam == fam)
				add_rule(&extra[i]);
		for (int i = 0; i < NFT_ROUTE_N_MARKS; i++)
			add_rule(&(struct rspec){.fam = fam,
						 .prio = NFT_ROUTE_PRIO_MARK + (uint32_t)i,
						 .table = RT_TABLE_MAIN,
						 .iif = BR,
						 .mark = marks[i]});
		if (catch_rule)
			add_rule(&(struct rspec){.fam = fam,
						 .prio = NFT_ROUTE_PRIO_DROP,
						 .table = NFT_ROUTE_TABLE,
						 .iif = BR});
		add_rule(&(struct rspec){.fam = fam, .prio = 32766, .table = RT_TABLE_MAIN});
		add_rule(&(struct rspec){.fam = fam, .prio = 32767, .table = RT_TABLE_DEFAULT});
	}
	add_route(AF_INET, RT_TABLE_LOCAL, RTN_LOCAL, "10.99.0.1", 32);
	add_route(AF_INET, RT_TABLE_LOCAL, RTN_BROADCAST, "10.99.0.255", 32);
	add_route(AF_INET, RT_TABLE_LOCAL, RTN_LOCAL, "127.0.0.0", 8);
	add_route(AF_INET, RT_TABLE_MAIN, RTN_UNICAST, "0.0.0.0", 0)->has_gw = true;
	add_route(AF_INET, NFT_ROUTE_TABLE, RTN_BLACKHOLE, "0.0.0.0", 0);
	add_route(AF_INET6, RT_TABLE_LOCAL, RTN_LOCAL, "::1", 128);
	add_route(AF_INET6, RT_TABLE_LOCAL, RTN_ANYCAST, "fe80::", 64);
	add_route(AF_INET6, RT_TABLE_LOCAL, RTN_MULTICAST, "ff00::", 8);
	add_route(AF_INET6, RT_TABLE_MAIN, RTN_UNICAST, "::", 0)->has_gw = true;
	add_route(AF_INET6, NFT_ROUTE_TABLE, RTN_BLACKHOLE, "::", 0);
}

/* Both families checked; the findings joined, one a line. */
static struct checker_result *run(void)
{
	struct checker_result *res = calloc(1, sizeof(*res));
	struct pc_buf b = {.p = (char *)dump, .len = dump_len};

	ck_assert_ptr_nonnull(res);
	res->status = CHECKER_PROVEN;
	ck_routing_family(&st, BR, AF_INET, &b, res);
	ck_routing_family(&st, BR, AF_INET6, &b, res);
	return res;
}

static bool finds(const struct checker_result *res, const char *what)
{
	for (size_t i = 0; i < res->n_findings; i++)
		if (strstr(res->findings[i].text, what))
			return true;
	return false;
}

static void show(const struct checker_result *res)
{
	for (size_t i = 0; i < res->n_findings; i++)
		fprintf(stderr, "  finding: %s\n", res->findings[i].text);
}

#define EXPECT_PROVEN(res)                                                                         \
	do {                                                                                       \
		show(res);                                                                         \
		ck_assert_uint_eq((res)->n_findings, 0);                                           \
		ck_assert_int_eq((res)->status, CHECKER_PROVEN);                                   \
	} while (0)
#define EXPECT_FINDING(res, text)                                                                  \
	do {                                                                                       \
		show(res);                                                                         \
		ck_assert_int_eq((res)->status, CHECKER_EXIT_FOUND);                               \
		ck_assert_msg(finds((res), (text)), "no finding names \"%s\"", (text));            \
	} while (0)

START_TEST(the_engines_rules_and_the_kernels_local_table_prove)
{
	struct checker_result *res;

	gateway(NULL, 0, true);
	res = run();
	EXPECT_PROVEN(res);
	checker_result_free(res);
}
END_TEST

/* finding 4: rule 0 reaches table local for every packet; a unicast
 * route put there routes bridge traffic before our rules are read */
START_TEST(a_unicast_route_in_table_local_is_a_way_out)
{
	struct checker_result *res;
	struct ck_route *r;

	gateway(NULL, 0, true);
	r = add_route(AF_INET, RT_TABLE_LOCAL, RTN_UNICAST, "203.0.113.0", 24);
	r->has_gw = true;
	inet_pton(AF_INET, "10.98.0.2", r->gw);
	res = run();
	EXPECT_FINDING(res, "IPv4 routing rule 0: from all fwmark 0x0/0x0 lookup 255 comes before "
			    "the blackhole rule of bridge pcbr0 and reaches table 255, which "
			    "holds a unicast route to 203.0.113.0/24 via 10.98.0.2");
	checker_result_free(res);

	gateway(NULL, 0, true);
	add_route(AF_INET6, RT_TABLE_LOCAL, RTN_UNICAST, "::", 0);
	res = run();
	EXPECT_FINDING(res, "IPv6 routing rule 0: from all fwmark 0x0/0x0 lookup 255");
	checker_result_free(res);
}
END_TEST

/* IPv6 forwards a non-multicast destination a "multicast" route covers */
START_TEST(a_multicast_route_to_unicast_space_in_table_local_is_a_way_out)
{
	struct checker_result *res;

	gateway(NULL, 0, true);
	add_route(AF_INET6, RT_TABLE_LOCAL, RTN_MULTICAST, "2001:db8::", 32);
	res = run();
	EXPECT_FINDING(res, "holds a multicast route to 2001:db8::/32");
	checker_result_free(res);
}
END_TEST

/* AnyIP (a transparent proxy's `ip route add local 198.51.100.0/24 dev lo
 * table local`): delivered to the gateway, the input chain's business */
START_TEST(local_routes_in_table_local_are_not_a_way_out)
{
	struct checker_result *res;

	gateway(NULL, 0, true);
	add_route(AF_INET, RT_TABLE_LOCAL, RTN_LOCAL, "198.51.100.0", 24);
	add_route(AF_INET, RT_TABLE_LOCAL, RTN_THROW, "192.0.2.0", 24);
	add_route(AF_INET6, RT_TABLE_LOCAL, RTN_LOCAL, "2001:db8:1::", 64);
	add_route(AF_INET6, RT_TABLE_LOCAL, RTN_BLACKHOLE, "2001:db8:2::", 64);
	res = run();
	EXPECT_PROVEN(res);
	checker_result_free(res);
}
END_TEST

/* finding 5: `blackhole default tos 0x10` ends only tos 0x10 lookups */
START_TEST(a_blackhole_default_with_a_tos_does_not_count)
{
	struct checker_result *res;

	gateway(NULL, 0, true);
	for (size_t i = 0; i < st.n_routes; i++)
		if (st.routes[i].table == NFT_ROUTE_TABLE && st.routes[i].family == AF_INET)
			st.routes[i].tos = 0x10;
	res = run();
	EXPECT_FINDING(res, "IPv4 blackhole table 28771 has no unconditional blackhole default "
			    "route: its blackhole route to 0.0.0.0/0 tos 0x10 matches only part");
	checker_result_free(res);

	/* beside an unconditional one it is one more drop */
	gateway(NULL, 0, true);
	add_route(AF_INET, NFT_ROUTE_TABLE, RTN_BLACKHOLE, "0.0.0.0", 0)->tos = 0x10;
	res = run();
	EXPECT_PROVEN(res);
	checker_result_free(res);
}
END_TEST

/* finding 6: `blackhole ::/0 from 2001:db8::/32` ends only lookups from
 * that prefix */
START_TEST(an_ipv6_blackhole_default_with_a_source_does_not_count)
{
	struct checker_result *res;

	gateway(NULL, 0, true);
	for (size_t i = 0; i < st.n_routes; i++)
		if (st.routes[i].table == NFT_ROUTE_TABLE && st.routes[i].family == AF_INET6) {
			st.routes[i].src_len = 32;
			inet_pton(AF_INET6, "2001:db8::", st.routes[i].src);
		}
	res = run();
	EXPECT_FINDING(res, "IPv6 blackhole table 28771 has no unconditional blackhole default "
			    "route: its blackhole route to ::/0 from 2001:db8::/32 matches only");
	checker_result_free(res);
}
END_TEST

/* our found-all rule with a selector leaves the rest to main */
START_TEST(a_found_all_rule_with_a_selector_is_not_ours)
{
	struct checker_result *res;
	struct rspec tos = {.fam = AF_INET,
			    .prio = NFT_ROUTE_PRIO_DROP,
			    .table = NFT_ROUTE_TABLE,
			    .iif = BR,
			    .tos = 0x10};
	struct rspec sup = {.fam = AF_INET6,
			    .prio = NFT_ROUTE_PRIO_DROP,
			    .table = NFT_ROUTE_TABLE,
			    .iif = BR,
			    .suppress0 = true};
	struct rspec uid = {.fam = AF_INET,
			    .prio = NFT_ROUTE_PRIO_DROP,
			    .table = NFT_ROUTE_TABLE,
			    .iif = BR,
			    .uid = true,
			    .uid_lo = 0,
			    .uid_hi = 0};

	gateway((struct rspec[]){tos, sup}, 2, false);
	res = run();
	EXPECT_FINDING(res, "IPv4 routing rule 1010 (iif pcbr0 lookup 28771) is missing");
	EXPECT_FINDING(res, "IPv6 routing rule 1010 (iif pcbr0 lookup 28771) is missing");
	checker_result_free(res);

	gateway(&uid, 1, false);
	res = run();
	EXPECT_FINDING(res, "IPv4 routing rule 1010 (iif pcbr0 lookup 28771) is missing");
	checker_result_free(res);
}
END_TEST

/* a forwarded packet's lookup carries uid 0: a range without it never
 * matches bridge traffic, one with it does whatever else it selects */
START_TEST(a_uid_range_is_honoured)
{
	struct checker_result *res;
	struct rspec users = {.fam = AF_INET,
			      .prio = 500,
			      .table = RT_TABLE_MAIN,
			      .uid = true,
			      .uid_lo = 1000,
			      .uid_hi = 1999};
	struct rspec root = users;

	gateway(&users, 1, true);
	res = run();
	EXPECT_PROVEN(res);
	checker_result_free(res);

	root.uid_lo = 0;
	root.tos = 0x10;
	gateway(&root, 1, true);
	res = run();
	EXPECT_FINDING(res, "IPv4 routing rule 500: from all fwmark 0x0/0x0 tos 0x10 uidrange "
			    "0-1999 lookup 254 comes before the blackhole rule");
	checker_result_free(res);
}
END_TEST

/* another table may be given a route at any time without a rule event:
 * reaching it is a way out whatever it holds now */
START_TEST(a_rule_to_another_table_is_a_way_out_even_empty)
{
	struct checker_result *res;
	struct rspec r = {.fam = AF_INET, .prio = 600, .table = 100};

	gateway(&r, 1, true);
	res = run();
	EXPECT_FINDING(res, "IPv4 routing rule 600: from all fwmark 0x0/0x0 lookup 100 comes "
			    "before the blackhole rule of bridge pcbr0 and may route");
	checker_result_free(res);
}
END_TEST

PC_UNIT_SUITE("checker_routing", "routing", 0, the_engines_rules_and_the_kernels_local_table_prove,
	      a_unicast_route_in_table_local_is_a_way_out,
	      a_multicast_route_to_unicast_space_in_table_local_is_a_way_out,
	      local_routes_in_table_local_are_not_a_way_out,
	      a_blackhole_default_with_a_tos_does_not_count,
	      an_ipv6_blackhole_default_with_a_source_does_not_count,
	      a_found_all_rule_with_a_selector_is_not_ours, a_uid_range_is_honoured,
	      a_rule_to_another_table_is_a_way_out_even_empty)
