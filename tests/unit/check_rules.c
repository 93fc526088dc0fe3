/* The policy compiler and its lookups: what rule files compile to, how
 * names, addresses and senders match, that the indexed lookups agree with
 * a plain scan on large policies, and what the canonical hash covers.
 * Error messages are in check_rules_errors.c. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rules/rules_int.h"
#include "tests/unit/hostnames.h"
#include "tests/unit/allow.h"
#include "tests/unit/unit.h"

static struct policy *load_cfg(const char *yaml, const struct config *cfg)
{
	struct policy *p = NULL;
	struct pc_err e = {0};
	char buf[1024];
	int rc = policy_load_buffer("t.yaml", yaml, strlen(yaml), cfg, &p, &e);

	ck_assert_msg(rc == 0, "load failed: %s", pc_err_str(&e, buf, sizeof(buf)));
	ck_assert_ptr_nonnull(p);
	return p;
}

static struct policy *load(const char *yaml)
{
	return load_cfg(yaml, NULL);
}

static struct pc_addr addr(const char *s)
{
	struct pc_addr a;

	ck_assert_int_eq(pc_addr_parse(s, &a), 0);
	return a;
}

static const char agent1[] = "sandbox: agent-1\n"
			     "match: { source: 10.203.0.10/32 }\n"
			     "allow:\n"
			     "  - host: api.github.com\n"
			     "    ports: [443]\n"
			     "  - host: \"*.githubusercontent.com\"\n"
			     "    ports: [443]\n"
			     "  - cidr: 198.51.100.0/24\n"
			     "    ports: [22]\n"
			     "    proto: tcp\n"
			     "secrets:\n"
			     "  - name: GITHUB_TOKEN\n"
			     "    host: api.github.com\n"
			     "    header: Authorization\n"
			     "    format: \"Bearer {secret}\"\n";

/* ---- what a file compiles to ------------------------------------------------ */

START_TEST(design_example_compiles)
{
	struct policy *p = load(agent1);
	const struct policy_sandbox *sb;
	char a[64];

	ck_assert_uint_eq(policy_sandbox_count(p), 1);
	sb = policy_sandbox_at(p, 0);
	ck_assert_str_eq(sb->name, "agent-1");
	ck_assert_str_eq(sb->file, "t.yaml");
	ck_assert_uint_eq(sb->line, 1);
	ck_assert_uint_eq(sb->match.n_sources, 1);
	ck_assert_str_eq(pc_addr_str(&sb->match.sources[0].addr, a, sizeof(a)), "10.203.0.10");
	ck_assert_uint_eq(sb->match.sources[0].len, 32);
	ck_assert(!sb->match.has_mac);
	ck_assert_str_eq(sb->match.port, "");
	ck_assert_uint_eq(sb->n_allow, 3);
	ck_assert_int_eq(sb->allow[0].kind, POLICY_ALLOW_HOST);
	ck_assert_str_eq(sb->allow[0].host, "api.github.com");
	ck_assert_int_eq(sb->allow[1].kind, POLICY_ALLOW_WILDCARD);
	ck_assert_str_eq(sb->allow[1].host, "githubusercontent.com");
	ck_assert_int_eq(sb->allow[2].kind, POLICY_ALLOW_CIDR);
	ck_assert_uint_eq(sb->allow[2].cidr.len, 24);
	ck_assert_str_eq(sb->allow[2].rule, "agent-1/allow[2]");
	ck_assert_str_eq(sb->allow[2].file, "t.yaml");
	ck_assert_uint_eq(sb->allow[2].line, 8);
	ck_assert_uint_eq(sb->allow[0].proto, POLICY_PROTO_TCP);
	ck_assert_uint_eq(sb->n_secrets, 1);
	ck_assert_str_eq(sb->secrets[0].name, "GITHUB_TOKEN");
	ck_assert_str_eq(sb->secrets[0].host, "api.github.com");
	ck_assert_uint_eq(sb->secrets[0].port, 443);
	ck_assert_uint_eq(sb->dns_qtypes, QT_DEFAULT);
	ck_assert_int_eq(sb->dns_refuse, DNS_REFUSE_REFUSED);
	ck_assert_ptr_eq(policy_sandbox_by_name(p, "agent-1"), sb);
	ck_assert_ptr_null(policy_sandbox_by_name(p, "agent-2"));
	ck_assert_ptr_null(policy_sandbox_by_name(p, "AGENT-1"));
	ck_assert_ptr_null(policy_sandbox_at(p, 1));
	policy_unref(p);
}
END_TEST

START_TEST(defaults_are_written_out)
{
	struct policy *p = load("sandbox: s\nmatch: {port: tap0}\n"
				"allow: [{host: a.example.com, ports: [443]}]\n"
				"secrets: [{name: T, host: a.example.com}]\n");
	const struct policy_sandbox *sb = policy_sandbox_at(p, 0);

	ck_assert_uint_eq(sb->allow[0].proto, POLICY_PROTO_TCP);
	ck_assert_uint_eq(sb->secrets[0].port, 443);
	ck_assert_str_eq(sb->secrets[0].header, "Authorization");
	ck_assert_str_eq(sb->secrets[0].format, "Bearer {secret}");
	policy_unref(p);
}
END_TEST

START_TEST(files_hold_lists_and_documents)
{
	struct policy *p = load("- sandbox: b\n  match: {source: 10.0.0.2}\n"
				"- sandbox: a\n  match: {source: 10.0.0.1}\n"
				"---\n"
				"# an empty document is nothing\n"
				"---\n"
				"sandbox: c\nmatch: {source: 10.0.0.3}\n");

	/* Sandboxes are kept in name order, whatever the file order. */
	ck_assert_uint_eq(policy_sandbox_count(p), 3);
	ck_assert_str_eq(policy_sandbox_at(p, 0)->name, "a");
	ck_assert_str_eq(policy_sandbox_at(p, 1)->name, "b");
	ck_assert_str_eq(policy_sandbox_at(p, 2)->name, "c");
	ck_assert_uint_eq(policy_sandbox_at(p, 2)->n_allow, 0);
	policy_unref(p);
	p = load("# only comments: no sandbox, everything refused\n");
	ck_assert_uint_eq(policy_sandbox_count(p), 0);
	ck_assert_ptr_null(policy_sandbox_at(p, 0));
	policy_unref(p);
}
END_TEST

