/* dnsguard unit tests for DNS rebinding: no answer teaches a special-purpose
 * address (every entry of common/special.c, at both ends, with the
 * addresses just outside learned), an IPv4-mapped or NAT64 address, the
 * sandbox bridge's subnet or the gateway's addresses, unless a cidr entry
 * of the sandbox covers it or the configuration declares its range
 * routable; the answer is still released and says what was not learned. */
#include "dnsguard/dnsguard_int.h"
#include "rules/rules_int.h"
#include "tests/unit/dnsmsg.h"
#include "tests/unit/allow.h"
#include "tests/unit/unit.h"

#include <ldns/ldns.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define T0 1000000u /* an arbitrary monotonic start, ms */

static struct config cfg;
static struct dnsguard *g;
static uint16_t next_id;

static struct policy_portrange p80[] = {{80, 80}};
static struct policy_portrange p8080[] = {{8080, 8080}};
static struct policy_allow allows[] = {
    UA_NAME(WILDCARD, "example.org", p80, TCP, "agent-1/allow[0]"),
    /* agent-2 only: opens the metadata address explicitly, on another port */
    UA_CIDR(p8080, TCP, "agent-2/allow[1]", {{AF_INET, {169, 254, 169, 254}}, 32}),
};
static struct policy_sandbox sb1 = UA_SANDBOX("agent-1", allows, 1, REFUSED);
static struct policy_sandbox sb2 = UA_SANDBOX("agent-2", allows, 2, REFUSED);

static struct dns_flow qf;

static void guard_new(void)
{
	struct pc_err err;

	ck_assert_int_eq(dnsguard_new(&cfg, &g, &err), 0);
}

static void setup(void)
{
	config_defaults(&cfg); /* the shipped default: nothing declared routable */
	cfg.dns.resolvers[0] = dm_addr("198.51.100.53");
	cfg.dns.n_resolvers = 1;
	qf = dm_flow("10.203.0.10", 40000, "198.51.100.53", 53, IPPROTO_UDP);
	next_id = 1;
	guard_new();
}

static void teardown(void)
{
	dnsguard_free(g);
	g = NULL;
}

static void routable(const char *const *nets, size_t n)
{
	dnsguard_free(g);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(pc_prefix_parse(nets[i], &cfg.dns.routable[i]), 0);
	cfg.dns.n_routable = n;
	guard_new();
}

/* Resolve name (A or AAAA by the family of the first address) to the
 * addresses addrs; the answer must be released. */
static void resolve(const struct policy_sandbox *sb, const char *name, const struct pc_addr *addrs,
		    size_t n, struct dnsguard_answer_res *ar)
{
	ldns_rr_type t = addrs[0].family == AF_INET ? LDNS_RR_TYPE_A : LDNS_RR_TYPE_AAAA;
	struct dns_flow af = dm_reversed(&qf);
	struct dnsguard_query_res qr;
	uint16_t id = next_id++;
	uint8_t m[4096];
	size_t len;
	ldns_pkt *p;

	len = dm_wire(dm_query(id, name, t, LDNS_RR_CLASS_IN), m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, sb, &qf, m, len, T0, &qr), 0);
	ck_assert_int_eq(qr.verdict, DNSG_ALLOW);
	p = dm_query(id, name, t, LDNS_RR_CLASS_IN);
	ldns_pkt_set_qr(p, true);
	ldns_pkt_set_ra(p, true);
	for (size_t i = 0; i < n; i++) {
		char rr[256], as[PC_ADDRSTRLEN];

		snprintf(rr, sizeof(rr), "%s 300 IN %s %s", name,
			 addrs[i].family == AF_INET ? "A" : "AAAA",
			 pc_addr_str(&addrs[i], as, sizeof(as)));
		dm_push(p, LDNS_SECTION_ANSWER, rr);
	}
	len = dm_wire(p, m, sizeof(m));
	ck_assert_int_eq(dnsguard_answer(g, sb, &af, m, len, T0, ar), 0);
	ck_assert_int_eq(ar->verdict, DNSG_ALLOW); /* released, whatever it teaches */
}

