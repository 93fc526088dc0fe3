# The DNS guard judging queries, end to end: real dig (and crafted messages
# from tests/integration/dnsguard_tool.py) in the sandboxes, the real engine
# and logd in the gateway, the lab's dnsmasq upstream. Every refusal is shown
# three ways: what the client got, that the resolver never saw the query, and
# the verdict record. (engine_flows covers the basics over IPv4: an allowed
# name by curl, REFUSED never reaching the resolver, the rogue resolver over
# UDP, dig +tcp of an allowed name.)
PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$PC_TOP/tests/integration/dnsguard_setup.bash"

guard_need_bins
# ...wild.test and everything below it: 203.0.113.10; big.test: a TXT
# answer of about 2 KB (over a TCP segment, and over dnsmasq's UDP size)
S250=$(printf 'x%.0s' $(seq 1 250))
LAB_DNS_EXTRA="--address=/wild.test/$LAB_API4 --txt-record=big.test,$S250,$S250,$S250,$S250,$S250,$S250,$S250,$S250"
lab_up 3
guard_config
SB1=$(lab_sb_ip4 1) SB2=$(lab_sb_ip4 2) SB3=$(lab_sb_ip4 3)
guard_agent1 dual <<EOF
  - host: api.github.test
    ports: [443]
  - host: "*.wild.test"
    ports: [443]
---
sandbox: agent-2
match: { source: $SB2/32, port: $(lab_sb_port 2) }
dns: { qtypes: [A, AAAA, TXT], refuse_with: nxdomain }
allow:
  - host: api.github.test
    ports: [443]
  - host: big.test
    ports: [443]
---
sandbox: agent-3
match: { source: $SB3/32, port: $(lab_sb_port 3) }
dns: { refuse_with: refused }
allow:
  - host: api.github.test
    ports: [443]
EOF
guard_start || { t_fail "guard started" true; t_done; }

dig1() { lab_sb 1 dig +time=3 +tries=1 "$@"; }
from1() { grep -c " from $SB1\$\| from $(lab_sb_ip6 1)\$" || true; }

# ---- allowed and refused names, over IPv6 to the v6 resolver ------------------
m=$(dg_mark)
t_eq "allowed name over IPv6 transport: the answer" "$LAB_API4" \
	"$(dig1 +short @$LAB_RESOLVER6 api.github.test A)"
t_eq "allowed AAAA over IPv6 transport: the answer" "$LAB_API6" \
	"$(dig1 +short @$LAB_RESOLVER6 api.github.test AAAA)"
out=$(dig1 @$LAB_RESOLVER6 paste.evil.test A)
t_match "denied name: REFUSED at once (an answer, not a timeout) with the reason as EDE" \
	"status: REFUSED.*EDE: 15 \(Blocked\): \(portcullis: name not on the allow list\)" \
	"$(echo $out)"
dg_upstream "$m"
up=$UP
t_match "the resolver saw the allowed queries (A and AAAA)" \
	"query\[A\] api.github.test .*query\[AAAA\] api.github.test " "$(echo $up)"
t_nomatch "... and never the denied one" "paste.evil.test" "$up"
t_match "verdict record: allowed, with its rule" \
	'"event.outcome":"success","event.reason":"name allowed".*"rule.name":"agent-1/allow\[0\]".*"destination.ip":"2001:db8:53::53"' \
	"$(dg_rec api.github.test)"
t_match "verdict record: refused, with its reason" \
	'"event.outcome":"failure","event.reason":"name not on the allow list".*"dns.question.name":"paste.evil.test","dns.question.type":"A"' \
	"$(dg_rec paste.evil.test)"
t_match "the answer taught the v6 address (the record of its answer)" '"dns.resolved_ip":\["2001:db8:10::10"\]' \
	"$(dg_learned api.github.test)"

