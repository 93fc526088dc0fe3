/* portcullis.yaml: defaults, every key reaching its field, derived and
 * relative paths, and each kind of error with its exact position. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules/rules_int.h"
#include "tests/unit/cfgload.h"
#include "tests/unit/unit.h"

/* The first error of yaml, as "file:line:col: message". */
static const char *load_err(const char *yaml)
{
	struct config c;

	memset(&c, 0x5a, sizeof(c));
	if (cfg_load(yaml, &c) == 0)
		return "(loaded without error)";
	/* Out-parameters are written only on success. */
	for (size_t i = 0; i < sizeof(c); i++)
		if (((unsigned char *)&c)[i] != 0x5a)
			return "(cfg modified on error)";
	return cfg_errbuf;
}

/* The syslog facility by name, the SD-ID's enterprise number. */
START_TEST(syslog_facility_and_enterprise_number)
{
	struct config c;

	ck_assert_int_eq(
	    cfg_load("log: {syslog: {facility: local3, enterprise_number: 99999}}\n", &c), 0);
	ck_assert_uint_eq(c.log.syslog.facility, 19);
	ck_assert_uint_eq(c.log.syslog.pen, 99999);
	ck_assert_int_eq(cfg_load("log: {syslog: {facility: daemon}}\n", &c), 0);
	ck_assert_uint_eq(c.log.syslog.facility, 3);
	ck_assert_str_eq(
	    load_err("log: {syslog: {facility: kern}}\n"),
	    "etc/pc.yaml:1:26: log.syslog.facility: expected local0 to local7, user or "
	    "daemon, found 'kern'");
	ck_assert_str_ne(load_err("log: {syslog: {enterprise_number: 0}}\n"),
			 "(loaded without error)");
}
END_TEST

START_TEST(defaults_are_the_documented_ones)
{
	struct config c;
	char ep[64];

	config_defaults(&c);
	ck_assert_str_eq(c.bridge, "pcbr0");
	ck_assert_str_eq(c.rules_dir, "/etc/portcullis/rules.d");
	ck_assert_str_eq(c.run_dir, "/run/portcullis");
	ck_assert_str_eq(c.state_dir, "/var/lib/portcullis");
	ck_assert_uint_eq(c.queue.base, 100);
	ck_assert_uint_eq(c.queue.count, 2);
	ck_assert_uint_eq(c.queue.maxlen, 4096);
	ck_assert_str_eq(c.engine.user, "portcullis");
	ck_assert(!c.engine.remove_on_exit);
	ck_assert_uint_eq(c.engine.flows_max, 262144);
	ck_assert_uint_eq(c.engine.recheck_s, 60);
	ck_assert_uint_eq(c.engine.sni_timeout_ms, 3000);
	ck_assert_uint_eq(c.limits.new_flows_per_second, 1000);
	ck_assert_uint_eq(c.limits.new_flows_burst, 2000);
	ck_assert_uint_eq(c.dns.n_resolvers, 0);
	ck_assert_uint_eq(c.dns.qtypes, QT_DEFAULT);
	ck_assert_int_eq(c.dns.refuse, DNS_REFUSE_REFUSED);
	ck_assert_uint_eq(c.dns.ttl_min, 30);
	ck_assert_uint_eq(c.dns.ttl_max, 3600);
	ck_assert_uint_eq(c.dns.grace, 60);
	ck_assert_uint_eq(c.dns.learned_per_sandbox, 4096);
	ck_assert_uint_eq(c.dns.learned_total, 100000);
	ck_assert_str_eq(pc_endpoint_str(&c.vault.listen, ep, sizeof(ep)), "0.0.0.0:8443");
	ck_assert_str_eq(c.vault.ca_dir, "/var/lib/portcullis/ca");
	ck_assert_str_eq(c.vault.secrets, "/var/lib/portcullis/secrets");
	ck_assert_str_eq(c.vault.trust, "/etc/ssl/certs/ca-certificates.crt");
	ck_assert_str_eq(c.vault.user, "portcullis-vault");
	ck_assert_str_eq(c.vault.worker_user, "portcullis-vworker");
	ck_assert_uint_eq(c.vault.max_conns_per_sandbox, 64);
	ck_assert_uint_eq(c.vault.max_header_bytes, 32768);
	ck_assert_uint_eq(c.vault.handshake_timeout_ms, 10000);
	ck_assert_uint_eq(c.vault.idle_timeout_ms, 60000);
	ck_assert_uint_eq(c.vault.request_timeout_ms, 60000);
	ck_assert_str_eq(c.log.socket, "/run/portcullis/logd.sock");
	ck_assert_str_eq(c.log.file, "/var/log/portcullis/verdicts.jsonl");
	ck_assert_str_eq(c.log.key, "/var/lib/portcullis/log.key");
	ck_assert_str_eq(c.log.user, "portcullis-log");
	ck_assert_uint_eq(c.log.checkpoint_records, 1000);
	ck_assert_uint_eq(c.log.checkpoint_ms, 1000);
	ck_assert_uint_eq(c.log.rotate_bytes, 0);
	ck_assert(c.log.syslog.local);
	ck_assert_str_eq(c.log.syslog.remote, "");
	ck_assert(!c.log.syslog.tls);
	ck_assert_str_eq(c.log.syslog.ca, "");
	ck_assert_uint_eq(c.log.syslog.spool_records, 100000);
	ck_assert_str_eq(c.log.syslog.socket, "/dev/log");
	ck_assert_uint_eq(c.log.syslog.facility, 16); /* local0 */
	ck_assert_uint_eq(c.log.syslog.pen, 0);	      /* none: never the documentation PEN */
	ck_assert(!c.log.fsync_batch);
	ck_assert_uint_eq(c.sandbox.pool4.addr.family, 0); /* the bridge's subnet */
	ck_assert_uint_eq(c.sandbox.pool6.addr.family, 0);
	ck_assert_str_eq(c.sandbox.user, "nobody");
}
END_TEST

