/* The sandbox launcher's pure parts: its command line, the rule file it
 * writes (which must load as the policy it means: round trip through the
 * policy loader), the choice of addresses, and the summary's count of a
 * sandbox's records in log lines. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_int.h"
#include "rules/rules_int.h"
#include "tests/unit/unit.h"

static struct sb *sb_new(bool attach)
{
	struct sb *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	s->attach = attach;
	s->netns_fd = s->lock_fd = -1;
	config_defaults(&s->cfg);
	return s;
}

/* sbargs_parse over a NULL-terminated list (argv[0] is the subcommand). */
static int parse(struct sb *s, const char *const *args, struct pc_err *e)
{
	/* static: s->cmd borrows from argv after parse() returns (as it borrows
	 * main's argv in the launcher) */
	static char *argv[40];
	int argc = 0;

	for (; args[argc]; argc++)
		argv[argc] = (char *)args[argc];
	argv[argc] = NULL;
	optind = 0;
	return sbargs_parse(s, argc, argv, e);
}

START_TEST(command_line_is_read_into_entries)
{
	struct sb *s = sb_new(false);
	struct pc_err e = {0};
	const char *a[] = {"run",
			   "--name",
			   "agent-1",
			   "--allow",
			   "API.GitHub.com.",
			   "--allow",
			   "*.githubusercontent.com:8000-8080",
			   "--allow-cidr",
			   "198.51.100.0/24:22",
			   "--allow-cidr",
			   "[2001:db8::/32]:5000/udp",
			   "--secret",
			   "GITHUB_TOKEN",
			   "--secret",
			   "PYPI_KEY@pypi.org:8443",
			   "--env",
			   "A=b",
			   "--",
			   "python3",
			   "-c",
			   "print(1)",
			   NULL};

	ck_assert_int_eq(parse(s, a, &e), 0);
	ck_assert_str_eq(s->name, "agent-1");
	ck_assert_uint_eq(s->n_allow, 4);
	ck_assert_str_eq(s->allow[0].host, "api.github.com");
	ck_assert_str_eq(s->allow[0].ports, "443");
	ck_assert_str_eq(s->allow[1].host, "*.githubusercontent.com");
	ck_assert_str_eq(s->allow[1].ports, "8000-8080");
	ck_assert(s->allow[2].cidr);
	ck_assert_uint_eq(s->allow[2].prefix.len, 24);
	ck_assert_str_eq(s->allow[2].ports, "22");
	ck_assert_str_eq(s->allow[2].proto, "tcp");
	ck_assert_uint_eq(s->allow[3].prefix.addr.family, AF_INET6);
	ck_assert_str_eq(s->allow[3].proto, "udp");
	ck_assert_uint_eq(s->n_secrets, 2);
	/* without @HOST: the first exact --allow host */
	ck_assert_str_eq(s->secrets[0].host, "api.github.com");
	ck_assert_uint_eq(s->secrets[0].port, 443);
	ck_assert_str_eq(s->secrets[1].host, "pypi.org");
	ck_assert_uint_eq(s->secrets[1].port, 8443);
	ck_assert_str_eq(s->env[0], "A=b");
	ck_assert_str_eq(s->cmd[0], "python3");
	ck_assert_str_eq(s->cmd[2], "print(1)");
	free(s);
}
END_TEST