# ---- refuse_with: nxdomain, per sandbox -----------------------------------------
m=$(dg_mark)
out=$(lab_sb 2 dig +time=3 +tries=1 paste.evil.test A)
t_match "refuse_with: nxdomain (sandbox's own): NXDOMAIN" "status: NXDOMAIN" "$out"
dg_upstream "$m"
t_nomatch "... never reached the resolver" "paste.evil.test" "$UP"
t_match "... recorded as refused" '"event.outcome":"failure".*"portcullis.sandbox":"agent-2"' \
	"$(dg_rec paste.evil.test)"
t_match "... with its code and the rcode the guard answered" \
	'"event.code":"dns_name_not_allowed","portcullis.sandbox":"agent-2".*"dns.response_code":"NXDOMAIN"' \
	"$(dg_rec paste.evil.test | grep agent-2)"
t_fail "getent (glibc) in that sandbox fails for the denied name" \
	lab_sb 2 getent hosts paste.evil.test

# ---- resolvers that are not the guard's -------------------------------------------
m=$(dg_mark)
out=$(dig1 @$LAB_GW4 api.github.test A)
t_match "query to the gateway's address (no resolver configured there): REFUSED, EDE Prohibited" \
	"status: REFUSED.*EDE: 18 \(Prohibited\): \(portcullis: not to a configured resolver\)" \
	"$(echo $out)"
out=$(dig1 @$LAB_API4 api.github.test A)
t_match "query to a web server's address: REFUSED by the guard in its name" "status: REFUSED" "$out"
out=$(dig1 +tcp @$LAB_ROGUE_RESOLVER4 api.github.test A 2>&1)
t_match "DNS over TCP to the rogue resolver: the connection is reset" \
	"failed: connection refused" "$out"
t_eq "the rogue resolver saw nothing" 0 \
	"$(grep -c 'query\[' "$LAB_DIR/dnsmasq-rogue.log" 2>/dev/null || true)"
dg_upstream "$m"
t_eq "the guard's resolver saw none of these" 0 "$(echo "$UP" | from1)"
t_match "verdict records say why" \
	'"event.reason":"not to a configured resolver".*"destination.ip":"10.203.0.1".*"event.reason":"not to a configured resolver".*"destination.ip":"203.0.113.10"' \
	"$(echo $(dg_rec api.github.test | grep failure))"
t_match "... and the TCP one too" \
	'"event.reason":"DNS over TCP to a resolver that is not the guard.s".*"destination.ip":"198.51.100.54"' \
	"$(guard_records | grep 198.51.100.54)"

# ---- query types -------------------------------------------------------------------
m=$(dg_mark)
out=$(dig1 api.github.test TXT)
t_match "TXT for an allowed name: REFUSED by default" \
	"status: REFUSED.*portcullis: query type not permitted" "$(echo $out)"
t_eq "TXT allowed where the sandbox's dns.qtypes permits it" '"v=lab"' \
	"$(lab_sb 2 dig +short +time=3 +tries=1 api.github.test TXT)"
dg_upstream "$m"
up=$UP
t_eq "the resolver saw TXT only from the permitted sandbox" "1 0" \
	"$(echo "$up" | grep -c "query\[TXT\] api.github.test from $SB2\$") $(echo "$up" | from1)"
t_match "verdict record: TXT refused for agent-1" \
	'"event.reason":"query type not permitted","event.code":"dns_type","portcullis.sandbox":"agent-1".*"dns.question.type":"TXT","dns.response_code":"REFUSED"' \
	"$(dg_rec api.github.test | grep TXT)"

# ---- shapes of query the guard refuses --------------------------------------------------
m=$(dg_mark)
t_match "two questions in one query: REFUSED" "^rcode=REFUSED" \
	"$(lab_sb 1 python3 "$DG_TOOL" query --server $LAB_RESOLVER4 api.github.test:A api.github.test:AAAA)"
t_match "an UPDATE (opcode 5) for an allowed zone name: REFUSED" "^rcode=REFUSED" \
	"$(lab_sb 1 python3 "$DG_TOOL" query --opcode 5 --server $LAB_RESOLVER4 api.github.test:6)"