START_TEST(empty_file_means_all_defaults)
{
	struct config c, d;

	ck_assert_int_eq(cfg_load("# nothing but a comment\n", &c), 0);
	config_defaults(&d);
	ck_assert_str_eq(c.path, "etc/pc.yaml");
	memcpy(d.path, c.path, sizeof(d.path));
	ck_assert_int_eq(memcmp(&c, &d, sizeof(c)), 0);
	ck_assert_int_eq(cfg_load("", &c), 0);
}
END_TEST

START_TEST(every_key_reaches_its_field)
{
	struct config c;
	char ep[64], a[64];
	const char *y = "bridge: br-sb\n"
			"rules: /srv/rules\n"
			"run_dir: /tmp/run\n"
			"state_dir: /tmp/state\n"
			"queue: {base: 7, count: 3, maxlen: 99}\n"
			"engine:\n"
			"  user: eng\n"
			"  remove_table_on_exit: true\n"
			"  flows_max: 1000\n"
			"  sni_timeout_ms: 500\n"
			"dns:\n"
			"  resolvers: [198.51.100.53, '2001:db8::53']\n"
			"  qtypes: [a, TXT]\n"
			"  refuse_with: nxdomain\n"
			"  ttl_min: 5\n"
			"  ttl_max: 50\n"
			"  grace: 0\n"
			"  max_learned_per_sandbox: 10\n"
			"  max_learned_total: 20\n"
			"vault:\n"
			"  listen: '[::1]:9443'\n"
			"  ca_dir: /v/ca\n"
			"  secrets: /v/sec\n"
			"  trust: /v/trust.pem\n"
			"  user: vlt\n"
			"  worker_user: vwk\n"
			"  max_conns_per_sandbox: 3\n"
			"  max_header_bytes: 2048\n"
			"  handshake_timeout_ms: 200\n"
			"  idle_timeout_ms: 300\n"
			"  request_timeout_ms: 400\n"
			"log:\n"
			"  socket: /l/s.sock\n"
			"  file: /l/v.jsonl\n"
			"  key: /l/k\n"
			"  user: lg\n"
			"  checkpoint: {records: 5, interval_ms: 20}\n"
			"  rotate_bytes: 10000000000\n"
			"  fsync_batch: true\n"
			"  syslog: {local: false, remote: 'siem.example.com:6514', tls: true,\n"
			"           ca: /l/ca.pem, spool: 7, socket: /l/log.sock}\n"
			"sandbox: {pool4: 10.203.0.128/25, pool6: 'fd00:203::/64', user: sbx}\n";

	ck_assert_msg(cfg_load(y, &c) == 0, "%s", cfg_errbuf);
	ck_assert_str_eq(c.bridge, "br-sb");
	ck_assert_str_eq(c.rules_dir, "/srv/rules");
	ck_assert_str_eq(c.run_dir, "/tmp/run");
	ck_assert_str_eq(c.state_dir, "/tmp/state");
	ck_assert_uint_eq(c.queue.base, 7);
	ck_assert_uint_eq(c.queue.count, 3);
	ck_assert_uint_eq(c.queue.maxlen, 99);
	ck_assert_str_eq(c.engine.user, "eng");
	ck_assert(c.engine.remove_on_exit);
	ck_assert_uint_eq(c.engine.flows_max, 1000);
	ck_assert_uint_eq(c.engine.sni_timeout_ms, 500);
	ck_assert_uint_eq(c.dns.n_resolvers, 2);
	ck_assert_str_eq(pc_addr_str(&c.dns.resolvers[0], a, sizeof(a)), "198.51.100.53");
	ck_assert_str_eq(pc_addr_str(&c.dns.resolvers[1], a, sizeof(a)), "2001:db8::53");
	ck_assert_uint_eq(c.dns.qtypes, QT_A | QT_TXT);
	ck_assert_int_eq(c.dns.refuse, DNS_REFUSE_NXDOMAIN);
	ck_assert_uint_eq(c.dns.ttl_min, 5);
	ck_assert_uint_eq(c.dns.ttl_max, 50);
	ck_assert_uint_eq(c.dns.grace, 0);
	ck_assert_uint_eq(c.dns.learned_per_sandbox, 10);
	ck_assert_uint_eq(c.dns.learned_total, 20);
	ck_assert_str_eq(pc_endpoint_str(&c.vault.listen, ep, sizeof(ep)), "[::1]:9443");
	ck_assert_str_eq(c.vault.ca_dir, "/v/ca");
	ck_assert_str_eq(c.vault.secrets, "/v/sec");
	ck_assert_str_eq(c.vault.trust, "/v/trust.pem");
	ck_assert_str_eq(c.vault.user, "vlt");
	ck_assert_str_eq(c.vault.worker_user, "vwk");
	ck_assert_uint_eq(c.vault.max_conns_per_sandbox, 3);
	ck_assert_uint_eq(c.vault.max_header_bytes, 2048);
	ck_assert_uint_eq(c.vault.handshake_timeout_ms, 200);
	ck_assert_uint_eq(c.vault.idle_timeout_ms, 300);
	ck_assert_uint_eq(c.vault.request_timeout_ms, 400);
	ck_assert_str_eq(c.log.socket, "/l/s.sock");
	ck_assert_str_eq(c.log.file, "/l/v.jsonl");
	ck_assert_str_eq(c.log.key, "/l/k");
	ck_assert_str_eq(c.log.user, "lg");
	ck_assert_uint_eq(c.log.checkpoint_records, 5);
	ck_assert_uint_eq(c.log.checkpoint_ms, 20);
	ck_assert(c.log.rotate_bytes == 10000000000ULL);
	ck_assert(!c.log.syslog.local);
	ck_assert_str_eq(c.log.syslog.remote, "siem.example.com:6514");
	ck_assert(c.log.syslog.tls);
	ck_assert_str_eq(c.log.syslog.ca, "/l/ca.pem");
	ck_assert_uint_eq(c.log.syslog.spool_records, 7);
	ck_assert_str_eq(c.log.syslog.socket, "/l/log.sock");
	ck_assert(c.log.fsync_batch);
	ck_assert_str_eq(pc_addr_str(&c.sandbox.pool4.addr, a, sizeof(a)), "10.203.0.128");
	ck_assert_uint_eq(c.sandbox.pool4.len, 25);
	ck_assert_str_eq(pc_addr_str(&c.sandbox.pool6.addr, a, sizeof(a)), "fd00:203::");
	ck_assert_uint_eq(c.sandbox.pool6.len, 64);
	ck_assert_str_eq(c.sandbox.user, "sbx");
}
END_TEST