static const struct {
	bool attach;
	const char *args[8];
	const char *why;
} bad[] = {
    {false, {"run", "--allow", "203.0.113.10", "--", "x"}, "use --allow-cidr"},
    {false, {"run", "--allow", "a..b", "--", "x"}, "--allow a..b"},
    {false, {"run", "--allow", "a.test:0", "--", "x"}, "bad port"},
    {false, {"run", "--allow", "a.test:9-3", "--", "x"}, "bad port"},
    {false, {"run", "--allow-cidr", "10.0.0.1/24:22", "--", "x"}, "expected CIDR:PORT"},
    {false, {"run", "--allow-cidr", "10.0.0.0/24", "--", "x"}, "expected CIDR:PORT"},
    {false, {"run", "--allow-cidr", "10.0.0.0/24:22/sctp", "--", "x"}, "expected CIDR:PORT"},
    {false, {"run", "--allow", "a.test", "--secret", "lower", "--", "x"}, "secret name"},
    {false,
     {"run", "--allow-cidr", "10.0.0.0/24:22", "--secret", "TOKEN", "--", "x"},
     "no exact --allow host"},
    {false,
     {"run", "--allow", "*.a.test", "--secret", "T@*.a.test", "--", "x"},
     "one exact host name"},
    {false, {"run", "--name", "../etc", "--allow", "a.test", "--", "x"}, "--name ../etc"},
    {false, {"run", "--name", "-x", "--allow", "a.test", "--", "x"}, "--name -x"},
    {false, {"run", "--allow", "a.test"}, "no command to run"},
    {false, {"run", "--", "x"}, "nothing allowed"},
    {false, {"run", "--port", "tap0", "--allow", "a.test", "--", "x"}, "sandbox attach"},
    {true, {"attach", "--name", "vm", "--allow", "a.test"}, "needs --port"},
    {true, {"attach", "--port", "tap\"0", "--name", "vm", "--allow", "a.test"}, "--port"},
    {true, {"attach", "--port", "t", "--name", "v", "--mac", "01:00:5e:00:00:01"}, "unicast MAC"},
    {true, {"attach", "--port", "t", "--name", "v", "--address", "nope"}, "--address nope"},
};

START_TEST(bad_command_lines_say_what_is_wrong)
{
	struct sb *s = sb_new(bad[_i].attach);
	struct pc_err e = {0};

	ck_assert_int_lt(parse(s, bad[_i].args, &e), 0);
	ck_assert_msg(strstr(e.msg, bad[_i].why), "case %d: '%s' lacks '%s'", _i, e.msg,
		      bad[_i].why);
	free(s);
}
END_TEST

static struct sb *sb_example(void)
{
	struct sb *s = sb_new(false);

	pc_strlcpy(s->name, "agent-1", sizeof(s->name));
	pc_strlcpy(s->port, "pcs4242", sizeof(s->port));
	pc_addr_parse("10.203.0.2", &s->addr4);
	pc_addr_parse("fd00:203::2", &s->addr6);
	s->has_mac = true;
	memcpy(s->mac, "\x02\x70\x0a\xcb\x00\x02", 6);
	s->allow[0] = (struct sb_allow){.host = "api.github.test", .ports = "443", .proto = "tcp"};
	s->allow[1] = (struct sb_allow){
	    .host = "*.githubusercontent.com", .ports = "8000-8080", .proto = "any"};
	s->allow[2] = (struct sb_allow){.cidr = true, .ports = "5000", .proto = "udp"};
	pc_prefix_parse("198.51.100.0/24", &s->allow[2].prefix);
	s->n_allow = 3;
	s->secrets[0] =
	    (struct sb_secret){.name = "GITHUB_TOKEN", .host = "api.github.test", .port = 443};
	s->n_secrets = 1;
	return s;
}

START_TEST(rule_file_loads_as_the_policy_it_means)
{
	struct sb *s = sb_example();
	char *text = sbfile_rule_text(s), eb[600];
	struct policy *p = NULL;
	struct pc_err e = {0};
	const struct policy_sandbox *sb;
	struct policy_src src = {0};
	const struct policy_allow *rule;
	struct pc_addr a;

	ck_assert_ptr_nonnull(text);
	ck_assert_msg(
	    policy_load_buffer("sandbox-agent-1.yaml", text, strlen(text), NULL, &p, &e) == 0,
	    "%s\n%s", pc_err_str(&e, eb, sizeof(eb)), text);
	sb = policy_sandbox_by_name(p, "agent-1");
	ck_assert_ptr_nonnull(sb);
	ck_assert_uint_eq(sb->match.n_sources, 2);
	ck_assert_str_eq(sb->match.port, "pcs4242");
	ck_assert(sb->match.has_mac);
	ck_assert_uint_eq(sb->n_allow, 3);
	/* matched only with every selector */
	pc_addr_parse("10.203.0.2", &src.addr);
	ck_assert_ptr_null(policy_sandbox_match(p, &src));
	strcpy(src.port, "pcs4242");
	src.has_mac = true;
	memcpy(src.mac, s->mac, 6);
	ck_assert_ptr_eq(policy_sandbox_match(p, &src), sb);
	ck_assert(policy_host_allows(sb, "api.github.test", 6, 443, &rule));
	ck_assert(!policy_host_allows(sb, "api.github.test", 17, 443, NULL));
	ck_assert(policy_host_allows(sb, "raw.githubusercontent.com", 17, 8080, NULL));
	pc_addr_parse("198.51.100.7", &a);
	ck_assert(policy_cidr_allows(sb, &a, 17, 5000, NULL));
	ck_assert(!policy_cidr_allows(sb, &a, 6, 5000, NULL));
	ck_assert_ptr_nonnull(policy_secret_for(sb, "api.github.test", 443));
	ck_assert_ptr_nonnull(strstr(text, "# portcullis sandbox: agent-1, launcher "));
	policy_unref(p);
	free(text);
	free(s);
}
END_TEST