START_TEST(ports_become_sorted_disjoint_ranges)
{
	struct policy *p = load("sandbox: s\nmatch: {port: tap0}\n"
				"allow: [{cidr: 0.0.0.0/0, ports: [443, \"80-81\", 82, \"100\", "
				"\"8000-8080\", 8080, 90]}]\n");
	const struct policy_allow *a = &policy_sandbox_at(p, 0)->allow[0];

	ck_assert_uint_eq(a->n_ports, 5);
	ck_assert_uint_eq(a->ports[0].lo, 80);
	ck_assert_uint_eq(a->ports[0].hi, 82);
	ck_assert_uint_eq(a->ports[1].lo, 90);
	ck_assert_uint_eq(a->ports[2].lo, 100);
	ck_assert_uint_eq(a->ports[3].lo, 443);
	ck_assert_uint_eq(a->ports[4].lo, 8000);
	ck_assert_uint_eq(a->ports[4].hi, 8080);
	policy_unref(p);
}
END_TEST

START_TEST(dns_settings_come_from_sandbox_then_config)
{
	struct config cfg;
	struct policy *p;

	config_defaults(&cfg);
	cfg.dns.qtypes = QT_A;
	cfg.dns.refuse = DNS_REFUSE_NXDOMAIN;
	p = load_cfg("- sandbox: own\n  match: {port: t1}\n"
		     "  dns: {qtypes: [aaaa, TXT], refuse_with: refused}\n"
		     "- sandbox: inherits\n  match: {port: t2}\n",
		     &cfg);
	ck_assert_uint_eq(policy_sandbox_by_name(p, "own")->dns_qtypes, QT_AAAA | QT_TXT);
	ck_assert_int_eq(policy_sandbox_by_name(p, "own")->dns_refuse, DNS_REFUSE_REFUSED);
	ck_assert_uint_eq(policy_sandbox_by_name(p, "inherits")->dns_qtypes, QT_A);
	ck_assert_int_eq(policy_sandbox_by_name(p, "inherits")->dns_refuse, DNS_REFUSE_NXDOMAIN);
	policy_unref(p);
}
END_TEST

START_TEST(limits_come_from_sandbox_then_config)
{
	struct config cfg;
	struct policy *p;

	config_defaults(&cfg);
	cfg.limits.new_flows_per_second = 300;
	cfg.limits.new_flows_burst = 600;
	p = load_cfg("- sandbox: own\n  match: {port: t1}\n"
		     "  limits: {new_flows_per_second: 5, new_flows_burst: 10}\n"
		     "- sandbox: half\n  match: {port: t2}\n  limits: {new_flows_burst: 7}\n"
		     "- sandbox: inherits\n  match: {port: t3}\n",
		     &cfg);
	ck_assert_uint_eq(policy_sandbox_by_name(p, "own")->new_flows_per_second, 5);
	ck_assert_uint_eq(policy_sandbox_by_name(p, "own")->new_flows_burst, 10);
	ck_assert_uint_eq(policy_sandbox_by_name(p, "half")->new_flows_per_second, 300);
	ck_assert_uint_eq(policy_sandbox_by_name(p, "half")->new_flows_burst, 7);
	ck_assert_uint_eq(policy_sandbox_by_name(p, "inherits")->new_flows_per_second, 300);
	ck_assert_uint_eq(policy_sandbox_by_name(p, "inherits")->new_flows_burst, 600);
	policy_unref(p);
}
END_TEST

START_TEST(refcount_keeps_policy_alive)
{
	struct policy *p = load(agent1), *q;
	char hash[80];

	q = policy_ref(p);
	ck_assert_ptr_eq(p, q);
	pc_strlcpy(hash, policy_hash(p), sizeof(hash));
	policy_unref(p);
	/* Still readable through the second reference (ASan would see a use
	 * after free otherwise). */
	ck_assert_str_eq(policy_hash(q), hash);
	policy_unref(q);
	policy_unref(NULL);
	ck_assert_ptr_null(policy_ref(NULL));
}
END_TEST

START_TEST(qtype_bits_follow_rr_types)
{
	ck_assert_uint_eq(rules_qtype_bit(1), QT_A);
	ck_assert_uint_eq(rules_qtype_bit(28), QT_AAAA);
	ck_assert_uint_eq(rules_qtype_bit(5), QT_CNAME);
	ck_assert_uint_eq(rules_qtype_bit(65), QT_HTTPS);
	ck_assert_uint_eq(rules_qtype_bit(64), QT_SVCB);
	ck_assert_uint_eq(rules_qtype_bit(16), QT_TXT);
	ck_assert_uint_eq(rules_qtype_bit(15), QT_MX);
	ck_assert_uint_eq(rules_qtype_bit(33), QT_SRV);
	ck_assert_uint_eq(rules_qtype_bit(12), QT_PTR);
	ck_assert_uint_eq(rules_qtype_bit(2), QT_NS);
	ck_assert_uint_eq(rules_qtype_bit(257), QT_CAA);
	ck_assert_uint_eq(rules_qtype_bit(255), 0); /* ANY */
	ck_assert_uint_eq(rules_qtype_bit(252), 0); /* AXFR */
	ck_assert_uint_eq(rules_qtype_bit(0), 0);
}
END_TEST

/* The shared table through a rule's host (policy_host_normalize) and
 * through a lookup (policy_allow_name_match, which every query, server
 * name and secret lookup goes through). */
