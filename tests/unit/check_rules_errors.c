/* Every way a rule file can be wrong, each with the exact file:line:col
 * and words the admin sees; errors across files and directories; input
 * bounds; and that a failed load never yields a policy. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules/rules_int.h"
#include "tests/unit/unit.h"

static char errbuf[1024];

/* The first error of loading yaml as t.yaml; out must stay untouched. */
static const char *load_err(const char *yaml)
{
	struct policy *sentinel = (struct policy *)&errbuf, *p = sentinel;
	struct pc_err e = {0};

	if (policy_load_buffer("t.yaml", yaml, strlen(yaml), NULL, &p, &e) == 0) {
		policy_unref(p);
		return "(loaded without error)";
	}
	if (p != sentinel)
		return "(out written on error)";
	return pc_err_str(&e, errbuf, sizeof(errbuf));
}

#define SB   "sandbox: s\nmatch: {port: tap0}\n" /* two lines of a valid head */
#define X16  "xxxxxxxxxxxxxxxx"
#define X256 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16

static const struct {
	const char *yaml, *err;
} cases[] = {
    /* YAML itself */
    {"sandbox: a\nmatch: {source: 10.0.0.1\n",
     "t.yaml:3:1: invalid YAML: did not find expected ',' or '}' (while parsing a flow mapping "
     "at line 2 column 8)"},
    {"sandbox: a\nmatch:\n\t- x\n",
     "t.yaml:3:1: invalid YAML: a tab character; expected spaces (YAML indents with spaces "
     "only)"},
    {"sandbox: \"a\n",
     "t.yaml:2:1: invalid YAML: found unexpected end of stream (while scanning a quoted scalar "
     "at line 1 column 10)"},
    {"sandbox: \xff\n",
     "t.yaml:1:10: byte 0xFF is not UTF-8 (invalid leading UTF-8 octet); the "
     "file must be UTF-8: save it as UTF-8 or convert it (iconv -f latin1 -t utf-8)"},
    /* a Latin-1 'é' in a comment: the position of the 'é', not of the byte after it */
    {"sandbox: s\n# caf\xe9 au lait\nmatch: {port: tap0}\n",
     "t.yaml:2:6: byte 0xE9 is not UTF-8 (invalid trailing UTF-8 octet); the file must be "
     "UTF-8: save it as UTF-8 or convert it (iconv -f latin1 -t utf-8)"},
    /* an unquoted wildcard is read as a YAML alias: say to quote it */
    {SB "allow:\n  - host: *.example.com\n    ports: [443]\n",
     "t.yaml:4:11: invalid YAML: an unquoted '*' starts a YAML alias; quote a wildcard: "
     "\"*.example.com\""},
    {SB "allow: [{host: *.example.com, ports: [443]}]\n",
     "t.yaml:3:16: invalid YAML: an unquoted '*' starts a YAML alias; quote a wildcard: "
     "\"*.example.com\""},
    {SB "sandbox: t\n",
     "t.yaml:3:1: duplicate key 'sandbox' (first at line 1 column 1); expected each key once "
     "per mapping"},
    {"sandbox: &n a\nmatch: {port: *n}\n",
     "t.yaml:2:15: YAML aliases (*n) are not supported; write the value out (a wildcard or a "
     "value starting with '*' must be quoted: \"*n\")"},
    {SB "allow: !!seq []\n",
     "t.yaml:3:8: YAML tag 'tag:yaml.org,2002:seq' is not supported; expected a plain list"},
    /* unknown keys */
    {SB "allwo: []\n",
     "t.yaml:3:1: unknown key 'allwo' in a sandbox (did you mean 'allow'?); expected one of: "
     "sandbox, match, allow, secrets, dns, limits"},
    {SB "comment: hi\n",
     "t.yaml:3:1: unknown key 'comment' in a sandbox; expected one of: sandbox, match, allow, "
     "secrets, dns, limits"},
    {"sandbox: s\nmatch: {sorce: 10.0.0.1}\n",
     "t.yaml:2:9: unknown key 'sorce' in match (did you mean 'source'?); expected one of: "
     "source, mac, port"},
    {SB "allow:\n  - {host: a.example.com, prots: [1]}\n",
     "t.yaml:4:27: unknown key 'prots' in an allow entry (did you mean 'ports'?); expected one "
     "of: host, cidr, ports, proto"},
    {SB "allow: [{host: a.example.com, ports: [1]}]\nsecrets:\n  - {nmae: A, host: "
	"a.example.com, port: 1}\n",
     "t.yaml:5:6: unknown key 'nmae' in a secret (did you mean 'name'?); expected one of: "
     "name, host, port, header, format"},
    {SB "dns: {qtype: [A]}\n",
     "t.yaml:3:7: unknown key 'qtype' in dns (did you mean 'qtypes'?); expected one of: "
     "qtypes, refuse_with"},
    /* wrong types */
    {"hello\n",
     "t.yaml:1:1: rule file: expected a sandbox (a mapping with sandbox, match, allow) or a "
     "list of them, found a string ('hello')"},
    {"- 42\n",
     "t.yaml:1:3: sandbox: expected a mapping with sandbox, match, allow and secrets, found a "
     "number (42)"},
    {"sandbox: [a]\nmatch: {port: t}\n", "t.yaml:1:10: sandbox: expected a string, found a list"},
    {"sandbox: s\nmatch: 10.0.0.1\n",
     "t.yaml:2:8: match: expected a mapping with source, mac and/or port (which packets are "
     "this sandbox's), found a number (10.0.0.1)"},
    {SB "allow: {host: a.example.com}\n",
     "t.yaml:3:8: allow: expected a list of allow entries, found a mapping"},
    {SB "allow:\n  - a.example.com\n",
     "t.yaml:4:5: allow entry: expected a mapping like {host: api.example.com, ports: [443]}, "
     "found a string ('a.example.com')"},
    {SB "allow: [{host: a.example.com, ports: 443}]\n",
     "t.yaml:3:38: ports: expected a list of ports like [443] or [\"8000-8080\"], found a "
     "number (443)"},
    {SB "allow: [{host: [a.example.com], ports: [1]}]\n",
     "t.yaml:3:16: host: expected a string, found a list"},
    {SB "secrets: {name: A}\n",
     "t.yaml:3:10: secrets: expected a list of secrets, found a mapping"},
    {SB "allow: [{host: a.example.com, ports: [1]}]\nsecrets: [A]\n",
     "t.yaml:4:11: secret: expected a mapping like {name: GITHUB_TOKEN, host: api.github.com}, "
     "found a string ('A')"},
    {SB "allow: [{host: a.example.com, ports: [1]}]\nsecrets: [{name: A, host: a.example.com, "
	"port: \"1\"}]\n",
     "t.yaml:4:48: port: expected a whole number from 1 to 65535, found a string ('1'); write "
     "numbers without quotes"},
    {SB "dns: [A]\n", "t.yaml:3:6: dns: expected a mapping with qtypes and/or refuse_with, found "
		      "a list"},
    /* missing keys */
    {"match: {port: t}\n",
     "t.yaml:1:1: sandbox: no 'sandbox' key; expected the sandbox's name, like 'sandbox: "
     "agent-1'"},
    {"sandbox: s\nallow: []\n",
     "t.yaml:1:1: sandbox: no 'match'; expected a selector like 'match: {source: "
     "10.0.0.10/32}'"},
    {"sandbox: s\nmatch: {}\n",
     "t.yaml:2:8: match: no selector; expected at least one of source, mac, port"},
    {SB "allow: [{ports: [1]}]\n",
     "t.yaml:3:9: allow entry: no destination; expected 'host' (a name) or 'cidr' (a network)"},
    {SB "allow:\n  - host: a.example.com\n",
     "t.yaml:4:5: allow entry: no 'ports'; expected a list of the ports it allows, like [443]"},
    {SB "allow: [{host: a.example.com, cidr: 10.0.0.0/8, ports: [1]}]\n",
     "t.yaml:3:31: an allow entry has host or cidr, not both; expected one entry for each"},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{host: a.example.com}]\n",
     "t.yaml:4:11: secret: no 'name'; expected the secret's name, like GITHUB_TOKEN"},
    {SB "secrets: [{name: A}]\n",
     "t.yaml:3:11: secret: no 'host'; expected the one host it may be sent to"},
    /* names */
    {"sandbox: agent 1\nmatch: {port: t}\n",
     "t.yaml:1:10: sandbox: invalid name 'agent 1'; expected at most 63 letters, digits, '.', "
     "'_' or '-', starting with a letter or digit"},
    {"sandbox: -a\nmatch: {port: t}\n",
     "t.yaml:1:10: sandbox: invalid name '-a'; expected at most 63 letters, digits, '.', '_' or "
     "'-', starting with a letter or digit"},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: gh_token, host: "
	"a.example.com}]\n",
     "t.yaml:4:18: name: invalid secret name 'gh_token'; expected upper-case letters, digits "
     "and '_', starting with a letter (like GITHUB_TOKEN), at most 63"},
    /* host patterns */
    {SB "allow: [{host: a.*.example.com, ports: [1]}]\n",
     "t.yaml:3:16: host: invalid host 'a.*.example.com': '*' is only allowed as the whole first "
     "label, as in '*.example.com'; expected a DNS name like 'api.example.com' or "
     "'*.example.com'"},
    {SB "allow: [{host: '*a.example.com', ports: [1]}]\n",
     "t.yaml:3:16: host: invalid host '*a.example.com': '*' is only allowed as the whole first "
     "label, as in '*.example.com'; expected a DNS name like 'api.example.com' or "
     "'*.example.com'"},
    {SB "allow: [{host: '*', ports: [1]}]\n",
     "t.yaml:3:16: host: invalid host '*': a lone '*' would allow every name; expected "
     "'*.example.com'"},
    {SB "allow: [{host: '*.com', ports: [1]}]\n",
     "t.yaml:3:16: host: invalid host '*.com': a wildcard must keep at least two labels after "
     "'*.' (a whole top-level domain is too wide); expected a DNS name like 'api.example.com' "
     "or '*.example.com'"},
    {SB "allow: [{host: a..example.com, ports: [1]}]\n",
     "t.yaml:3:16: host: invalid host 'a..example.com': it has an empty label (two dots in a "
     "row, or a leading dot); expected a DNS name like 'api.example.com' or '*.example.com'"},
    {SB "allow: [{host: "
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.com, ports: "
	"[1]}]\n",
     "t.yaml:3:16: host: invalid host "
     "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.com': it has a "
     "label longer than 63 characters; expected a DNS name like 'api.example.com' or "
     "'*.example.com'"},
    {SB "allow: [{host: a_b!.example.com, ports: [1]}]\n",
     "t.yaml:3:16: host: invalid host 'a_b!.example.com': it contains a character other than "
     "letters, digits, '-', '_' and '.'; expected a DNS name like 'api.example.com' or "
     "'*.example.com'"},
    {SB "allow: [{host: 192.0.2.1, ports: [1]}]\n",
     "t.yaml:3:16: host: '192.0.2.1' is an address, not a host name; use 'cidr: 192.0.2.1' for "
     "addresses"},
    {SB "allow: [{host: 'https://a.example.com', ports: [1]}]\n",
     "t.yaml:3:16: host: invalid host 'https://a.example.com': it is a URL; expected only the "
     "host name (like 'api.example.com')"},
    {SB "allow: [{host: 'a.example.com:443', ports: [1]}]\n",
     "t.yaml:3:16: host: invalid host 'a.example.com:443': it has a ':'; expected only the host "
     "name (ports go in 'ports', addresses in 'cidr')"},
    {SB "allow: [{host: '2001:db8::/32', ports: [1]}]\n",
     "t.yaml:3:16: host: '2001:db8::/32' is an address, not a host name; use 'cidr: "
     "2001:db8::/32' for addresses"},
    {SB "allow: [{host: '', ports: [1]}]\n",
     "t.yaml:3:16: host: empty host name; expected a DNS name like 'api.example.com'"},
    /* cidr, source, mac, port */
    {SB "allow: [{cidr: 10.0.0.1/24, ports: [1]}]\n",
     "t.yaml:3:16: cidr: invalid prefix '10.0.0.1/24': address bits are set after the first 24 "
     "(the network is 10.0.0.0/24); expected a network like '10.0.0.0/24' or '2001:db8::/64', "
     "or one address"},
    {SB "allow: [{cidr: 10.0.0.0/33, ports: [1]}]\n",
     "t.yaml:3:16: cidr: invalid prefix '10.0.0.0/33': the prefix length must be a number from "
     "0 to 32; expected a network like '10.0.0.0/24' or '2001:db8::/64', or one address"},
    {SB "allow: [{cidr: '2001:db8::/129', ports: [1]}]\n",
     "t.yaml:3:16: cidr: invalid prefix '2001:db8::/129': the prefix length must be a number "
     "from 0 to 128; expected a network like '10.0.0.0/24' or '2001:db8::/64', or one address"},
    {SB "allow: [{cidr: example.com/24, ports: [1]}]\n",
     "t.yaml:3:16: cidr: invalid prefix 'example.com/24': 'example.com' is not an IP address; "
     "expected a network like '10.0.0.0/24' or '2001:db8::/64', or one address"},
    {"sandbox: s\nmatch: {source: []}\n",
     "t.yaml:2:17: match.source: the list is empty; expected at least one prefix"},
    {"sandbox: s\nmatch: {source: [10.0.0.0/24, 10.0.0.128/25]}\n",
     "t.yaml:2:31: match.source: 10.0.0.128/25 overlaps 10.0.0.0/24 (line 2 column 18) of the "
     "same sandbox; expected each address once"},
    {"sandbox: s\nmatch: {mac: '02:00:5e:10:00'}\n",
     "t.yaml:2:14: match.mac: invalid MAC address '02:00:5e:10:00'; expected six hex bytes like "
     "02:00:5e:10:00:01"},
    {"sandbox: s\nmatch: {mac: 'ff:ff:ff:ff:ff:ff'}\n",
     "t.yaml:2:14: match.mac: 'ff:ff:ff:ff:ff:ff' is a multicast address, never a sender; "
     "expected the sandbox's own (unicast) MAC"},
    {"sandbox: s\nmatch: {port: 'tap/0'}\n",
     "t.yaml:2:15: match.port: invalid interface name 'tap/0'; expected the bridge port's name "
     "(1-15 characters without '/', ':' or spaces)"},
    /* ports and proto */
    {SB "allow: [{cidr: 10.0.0.0/8, ports: [0]}]\n",
     "t.yaml:3:36: ports: port 0 is not a port; expected a port from 1 to 65535 or a range like "
     "\"8000-8080\""},
    {SB "allow: [{cidr: 10.0.0.0/8, ports: [65536]}]\n",
     "t.yaml:3:36: ports: '65536' is out of range; expected a port from 1 to 65535 or a range "
     "like \"8000-8080\""},
    {SB "allow: [{cidr: 10.0.0.0/8, ports: [https]}]\n",
     "t.yaml:3:36: ports: invalid port 'https'; expected a port from 1 to 65535 or a range "
     "like \"8000-8080\""},
    {SB "allow: [{cidr: 10.0.0.0/8, ports: ['9000-8000']}]\n",
     "t.yaml:3:36: ports: invalid range '9000-8000': the first port is above the last; "
     "expected lo-hi with lo <= hi"},
    {SB "allow: [{cidr: 10.0.0.0/8, ports: ['1-2-3']}]\n",
     "t.yaml:3:36: ports: invalid port '1-2-3'; expected a port from 1 to 65535 or a range "
     "like \"8000-8080\""},
    {SB "allow: [{cidr: 10.0.0.0/8, ports: [-1]}]\n",
     "t.yaml:3:36: ports: invalid port '-1'; expected a port from 1 to 65535 or a range like "
     "\"8000-8080\""},
    {SB "allow: [{cidr: 10.0.0.0/8, ports: []}]\n",
     "t.yaml:3:35: ports: the list is empty; expected at least one port"},
    {SB "allow: [{cidr: 10.0.0.0/8, ports: [1], proto: icmp}]\n",
     "t.yaml:3:47: proto: expected tcp, udp or any, found 'icmp'"},
    /* secrets */
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"'*.example.com'}]\n",
     "t.yaml:4:27: host: a secret is bound to one exact host, not '*.example.com'; expected a "
     "name without '*'"},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"a.example.com, header: Host}]\n",
     "t.yaml:4:50: header: invalid header name 'Host'; expected an HTTP header name like "
     "Authorization (not Host, Content-Length, Transfer-Encoding or Connection)"},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"a.example.com, header: 'X Token'}]\n",
     "t.yaml:4:50: header: invalid header name 'X Token'; expected an HTTP header name like "
     "Authorization (not Host, Content-Length, Transfer-Encoding or Connection)"},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"a.example.com, format: 'Bearer'}]\n",
     "t.yaml:4:50: format: 'Bearer' must contain {secret} exactly once; expected something "
     "like \"Bearer {secret}\""},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"a.example.com, format: '{secret}:{secret}'}]\n",
     "t.yaml:4:50: format: '{secret}:{secret}' must contain {secret} exactly once; expected "
     "something like \"Bearer {secret}\""},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"a.example.com, format: \"Bearer {secret}\\r\\nX: y\"}]\n",
     "t.yaml:4:50: format: contains a line break (CR at character 16), which would end the "
     "header and start another; expected one line, like \"Bearer {secret}\""},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"a.example.com, format: \"Bearer {secret}\\nX: y\"}]\n",
     "t.yaml:4:50: format: contains a line break (LF at character 16), which would end the "
     "header and start another; expected one line, like \"Bearer {secret}\""},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"a.example.com, format: \"Bearer\\t{secret}\"}]\n",
     "t.yaml:4:50: format: contains byte 0x09 at character 7, not printable ASCII; expected "
     "printable ASCII (it becomes a header value)"},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"a.example.com, format: \"{secret}" X256 "\"}]\n",
     "t.yaml:4:50: format: too long (264 characters); expected at most 255 (it becomes a header "
     "value)"},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets:\n  - {name: A, host: "
	"a.example.com}\n  - {name: A, host: a.example.com}\n",
     "t.yaml:6:12: duplicate secret name 'A' in sandbox 's' (first at line 5 column 12); "
     "expected each secret once per sandbox"},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"b.example.com}]\n",
     "t.yaml:4:27: secret 'A' is bound to b.example.com:443, which sandbox 's' may not reach; "
     "expected a host or wildcard entry of this sandbox allowing tcp port 443 to "
     "b.example.com"},
    {SB "allow: [{host: a.example.com, ports: [443]}]\nsecrets: [{name: A, host: "
	"a.example.com, port: 8443}]\n",
     "t.yaml:4:27: secret 'A' is bound to a.example.com:8443, which sandbox 's' may not reach; "
     "expected a host or wildcard entry of this sandbox allowing tcp port 8443 to "
     "a.example.com"},
    {SB "allow: [{host: a.example.com, ports: [443], proto: udp}]\nsecrets: [{name: A, host: "
	"a.example.com}]\n",
     "t.yaml:4:27: secret 'A' is bound to a.example.com:443, which sandbox 's' may not reach; "
     "expected a host or wildcard entry of this sandbox allowing tcp port 443 to "
     "a.example.com"},
    {SB "allow: [{cidr: 0.0.0.0/0, ports: [443]}]\nsecrets: [{name: A, host: "
	"a.example.com}]\n",
     "t.yaml:4:27: secret 'A' is bound to a.example.com:443, which sandbox 's' may not reach; "
     "expected a host or wildcard entry of this sandbox allowing tcp port 443 to "
     "a.example.com"},
    /* dns */
    {SB "dns: {qtypes: [A, AAA]}\n",
     "t.yaml:3:19: dns.qtypes: unknown DNS type 'AAA' (did you mean 'AAAA'?); expected one of "
     "A, AAAA, CNAME, HTTPS, SVCB, TXT, MX, SRV, PTR, NS, CAA"},
    {SB "dns: {refuse_with: drop}\n",
     "t.yaml:3:20: dns.refuse_with: expected refused or nxdomain, found 'drop'"},
    {SB "limits: {new_flows_per_second: 0}\n",
     "t.yaml:3:32: limits.new_flows_per_second: expected a whole number from 1 to 1000000, "
     "found 0"},
    {SB "limits: {new_flows_burst: 1000001}\n",
     "t.yaml:3:27: limits.new_flows_burst: expected a whole number from 1 to 1000000, found "
     "1000001"},
    {SB "limits: {new_flows_per_second: fast}\n",
     "t.yaml:3:32: limits.new_flows_per_second: expected a whole number from 1 to 1000000, "
     "found a string ('fast')"},
    {SB "limits: {new_flows: 10}\n",
     "t.yaml:3:10: unknown key 'new_flows' in limits; expected one of: new_flows_per_second, "
     "new_flows_burst"},
    {SB "limits: 100\n",
     "t.yaml:3:9: limits: expected a mapping with new_flows_per_second and/or new_flows_burst, "
     "found a number (100)"},
    /* across sandboxes */
    {"- {sandbox: a, match: {port: t1}}\n- {sandbox: a, match: {port: t2}}\n",
     "t.yaml:2:13: duplicate sandbox name 'a' (first at t.yaml:1:13); expected each sandbox "
     "once across all rule files"},
    {"- {sandbox: Agent, match: {port: t1}}\n- {sandbox: agent, match: {port: t2}}\n",
     "t.yaml:2:13: duplicate sandbox name 'agent' ('Agent' at t.yaml:1:13; names are compared "
     "ignoring case); expected each sandbox once across all rule files"},
    {"- {sandbox: a, match: {source: 10.0.0.0/24}}\n- {sandbox: b, match: {source: "
     "10.0.0.7}}\n",
     "t.yaml:2:23: sandbox 'b' can claim the same packets as sandbox 'a' (t.yaml:1:23): source "
     "10.0.0.7/32; expected selectors that no packet satisfies twice (make source, mac or port "
     "disjoint)"},
    {"- {sandbox: a, match: {source: 10.0.0.0/24}}\n- {sandbox: b, match: {mac: "
     "'02:00:00:00:00:01'}}\n",
     "t.yaml:2:23: sandbox 'b' can claim the same packets as sandbox 'a' (t.yaml:1:23): source "
     "10.0.0.0/24, mac 02:00:00:00:00:01; expected selectors that no packet satisfies twice "
     "(make source, mac or port disjoint)"},
    {"- {sandbox: a, match: {port: tap1}}\n- {sandbox: b, match: {port: tap1, source: "
     "'fd00::/64'}}\n",
     "t.yaml:2:23: sandbox 'b' can claim the same packets as sandbox 'a' (t.yaml:1:23): source "
     "fd00::/64, port tap1; expected selectors that no packet satisfies twice (make source, mac "
     "or port disjoint)"},
    {"- {sandbox: a, match: {port: tap1}}\n- {sandbox: b, match: {mac: '02:00:00:00:00:01'}}\n",
     "t.yaml:2:23: sandbox 'b' can claim the same packets as sandbox 'a' (t.yaml:1:23): source "
     "any address, mac 02:00:00:00:00:01, port tap1; expected selectors that no packet "
     "satisfies twice (make source, mac or port disjoint)"},
};