START_TEST(unset_paths_follow_run_and_state_dir)
{
	struct config c;

	ck_assert_int_eq(cfg_load("run_dir: /tmp/r\nstate_dir: /tmp/s\nlog: {key: /k}\n", &c), 0);
	ck_assert_str_eq(c.log.socket, "/tmp/r/logd.sock");
	ck_assert_str_eq(c.log.key, "/k");
	ck_assert_str_eq(c.vault.ca_dir, "/tmp/s/ca");
	ck_assert_str_eq(c.vault.secrets, "/tmp/s/secrets");
	/* The log file is not under state_dir: it has its own default. */
	ck_assert_str_eq(c.log.file, "/var/log/portcullis/verdicts.jsonl");
}
END_TEST

START_TEST(relative_paths_start_at_the_config_directory)
{
	char dir[] = "/tmp/pc-config-XXXXXX", path[PC_PATH_MAX], want[PC_PATH_MAX];
	const char *y = "rules: rules.d\nrun_dir: run\nlog: {file: ../v.jsonl}\n";
	struct config c;
	struct pc_err e;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/portcullis.yaml", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(y, f);
	fclose(f);
	ck_assert_int_eq(config_load(path, &c, &e), 0);
	ck_assert_str_eq(c.path, path);
	snprintf(want, sizeof(want), "%s/rules.d", dir);
	ck_assert_str_eq(c.rules_dir, want);
	snprintf(want, sizeof(want), "%s/run/logd.sock", dir);
	ck_assert_str_eq(c.log.socket, want);
	snprintf(want, sizeof(want), "%s/../v.jsonl", dir);
	ck_assert_str_eq(c.log.file, want);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(resolvers_take_one_address_or_a_list)
{
	struct config c;

	ck_assert_int_eq(cfg_load("dns: {resolvers: 198.51.100.53}\n", &c), 0);
	ck_assert_uint_eq(c.dns.n_resolvers, 1);
	ck_assert_int_eq(cfg_load("dns: {resolvers: []}\n", &c), 0);
	ck_assert_uint_eq(c.dns.n_resolvers, 0);
	ck_assert_int_eq(cfg_load("dns: {qtypes: []}\n", &c), 0);
	ck_assert_uint_eq(c.dns.qtypes, 0);
}
END_TEST

START_TEST(uplinks_take_one_name_or_a_list)
{
	struct config c;

	ck_assert_int_eq(cfg_load("bridge: pcbr0\n", &c), 0);
	ck_assert_uint_eq(c.n_uplinks, 0); /* no default: portcullisd refuses to start */
	ck_assert_int_eq(cfg_load("uplinks: eth0\n", &c), 0);
	ck_assert_uint_eq(c.n_uplinks, 1);
	ck_assert_str_eq(c.uplinks[0], "eth0");
	ck_assert_int_eq(cfg_load("uplinks: [eth0, wg0]\n", &c), 0);
	ck_assert_uint_eq(c.n_uplinks, 2);
	ck_assert_str_eq(c.uplinks[1], "wg0");
}
END_TEST

START_TEST(missing_file_is_a_read_error)
{
	struct config c;
	struct pc_err e;

	ck_assert_int_eq(config_load("/nonexistent/pc.yaml", &c, &e), PC_ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/pc.yaml"));
}
END_TEST

/* ---- every error, with its position and words ---------------------------- */

static const struct {
	const char *yaml, *err;
} errors[] = {
    {"bridge: pcbr0\nqueue: [1\n",
     "etc/pc.yaml:3:1: invalid YAML: did not find expected ',' or ']' (while parsing a flow "
     "sequence at line 2 column 8)"},
    {"bridge: a\nbridge: b\n",
     "etc/pc.yaml:2:1: duplicate key 'bridge' (first at line 1 column 1); expected each key "
     "once per mapping"},
    {"brige: pcbr1\n",
     "etc/pc.yaml:1:1: unknown key 'brige' in the configuration (did you mean 'bridge'?); "
     "expected one of: bridge, uplinks, rules, run_dir, state_dir, queue, engine, limits, dns, "
     "vault, log, "
     "sandbox"},
    {"queue:\n  bsae: 1\n",
     "etc/pc.yaml:2:3: unknown key 'bsae' in 'queue' (did you mean 'base'?); expected one of: "
     "base, count, maxlen"},
    {"log: {syslog: {remtoe: x}}\n",
     "etc/pc.yaml:1:16: unknown key 'remtoe' in 'log.syslog' (did you mean 'remote'?); "
     "expected one of: local, remote, tls, ca, spool, socket, facility, "
     "enterprise_number"},
    {"frobnicate: 1\n",
     "etc/pc.yaml:1:1: unknown key 'frobnicate' in the configuration; expected one of: "
     "bridge, uplinks, rules, run_dir, state_dir, queue, engine, limits, dns, vault, log, sandbox"},
    {"queue.base: 1\n",
     "etc/pc.yaml:1:1: unknown key 'queue.base' in the configuration; write nested keys as "
     "mappings (a: {b: ...})"},
    {"queue: 4\n", "etc/pc.yaml:1:8: queue: expected a mapping, found a number (4)"},
    {"- bridge\n", "etc/pc.yaml:1:1: configuration: expected a mapping of settings, found a list"},
    {"bridge: pcbr0\n---\nbridge: x\n",
     "etc/pc.yaml:3:1: a second YAML document; expected one configuration per file"},
    {"queue: {count: 0}\n",
     "etc/pc.yaml:1:16: queue.count: expected a whole number from 1 to 64, found 0"},
    {"limits: {new_flows_per_second: 0}\n",
     "etc/pc.yaml:1:32: limits.new_flows_per_second: expected a whole number from 1 to 1000000, "
     "found 0"},
    {"queue: {count: \"2\"}\n",
     "etc/pc.yaml:1:16: queue.count: expected a whole number from 1 to 64, found a string "
     "('2'); write numbers without quotes"},
    {"queue: {maxlen: 010}\n",
     "etc/pc.yaml:1:17: queue.maxlen: expected a whole number from 1 to 1048576, found '010' "
     "(leading zeros are ambiguous)"},
    {"queue: {base: -1}\n",
     "etc/pc.yaml:1:15: queue.base: expected a whole number from 0 to 65535, found a number "
     "(-1)"},
    {"queue: {base: 99999999999999999999999}\n",
     "etc/pc.yaml:1:15: queue.base: expected a whole number from 0 to 65535, found "
     "99999999999999999999999"},
    {"queue: {base: 65535, count: 2}\n",
     "etc/pc.yaml:1:29: queue.base + queue.count goes past queue number 65535; expected base "
     "+ count <= 65536"},
    {"engine: {remove_table_on_exit: yes}\n",
     "etc/pc.yaml:1:32: engine.remove_table_on_exit: expected true or false, found a string "
     "('yes')"},
    {"engine: {user: Root!}\n",
     "etc/pc.yaml:1:16: engine.user: invalid user name 'Root!'; expected a system user: "
     "lower-case letters, digits, '_', '-'"},
    {"bridge: a-very-long-bridge-name\n",
     "etc/pc.yaml:1:9: bridge: invalid interface name 'a-very-long-bridge-name'; expected 1-15 "
     "characters without '/', ':' or spaces"},
    {"bridge:\n", "etc/pc.yaml:1:8: bridge: expected a string, found nothing (null)"},
    {"dns: {resolvers: [1.2.3.4:53]}\n",
     "etc/pc.yaml:1:19: dns.resolvers: invalid address '1.2.3.4:53'; expected an IPv4 or IPv6 "
     "address (port 53 is implied)"},
    {"uplinks: [eth0, eth0]\n",
     "etc/pc.yaml:1:17: uplinks: 'eth0' is listed twice; expected each interface once"},
    {"uplinks: [a/b]\n",
     "etc/pc.yaml:1:11: uplinks: invalid interface name 'a/b'; expected 1-15 characters "
     "without '/', ':' or spaces"},
    {"uplinks: {a: 1}\n",
     "etc/pc.yaml:1:10: uplinks: expected a list of interface names, found a mapping"},
    {"dns: {resolvers: [1.2.3.4, 1.2.3.4]}\n",
     "etc/pc.yaml:1:28: dns.resolvers: '1.2.3.4' is listed twice; expected each resolver once"},
    {"dns: {resolvers: [1.1.1.1, 1.1.1.2, 1.1.1.3, 1.1.1.4, 1.1.1.5, 1.1.1.6, 1.1.1.7, "
     "1.1.1.8, 1.1.1.9]}\n",
     "etc/pc.yaml:1:18: dns.resolvers: 9 addresses; expected at most 8"},
    {"dns: {resolvers: {a: 1}}\n",
     "etc/pc.yaml:1:18: dns.resolvers: expected a list of IP addresses, found a mapping"},
    {"dns: {qtypes: [A, AAA]}\n",
     "etc/pc.yaml:1:19: dns.qtypes: unknown DNS type 'AAA' (did you mean 'AAAA'?); expected "
     "one of A, AAAA, CNAME, HTTPS, SVCB, TXT, MX, SRV, PTR, NS, CAA"},
    {"dns: {qtypes: A}\n",
     "etc/pc.yaml:1:15: dns.qtypes: expected a list of DNS types like [A, AAAA], found a "
     "string ('A')"},
    {"dns: {refuse_with: drop}\n",
     "etc/pc.yaml:1:20: dns.refuse_with: expected refused or nxdomain, found 'drop'"},
    {"dns: {ttl_min: 100, ttl_max: 50}\n",
     "etc/pc.yaml:1:30: dns.ttl_min (100) is above dns.ttl_max (50); expected min <= max"},
    {"dns: {max_learned_per_sandbox: 100, max_learned_total: 50}\n",
     "etc/pc.yaml:1:32: dns.max_learned_per_sandbox (100) is above dns.max_learned_total (50); "
     "expected per_sandbox <= total"},
    {"vault: {listen: 1.2.3.4}\n",
     "etc/pc.yaml:1:17: vault.listen: invalid endpoint '1.2.3.4'; expected an address and port "
     "like '0.0.0.0:8443' or '[::1]:8443'"},
    {"vault: {listen: 'localhost:8443'}\n",
     "etc/pc.yaml:1:17: vault.listen: invalid endpoint 'localhost:8443'; expected an address "
     "and port like '0.0.0.0:8443' or '[::1]:8443'"},
    {"vault: {trust: ''}\n",
     "etc/pc.yaml:1:16: vault.trust: expected a path, found an empty string"},
    {"log: {syslog: {remote: 'siem.example.com'}}\n",
     "etc/pc.yaml:1:24: log.syslog.remote: invalid endpoint 'siem.example.com'; expected "
     "\"host:port\" like 'siem.example.com:6514', or \"\" for none"},
    {"log: {syslog: {remote: 'bad..name:514'}}\n",
     "etc/pc.yaml:1:24: log.syslog.remote: invalid endpoint 'bad..name:514'; expected "
     "\"host:port\" like 'siem.example.com:6514', or \"\" for none"},
    {"log: {syslog: {tls: true}}\n",
     "etc/pc.yaml:1:21: log.syslog.tls is true but log.syslog.remote is not set; expected a "
     "collector \"host:port\" to send to"},
    {"log: {syslog: {ca: /x.pem}}\n",
     "etc/pc.yaml:1:20: log.syslog.ca is set but log.syslog.tls is false; expected tls: true "
     "(the CA is only used for TLS)"},
    {"log: {checkpoint: 5}\n",
     "etc/pc.yaml:1:19: log.checkpoint: expected a mapping, found a number (5)"},
    {"sandbox: {pool4: 'fd00::/64'}\n",
     "etc/pc.yaml:1:18: sandbox.pool4: invalid prefix 'fd00::/64'; expected an IPv4 prefix "
     "like '10.203.0.128/25'"},
    {"sandbox: {pool6: 10.0.0.1/24}\n",
     "etc/pc.yaml:1:18: sandbox.pool6: invalid prefix '10.0.0.1/24'; expected an IPv6 prefix "
     "like 'fd00:203::/64'"},
    {"bridge: &b pcbr0\nrules: *b\n",
     "etc/pc.yaml:2:8: YAML aliases (*b) are not supported; write the value out (a wildcard or "
     "a value starting with '*' must be quoted: \"*b\")"},
    /* portcullis.yaml read by the same loader: Latin-1 says the file must be UTF-8 */
    {"bridge: pcbr0 # br\xfc"
     "cke\n",
     "etc/pc.yaml:1:19: byte 0xFC is not UTF-8 (invalid leading UTF-8 octet); the file must be "
     "UTF-8: save it as UTF-8 or convert it (iconv -f latin1 -t utf-8)"},
    {"bridge: !!int 3\n",
     "etc/pc.yaml:1:9: YAML tag 'tag:yaml.org,2002:int' is not supported; expected a plain "
     "value"},
    {"[a]: 1\n", "etc/pc.yaml:1:1: expected a key (a name), found a list"},
    {"bridge: \"a\\0b\"\n", "etc/pc.yaml:1:9: value contains a NUL character; expected text"},
};

START_TEST(error_has_position_and_expectation)
{
	ck_assert_str_eq(load_err(errors[_i].yaml), errors[_i].err);
}
END_TEST

START_TEST(too_long_run_dir_is_refused)
{
	char y[600];

	snprintf(y, sizeof(y), "run_dir: /%0250d\n", 0);
	ck_assert_str_eq(load_err(y), "etc/pc.yaml:1:10: run_dir: too long to hold the paths "
				      "derived from it; expected at most 240 bytes");
}
END_TEST

static void count_err(const struct pc_err *er, void *arg)
{
	(void)er;
	(*(int *)arg)++;
}

START_TEST(every_error_is_reported)
{
	const char *y = "brige: x\nqueue: {count: 0}\ndns: {refuse_with: drop}\n";
	char path[] = "/tmp/pc-config-XXXXXX";
	int fd = mkstemp(path), n = 0;
	struct config c;
	struct pc_err e;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, y, strlen(y)), (int)strlen(y));
	close(fd);
	ck_assert_int_eq(config_load_report(path, &c, &e, count_err, &n), PC_EPARSE);
	ck_assert_int_eq(n, 3);
	ck_assert_uint_eq(e.line, 1);
	unlink(path);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");

	PC_UNIT_TESTS(tc, defaults_are_the_documented_ones, empty_file_means_all_defaults,
		      every_key_reaches_its_field, unset_paths_follow_run_and_state_dir,
		      relative_paths_start_at_the_config_directory,
		      resolvers_take_one_address_or_a_list, uplinks_take_one_name_or_a_list,
		      missing_file_is_a_read_error);
	tcase_add_loop_test(tc, error_has_position_and_expectation, 0,
			    (int)(sizeof(errors) / sizeof(errors[0])));
	PC_UNIT_TESTS(tc, too_long_run_dir_is_refused, every_error_is_reported,
		      syslog_facility_and_enterprise_number);
	suite_add_tcase(s, tc);
	return s;
}

PC_UNIT_MAIN(config_suite)