START_TEST(hostname_table_rules)
{
	for (size_t i = 0; i < N_HOSTNAME_CASES; i++) {
		const struct hostname_case *c = &hostname_cases[i];
		char out[POLICY_HOST_MAX], shown[300];
		struct pc_err e = {0};
		bool w = false;
		int rc = policy_host_normalize(c->in, out, sizeof(out), &w, &e);
		struct policy_allow a = {.kind = POLICY_ALLOW_HOST, .host = "example.com"};

		if (c->policy) {
			ck_assert_msg(rc == 0, "'%s': %s", c->in, e.msg);
			snprintf(shown, sizeof(shown), "%s%s", w ? "*." : "", out);
			ck_assert_str_eq(shown, c->policy);
		} else {
			ck_assert_msg(rc < 0, "'%s' accepted as a rule's host", c->in);
		}
		if (c->name) {
			pc_strlcpy(a.host, c->name, sizeof(a.host));
			ck_assert_msg(policy_allow_name_match(&a, c->in), "'%s'", c->in);
		} else {
			ck_assert_msg(!policy_allow_name_match(&a, c->in), "'%s'", c->in);
			if (c->policy && !w) {
				pc_strlcpy(a.host, out, sizeof(a.host));
				ck_assert_msg(!policy_allow_name_match(&a, c->in), "'%s'", c->in);
			}
		}
	}
}
END_TEST