START_TEST(error_has_position_and_expectation)
{
	ck_assert_str_eq(load_err(cases[_i].yaml), cases[_i].err);
}
END_TEST

START_TEST(disjoint_selectors_and_reachable_secrets_are_fine)
{
	const char *y = "- {sandbox: a, match: {source: 10.0.0.0/24, port: tap1}}\n"
			"- {sandbox: b, match: {source: 10.0.0.0/24, port: tap2}}\n"
			"- {sandbox: c, match: {source: 10.0.1.0/24}}\n"
			"- {sandbox: d, match: {source: '::/0', mac: '02:00:00:00:00:01'}}\n"
			"- {sandbox: e, match: {source: '::/0', mac: '02:00:00:00:00:02'}}\n"
			"- sandbox: f\n"
			"  match: {source: 10.9.0.1}\n"
			"  allow: [{host: '*.example.com', ports: ['400-500']}]\n"
			"  secrets: [{name: X, host: api.example.com, port: 443}]\n";
	struct policy *p = NULL;
	struct pc_err e;

	ck_assert_int_eq(policy_load_buffer("t.yaml", y, strlen(y), NULL, &p, &e), 0);
	ck_assert_uint_eq(policy_sandbox_count(p), 6);
	policy_unref(p);
}
END_TEST