static bool reachable(const struct policy_sandbox *sb, const struct pc_addr *a, uint16_t port,
		      struct dnsguard_flow_res *fr)
{
	ck_assert_int_eq(dnsguard_flow(g, sb, a, IPPROTO_TCP, port, false, T0 + 1, fr), 0);
	return fr->allowed;
}

/* a with every bit from len on set (last) or cleared (first), then moved
 * by delta (-1, 0, +1) as one big number; false when it wraps. */
static bool edge(const struct pc_prefix *p, bool last, int delta, struct pc_addr *out)
{
	size_t bytes = p->addr.family == AF_INET ? 4 : 16;
	struct pc_addr a = p->addr;

	for (size_t b = p->len; b < bytes * 8; b++)
		if (last)
			a.a[b / 8] |= (uint8_t)(0x80u >> (b % 8));
	for (size_t i = bytes; delta && i-- > 0;) {
		uint8_t before = a.a[i];

		a.a[i] = (uint8_t)(a.a[i] + delta);
		if (!(delta > 0 ? a.a[i] < before : a.a[i] > before))
			break; /* no carry or borrow */
		if (i == 0)
			return false;
	}
	*out = a;
	return true;
}

START_TEST(table_matches_its_text)
{
	ck_assert_uint_gt(pc_special_count(), 50);
	ck_assert_ptr_null(pc_special_at(pc_special_count()));
	for (size_t i = 0; i < pc_special_count(); i++) {
		const struct pc_special *e = pc_special_at(i);
		struct pc_prefix p;

		ck_assert_msg(pc_prefix_parse(e->text, &p) == 0, "%s parses", e->text);
		ck_assert_msg(p.len == e->prefix.len && pc_addr_eq(&p.addr, &e->prefix.addr),
			      "entry %zu is %s", i, e->text);
		ck_assert_msg(strncmp(e->rfc, "RFC ", 4) == 0 && e->name[0], "%s cites an RFC",
			      e->text);
	}
}
END_TEST

/* The registries' headline entries, by address, as the issue lists them. */
START_TEST(known_entries_found)
{
	static const struct {
		const char *addr, *rfc;
	} want[] = {
	    {"0.1.2.3", "RFC 791"},
	    {"10.255.255.255", "RFC 1918"},
	    {"100.127.255.255", "RFC 6598"},
	    {"127.0.0.1", "RFC 1122"},
	    {"169.254.169.254", "RFC 3927"},
	    {"172.31.0.1", "RFC 1918"},
	    {"192.0.0.9", "RFC 7723"},
	    {"192.0.0.100", "RFC 6890"},
	    {"192.0.2.1", "RFC 5737"},
	    {"192.88.99.1", "RFC 7526"},
	    {"192.168.1.1", "RFC 1918"},
	    {"198.19.255.255", "RFC 2544"},
	    {"198.51.100.7", "RFC 5737"},
	    {"203.0.113.7", "RFC 5737"},
	    {"224.0.0.251", "RFC 5771"},
	    {"239.255.255.255", "RFC 5771"},
	    {"240.0.0.1", "RFC 1112"},
	    {"255.255.255.255", "RFC 919"},
	    {"::", "RFC 4291"},
	    {"::1", "RFC 4291"},
	    {"::ffff:8.8.8.8", "RFC 4291"},
	    {"64:ff9b::808:808", "RFC 6052"},
	    {"64:ff9b:1::1", "RFC 8215"},
	    {"100::1", "RFC 6666"},
	    {"2001::1", "RFC 4380"},
	    {"2001:1::1", "RFC 7723"},
	    {"2001:2::1", "RFC 5180"},
	    {"2001:1ff::1", "RFC 2928"},
	    {"2001:db8::1", "RFC 3849"},
	    {"2002:a9fe:a9fe::1", "RFC 3056"},
	    {"fc00::1", "RFC 4193"},
	    {"fd00:ec2::254", "RFC 4193"},
	    {"fe80::1", "RFC 4291"},
	    {"ff02::1", "RFC 4291"},
	    {"3fff:fff::1", "RFC 9637"},
	    {"5f00::1", "RFC 9602"},
	};
	static const char *const ordinary[] = {"8.8.8.8",	  "11.0.0.1",	 "100.63.255.255",
					       "100.128.0.0",	  "172.32.0.0",	 "192.0.1.255",
					       "223.255.255.255", "2001:200::1", "2a00:1450::1",
					       "2003::1",	  "fbff::1"};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct pc_addr a = dm_addr(want[i].addr);
		const struct pc_special *e = pc_special_find(&a);

		ck_assert_msg(e && strcmp(e->rfc, want[i].rfc) == 0, "%s: %s, expected %s",
			      want[i].addr, e ? e->rfc : "not special", want[i].rfc);
	}
	for (size_t i = 0; i < sizeof(ordinary) / sizeof(ordinary[0]); i++) {
		struct pc_addr a = dm_addr(ordinary[i]);

		ck_assert_msg(!pc_special_find(&a), "%s is ordinary", ordinary[i]);
	}
}
END_TEST