out=$(dig1 +notcp api.github.test ANY) # (dig asks ANY over TCP by default)
t_match "QTYPE ANY: REFUSED" "status: REFUSED.*query type not permitted" "$(echo $out)"
out=$(dig1 +tcp api.github.test AXFR 2>&1)
t_match "a zone transfer (AXFR over TCP): the connection is reset" "connection reset" "$out"
t_nomatch "... and its record has no dns.response_code (no answer was sent)" 'dns.response_code' \
	"$(dg_rec api.github.test | grep '"dns.question.type":"AXFR"')"
out=$(dig1 -c CH api.github.test A)
t_match "class CH: REFUSED" "status: REFUSED.*portcullis: class is not IN" "$(echo $out)"
out=$(dig1 CH TXT version.bind)
t_match "CH TXT version.bind (fingerprinting the resolver): REFUSED" \
	"status: REFUSED.*class is not IN" "$(echo $out)"
out=$(dig1 +subnet=192.0.2.0/24 api.github.test A)
t_match "EDNS client subnet: REFUSED" "status: REFUSED.*portcullis: EDNS option not permitted" \
	"$(echo $out)"
out=$(dig1 +ednsopt=65001:c0ffee api.github.test A)
t_match "an unknown EDNS option carrying data: REFUSED" "status: REFUSED.*EDNS option not permitted" \
	"$(echo $out)"
out=$(dig1 +edns=1 +noednsnegotiation api.github.test A)
t_match "EDNS version 1: REFUSED" "status: REFUSED.*EDNS version is not 0" "$(echo $out)"
dg_upstream "$m"
up=$UP
t_eq "the resolver saw none of them" 0 "$(echo "$up" | from1)"
t_match "verdict records: one question, opcode, ANY, AXFR, class, EDNS" \
	'not exactly one question.*opcode is not QUERY.*query type not permitted.*query type not permitted.*class is not IN.*class is not IN.*EDNS option not permitted.*EDNS option not permitted.*EDNS version is not 0' \
	"$(echo $(guard_records | grep '"event.outcome":"failure"' | grep -o '"event.reason":"[^"]*"'))"
m=$(dg_mark)
t_eq "EDNS cookie: allowed" "$LAB_API4" "$(dig1 +short +cookie api.github.test A)"
t_eq "EDNS NSID (empty): allowed" "$LAB_API4" "$(dig1 +short +nsid api.github.test A)"
dg_upstream "$m"
t_eq "... both reached the resolver" 2 \
	"$(echo "$UP" | grep -c "query\[A\] api.github.test from $SB1\$")"

# ---- tunnelling: long and odd names -----------------------------------------------------
L63=$(printf 'x%.0s' $(seq 1 10))$(head -c 40 /dev/urandom | od -An -tx1 | tr -d ' \n' | cut -c1-53)
m=$(dg_mark)
out=$(dig1 "$L63.$L63.paste.evil.test" A)
t_match "a 63-character-label name under a denied domain: REFUSED" \
	"status: REFUSED.*name not on the allow list" "$(echo $out)"
out=$(dig1 'aGVsbG8+d29y/bGQ=.wild.test' A)
t_match "a base64 label (+ / =) under an allowed wildcard: REFUSED (not a host name)" \
	"status: REFUSED.*name is not a host name" "$(echo $out)"
out=$(dig1 "$L63.wild.test" TXT)
t_match "TXT under an allowed wildcard (the usual tunnel carrier): REFUSED" \
	"status: REFUSED.*query type not permitted" "$(echo $out)"
mal0=$(dg_stat queries_malformed)
long=$L63.$L63.$L63.$L63.wild.test # 4 x 64 + 11 octets: over DNS's 255
t_eq "a name longer than 255 octets: dropped (no answer)" "timeout" \
	"$(lab_sb 1 python3 "$DG_TOOL" query --timeout 1.5 --server $LAB_RESOLVER4 "$long:A")"
t_eq "a 64-character label (not expressible in DNS): dropped" "timeout" \
	"$(lab_sb 1 python3 "$DG_TOOL" query --timeout 1.5 --server $LAB_RESOLVER4 "x$L63.wild.test:A")"
t_eq "a query with two TSIG records (ldns would leak one): dropped" "timeout" \
	"$(lab_sb 1 python3 "$DG_TOOL" query --tsig 2 --timeout 1.5 --server $LAB_RESOLVER4 a.wild.test:A)"
t_eq "... all three counted as malformed" "$((mal0 + 3))" "$(dg_stat queries_malformed)"
dg_upstream "$m"
up=$UP
t_eq "the resolver saw none of these" 0 "$(echo "$up" | from1)"
t_match "verdict records name the long labels and the reasons" \
	"\"event.reason\":\"name not on the allow list\".*\"dns.question.name\":\"$L63.$L63.paste.evil.test\"" \
	"$(guard_records | grep -F "$L63.$L63.paste")"
t_match "... the base64 label: the name as sent (escaped form) and its type, with the reason" \
	'"event.reason":"name is not a host name".*"dns.question.name":"aGVsbG8\+d29y/bGQ=.wild.test","dns.question.type":"A"' \
	"$(guard_records | grep 'not a host name')"
# Documented limit (docs/dnsguard.md): a wildcard entry admits any host name
# below it, long ones included; only the shape of the name is judged.
t_eq "(limit) a long host name under an allowed wildcard is a name like any other: answered" \
	"$LAB_API4" "$(dig1 +short "$L63.wild.test" A)"

# ---- DNS over TCP --------------------------------------------------------------------------
m=$(dg_mark)
out=$(dig1 +tcp paste.evil.test A 2>&1)
t_match "refused query over TCP: the connection is reset" "connection reset" "$out"
t_eq "allowed query over TCP to the v6 resolver: the answer" "$LAB_API4" \
	"$(dig1 +tcp +short @$LAB_RESOLVER6 api.github.test A)"
t_eq "two allowed queries on one TCP connection: both answered" \
	"rcode=NOERROR an=1 A=$LAB_API4|rcode=NOERROR an=1 A=$LAB_API4" \
	"$(lab_sb 1 python3 "$DG_TOOL" stream --server $LAB_RESOLVER4 api.github.test:A a.wild.test:A |
		sed 's/ id=[0-9]*//' | paste -sd'|')"
