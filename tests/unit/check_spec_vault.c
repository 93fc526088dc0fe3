/* The spec's model on the vault's requests (spec_vault_refuses; docs/spec.md
 * V1, V3, V4), as `portcullis log audit` judges an allowed http-request
 * record: a secret goes upstream only to the host and port it is bound
 * to, from a sandbox that has it, on a flow whose original destination
 * was learned for that host; the server name must be allowed there. */
#include "rules/rules_int.h"
#include "spec/spec.h"
#include "tests/unit/unit.h"

#include <netinet/in.h>
#include <string.h>

static const char policy_yaml[] = "sandbox: agent-1\n"
				  "match: { source: [10.203.0.11/32] }\n"
				  "allow:\n"
				  "  - host: api.test\n"
				  "    ports: [443]\n"
				  "  - host: other.test\n"
				  "    ports: [443]\n"
				  "secrets:\n"
				  "  - name: GH\n"
				  "    host: api.test\n";

struct fx {
	struct config cfg;
	struct policy *pol;
	struct spec_world w;
	char why[512];
};

/* agent-1 learns api.test -> 93.184.0.10 through the model (query, answer) */
static void fx_init(struct fx *f)
{
	struct pc_err err = {0};
	struct spec_pkt q = {0}, a = {0};
	struct spec_verdict v = {0};

	memset(f, 0, sizeof(*f));
	config_defaults(&f->cfg);
	ck_assert_int_eq(pc_addr_parse("198.51.100.53", &f->cfg.dns.resolvers[0]), 0);
	f->cfg.dns.n_resolvers = 1;
	ck_assert_int_eq(policy_load_buffer("spec.yaml", policy_yaml, strlen(policy_yaml), &f->cfg,
					    &f->pol, &err),
			 0);
	spec_world_init(&f->w, &f->cfg, f->pol);
	f->w.now_ms = 1000000;
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
	q.qtype = 1;
	strcpy(q.qname, "api.test");
	spec_judge(&f->w, &q, &v);
	a.dir = SPEC_IN;
	a.proto = IPPROTO_UDP;
	a.src = q.dst;
	a.sport = 53;
	a.dst = q.src;
	a.dport = q.sport;
	a.ct = SPEC_CT_EST;
	a.pl = SPEC_PL_DNS_ANSWER;
	a.qtype = 1;
	strcpy(a.qname, "api.test");
	pc_addr_parse("93.184.0.10", &a.answer[0]);
	a.n_answer = 1;
	a.answer_ttl = 300;
	spec_judge(&f->w, &a, &v);
	ck_assert_str_eq(v.row, "S40");
}

static const char *judge(struct fx *f, const char *src, const char *dst, uint16_t port,
			 const char *sni, const char *secrets)
{
	struct spec_vreq q = {.sandbox = "agent-1", .port = port, .sni = sni, .secrets = secrets};

	pc_addr_parse(src, &q.src);
	pc_addr_parse(dst, &q.dst);
	return spec_vault_refuses(&f->w, &q, f->why, sizeof(f->why));
}

START_TEST(bound_secret_to_its_learned_host_goes_upstream)
{
	struct fx f;

	fx_init(&f);
	ck_assert_ptr_null(judge(&f, "10.203.0.11", "93.184.0.10", 443, "api.test", "GH"));
	ck_assert_ptr_null(judge(&f, "10.203.0.11", "93.184.0.10", 443, "API.test", NULL));
	spec_world_free(&f.w);
	policy_unref(f.pol);
}
END_TEST

START_TEST(what_the_vault_must_refuse)
{
	struct fx f;

	fx_init(&f);
	/* V4: bound to api.test, sent toward other.test, or another port */
	ck_assert_str_eq(judge(&f, "10.203.0.11", "93.184.0.10", 443, "other.test", "GH"), "V4");
	ck_assert_ptr_nonnull(strstr(f.why, "bound to api.test:443"));
	/* V4: a secret this sandbox lacks */
	ck_assert_str_eq(judge(&f, "10.203.0.11", "93.184.0.10", 443, "api.test", "GH,AWS"), "V4");
	/* V1: a name not allowed, a port not allowed, no name, not the sandbox */
	ck_assert_str_eq(judge(&f, "10.203.0.11", "93.184.0.10", 443, "evil.test", NULL), "V1");
	ck_assert_str_eq(judge(&f, "10.203.0.11", "93.184.0.10", 8443, "api.test", NULL), "V1");
	ck_assert_str_eq(judge(&f, "10.203.0.11", "93.184.0.10", 443, "", NULL), "V1");
	ck_assert_str_eq(judge(&f, "10.203.0.99", "93.184.0.10", 443, "api.test", NULL), "V1");
	/* V3: the original destination was never learned for api.test */
	ck_assert_str_eq(judge(&f, "10.203.0.11", "93.184.0.99", 443, "api.test", "GH"), "V3");
	spec_world_free(&f.w);
	policy_unref(f.pol);
}
END_TEST

PC_UNIT_SUITE("spec_vault", "vault", 0, bound_secret_to_its_learned_host_goes_upstream,
	      what_the_vault_must_refuse)