/* Every entry's first and last address is not learned, with the most
 * specific entry's RFC in the reason, and the connection is refused; the
 * address just outside, when it is ordinary, is learned and reachable. */
START_TEST(every_entry_boundaries)
{
	size_t checked = 0, outside = 0;

	for (size_t i = 0; i < pc_special_count(); i++) {
		const struct pc_special *e = pc_special_at(i);

		for (int last = 0; last <= 1; last++) {
			struct dnsguard_answer_res ar;
			struct dnsguard_flow_res fr;
			struct pc_addr in, out;
			const struct pc_special *why;
			char name[64], as[PC_ADDRSTRLEN];

			ck_assert(edge(&e->prefix, last, 0, &in));
			why = pc_special_find(&in);
			ck_assert_ptr_nonnull(why);
			snprintf(name, sizeof(name), "e%zu-%d.example.org.", i, last);
			resolve(&sb1, name, &in, 1, &ar);
			pc_addr_str(&in, as, sizeof(as));
			ck_assert_msg(ar.n_learned == 0 && ar.n_unlearned == 1, "%s (%s) learned",
				      as, e->text);
			ck_assert(pc_addr_eq(&ar.unlearned[0].addr, &in));
			ck_assert_msg(strstr(ar.unlearned[0].why, why->rfc) &&
					  strstr(ar.unlearned[0].why, "special-purpose"),
				      "%s: %s", as, ar.unlearned[0].why);
			ck_assert(!reachable(&sb1, &in, 80, &fr));
			ck_assert_str_eq(fr.reason, "no allowed name resolved to this address");
			checked++;

			if (!edge(&e->prefix, last, last ? 1 : -1, &out) || pc_special_find(&out))
				continue;
			snprintf(name, sizeof(name), "o%zu-%d.example.org.", i, last);
			resolve(&sb1, name, &out, 1, &ar);
			pc_addr_str(&out, as, sizeof(as));
			ck_assert_msg(ar.n_learned == 1 && ar.n_unlearned == 0,
				      "%s, just outside %s, not learned", as, e->text);
			ck_assert_msg(reachable(&sb1, &out, 80, &fr), "%s reachable", as);
			outside++;
		}
	}
	ck_assert_uint_eq(checked, 2 * pc_special_count());
	ck_assert_uint_gt(outside, 40);
}
END_TEST