START_TEST(rule_file_without_ipv6_or_mac)
{
	struct sb *s = sb_example();
	char *text;
	struct policy *p = NULL;
	struct pc_err e = {0};

	s->addr6.family = 0;
	s->has_mac = false;
	s->n_secrets = 0;
	text = sbfile_rule_text(s);
	ck_assert_int_eq(policy_load_buffer("x.yaml", text, strlen(text), NULL, &p, &e), 0);
	ck_assert_uint_eq(policy_sandbox_by_name(p, "agent-1")->match.n_sources, 1);
	ck_assert(!policy_sandbox_by_name(p, "agent-1")->match.has_mac);
	policy_unref(p);
	free(text);
	free(s);
}
END_TEST

static struct policy *load(const char *y)
{
	struct policy *p = NULL;
	struct pc_err e = {0};

	ck_assert_int_eq(policy_load_buffer("t.yaml", y, strlen(y), NULL, &p, &e), 0);
	return p;
}

START_TEST(addresses_skip_the_gateway_and_claimed_ones)
{
	struct sb *s = sb_new(false);
	struct policy *p =
	    load("sandbox: a\nmatch: {source: [10.203.0.2/31, 'fd00:203::4/128']}\n");
	struct pc_err e = {0};
	char b[PC_ADDRSTRLEN];

	pc_prefix_parse("10.203.0.0/24", &s->br.net4);
	pc_addr_parse("10.203.0.1", &s->br.net4.addr);
	pc_prefix_parse("fd00:203::/64", &s->br.net6);
	pc_addr_parse("fd00:203::1", &s->br.net6.addr);
	ck_assert_int_eq(sbfile_pick_addresses(s, p, &e), 0);
	/* .1 the gateway, .2 and .3 claimed; ::4 claimed: the same number in both */
	ck_assert_str_eq(pc_addr_str(&s->addr4, b, sizeof(b)), "10.203.0.5");
	ck_assert_str_eq(pc_addr_str(&s->addr6, b, sizeof(b)), "fd00:203::5");

	pc_prefix_parse("10.203.0.128/25", &s->cfg.sandbox.pool4);
	ck_assert_int_eq(sbfile_pick_addresses(s, p, &e), 0);
	/* host number 1 is the IPv6 gateway's (fd00:203::1): both take 2 */
	ck_assert_str_eq(pc_addr_str(&s->addr4, b, sizeof(b)), "10.203.0.130");
	ck_assert_str_eq(pc_addr_str(&s->addr6, b, sizeof(b)), "fd00:203::2");

	pc_prefix_parse("10.9.0.0/24", &s->cfg.sandbox.pool4);
	ck_assert_int_lt(sbfile_pick_addresses(s, p, &e), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, "is not inside bridge pcbr0's subnet"));

	/* a full pool */
	pc_prefix_parse("10.203.0.0/30", &s->cfg.sandbox.pool4);
	memset(&s->cfg.sandbox.pool6, 0, sizeof(s->cfg.sandbox.pool6));
	ck_assert_int_lt(sbfile_pick_addresses(s, p, &e), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, "no free address left"));

	/* a bridge without addresses */
	memset(&s->cfg.sandbox, 0, sizeof(s->cfg.sandbox));
	memset(&s->br, 0, sizeof(s->br));
	ck_assert_int_lt(sbfile_pick_addresses(s, p, &e), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, "has no address"));
	policy_unref(p);
	free(s);
}
END_TEST