static void count_err(const struct pc_err *e, void *arg)
{
	(void)e;
	(*(int *)arg)++;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static char tmpdir[64];

static void mkdir_tmp(void)
{
	strcpy(tmpdir, "/tmp/pc-rules-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_tmp(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(dir_loads_yaml_files_in_name_order)
{
	struct policy *p = NULL;
	struct pc_err e;
	char h1[80];

	mkdir_tmp();
	write_file(tmpdir, "20-b.yaml", "sandbox: b\nmatch: {port: t2}\n");
	write_file(tmpdir, "10-a.yaml", "sandbox: a\nmatch: {port: t1}\n");
	write_file(tmpdir, ".10-a.yaml.swp", "garbage: [");
	write_file(tmpdir, "README", "not yaml at all: [");
	write_file(tmpdir, "30-c.yaml.dpkg-old", "garbage: [");
	ck_assert_int_eq(policy_load_dir(tmpdir, NULL, &p, &e), 0);
	ck_assert_uint_eq(policy_sandbox_count(p), 2);
	ck_assert_ptr_nonnull(strstr(policy_sandbox_by_name(p, "b")->file, "/20-b.yaml"));
	strcpy(h1, policy_hash(p));
	policy_unref(p);
	/* Moving a sandbox to another file does not change the policy. */
	write_file(tmpdir, "10-a.yaml",
		   "- {sandbox: a, match: {port: t1}}\n"
		   "- {sandbox: b, match: {port: t2}}\n");
	write_file(tmpdir, "20-b.yaml", "# moved\n");
	ck_assert_int_eq(policy_load_dir(tmpdir, NULL, &p, &e), 0);
	ck_assert_str_eq(policy_hash(p), h1);
	policy_unref(p);
	rm_tmp();
}
END_TEST

START_TEST(dir_errors_across_files)
{
	struct policy *p = (struct policy *)&errbuf;
	struct pc_err e;
	int n = 0;

	mkdir_tmp();
	write_file(tmpdir, "a.yaml", "sandbox: agent\nmatch: {source: 10.0.0.0/24}\n");
	write_file(tmpdir, "b.yaml", "sandbox: agent\nmatch: {source: 10.1.0.0/24}\n");
	write_file(tmpdir, "c.yaml", "sandbox: c\nmatch: {source: 10.0.0.9}\n");
	write_file(tmpdir, "d.yml", "sandbox: d\nmatch: {port: x}\n");
	ck_assert_int_eq(policy_load_dir_report(tmpdir, NULL, &p, &e, count_err, &n), PC_EPARSE);
	ck_assert_ptr_eq(p, (struct policy *)&errbuf);
	ck_assert_int_eq(n, 3);
	/* The first reported is the directory's own problem. */
	snprintf(errbuf, sizeof(errbuf),
		 "%s: d.yml: rule files must be named NAME.yaml; rename "
		 "it (or move it out of the rules directory)",
		 tmpdir);
	{
		char got[1024];

		ck_assert_str_eq(pc_err_str(&e, got, sizeof(got)), errbuf);
	}
	unlink(strcat(strcpy(errbuf, tmpdir), "/d.yml"));
	n = 0;
	ck_assert_int_eq(policy_load_dir_report(tmpdir, NULL, &p, &e, count_err, &n), PC_EPARSE);
	ck_assert_int_eq(n, 2);
	{
		char want[1024], got[1024];

		snprintf(
		    want, sizeof(want),
		    "%s/b.yaml:1:10: duplicate sandbox name 'agent' (first at %s/a.yaml:1:10); "
		    "expected each sandbox once across all rule files",
		    tmpdir, tmpdir);
		ck_assert_str_eq(pc_err_str(&e, got, sizeof(got)), want);
	}
	rm_tmp();
}
END_TEST

START_TEST(unreadable_input_is_a_read_error)
{
	const char *paths[] = {"/nonexistent/a.yaml", NULL};
	struct policy *p = NULL;
	struct pc_err e;
	int n = 0;

	ck_assert_int_eq(policy_load_dir("/nonexistent/rules.d", NULL, &p, &e), PC_ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/rules.d"));
	ck_assert_int_eq(policy_load_files(paths, 1, NULL, &p, &e), PC_ENOENT);
	ck_assert_ptr_null(p);
	/* The other files are still checked and reported. */
	mkdir_tmp();
	write_file(tmpdir, "bad.yaml", "sandbox: [\n");
	{
		char path[128];

		snprintf(path, sizeof(path), "%s/bad.yaml", tmpdir);
		paths[1] = path;
		ck_assert_int_eq(policy_load_files_report(paths, 2, NULL, &p, &e, count_err, &n),
				 PC_ENOENT);
		ck_assert_int_eq(n, 2);
	}
	rm_tmp();
}
END_TEST

START_TEST(input_bounds_are_enforced)
{
	size_t big = (16u << 20) + 1, n;
	char *y = malloc(big + 1);
	struct policy *p = NULL;
	struct pc_err e;

	ck_assert_ptr_nonnull(y);
	memset(y, '#', big);
	y[big] = '\0';
	ck_assert_int_lt(policy_load_buffer("big.yaml", y, big, NULL, &p, &e), 0);
	ck_assert_str_eq(e.msg, "too large (16777217 bytes, limit 16777216)");
	/* Nesting */
	n = 0;
	for (int i = 0; i < 40; i++)
		y[n++] = '[';
	y[n] = '\0';
	ck_assert_int_eq(policy_load_buffer("deep.yaml", y, n, NULL, &p, &e), PC_EPARSE);
	ck_assert_str_eq(pc_err_str(&e, errbuf, sizeof(errbuf)),
			 "deep.yaml:1:33: nested too deeply (more than 32 levels); expected a flat "
			 "structure");
	/* Node count: a flat list of 1.1 million items */
	n = 0;
	y[n++] = '[';
	for (int i = 0; i < 1100000; i++) {
		y[n++] = '1';
		y[n++] = ',';
	}
	y[n++] = ']';
	y[n] = '\0';
	ck_assert_int_eq(policy_load_buffer("wide.yaml", y, n, NULL, &p, &e), PC_EPARSE);
	ck_assert_ptr_nonnull(strstr(e.msg, "too many YAML nodes (limit 1048576)"));
	ck_assert_ptr_null(p);
	free(y);
}
END_TEST

START_TEST(error_count_is_bounded)
{
	char *y = malloc(200 * 64);
	size_t o = 0;
	int n = 0;
	struct pc_err e;
	char path[128];
	const char *paths[1] = {path};

	ck_assert_ptr_nonnull(y);
	for (int i = 0; i < 200; i++)
		o += (size_t)sprintf(y + o, "- {sandbox: s%d, match: {port: 'a/b'}}\n", i);
	mkdir_tmp();
	write_file(tmpdir, "many.yaml", y);
	snprintf(path, sizeof(path), "%s/many.yaml", tmpdir);
	ck_assert_int_eq(policy_load_files_report(paths, 1, NULL, NULL, &e, count_err, &n),
			 PC_EPARSE);
	ck_assert_int_eq(n, 101); /* 100 errors and "too many errors" */
	free(y);
	rm_tmp();
}
END_TEST

/* A reload takes the previous policy's parse of a file whose path, bytes
 * and defaults are the same: what it gives is what a load from nothing
 * gives, the checks across files still run, and what is shared outlives
 * the policy that parsed it. */
START_TEST(reload_reuses_unchanged_files_only)
{
	static const char a_text[] = "sandbox: a\nmatch: {source: 10.0.0.0/24}\nallow:\n"
				     "  - host: api.example.com\n    ports: [443]\n"
				     "  - cidr: 192.0.2.0/24\n    ports: [80, 443]\n"
				     "secrets:\n  - {name: ZED, host: api.example.com}\n"
				     "  - {name: ALPHA, host: api.example.com}\n";
	struct policy *p1 = NULL, *p2 = NULL, *p3 = NULL, *fresh = NULL, *bad = NULL;
	const struct policy_sandbox *a1, *a2, *a3, *b3;
	const struct policy_allow *a_allow; /* a's entries, in a's file's arena */
	struct config cfg;
	struct pc_err e;

	mkdir_tmp();
	write_file(tmpdir, "a.yaml", a_text);
	write_file(tmpdir, "b.yaml", "sandbox: b\nmatch: {source: 10.1.0.0/24}\n");
	ck_assert_int_eq(policy_load_dir(tmpdir, NULL, &p1, &e), 0);
	ck_assert_int_eq(policy_load_dir_since(tmpdir, NULL, p1, &p2, &e), 0);
	ck_assert_str_eq(policy_hash(p2), policy_hash(p1));
	a1 = policy_sandbox_by_name(p1, "a");
	a2 = policy_sandbox_by_name(p2, "a");
	a_allow = a1->allow;
	ck_assert_ptr_eq(a2->allow, a_allow); /* shared, not parsed again */
	ck_assert_ptr_eq(a2->index, a1->index);
	ck_assert_str_eq(a2->secrets[0].name, "ALPHA"); /* sorted once, still sorted */

	/* b changes: parsed afresh; a still shared, and it outlives p1 */
	write_file(tmpdir, "b.yaml",
		   "sandbox: b\nmatch: {source: 10.1.0.0/24}\nallow:\n"
		   "  - host: api.example.com\n    ports: [443]\n");
	ck_assert_int_eq(policy_load_dir_since(tmpdir, NULL, p2, &p3, &e), 0);
	policy_unref(p1);
	policy_unref(p2);
	a3 = policy_sandbox_by_name(p3, "a");
	b3 = policy_sandbox_by_name(p3, "b");
	ck_assert_ptr_eq(a3->allow, a_allow);
	ck_assert_uint_eq(b3->n_allow, 1);
	ck_assert(policy_host_allows(a3, "api.example.com", IPPROTO_TCP, 443, NULL));
	ck_assert(!policy_host_allows(a3, "other.example.com", IPPROTO_TCP, 443, NULL));
	ck_assert_int_eq(policy_load_dir(tmpdir, NULL, &fresh, &e), 0);
	ck_assert_str_eq(policy_hash(p3), policy_hash(fresh));
	policy_unref(fresh);
	fresh = NULL;

	/* checks across files see reused sandboxes: c takes a's name */
	write_file(tmpdir, "c.yaml", "sandbox: a\nmatch: {source: 10.2.0.0/24}\n");
	ck_assert_int_eq(policy_load_dir_since(tmpdir, NULL, p3, &bad, &e), PC_EPARSE);
	ck_assert_ptr_null(bad);
	ck_assert_ptr_nonnull(strstr(e.msg, "duplicate sandbox name 'a'"));
	write_file(tmpdir, "c.yaml", "sandbox: c\nmatch: {source: 10.0.0.128/25}\n");
	ck_assert_int_eq(policy_load_dir_since(tmpdir, NULL, p3, &bad, &e), PC_EPARSE);
	ck_assert_ptr_null(bad);
	unlink(strcat(strcpy(errbuf, tmpdir), "/c.yaml"));

	/* other defaults: the same bytes mean something else, parsed afresh */
	config_defaults(&cfg);
	cfg.dns.qtypes = QT_A;
	cfg.limits.new_flows_burst = 7;
	ck_assert_int_eq(policy_load_dir_since(tmpdir, &cfg, p3, &fresh, &e), 0);
	ck_assert_ptr_ne(policy_sandbox_by_name(fresh, "a")->allow, a_allow);
	ck_assert_uint_eq(policy_sandbox_by_name(fresh, "a")->dns_qtypes, QT_A);
	ck_assert_uint_eq(policy_sandbox_by_name(fresh, "b")->new_flows_burst, 7);
	ck_assert_int_eq(policy_load_dir(tmpdir, &cfg, &bad, &e), 0);
	ck_assert_str_eq(policy_hash(fresh), policy_hash(bad));
	policy_unref(bad);
	policy_unref(fresh);
	policy_unref(p3);
	rm_tmp();
}
END_TEST

static Suite *rules_errors_suite(void)
{
	Suite *s = suite_create("rules_errors");
	TCase *tc = tcase_create("errors");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, error_has_position_and_expectation, 0,
			    (int)(sizeof(cases) / sizeof(cases[0])));
	PC_UNIT_TESTS(tc, disjoint_selectors_and_reachable_secrets_are_fine,
		      dir_loads_yaml_files_in_name_order, dir_errors_across_files,
		      unreadable_input_is_a_read_error, input_bounds_are_enforced,
		      error_count_is_bounded, reload_reuses_unchanged_files_only);
	suite_add_tcase(s, tc);
	return s;
}

PC_UNIT_MAIN(rules_errors_suite)