START_TEST(mapped_and_nat64)
{
	static const char *const nets[] = {"::ffff:0:0/96", "64:ff9b::/96"};
	struct dnsguard_answer_res ar;
	struct dnsguard_flow_res fr;
	struct pc_addr a;

	/* by default the whole of both blocks is special */
	a = dm_addr("::ffff:8.8.8.8");
	resolve(&sb1, "m1.example.org.", &a, 1, &ar);
	ck_assert_uint_eq(ar.n_learned, 0);
	ck_assert_str_eq(ar.unlearned[0].why, "IPv4-mapped (RFC 4291), special-purpose");
	a = dm_addr("::ffff:169.254.169.254");
	resolve(&sb1, "m2.example.org.", &a, 1, &ar);
	ck_assert_uint_eq(ar.n_learned, 0);

	/* declared routable (a NAT64 network), the embedded IPv4 address is
	 * still judged */
	routable(nets, 2);
	a = dm_addr("::ffff:8.8.8.8");
	resolve(&sb1, "m3.example.org.", &a, 1, &ar);
	ck_assert_uint_eq(ar.n_learned, 1);
	a = dm_addr("::ffff:169.254.169.254");
	resolve(&sb1, "m4.example.org.", &a, 1, &ar);
	ck_assert_uint_eq(ar.n_learned, 0);
	ck_assert_str_eq(ar.unlearned[0].why,
			 "IPv4-mapped 169.254.169.254: link-local (RFC 3927), special-purpose");
	ck_assert(!reachable(&sb1, &a, 80, &fr));
	a = dm_addr("64:ff9b::a9fe:a9fe");
	resolve(&sb1, "m5.example.org.", &a, 1, &ar);
	ck_assert_uint_eq(ar.n_learned, 0);
	ck_assert_str_eq(ar.unlearned[0].why,
			 "NAT64 169.254.169.254: link-local (RFC 3927), special-purpose");
	a = dm_addr("64:ff9b::a00:1");
	resolve(&sb1, "m6.example.org.", &a, 1, &ar);
	ck_assert_uint_eq(ar.n_learned, 0);
	ck_assert_str_eq(ar.unlearned[0].why,
			 "NAT64 10.0.0.1: private-use (RFC 1918), special-purpose");
	a = dm_addr("64:ff9b::808:808");
	resolve(&sb1, "m7.example.org.", &a, 1, &ar);
	ck_assert_uint_eq(ar.n_learned, 1);
	ck_assert(reachable(&sb1, &a, 80, &fr));
}
END_TEST

/* agent-2's cidr entry names 169.254.169.254 (on 8080): an allowed name
 * resolving there is learned for it, and usable on the name's port;
 * agent-1 has no such entry; the next address is not covered. */
START_TEST(cidr_entry_covers_explicitly)
{
	struct dnsguard_answer_res ar;
	struct dnsguard_flow_res fr;
	struct pc_addr a[2] = {dm_addr("169.254.169.254"), dm_addr("169.254.169.253")};

	resolve(&sb2, "meta.example.org.", a, 2, &ar);
	ck_assert_uint_eq(ar.n_learned, 1);
	ck_assert(pc_addr_eq(&ar.learned[0], &a[0]));
	ck_assert_uint_eq(ar.n_unlearned, 1);
	ck_assert(pc_addr_eq(&ar.unlearned[0].addr, &a[1]));
	ck_assert(reachable(&sb2, &a[0], 80, &fr));
	ck_assert_str_eq(fr.name, "meta.example.org");
	ck_assert(!reachable(&sb2, &a[1], 80, &fr));

	resolve(&sb1, "meta.example.org.", a, 1, &ar);
	ck_assert_uint_eq(ar.n_learned, 0);
	ck_assert_str_eq(ar.reason, "answer released, its special-purpose addresses not learned");
	ck_assert(!reachable(&sb1, &a[0], 80, &fr));
}
END_TEST

START_TEST(routable_ranges_learned)
{
	static const char *const nets[] = {"203.0.113.0/24", "2001:db8:10::/48"};
	struct dnsguard_answer_res ar;
	struct dnsguard_flow_res fr;
	struct pc_addr a[4] = {dm_addr("203.0.113.5"), dm_addr("198.51.100.5"),
			       dm_addr("2001:db8:10::10"), dm_addr("2001:db8:11::10")};

	routable(nets, 2);
	resolve(&sb1, "r4.example.org.", a, 2, &ar);
	ck_assert_uint_eq(ar.n_learned, 1);
	ck_assert(pc_addr_eq(&ar.learned[0], &a[0]));
	ck_assert_uint_eq(ar.n_unlearned, 1);
	ck_assert_str_eq(ar.unlearned[0].why,
			 "documentation, TEST-NET-2 (RFC 5737), special-purpose");
	ck_assert_str_eq(ar.reason,
			 "answer released, addresses learned but not its special-purpose ones");
	ck_assert(reachable(&sb1, &a[0], 80, &fr));
	ck_assert(!reachable(&sb1, &a[1], 80, &fr));
	resolve(&sb1, "r6.example.org.", a + 2, 2, &ar);
	ck_assert_uint_eq(ar.n_learned, 1);
	ck_assert(pc_addr_eq(&ar.learned[0], &a[2]));
	ck_assert_uint_eq(ar.n_unlearned, 1);
}
END_TEST