START_TEST(attach_address_is_checked_not_chosen)
{
	struct sb *s = sb_new(true);
	struct policy *p = load("sandbox: a\nmatch: {source: 10.203.0.7/32}\n");
	struct pc_err e = {0};

	pc_prefix_parse("10.203.0.0/24", &s->br.net4);
	pc_addr_parse("10.203.0.1", &s->br.net4.addr);
	pc_addr_parse("10.203.0.50", &s->want4);
	ck_assert_int_eq(sbfile_pick_addresses(s, p, &e), 0);
	ck_assert(pc_addr_eq(&s->addr4, &s->want4));
	pc_addr_parse("10.203.0.7", &s->want4);
	ck_assert_int_eq(sbfile_pick_addresses(s, p, &e), PC_EEXIST);
	pc_addr_parse("192.0.2.9", &s->want4);
	ck_assert_int_lt(sbfile_pick_addresses(s, p, &e), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, "not a host address of bridge"));
	pc_addr_parse("10.203.0.1", &s->want4);
	ck_assert_int_lt(sbfile_pick_addresses(s, p, &e), 0);
	policy_unref(p);
	free(s);
}
END_TEST

START_TEST(summary_counts_one_sandbox_from_its_first_record)
{
	static const char log[] =
	    "{\"seq\":3,\"sandbox\":\"agent-1\",\"event.action\":\"connect\",\"event.outcome\":"
	    "\"success\"}\n"
	    "{\"seq\":4,\"sandbox\":\"agent-1\",\"event.action\":\"sandbox\"}\n"
	    "{\"seq\":5,\"sandbox\":\"agent-1\",\"event.action\":\"connect\",\"event.outcome\":"
	    "\"failure\"}\n"
	    "{\"seq\":6,\"sandbox\":\"agent-10\",\"event.action\":\"connect\",\"event.outcome\":"
	    "\"success\"}\n"
	    "{\"checkpoint\":\"x\"}\n"
	    "{\"seq\":7,\"sandbox\":\"agent-1\",\"event.action\":\"dns-query\",\"event.outcome\":"
	    "\"failure\"}\n"
	    "{\"seq\":8,\"sandbox\":\"agent-1\",\"event.action\":\"http-request\",\"event."
	    "outcome\":"
	    "\"success\",\"secrets\":[\"B_TOKEN\",\"TOKEN\"]}\n"
	    "{\"seq\":9,\"sandbox\":\"agent-1\",\"event.action\":\"http-request\",\"secrets\":"
	    "[\"B_TOKEN\"]}\n"
	    "{\"seq\":10,\"sandbox\":\"agent-1\",\"event.action\":\"http-request\",\"event."
	    "outcome\":"
	    "\"success\",\"secrets\":[\"B_TOKEN\"]}\n"
	    "{\"seq\":11,\"sandbox\":\"agent-1\",\"event.action\":\"exfiltration\",\"event."
	    "outcome\":"
	    "\"failure\"}\n"
	    "not json at all\n"
	    "{\"seq\":12,\"sandbox\":\"agent-1\",\"event.action\":\"dns-query\",\"event.outcome\":"
	    "\"success\"}";
	struct sb_counts c = {0};

	sbsum_count_buffer("agent-1", 4, log, sizeof(log) - 1, &c);
	ck_assert_uint_eq(c.first_seq, 4);
	ck_assert_uint_eq(c.last_seq, 12);
	ck_assert_uint_eq(c.flows_allowed, 0); /* seq 3 is before the sandbox; 6 another one's */
	ck_assert_uint_eq(c.flows_refused, 1);
	ck_assert_uint_eq(c.dns_allowed, 1);
	ck_assert_uint_eq(c.dns_refused, 1);
	ck_assert_uint_eq(c.http_requests, 2); /* the response's own record is no request */
	ck_assert_uint_eq(c.injected, 2);
	ck_assert_str_eq(c.injected_names, "B_TOKEN,TOKEN");
	ck_assert_uint_eq(c.exfil, 1);
}
END_TEST

static Suite *sandbox_suite(void)
{
	Suite *s = suite_create("sandbox");
	TCase *tc = tcase_create("launcher");

	tcase_add_test(tc, command_line_is_read_into_entries);
	tcase_add_loop_test(tc, bad_command_lines_say_what_is_wrong, 0,
			    sizeof(bad) / sizeof(bad[0]));
	PC_UNIT_TESTS(tc, rule_file_loads_as_the_policy_it_means, rule_file_without_ipv6_or_mac,
		      addresses_skip_the_gateway_and_claimed_ones,
		      attach_address_is_checked_not_chosen,
		      summary_counts_one_sandbox_from_its_first_record);
	suite_add_tcase(s, tc);
	return s;
}

PC_UNIT_MAIN(sandbox_suite)