START_TEST(host_normalize_accepts_and_refuses)
{
	char out[POLICY_HOST_MAX], name[300];
	struct pc_err e;
	bool w;

	ck_assert_int_eq(policy_host_normalize("API.GitHub.com.", out, sizeof(out), &w, &e), 0);
	ck_assert_str_eq(out, "api.github.com");
	ck_assert(!w);
	ck_assert_int_eq(policy_host_normalize("*.Example.COM", out, sizeof(out), &w, &e), 0);
	ck_assert_str_eq(out, "example.com");
	ck_assert(w);
	ck_assert_int_eq(policy_host_normalize("_dmarc.example.com", out, sizeof(out), &w, &e), 0);
	ck_assert_int_eq(policy_host_normalize("localhost", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("a.*.com", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("*", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("*.com", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("**.example.com", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("a..com", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize(".a.com", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("a.com..", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("-a.com", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("a b.com", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("10.0.0.1", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("2001:db8::1", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("a.123", out, sizeof(out), &w, &e), 0);
	ck_assert_int_lt(policy_host_normalize("", out, sizeof(out), &w, &e), 0);
	/* 63 is the longest label, 253 the longest name. */
	memset(name, 'a', 63);
	strcpy(name + 63, ".com");
	ck_assert_int_eq(policy_host_normalize(name, out, sizeof(out), &w, &e), 0);
	memset(name, 'a', 64);
	strcpy(name + 64, ".com");
	ck_assert_int_lt(policy_host_normalize(name, out, sizeof(out), &w, &e), 0);
	for (int i = 0; i < 4; i++)
		memset(name + i * 62, i == 0 ? 'a' : 'b', 61), name[i * 62 + 61] = '.';
	strcpy(name + 248, "aa.xy"); /* 253 characters */
	ck_assert_uint_eq(strlen(name), 253);
	ck_assert_int_eq(policy_host_normalize(name, out, sizeof(out), &w, &e), 0);
	strcpy(name + 248, "aaa.xy"); /* 254 */
	ck_assert_int_lt(policy_host_normalize(name, out, sizeof(out), &w, &e), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, "longer than 253"));
}
END_TEST

/* ---- matching ----------------------------------------------------------------- */

START_TEST(host_exact_wildcard_case_and_trailing_dot)
{
	struct policy *p = load(agent1);
	const struct policy_sandbox *sb = policy_sandbox_at(p, 0);
	const struct policy_allow *r = NULL;

	ck_assert(policy_host_allows(sb, "api.github.com", IPPROTO_TCP, 443, &r));
	ck_assert_str_eq(r->rule, "agent-1/allow[0]");
	ck_assert(policy_host_allows(sb, "API.GitHub.COM.", IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(sb, "api.github.com", IPPROTO_TCP, 80, NULL));
	ck_assert(!policy_host_allows(sb, "api.github.com", IPPROTO_UDP, 443, NULL));
	ck_assert(!policy_host_allows(sb, "api.github.com", IPPROTO_ICMP, 443, NULL));
	ck_assert(!policy_host_allows(sb, "x.api.github.com", IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(sb, "github.com", IPPROTO_TCP, 443, NULL));
	/* A wildcard takes one label or more, never the bare suffix. */
	ck_assert(policy_host_allows(sb, "raw.githubusercontent.com", IPPROTO_TCP, 443, &r));
	ck_assert_str_eq(r->rule, "agent-1/allow[1]");
	ck_assert(policy_host_allows(sb, "a.b.c.githubusercontent.com.", IPPROTO_TCP, 443, NULL));
	ck_assert(policy_host_allows(sb, "RAW.GitHubUserContent.com", IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(sb, "githubusercontent.com", IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(sb, "evilgithubusercontent.com", IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(sb, "githubusercontent.com.evil", IPPROTO_TCP, 443, NULL));
	/* Names that are not names never match. */
	ck_assert(!policy_host_allows(sb, "a..githubusercontent.com", IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(sb, ".githubusercontent.com", IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(sb, "*.githubusercontent.com", IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(sb, "", IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(sb, NULL, IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(NULL, "api.github.com", IPPROTO_TCP, 443, NULL));
	/* The DNS guard's question ignores ports. */
	ck_assert(policy_name_allowed(sb, "Api.Github.Com.", &r));
	ck_assert_str_eq(r->rule, "agent-1/allow[0]");
	ck_assert(policy_name_allowed(sb, "x.githubusercontent.com", NULL));
	ck_assert(!policy_name_allowed(sb, "githubusercontent.com", NULL));
	ck_assert(!policy_name_allowed(sb, "198.51.100.1", NULL));
	/* And the entry-level matcher agrees. */
	ck_assert(policy_allow_name_match(&sb->allow[1], "x.GITHUBUSERCONTENT.com."));
	ck_assert(!policy_allow_name_match(&sb->allow[1], "githubusercontent.com"));
	ck_assert(!policy_allow_name_match(&sb->allow[2], "198.51.100.1"));
	policy_unref(p);
}
END_TEST

START_TEST(cidr_v4_v6_ports_and_proto)
{
	struct policy *p = load("sandbox: s\nmatch: {source: 10.0.0.1}\nallow:\n"
				"  - {cidr: 198.51.100.0/24, ports: [22]}\n"
				"  - {cidr: 198.51.100.7, ports: [\"5000-5010\"], proto: udp}\n"
				"  - {cidr: \"2001:db8::/32\", ports: [443], proto: any}\n"
				"  - {cidr: 0.0.0.0/0, ports: [853]}\n"
				"  - {cidr: \"::/0\", ports: [9]}\n");
	const struct policy_sandbox *sb = policy_sandbox_at(p, 0);
	const struct policy_allow *r;
	struct pc_addr a;

	a = addr("198.51.100.200");
	ck_assert(policy_cidr_allows(sb, &a, IPPROTO_TCP, 22, &r));
	ck_assert_str_eq(r->rule, "s/allow[0]");
	ck_assert(!policy_cidr_allows(sb, &a, IPPROTO_UDP, 22, NULL));
	ck_assert(!policy_cidr_allows(sb, &a, IPPROTO_TCP, 23, NULL));
	a = addr("198.51.100.7");
	ck_assert(policy_cidr_allows(sb, &a, IPPROTO_UDP, 5005, &r));
	ck_assert_str_eq(r->rule, "s/allow[1]");
	ck_assert(!policy_cidr_allows(sb, &a, IPPROTO_TCP, 5005, NULL));
	ck_assert(!policy_cidr_allows(sb, &a, IPPROTO_UDP, 5011, NULL));
	/* 198.51.100.7 is inside allow[0] too: tcp/22 reports the earlier one. */
	ck_assert(policy_cidr_allows(sb, &a, IPPROTO_TCP, 22, &r));
	ck_assert_str_eq(r->rule, "s/allow[0]");
	a = addr("198.51.101.1");
	ck_assert(!policy_cidr_allows(sb, &a, IPPROTO_TCP, 22, NULL));
	ck_assert(policy_cidr_allows(sb, &a, IPPROTO_TCP, 853, &r));
	ck_assert_str_eq(r->rule, "s/allow[3]");
	a = addr("2001:db8:1::5");
	ck_assert(policy_cidr_allows(sb, &a, IPPROTO_TCP, 443, &r));
	ck_assert_str_eq(r->rule, "s/allow[2]");
	ck_assert(policy_cidr_allows(sb, &a, IPPROTO_UDP, 443, NULL));
	ck_assert(!policy_cidr_allows(sb, &a, IPPROTO_TCP, 853, NULL));
	ck_assert(policy_cidr_allows(sb, &a, IPPROTO_TCP, 9, &r));
	ck_assert_str_eq(r->rule, "s/allow[4]");
	a = addr("2001:db9::1");
	ck_assert(!policy_cidr_allows(sb, &a, IPPROTO_TCP, 443, NULL));
	/* An IPv4 address never matches an IPv6 prefix and vice versa. */
	a = addr("::ffff:198.51.100.1");
	ck_assert(!policy_cidr_allows(sb, &a, IPPROTO_TCP, 22, NULL));
	a = (struct pc_addr){0};
	ck_assert(!policy_cidr_allows(sb, &a, IPPROTO_TCP, 853, NULL));
	/* Host entries are not addresses. */
	ck_assert(!policy_host_allows(sb, "198.51.100.1", IPPROTO_TCP, 22, NULL));
	policy_unref(p);
}
END_TEST

START_TEST(first_matching_entry_in_file_order_is_reported)
{
	struct policy *p = load("sandbox: s\nmatch: {port: t}\nallow:\n"
				"  - {host: \"*.example.com\", ports: [80]}\n"
				"  - {host: \"*.b.example.com\", ports: [443]}\n"
				"  - {host: a.b.example.com, ports: [443, 80]}\n"
				"  - {host: \"*.example.com\", ports: [443]}\n"
				"  - {cidr: 10.0.0.0/8, ports: [443]}\n"
				"  - {cidr: 10.1.0.0/16, ports: [443, 80]}\n"
				"  - {cidr: 10.0.0.0/8, ports: [80]}\n");
	const struct policy_sandbox *sb = policy_sandbox_at(p, 0);
	const struct policy_allow *r;
	struct pc_addr a = addr("10.1.2.3");

	ck_assert(policy_host_allows(sb, "a.b.example.com", IPPROTO_TCP, 443, &r));
	ck_assert_str_eq(r->rule, "s/allow[1]");
	ck_assert(policy_host_allows(sb, "a.b.example.com", IPPROTO_TCP, 80, &r));
	ck_assert_str_eq(r->rule, "s/allow[0]");
	ck_assert(policy_host_allows(sb, "x.example.com", IPPROTO_TCP, 443, &r));
	ck_assert_str_eq(r->rule, "s/allow[3]");
	ck_assert(policy_name_allowed(sb, "a.b.example.com", &r));
	ck_assert_str_eq(r->rule, "s/allow[0]");
	ck_assert(policy_cidr_allows(sb, &a, IPPROTO_TCP, 443, &r));
	ck_assert_str_eq(r->rule, "s/allow[4]");
	ck_assert(policy_cidr_allows(sb, &a, IPPROTO_TCP, 80, &r));
	ck_assert_str_eq(r->rule, "s/allow[5]");
	a = addr("10.2.0.1");
	ck_assert(policy_cidr_allows(sb, &a, IPPROTO_TCP, 80, &r));
	ck_assert_str_eq(r->rule, "s/allow[6]");
	policy_unref(p);
}
END_TEST

START_TEST(secrets_by_host_and_name)
{
	struct policy *p = load("sandbox: s\nmatch: {port: t}\nallow:\n"
				"  - {host: \"*.example.com\", ports: [443, 8443]}\n"
				"secrets:\n"
				"  - {name: ZED, host: api.example.com, port: 8443, header: X-Key, "
				"format: \"{secret}\"}\n"
				"  - {name: ALPHA, host: API.example.com.}\n");
	const struct policy_sandbox *sb = policy_sandbox_at(p, 0);
	const struct policy_secret *s;

	s = policy_secret_for(sb, "api.example.com", 443);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->name, "ALPHA");
	s = policy_secret_for(sb, "Api.Example.com.", 8443);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s->name, "ZED");
	ck_assert_str_eq(s->header, "X-Key");
	ck_assert_str_eq(s->format, "{secret}");
	ck_assert_ptr_null(policy_secret_for(sb, "api.example.com", 80));
	ck_assert_ptr_null(policy_secret_for(sb, "www.example.com", 443));
	ck_assert_ptr_null(policy_secret_for(sb, NULL, 443));
	ck_assert_str_eq(policy_secret_by_name(sb, "ZED")->host, "api.example.com");
	ck_assert_str_eq(policy_secret_by_name(sb, "ALPHA")->host, "api.example.com");
	ck_assert_ptr_null(policy_secret_by_name(sb, "alpha"));
	ck_assert_ptr_null(policy_secret_by_name(sb, "NONE"));
	policy_unref(p);
}
END_TEST

START_TEST(sandbox_selected_by_source_mac_and_port)
{
	struct policy *p = load("- {sandbox: net, match: {source: 10.203.0.0/24}}\n"
				"- {sandbox: host, match: {source: [10.204.0.10, 'fd00::10']}}\n"
				"- {sandbox: both, match: {source: 10.205.0.0/24, port: tap1}}\n"
				"- {sandbox: both2, match: {source: 10.205.0.0/24, port: tap2}}\n");
	struct policy_src s = {0};

	s.addr = addr("10.203.0.77");
	ck_assert_str_eq(policy_sandbox_match(p, &s)->name, "net");
	s.addr = addr("10.204.0.10");
	ck_assert_str_eq(policy_sandbox_match(p, &s)->name, "host");
	s.addr = addr("fd00::10");
	ck_assert_str_eq(policy_sandbox_match(p, &s)->name, "host");
	s.addr = addr("10.204.0.11");
	ck_assert_ptr_null(policy_sandbox_match(p, &s));
	/* Every field a selector names must match; an unknown field is no
	 * match (fail closed). */
	s.addr = addr("10.205.0.1");
	ck_assert_ptr_null(policy_sandbox_match(p, &s));
	strcpy(s.port, "tap2");
	ck_assert_str_eq(policy_sandbox_match(p, &s)->name, "both2");
	strcpy(s.port, "tap1");
	ck_assert_str_eq(policy_sandbox_match(p, &s)->name, "both");
	memset(&s, 0, sizeof(s));
	ck_assert_ptr_null(policy_sandbox_match(p, &s));
	ck_assert_ptr_null(policy_sandbox_match(p, NULL));
	ck_assert_ptr_null(policy_sandbox_match(NULL, &s));
	policy_unref(p);

	/* Without a source, a sandbox claims any address with its mac/port. */
	p = load("- {sandbox: mac, match: {mac: '02:00:5E:10:00:01'}}\n"
		 "- {sandbox: mp, match: {mac: '02:00:5e:10:00:02', port: tap8}}\n");
	s.has_mac = true;
	memcpy(s.mac, "\x02\x00\x5e\x10\x00\x01", 6);
	ck_assert_str_eq(policy_sandbox_match(p, &s)->name, "mac");
	s.addr = addr("192.0.2.1");
	ck_assert_str_eq(policy_sandbox_match(p, &s)->name, "mac");
	ck_assert_uint_eq(policy_sandbox_by_name(p, "mac")->match.mac[3], 0x10);
	s.mac[5] = 2;
	ck_assert_ptr_null(policy_sandbox_match(p, &s));
	strcpy(s.port, "tap8");
	ck_assert_str_eq(policy_sandbox_match(p, &s)->name, "mp");
	s.has_mac = false;
	ck_assert_ptr_null(policy_sandbox_match(p, &s));
	policy_unref(p);

	p = load("- {sandbox: p9, match: {port: tap9}}\n- {sandbox: p7, match: {port: tap7}}\n");
	memset(&s, 0, sizeof(s));
	strcpy(s.port, "tap9");
	ck_assert_str_eq(policy_sandbox_match(p, &s)->name, "p9");
	s.addr = addr("2001:db8::1");
	strcpy(s.port, "tap7");
	ck_assert_str_eq(policy_sandbox_match(p, &s)->name, "p7");
	strcpy(s.port, "tap");
	ck_assert_ptr_null(policy_sandbox_match(p, &s));
	policy_unref(p);
}
END_TEST

/* The vault's question: which sandbox owns this address, whatever its
 * mac/port selectors (the engine bound them at layer 2); refused when the
 * address is in two sandboxes' sources. */
START_TEST(sandbox_by_source_ignores_mac_and_port_refuses_ambiguity)
{
	static const char y[] =
	    "- {sandbox: sb1, match: {source: [10.203.0.2/32, 'fd00::2/128'],\n"
	    "                       port: pcs1, mac: '02:70:0a:cb:00:02'}}\n"
	    "- {sandbox: wide, match: {source: 10.205.0.0/24, port: tap1}}\n"
	    "- {sandbox: narrow, match: {source: 10.205.0.7/32, port: tap2}}\n"
	    "- {sandbox: maconly, match: {mac: '02:00:5e:10:00:01', port: tap3}}\n";
	struct policy *p = load(y);
	struct pc_addr a;

	a = addr("10.203.0.2");
	ck_assert_str_eq(policy_sandbox_by_source(p, &a)->name, "sb1");
	a = addr("fd00::2");
	ck_assert_str_eq(policy_sandbox_by_source(p, &a)->name, "sb1");
	a = addr("10.205.0.8");
	ck_assert_str_eq(policy_sandbox_by_source(p, &a)->name, "wide");
	a = addr("10.205.0.7"); /* in both: ambiguous */
	ck_assert_ptr_null(policy_sandbox_by_source(p, &a));
	a = addr("10.203.0.3");
	ck_assert_ptr_null(policy_sandbox_by_source(p, &a));
	ck_assert_ptr_null(policy_sandbox_by_source(p, NULL));
	ck_assert_ptr_null(policy_sandbox_by_source(NULL, &a));
	policy_unref(p);
}
END_TEST

/* issue 20: the engine's "is this address a sandbox's?" (every new flow's
 * destination, every DNS answer's receiver) walks the trie of sources:
 * sandboxes in index (name) order from *from on, overlapping sources one
 * after the other, and a policy of 1,000 sandboxes answered for its last
 * one as for its first. */
START_TEST(sandbox_by_addr_walks_the_source_trie_in_order)
{
	static const char y[] =
	    "- {sandbox: a-wide, match: {source: 10.205.0.0/24, port: tap1}}\n"
	    "- {sandbox: b-narrow, match: {source: [10.205.0.7/32, 'fd00::7/128'], port: tap2}}\n"
	    "- {sandbox: c-other, match: {source: 10.206.0.1/32, port: tap3}}\n"
	    "- {sandbox: d-maconly, match: {mac: '02:00:5e:10:00:01', port: tap4}}\n";
	struct policy *p = load(y), *big;
	struct pc_addr a;
	size_t from = 0;
	char *many = NULL, line[160];
	size_t len = 0;

	a = addr("10.205.0.7"); /* in a-wide and b-narrow: both, in order */
	ck_assert_str_eq(policy_sandbox_by_addr_from(p, &a, &from)->name, "a-wide");
	ck_assert_uint_eq(from, 1);
	ck_assert_str_eq(policy_sandbox_by_addr_from(p, &a, &from)->name, "b-narrow");
	ck_assert_uint_eq(from, 2);
	ck_assert_ptr_null(policy_sandbox_by_addr_from(p, &a, &from));
	ck_assert_uint_eq(from, policy_sandbox_count(p));
	from = 0;
	a = addr("fd00::7");
	ck_assert_str_eq(policy_sandbox_by_addr_from(p, &a, &from)->name, "b-narrow");
	from = 0;
	a = addr("10.207.0.1"); /* nobody's */
	ck_assert_ptr_null(policy_sandbox_by_addr_from(p, &a, &from));
	ck_assert_ptr_null(policy_sandbox_by_addr_from(p, NULL, &from));
	ck_assert_ptr_null(policy_sandbox_by_addr_from(NULL, &a, &from));
	ck_assert_ptr_null(policy_sandbox_by_addr_from(p, &a, NULL));
	policy_unref(p);

	for (int k = 0; k < 1000; k++) {
		snprintf(
		    line, sizeof(line),
		    "- {sandbox: sb%04d, match: {source: 'fd00:203::1:%x/128', port: pcs%d}}\n", k,
		    k, k);
		ck_assert_int_eq(pc_buf_appendf(&many, &len, "%s", line), 0);
	}
	big = load(many);
	ck_assert_uint_eq(policy_sandbox_count(big), 1000);
	for (int k = 0; k < 1000; k += 333) {
		char want[16], at[64];

		snprintf(at, sizeof(at), "fd00:203::1:%x", k);
		snprintf(want, sizeof(want), "sb%04d", k);
		a = addr(at);
		from = 0;
		ck_assert_str_eq(policy_sandbox_by_addr_from(big, &a, &from)->name, want);
		ck_assert_uint_eq(from, (size_t)k + 1);
		ck_assert_ptr_null(policy_sandbox_by_addr_from(big, &a, &from));
	}
	policy_unref(big);
	free(many);
}
END_TEST

START_TEST(hand_built_sandbox_is_scanned)
{
	struct policy_portrange ports[] = {{443, 443}};
	struct policy_allow allow[2] = {
	    UA_NAME(WILDCARD, "example.com", ports, TCP, "h/allow[0]"),
	    UA_CIDR(ports, TCP, "h/allow[1]", {{0}, 0}),
	};
	struct policy_secret sec = {.name = "T", .host = "a.example.com", .port = 443};
	struct policy_sandbox sb = {
	    .name = "h", .allow = allow, .n_allow = 2, .secrets = &sec, .n_secrets = 1};
	const struct policy_allow *r;
	struct pc_addr a = addr("10.9.8.7");

	pc_prefix_parse("10.0.0.0/8", &allow[1].cidr);
	ck_assert(policy_host_allows(&sb, "A.Example.com.", IPPROTO_TCP, 443, &r));
	ck_assert_str_eq(r->rule, "h/allow[0]");
	ck_assert(!policy_host_allows(&sb, "example.com", IPPROTO_TCP, 443, NULL));
	ck_assert(policy_cidr_allows(&sb, &a, IPPROTO_TCP, 443, &r));
	ck_assert_str_eq(r->rule, "h/allow[1]");
	ck_assert_ptr_eq(policy_secret_for(&sb, "a.example.com", 443), &sec);
	ck_assert_ptr_eq(policy_secret_by_name(&sb, "T"), &sec);
}
END_TEST

/* xorshift32: the low bits of an LCG repeat too regularly for this. */
static unsigned rnd(unsigned x)
{
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

/* The indexes must answer exactly as a scan of the entries would, whatever
 * the policy's size: compare them on a large generated policy. */
START_TEST(indexed_lookups_agree_with_a_scan)
{
	enum { N = 4000 };
	size_t cap = (size_t)N * 96 + 256, o = 0;
	char *y = malloc(cap);
	struct policy *p;
	const struct policy_sandbox *ix;
	struct policy_sandbox scan;
	unsigned seed = 12345;
	int hits[3] = {0, 0, 0};

	ck_assert_ptr_nonnull(y);
	o += (size_t)snprintf(y + o, cap - o, "sandbox: big\nmatch: {port: t}\nallow:\n");
	for (int i = 0; i < N; i++) {
		seed = rnd(seed);
		switch (i % 4) {
		case 0:
			o += (size_t)snprintf(y + o, cap - o,
					      "- {host: h%u.d%u.test, ports: [%u]}\n", seed % 50,
					      (seed >> 8) % 20, 440 + seed % 8);
			break;
		case 1:
			o += (size_t)snprintf(y + o, cap - o,
					      "- {host: \"*.d%u.test\", ports: [%u]}\n",
					      (seed >> 8) % 20, 440 + (seed >> 4) % 8);
			break;
		case 2:
			o += (size_t)snprintf(
			    y + o, cap - o, "- {cidr: 10.%u.%u.0/24, ports: [%u], proto: %s}\n",
			    seed % 8, (seed >> 8) % 8, 440 + seed % 8, seed & 64 ? "udp" : "tcp");
			break;
		default:
			o += (size_t)snprintf(y + o, cap - o,
					      "- {cidr: \"2001:db8:%x::/%u\", ports: [%u]}\n",
					      seed % 16, 48 + (seed >> 4) % 9, 440 + seed % 8);
		}
	}
	p = load(y);
	free(y);
	ix = policy_sandbox_at(p, 0);
	scan = *ix;
	scan.index = NULL;
	for (int q = 0; q < 4000; q++) {
		const struct policy_allow *r1 = NULL, *r2 = NULL;
		uint8_t proto = q & 1 ? IPPROTO_TCP : IPPROTO_UDP;
		uint16_t port = (uint16_t)(438 + (q >> 1) % 12);
		char name[64];
		struct pc_addr a = {0};
		bool b1, b2;

		seed = rnd(seed);
		snprintf(name, sizeof(name), "%sh%u.d%u.test", q % 3 ? "" : "x.", seed % 60,
			 (seed >> 8) % 24);
		b1 = policy_host_allows(ix, name, proto, port, &r1);
		b2 = policy_host_allows(&scan, name, proto, port, &r2);
		ck_assert_int_eq(b1, b2);
		ck_assert_ptr_eq(r1, r2);
		hits[0] += b1;
		b1 = policy_name_allowed(ix, name, &r1);
		b2 = policy_name_allowed(&scan, name, &r2);
		ck_assert_int_eq(b1, b2);
		ck_assert_ptr_eq(r1, r2);
		hits[1] += b1;
		if (q % 2) {
			a.family = AF_INET;
			a.a[0] = 10, a.a[1] = seed % 9, a.a[2] = (seed >> 8) % 9, a.a[3] = 7;
		} else {
			a.family = AF_INET6;
			a.a[0] = 0x20, a.a[1] = 0x01, a.a[2] = 0x0d, a.a[3] = 0xb8;
			a.a[5] = (uint8_t)(seed % 17);
			a.a[6] = (uint8_t)((seed >> 8) & 0x3);
		}
		b1 = policy_cidr_allows(ix, &a, proto, port, &r1);
		b2 = policy_cidr_allows(&scan, &a, proto, port, &r2);
		ck_assert_int_eq(b1, b2);
		ck_assert_ptr_eq(r1, r2);
		hits[2] += b1;
	}
	/* Both answers occur often enough for the comparison to mean something. */
	for (int k = 0; k < 3; k++)
		ck_assert_msg(hits[k] > 60 && hits[k] < 3900, "hits[%d] = %d", k, hits[k]);
	policy_unref(p);
}
END_TEST

/* ---- the canonical hash ------------------------------------------------------- */

static void hash_of(const char *yaml, char *out)
{
	struct policy *p = load(yaml);

	ck_assert_int_eq(strncmp(policy_hash(p), "sha256:", 7), 0);
	ck_assert_uint_eq(strlen(policy_hash(p)), 7 + 64);
	strcpy(out, policy_hash(p));
	policy_unref(p);
}

static const char base[] = "sandbox: a\nmatch: {source: [10.0.0.1, 10.0.1.0/24]}\n"
			   "allow:\n"
			   "  - {host: api.example.com, ports: [443, 80]}\n"
			   "  - {cidr: 192.0.2.0/24, ports: [22]}\n"
			   "secrets:\n"
			   "  - {name: A, host: api.example.com}\n"
			   "  - {name: B, host: api.example.com, port: 80}\n";

/* Same meaning, different spelling: each must hash like base. */
static const char *const same[] = {
    /* key order, comments, whitespace, flow vs block */
    "# a comment\nallow:\n- ports: [80, 443]\n  host: api.example.com   # why\n"
    "- {ports: [22], cidr: 192.0.2.0/24, proto: tcp}\n"
    "match:\n  source:\n  - 10.0.1.0/24\n  - 10.0.0.1/32\n"
    "secrets: [{name: B, port: 80, host: api.example.com},\n"
    "          {host: API.example.com., name: A, port: 443, header: Authorization,\n"
    "           format: 'Bearer {secret}'}]\n"
    "sandbox: a\n",
    /* port lists as ranges, case and trailing dots of names */
    "sandbox: a\nmatch: {source: [10.0.0.1, 10.0.1.0/24]}\n"
    "allow:\n  - {host: API.Example.COM., ports: [\"80\", 443, 80]}\n"
    "  - {cidr: 192.0.2.0/24, ports: [\"22-22\"]}\n"
    "secrets: [{name: A, host: api.example.com}, {name: B, host: api.example.com, port: 80}]\n"
    "dns: {qtypes: [svcb, HTTPS, CNAME, AAAA, A], refuse_with: refused}\n"
    "limits: {new_flows_burst: 2000, new_flows_per_second: 1000}\n",
    /* the same sandbox as a one-element list, in a second document */
    "---\n---\n- sandbox: a\n  match: {source: [10.0.0.1, 10.0.1.0/24]}\n"
    "  allow: [{host: api.example.com, ports: [443, 80]},"
    " {cidr: 192.0.2.0/24, ports: [22]}]\n"
    "  secrets: [{name: B, host: api.example.com, port: 80},"
    " {name: A, host: api.example.com}]\n",
};

/* Different meaning: base with one edit (from, which must occur in base,
 * replaced by to; from "" appends to), each must hash differently. */
static const struct {
	const char *from, *to;
} differ[] = {
    /* allow order names the rules that logs cite */
    {"  - {host: api.example.com, ports: [443, 80]}\n  - {cidr: 192.0.2.0/24, ports: [22]}\n",
     "  - {cidr: 192.0.2.0/24, ports: [22]}\n  - {host: api.example.com, ports: [443, 80]}\n"},
    /* one port more */
    {"ports: [443, 80]}", "ports: [443, 80, 8080]}"},
    /* proto */
    {"ports: [22]}", "ports: [22], proto: any}"},
    /* a wildcard instead of the name (first), the name after the cidr */
    {"  - {host: api.example.com, ports: [443, 80]}\n  - {cidr: 192.0.2.0/24, ports: [22]}\n",
     "  - {host: '*.api.example.com', ports: [443, 80]}\n  - {cidr: 192.0.2.0/24, ports: [22]}\n"
     "  - {host: api.example.com, ports: [443, 80]}\n"},
    /* the sandbox's name */
    {"sandbox: a\n", "sandbox: A2\n"},
    /* a secret's header */
    {"{name: A, host: api.example.com}", "{name: A, host: api.example.com, header: X-Token}"},
    /* the selector */
    {"match: {source: [10.0.0.1, 10.0.1.0/24]}",
     "match: {source: [10.0.0.1, 10.0.1.0/24], port: tap0}"},
    /* DNS types */
    {"", "dns: {qtypes: [A, AAAA]}\n"},
    /* the new-flow limit */
    {"", "limits: {new_flows_per_second: 999}\n"},
};

START_TEST(hash_equal_for_equal_meaning)
{
	char h0[80], h[80];

	hash_of(base, h0);
	hash_of(same[_i], h);
	ck_assert_str_eq(h, h0);
}
END_TEST

START_TEST(hash_differs_for_different_meaning)
{
	const char *at = *differ[_i].from ? strstr(base, differ[_i].from) : base + strlen(base);
	char h0[80], h[80], y[sizeof(base) + 256];

	ck_assert_msg(at, "case %d: '%s' is not in base", _i, differ[_i].from);
	ck_assert_int_lt(snprintf(y, sizeof(y), "%.*s%s%s", (int)(at - base), base, differ[_i].to,
				  at + strlen(differ[_i].from)),
			 (int)sizeof(y));
	hash_of(base, h0);
	hash_of(y, h);
	ck_assert_str_ne(h, h0);
}
END_TEST

START_TEST(hash_covers_inherited_dns_settings)
{
	struct config cfg;
	struct policy *p1, *p2;

	config_defaults(&cfg);
	p1 = load_cfg(base, &cfg);
	cfg.dns.refuse = DNS_REFUSE_NXDOMAIN;
	p2 = load_cfg(base, &cfg);
	ck_assert_str_ne(policy_hash(p1), policy_hash(p2));
	policy_unref(p2);
	/* the config's default new-flow limit too: it is the sandbox's */
	cfg.dns.refuse = DNS_REFUSE_REFUSED;
	cfg.limits.new_flows_burst = 1;
	p2 = load_cfg(base, &cfg);
	ck_assert_str_ne(policy_hash(p1), policy_hash(p2));
	policy_unref(p1);
	policy_unref(p2);
}
END_TEST

START_TEST(canonical_form_is_documented_json)
{
	struct policy *p = load(agent1);
	size_t len = 0;
	const char *c = policy_canonical(p, &len);
	const char *want =
	    "{\"portcullis_policy\":1,\"sandboxes\":[{\"allow\":["
	    "{\"host\":\"api.github.com\",\"ports\":[\"443\"],\"proto\":\"tcp\"},"
	    "{\"host\":\"*.githubusercontent.com\",\"ports\":[\"443\"],\"proto\":\"tcp\"},"
	    "{\"cidr\":\"198.51.100.0/24\",\"ports\":[\"22\"],\"proto\":\"tcp\"}],"
	    "\"dns\":{\"qtypes\":[\"A\",\"AAAA\",\"CNAME\",\"HTTPS\",\"SVCB\"],"
	    "\"refuse_with\":\"refused\"},"
	    "\"limits\":{\"new_flows_burst\":2000,\"new_flows_per_second\":1000},"
	    "\"match\":{\"source\":[\"10.203.0.10/32\"]},\"name\":\"agent-1\","
	    "\"secrets\":[{\"format\":\"Bearer {secret}\",\"header\":\"Authorization\","
	    "\"host\":\"api.github.com\",\"name\":\"GITHUB_TOKEN\",\"port\":443}]}]}";

	ck_assert_str_eq(c, want);
	ck_assert_uint_eq(len, strlen(want));
	policy_unref(p);
}
END_TEST

static Suite *rules_suite(void)
{
	Suite *s = suite_create("rules");
	TCase *tc = tcase_create("policy");

	tcase_set_timeout(tc, 60);
	PC_UNIT_TESTS(tc, design_example_compiles, defaults_are_written_out,
		      files_hold_lists_and_documents, ports_become_sorted_disjoint_ranges,
		      dns_settings_come_from_sandbox_then_config,
		      limits_come_from_sandbox_then_config, refcount_keeps_policy_alive,
		      qtype_bits_follow_rr_types, host_normalize_accepts_and_refuses,
		      hostname_table_rules, host_exact_wildcard_case_and_trailing_dot,
		      cidr_v4_v6_ports_and_proto, first_matching_entry_in_file_order_is_reported,
		      secrets_by_host_and_name, sandbox_selected_by_source_mac_and_port,
		      sandbox_by_source_ignores_mac_and_port_refuses_ambiguity,
		      sandbox_by_addr_walks_the_source_trie_in_order, hand_built_sandbox_is_scanned,
		      indexed_lookups_agree_with_a_scan);
	tcase_add_loop_test(tc, hash_equal_for_equal_meaning, 0,
			    (int)(sizeof(same) / sizeof(*same)));
	tcase_add_loop_test(tc, hash_differs_for_different_meaning, 0,
			    (int)(sizeof(differ) / sizeof(*differ)));
	PC_UNIT_TESTS(tc, hash_covers_inherited_dns_settings, canonical_form_is_documented_json);
	suite_add_tcase(s, tc);
	return s;
}

PC_UNIT_MAIN(rules_suite)
