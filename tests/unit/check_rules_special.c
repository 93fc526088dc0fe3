/* Special-purpose ranges in the configuration and the policy: dns.routable
 * (parsed, bounded, each entry inside one registry block, errors at their
 * position), policy_cidr_covers, and the warnings `policy lint` prints for
 * cidr entries that open such ranges (file:line:col, the block and its
 * RFC; exit status unchanged). */
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rules/rules_int.h"
#include "tests/unit/cfgload.h"
#include "tests/unit/unit.h"

START_TEST(routable_default_none)
{
	struct config c;

	config_defaults(&c);
	ck_assert_uint_eq(c.dns.n_routable, 0);
	ck_assert_int_eq(cfg_load("dns: {resolvers: [198.51.100.53]}\n", &c), 0);
	ck_assert_uint_eq(c.dns.n_routable, 0);
}
END_TEST

START_TEST(routable_parsed)
{
	struct config c;
	struct pc_prefix p;

	ck_assert_int_eq(
	    cfg_load("dns:\n  routable: [192.0.2.0/24, \"2001:db8::/32\", 10.1.0.0/16, "
		     "100.64.0.1, \"64:ff9b::/96\"]\n",
		     &c),
	    0);
	ck_assert_uint_eq(c.dns.n_routable, 5);
	ck_assert_int_eq(pc_prefix_parse("10.1.0.0/16", &p), 0);
	ck_assert_uint_eq(c.dns.routable[2].len, 16);
	ck_assert(pc_addr_eq(&c.dns.routable[2].addr, &p.addr));
	ck_assert_uint_eq(c.dns.routable[3].len, 32);
	ck_assert_int_eq(cfg_load("dns: {routable: 198.51.100.0/24}\n", &c), 0); /* one, no list */
	ck_assert_uint_eq(c.dns.n_routable, 1);
}
END_TEST

START_TEST(routable_errors)
{
	struct config c;
	char many[2048] = "dns:\n  routable: [";

	ck_assert_int_ne(cfg_load("dns:\n  routable: [192.0.2.0/24, 8.8.8.0/24]\n", &c), 0);
	ck_assert_str_eq(cfg_errbuf,
			 "etc/pc.yaml:2:28: dns.routable: '8.8.8.0/24' is not inside one "
			 "special-purpose block; expected a range inside one of them, like "
			 "'192.0.2.0/24' (other addresses are learned anyway)");
	/* wider than any block: not a blanket exemption */
	ck_assert_int_ne(cfg_load("dns: {routable: [0.0.0.0/0]}\n", &c), 0);
	ck_assert_ptr_nonnull(
	    strstr(cfg_errbuf, "etc/pc.yaml:1:18: dns.routable: '0.0.0.0/0' is not"));
	ck_assert_int_ne(cfg_load("dns: {routable: [192.0.0.0/16]}\n", &c), 0);
	ck_assert_int_ne(cfg_load("dns: {routable: [10.0.0.1/8]}\n", &c), 0);
	ck_assert_str_eq(cfg_errbuf, "etc/pc.yaml:1:18: dns.routable: invalid prefix '10.0.0.1/8'; "
				     "expected a network like '192.0.2.0/24' or '2001:db8::/32'");
	ck_assert_int_ne(cfg_load("dns: {routable: {a: 1}}\n", &c), 0);
	ck_assert_ptr_nonnull(strstr(cfg_errbuf, "dns.routable: expected a list of special-purpose "
						 "prefixes, found a mapping"));
	for (int i = 0; i < RULES_MAX_ROUTABLE + 1; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s10.%d.0.0/16",
			 i ? ", " : "", i);
	strcat(many, "]\n");
	ck_assert_int_ne(cfg_load(many, &c), 0);
	ck_assert_ptr_nonnull(strstr(cfg_errbuf, "dns.routable: 33 prefixes; expected at most 32"));
}
END_TEST

static const char rules_yaml[] = "sandbox: a\n"
				 "match: {source: 10.203.0.10/32}\n"
				 "allow:\n"
				 "  - {host: api.example.org, ports: [443]}\n"
				 "  - {cidr: 169.254.169.254/32, ports: [80]}\n"
				 "  - {cidr: 8.8.8.0/24, ports: [53], proto: udp}\n"
				 "  - {cidr: \"fd00::/8\", ports: [443]}\n"
				 "  - {cidr: 203.0.113.0/24, ports: [443]}\n"
				 "  - {cidr: 192.0.0.0/16, ports: [443]}\n";

START_TEST(cidr_covers_whatever_the_port)
{
	struct policy *p = NULL;
	struct pc_err e = {0};
	const struct policy_sandbox *sb;
	const struct policy_allow *r = NULL;
	struct pc_addr a;

	ck_assert_int_eq(policy_load_buffer("r.yaml", rules_yaml, strlen(rules_yaml), NULL, &p, &e),
			 0);
	sb = policy_sandbox_by_name(p, "a");
	ck_assert_ptr_nonnull(sb);
	ck_assert_int_eq(pc_addr_parse("169.254.169.254", &a), 0);
	ck_assert(policy_cidr_covers(sb, &a, &r));
	ck_assert_str_eq(r->rule, "a/allow[1]");
	ck_assert(!policy_cidr_allows(sb, &a, 6, 443, NULL)); /* the port still matters there */
	ck_assert_int_eq(pc_addr_parse("169.254.169.253", &a), 0);
	ck_assert(!policy_cidr_covers(sb, &a, NULL));
	ck_assert_int_eq(pc_addr_parse("fd12::1", &a), 0);
	ck_assert(policy_cidr_covers(sb, &a, &r));
	ck_assert_str_eq(r->rule, "a/allow[3]");
	ck_assert(!policy_cidr_covers(NULL, &a, NULL));
	/* where the value is written */
	ck_assert_uint_eq(sb->allow[1].vline, 5);
	ck_assert_uint_eq(sb->allow[1].vcol, 12);
	policy_unref(p);
}
END_TEST