out=$(lab_sb 1 python3 "$DG_TOOL" stream --server $LAB_RESOLVER4 b.wild.test:A paste.evil.test:A \
	c.wild.test:A | sed 's/ id=[0-9]*//' | paste -sd'|')
t_eq "allowed, then refused on one TCP connection: answered, then reset (verdict per message)" \
	"rcode=NOERROR an=1 A=$LAB_API4|reset" "$out"
out=$(lab_sb 1 python3 "$DG_TOOL" stream --together --server $LAB_RESOLVER4 d.wild.test:A \
	e.wild.test:A | sed 's/ id=[0-9]*//' | paste -sd'|')
t_eq "two messages in one TCP segment: each judged on its own, both answered" \
	"rcode=NOERROR an=1 A=$LAB_API4|rcode=NOERROR an=1 A=$LAB_API4" "$out"
dg_upstream "$m"
up=$UP
t_match "the resolver saw the allowed TCP queries" \
	"query\[A\] api.github.test from fd00:203::11" \
	"$up"
t_match "... b.wild.test before the refusal" "query\[A\] b.wild.test from $SB1" "$up"
t_nomatch "... and nothing of the refused or the one after it" "paste.evil.test|c.wild.test" "$up"
t_match "... the two in one segment reached it" "query\[A\] d.wild.test .*query\[A\] e.wild.test" \
	"$(echo $up)"
t_match "verdict records: the TCP refusal, per message" \
	'"event.outcome":"failure","event.reason":"name not on the allow list".*"network.transport":"tcp"' \
	"$(dg_rec paste.evil.test | tail -2)"
