/* The spec's model (spec/) on `dns.routable` (docs/spec.md, "Words"):
 * an answer's address inside a declared routable range is learned, as the
 * DNS guard learns it (docs/dnsguard.md), so a flow to it is held, not
 * refused; outside one, or an IPv4 address mapped into IPv6 whose IPv4
 * address is special, it stays special. Before the model knew the key,
 * `portcullis log audit` read every lab log (whose simulated internet is
 * the documentation ranges, declared routable) as a lie of the engine. */
#include "rules/rules_int.h"
#include "spec/spec.h"
#include "tests/unit/unit.h"

#include <netinet/in.h>
#include <string.h>

static const char policy_yaml[] = "sandbox: agent-1\n"
				  "match: { source: [10.203.0.11/32] }\n"
				  "allow:\n"
				  "  - host: api.test\n"
				  "    ports: [443]\n";

struct fx {
	struct config cfg;
	struct policy *pol;
	struct spec_world w;
};

static void fx_init(struct fx *f, const char *routable)
{
	struct pc_err err = {0};

	memset(f, 0, sizeof(*f));
	config_defaults(&f->cfg);
	ck_assert_int_eq(pc_addr_parse("198.51.100.53", &f->cfg.dns.resolvers[0]), 0);
	f->cfg.dns.n_resolvers = 1;
	if (routable) {
		ck_assert_int_eq(pc_prefix_parse(routable, &f->cfg.dns.routable[0]), 0);
		f->cfg.dns.n_routable = 1;
	}
	ck_assert_int_eq(policy_load_buffer("spec.yaml", policy_yaml, strlen(policy_yaml), &f->cfg,
					    &f->pol, &err),
			 0);
	spec_world_init(&f->w, &f->cfg, f->pol);
	f->w.now_ms = 1000000;
}

static void fx_free(struct fx *f)
{
	spec_world_free(&f->w);
	policy_unref(f->pol);
}

/* agent-1 asks for api.test (qtype), the resolver answers addr; then a SYN
 * to addr:443: the row that decides it. */
static const char *learn_then_syn(struct fx *f, uint16_t qtype, const char *addr)
{
	struct spec_pkt q = {0}, a = {0}, s = {0};
	struct spec_verdict v = {0};

	q.dir = SPEC_OUT;
	q.port_known = true;
	pc_addr_parse("10.203.0.11", &q.src);
	q.from.addr = q.src;
	pc_addr_parse("198.51.100.53", &q.dst);
	q.proto = IPPROTO_UDP;
	q.sport = 40000;
	q.dport = 53;
	q.ct = SPEC_CT_NEW;
	q.pl = SPEC_PL_DNS_QUERY;
	q.qtype = qtype;
	strcpy(q.qname, "api.test");
	spec_judge(&f->w, &q, &v);
	ck_assert_str_eq(v.row, "S8");

	a.dir = SPEC_IN;
	a.proto = IPPROTO_UDP;
	a.src = q.dst;
	a.sport = 53;
	a.dst = q.src;
	a.dport = q.sport;
	a.ct = SPEC_CT_EST;
	a.pl = SPEC_PL_DNS_ANSWER;
	a.qtype = qtype;
	strcpy(a.qname, "api.test");
	ck_assert_int_eq(pc_addr_parse(addr, &a.answer[0]), 0);
	a.n_answer = 1;
	a.answer_ttl = 300;
	spec_judge(&f->w, &a, &v);
	ck_assert_str_eq(v.row, "S40");

	s.dir = SPEC_OUT;
	s.port_known = true;
	s.src = q.src;
	s.from.addr = q.src;
	ck_assert_int_eq(pc_addr_parse(addr, &s.dst), 0);
	s.proto = IPPROTO_TCP;
	s.sport = 40001;
	s.dport = 443;
	s.tcp_flags = 0x02;
	s.seq = 1;
	s.ct = SPEC_CT_NEW;
	memset(&v, 0, sizeof(v));
	spec_judge(&f->w, &s, &v);
	return v.row;
}

START_TEST(documentation_range_is_special_by_default)
{
	struct fx f;

	fx_init(&f, NULL);
	ck_assert_str_eq(learn_then_syn(&f, 1, "203.0.113.10"), "S26");
	fx_free(&f);
}
END_TEST

START_TEST(declared_routable_is_learned)
{
	struct fx f;

	fx_init(&f, "203.0.113.0/24");
	ck_assert_str_eq(learn_then_syn(&f, 1, "203.0.113.10"), "S24");
	fx_free(&f);
}
END_TEST

START_TEST(routable_elsewhere_does_not_open_this_range)
{
	struct fx f;

	fx_init(&f, "192.0.2.0/24");
	ck_assert_str_eq(learn_then_syn(&f, 1, "203.0.113.10"), "S26");
	fx_free(&f);
}
END_TEST

START_TEST(mapped_special_stays_special_under_routable_prefix)
{
	struct fx f;

	/* declaring the mapped block routable does not open the metadata
	 * service through it (docs/dnsguard.md) */
	fx_init(&f, "::ffff:0:0/96");
	ck_assert_str_eq(learn_then_syn(&f, 28, "::ffff:169.254.169.254"), "S26");
	fx_free(&f);
}
END_TEST

PC_UNIT_SUITE("spec_routable", "routable", 0, documentation_range_is_special_by_default,
	      declared_routable_is_learned, routable_elsewhere_does_not_open_this_range,
	      mapped_special_stays_special_under_routable_prefix)
