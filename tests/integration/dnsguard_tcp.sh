# DNS over TCP whose messages span segments, end to end: the engine puts a
# query or an answer together from its segments, judges (and learns from)
# the whole message, and only then lets its segments through
# (docs/engine.md, "DNS over TCP"). Real dig and dnsmasq; long.test's answer
# is a chain of eight CNAMEs with 250-byte names ending in ssh.test's
# address (about 2.2 KB: two segments or more), big.test a 2 KB TXT.
PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$PC_TOP/tests/integration/dnsguard_setup.bash"

guard_need_bins
L=$(printf 'a%.0s' $(seq 1 60))
S250=$(printf 'x%.0s' $(seq 1 250))
chain="" prev=long.test
for i in 1 2 3 4 5 6 7; do
	chain="$chain --cname=$prev,c$i-$L.$L.$L.$L.test"
	prev=c$i-$L.$L.$L.$L.test
done
LAB_DNS_EXTRA="$chain --cname=$prev,f-$L.$L.$L.$L.test --host-record=f-$L.$L.$L.$L.test,$LAB_SSH4 --txt-record=big.test,$S250,$S250,$S250,$S250,$S250,$S250,$S250,$S250"
lab_up 1
guard_config
SB1=$(lab_sb_ip4 1)
guard_rules agents <<EOF
sandbox: agent-1
match: { source: $SB1/32, port: $(lab_sb_port 1) }
dns: { qtypes: [A, TXT] }
allow:
  - host: long.test
    ports: [5000]
    proto: udp
  - host: big.test
    ports: [443]
  - host: api.github.test
    ports: [443]
EOF
guard_start || { t_fail "guard started" true; t_done; }

udp5000() { echo "$1" | lab_sb 1 socat -T 2 - UDP:$LAB_SSH4:5000 2>&1; }

t_nomatch "before any lookup, UDP to ssh.test's address is refused" "^before$" "$(udp5000 before)"
m=$(dg_mark)
out=$(lab_sb 1 dig +tcp +time=4 +tries=1 long.test A)
t_match "a TCP answer over several segments (8 CNAMEs, ~2.2 KB) arrives whole" \
	"ANSWER: 9,.*MSG SIZE +rcvd: 2[0-9]{3}" "$(echo $out)"
t_match "... with the address at the end of its chain" "IN A $LAB_SSH4" "$(echo $out)"
t_eq "what it taught is used: UDP to that address on the allowed port" "after" "$(udp5000 after)"
t_match "the record carries the address, over TCP" \
	"\"network.transport\":\"tcp\".*\"dns.question.name\":\"long.test\",\"dns.question.type\":\"A\",\"dns.resolved_ip\":\\[\"$LAB_SSH4\"\\]" \
	"$(dg_learned long.test)"
out=$(lab_sb 1 dig +tcp +short +time=4 +tries=1 big.test TXT)
t_eq "a 2 KB TXT answer over TCP arrives whole" 2000 "$(printf '%s' "$out" | tr -cd x | wc -c)"

# Queries split over two segments: judged once whole, nothing before.
out=$(lab_sb 1 python3 "$DG_TOOL" stream --split 9 --server $LAB_RESOLVER4 api.github.test:A |
	sed 's/ id=[0-9]*//')
t_eq "a query split over two segments: judged whole, answered" "rcode=NOERROR an=1 A=$LAB_API4" "$out"
out=$(lab_sb 1 python3 "$DG_TOOL" stream --split 9 --server $LAB_RESOLVER4 split.evil.test:A)
t_eq "a refused query split over two segments: the connection is reset" "reset" "$out"
out=$(lab_sb 1 python3 "$DG_TOOL" stream --split 1 --server $LAB_RESOLVER4 api.github.test:A \
	split2.evil.test:A | sed 's/ id=[0-9]*//' | paste -sd'|')
t_eq "... split after its length's first byte: allowed then refused on one connection" \
	"rcode=NOERROR an=1 A=$LAB_API4|reset" "$out"
dg_upstream "$m"
t_match "the resolver saw the split allowed query" "query\[A\] api.github.test from $SB1" "$UP"
t_nomatch "... and never the refused ones" "split.evil.test|split2.evil.test" "$UP"
t_match "the refusal is recorded" \
	'"event.outcome":"failure","event.reason":"name not on the allow list".*"network.transport":"tcp"' \
	"$(dg_rec split.evil.test)"
t_done