# A TCP answer longer than one segment is put together and judged whole
# (docs/engine.md, "DNS over TCP"); more in dnsguard_tcp.
out=$(lab_sb 2 dig +tcp +short +time=4 +tries=1 big.test TXT 2>&1)
t_eq "a TCP answer larger than one segment (2 KB TXT) is judged whole and arrives whole" \
	2000 "$(printf '%s' "$out" | tr -cd x | wc -c)"
lab_sb 2 dig +tcp +short +time=3 +tries=1 api.github.test A >/dev/null
t_match "an answer over TCP teaches: agent-2 reaches api.github.test having asked only over TCP" \
	"^api.github.test ok" "$(lab_sb 2 curl -sS --max-time 4 --cacert "$LAB_CA" \
		--resolve api.github.test:443:$LAB_API4 https://api.github.test/)"
t_match "... (its record over TCP)" '"network.transport":"tcp".*"dns.resolved_ip":\["203.0.113.10"\]' \
	"$(dg_learned api.github.test | grep agent-2)"

# ---- other resolver paths: DoT and DoH are only connections --------------------------------
for p in 853 443; do
	lab_upstream socat -T 3 TCP-LISTEN:$p,bind=$LAB_RESOLVER4,fork,reuseaddr \
		SYSTEM:"cat >>$LAB_DIR/resolver-$p.log" &
	lab_wait_tcp "$LAB_UP" $LAB_RESOLVER4 $p
done
out=$(echo x | lab_sb 1 socat -T 2 - TCP:$LAB_RESOLVER4:853,connect-timeout=3 2>&1)
t_match "DNS over TLS (TCP 853) to the resolver: refused at once" "Connection refused" "$out"
t_eq "DNS over HTTPS to the resolver's address (443): refused (curl 7)" 7 \
	"$(dg_curl_rc 1 -k -H 'accept: application/dns-message' \
		"https://$LAB_RESOLVER4/dns-query?dns=AAABAAABAAAAAAAAA2FwaQZnaXRodWIEdGVzdAAAAQAB")"
t_eq "nothing reached the resolver's 853 or 443" "0 0" \
	"$(cat "$LAB_DIR/resolver-853.log" 2>/dev/null | wc -c) $(cat "$LAB_DIR/resolver-443.log" 2>/dev/null | wc -c)"
t_match "verdict records: connections refused, no name resolved to the address" \
	'"event.action":"connect","event.outcome":"failure","event.reason":"no allowed name resolved to this address".*"destination.port":853.*"event.reason":"no allowed name resolved to this address".*"destination.port":443' \
	"$(echo $(guard_records | grep "\"destination.ip\":\"$LAB_RESOLVER4\",\"destination.port\":\(853\|443\)"))"

# ---- refuse_with from the configuration --------------------------------------------------
guard_engine_stop
dg_dns_conf "refuse_with: nxdomain"
guard_engine_start || t_fail "engine restarted with dns.refuse_with: nxdomain" true
m=$(dg_mark)
t_match "dns.refuse_with: nxdomain in the configuration: a sandbox without its own gets NXDOMAIN" \
	"status: NXDOMAIN" "$(dig1 paste.evil.test A)"
t_match "... a sandbox that says refuse_with: refused keeps REFUSED" "status: REFUSED" \
	"$(lab_sb 3 dig +time=3 +tries=1 paste.evil.test A)"
t_eq "... getent fails for the denied name (glibc takes NXDOMAIN at once)" 2 \
	"$(lab_sb 1 getent hosts paste.evil.test >/dev/null 2>&1; echo $?)"
dg_upstream "$m"
t_nomatch "... none reached the resolver" "paste.evil.test" "$UP"
t_match "... each recorded" '"portcullis.sandbox":"agent-1".*"portcullis.sandbox":"agent-3".*"portcullis.sandbox":"agent-1"' \
	"$(echo $(dg_rec paste.evil.test | tail -4))"
t_eq "... and allowed names still resolve" "$LAB_API4" "$(dig1 +short api.github.test A)"
guard_stop
t_nomatch "nothing of ours in the root namespace" "portcullis" "$(nft list tables 2>&1)"
t_done