/* The gateway's own addresses and the bridge's subnet are never learned,
 * even in a range declared routable; a cidr entry still covers them; the
 * set is replaced whole. */
START_TEST(local_addresses_never_learned)
{
	static const char *const nets[] = {"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"};
	struct dnsguard_local l[2] = {{{dm_addr("192.0.2.0"), 24}, "the sandbox bridge's subnet"},
				      {{dm_addr("203.0.113.1"), 32}, "an address of the gateway"}};
	struct dnsguard_answer_res ar;
	struct pc_addr a[3] = {dm_addr("192.0.2.77"), dm_addr("203.0.113.1"),
			       dm_addr("203.0.113.2")};
	struct pc_err err;

	routable(nets, 3);
	ck_assert_int_eq(dnsguard_local_set(g, l, 2, &err), 0);
	resolve(&sb1, "l1.example.org.", a, 3, &ar);
	ck_assert_uint_eq(ar.n_learned, 1);
	ck_assert(pc_addr_eq(&ar.learned[0], &a[2]));
	ck_assert_uint_eq(ar.n_unlearned, 2);
	ck_assert_str_eq(ar.unlearned[0].why, "the sandbox bridge's subnet");
	ck_assert_str_eq(ar.unlearned[1].why, "an address of the gateway");

	/* not routable: both reasons */
	l[0].prefix = (struct pc_prefix){dm_addr("10.203.0.0"), 24};
	ck_assert_int_eq(dnsguard_local_set(g, l, 1, &err), 0);
	a[0] = dm_addr("10.203.0.12");
	resolve(&sb1, "l2.example.org.", a, 2, &ar);
	ck_assert_uint_eq(ar.n_learned, 1); /* 203.0.113.1 is no longer the gateway's */
	ck_assert_uint_eq(ar.n_unlearned, 1);
	ck_assert_str_eq(
	    ar.unlearned[0].why,
	    "the sandbox bridge's subnet, and private-use (RFC 1918), special-purpose");

	ck_assert_int_eq(dnsguard_local_set(g, NULL, 0, &err), 0);
	ck_assert_int_eq(dnsguard_local_set(NULL, l, 1, &err), PC_EINVAL);
	ck_assert_int_eq(dnsguard_local_set(g, NULL, 1, &err), PC_EINVAL);
}
END_TEST

/* More special addresses than the record lists: all counted, the first
 * DNSG_UNLEARNED_SHOWN listed, the ordinary ones learned. */
START_TEST(many_unlearned_counted)
{
	struct pc_addr a[DNSG_LEARN_MAX];
	struct dnsguard_answer_res ar;

	for (size_t i = 0; i < DNSG_LEARN_MAX; i++) {
		a[i].family = AF_INET;
		memcpy(a[i].a, (uint8_t[]){i % 2 ? 10 : 11, 0, 0, (uint8_t)i}, 4);
	}
	resolve(&sb1, "many.example.org.", a, DNSG_LEARN_MAX, &ar);
	ck_assert_uint_eq(ar.n_learned, DNSG_LEARN_MAX / 2);
	ck_assert_uint_eq(ar.n_unlearned, DNSG_LEARN_MAX / 2);
	for (size_t i = 0; i < DNSG_UNLEARNED_SHOWN; i++)
		ck_assert(pc_addr_eq(&ar.unlearned[i].addr, &a[2 * i + 1]));
	for (size_t i = 0; i < ar.n_learned; i++)
		ck_assert(pc_addr_eq(&ar.learned[i], &a[2 * i]));
}
END_TEST

static Suite *special_suite(void)
{
	Suite *s = suite_create("dnsguard_special");
	TCase *t = tcase_create("special");

	tcase_add_checked_fixture(t, setup, teardown);
	PC_UNIT_TESTS(t, table_matches_its_text, known_entries_found, every_entry_boundaries,
		      mapped_and_nat64, cidr_entry_covers_explicitly, routable_ranges_learned,
		      local_addresses_never_learned, many_unlearned_counted);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(special_suite)