/* Run `policy lint ARGS` with stderr into buf (stdout dropped); returns
 * the exit status. */
static int lint(char *buf, size_t cap, const char *config, int argc, char **argv)
{
	char path[] = "/tmp/pc-lint-XXXXXX";
	int fd = mkstemp(path), saved = dup(2), saved_out = dup(1),
	    null = open("/dev/null", O_WRONLY);
	ssize_t n;
	int rc;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(null, 0);
	fflush(stderr);
	fflush(stdout);
	dup2(fd, 2);
	dup2(null, 1); /* the "ok" lines would mix with the TAP output */
	rc = rules_cli(argc, argv, config);
	fflush(stderr);
	fflush(stdout);
	dup2(saved, 2);
	dup2(saved_out, 1);
	close(saved);
	close(saved_out);
	close(null);
	n = pread(fd, buf, cap - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
	return rc;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

START_TEST(lint_warns_about_special_cidr)
{
	char dir[] = "/tmp/pc-lintd-XXXXXX", file[256], rdir[200], conf[256], cfg[1024];
	static char out[16384];
	char *argv[] = {"policy", "lint", file};
	char *argv_conf[] = {"policy", "lint"};

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(rdir, sizeof(rdir), "%s/rules.d", dir);
	ck_assert_int_eq(mkdir(rdir, 0755), 0);
	snprintf(file, sizeof(file), "%s/a.yaml", rdir);
	write_file(file, rules_yaml);

	/* a rule file alone: a warning per cidr entry opening a special range,
	 * at its value, and still exit 0 */
	ck_assert_int_eq(lint(out, sizeof(out), "/nonexistent", 3, argv), PC_EXIT_OK);
	ck_assert_msg(strstr(out, ":5:12: warning: cidr 169.254.169.254/32 of sandbox 'a' opens "
				  "169.254.0.0/16, link-local (RFC 3927), a special-purpose range"),
		      "%s", out);
	ck_assert_msg(strstr(out, ":7:12: warning: cidr fd00::/8 of sandbox 'a' opens fc00::/7, "
				  "unique-local (RFC 4193)"),
		      "%s", out);
	ck_assert_msg(strstr(out, ":8:12: warning: cidr 203.0.113.0/24 of sandbox 'a' opens "
				  "203.0.113.0/24, documentation, TEST-NET-3 (RFC 5737)"),
		      "%s", out);
	/* a cidr wider than a block: each outermost block inside it, once */
	ck_assert_msg(strstr(out, ":9:12: warning: cidr 192.0.0.0/16 of sandbox 'a' opens "
				  "192.0.0.0/24, IETF protocol assignments (RFC 6890)"),
		      "%s", out);
	ck_assert_msg(strstr(out, "opens 192.0.2.0/24, documentation, TEST-NET-1"), "%s", out);
	ck_assert_msg(!strstr(out, "opens 192.0.0.9/32"), "%s", out); /* inside 192.0.0.0/24 */
	ck_assert_msg(!strstr(out, "8.8.8.0/24"), "%s", out);
	ck_assert_msg(strstr(out, rdir) == out, "%s", out); /* starts with the file name */

	/* through a configuration that declares the TEST-NET routable */
	snprintf(conf, sizeof(conf), "%s/pc.yaml", dir);
	snprintf(cfg, sizeof(cfg),
		 "uplinks: [eth0]\nrules: %s\nrun_dir: %s\nstate_dir: %s\n"
		 "dns: {routable: [203.0.113.0/24]}\n"
		 /* users every Debian has, apart where the daemons need them
		  * apart: what stops a daemon is an error of lint */
		 "engine: {user: nobody}\nvault: {user: daemon, worker_user: bin}\n"
		 "log: {user: nobody}\n",
		 rdir, dir, dir);
	write_file(conf, cfg);
	ck_assert_int_eq(lint(out, sizeof(out), conf, 2, argv_conf), PC_EXIT_OK);
	ck_assert_msg(strstr(out, "opens 169.254.0.0/16"), "%s", out);
	ck_assert_msg(!strstr(out, "203.0.113.0/24"), "%s", out);

	/* no cidr entry in a special range (nor anything else lint warns
	 * about: port 53 would be an entry that never matches): no warning */
	write_file(file, "sandbox: a\nmatch: {source: 10.203.0.10/32}\nallow:\n"
			 "  - {cidr: 8.8.8.0/24, ports: [22], proto: tcp}\n");
	ck_assert_int_eq(lint(out, sizeof(out), "/nonexistent", 3, argv), PC_EXIT_OK);
	ck_assert_str_eq(out, "");
	unlink(file);
	unlink(conf);
	rmdir(rdir);
	rmdir(dir);
}
END_TEST

PC_UNIT_SUITE("rules_special", "special", 0, routable_default_none, routable_parsed,
	      routable_errors, cidr_covers_whatever_the_port, lint_warns_about_special_cidr)
