# Escape attempts, class "urgent data" (issue 30): on the address shared by
# an allowed name (cdn-good.test) and a disallowed one (cdn-evil.test), a
# flow is held until the guard has judged its first bytes. The sandbox
# sends one byte urgent (MSG_OOB: URG, urgent pointer 1): the guard read
# "X" as "not TLS", the flow was promoted once the server acknowledged it,
# and the server's TCP (nginx reads without SO_OOBINLINE) took the byte out
# of the stream, so its TLS library got only the ClientHello that followed
# on the fast path, unjudged: cdn-evil.test was served. The same with a
# bare ACK moving the urgent pointer onto the next byte (crafted,
# tests/escape/craft.py held --scenario urg-ack), and on DNS over TCP, where
# urgent data parts the resolver's framing from the guard's. Evidence: the
# disallowed name is not served, the upstream capture holds no byte
# naming it (or, for DNS, nothing of the urgent segment), and the log has
# the refusal ("TCP urgent data ...", event.code tcp_urgent).
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init urgent "Urgent data on streams judged by their bytes"
# cdn-good.test on 8443 too: a server of our own there reads WITH
# SO_OOBINLINE (the urgent byte stays in its stream).
ESC_ALLOW1='  - host: cdn-good.test
    ports: [8443]'
esc_up 2
ip netns exec "$LAB_UP" python3 "$ESC_CRAFT" oob-server --listen "$LAB_CDN4" --port 8443 \
	--cert "$LAB_DIR/pki/cdn.test.pem" --key "$LAB_DIR/pki/cdn.test.key" \
	--log "$LAB_DIR/oob-server.log" --inline >"$LAB_DIR/oob-server.err" 2>&1 &
echo $! >"$LAB_DIR/oob-server.pid"
for i in $(seq 1 100); do
	grep -q listening "$LAB_DIR/oob-server.log" 2>/dev/null && break
	sleep 0.05
done
t_match "the SO_OOBINLINE server listens" listening "$(cat "$LAB_DIR/oob-server.log" 2>&1)"

esc_crafted_ports 1 47100-47199

URG_HELD_RE='^TCP urgent data on a held flow'
URG_DNS_RE='^TCP urgent data on DNS over TCP'

t_match "sandbox 1 resolves cdn-good.test (A)" "$LAB_CDN4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test A)"
t_match "sandbox 1 resolves cdn-good.test (AAAA)" "$LAB_CDN6" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test AAAA)"

# (a) The issue's attack with the sandbox's own TCP and a real TLS client.
oob_attempt() { # title dst
	local out sport n r c
	esc_begin "$1"
	out=$(esc_craft 1 oob-tls --dst "$2" --name cdn-evil.test 2>&1)
	t_diag "client: $out"
	sport=$(printf '%s\n' "$out" | sed -n 's/^sport \([0-9]*\);.*/\1/p')
	t_match "$2: the client connected (its port is known)" '^[0-9]+$' "$sport"
	t_nomatch "$2: cdn-evil.test is not served" "served: cdn-evil.test" "$out"
	n=$(esc_evil_upstream "${sport:-0}")
	t_eq "$2: no byte naming cdn-evil.test reached the upstream" 0 "$n"
	r=$(esc_flow_reason "${sport:-0}")
	t_match "$2: the refusal is in the log" "$URG_HELD_RE" "$r"
	c=$(esc_flow_code "${sport:-0}")
	t_eq "$2: its event.code" tcp_urgent "$c"
	esc_end "RST at the urgent byte" "client: $out; upstream: $n packets naming cdn-evil.test; log: \"$r\" ($c)"
}
oob_attempt "(a) one byte sent urgent (MSG_OOB) on a held flow to the shared address, then a TLS handshake naming cdn-evil.test (IPv4)" "$LAB_CDN4"
oob_attempt "(a) the same over IPv6" "$LAB_CDN6"

# (a') The same against a server that reads WITH SO_OOBINLINE: its TLS
# library gets "X" first and fails, so nothing is served even on the old
# engine (what urgent data does depends on the receiver: which is why the
# guard refuses it instead of predicting it); the guard refuses at the
# urgent byte all the same, and the server reads nothing of the flow.
esc_begin "(a') one byte sent urgent, then a TLS handshake naming cdn-evil.test, to a server reading with SO_OOBINLINE"
out=$(esc_craft 1 oob-tls --dst "$LAB_CDN4" --dport 8443 --name cdn-evil.test 2>&1)
t_diag "client: $out"
sport=$(printf '%s\n' "$out" | sed -n 's/^sport \([0-9]*\);.*/\1/p')
t_match "the client connected (its port is known)" '^[0-9]+$' "$sport"
t_nomatch "cdn-evil.test is not served" "served: oob-server cdn-evil.test" "$out"
srv=
for i in $(seq 1 100); do # the server gives up on a silent connection after 3 s
	srv=$(grep "^peer ${sport:-0} " "$LAB_DIR/oob-server.log" 2>/dev/null) && break
	sleep 0.1
done
t_diag "server: $srv"
t_nomatch "the server read no byte of the flow" " first " "${srv:- first (no line)}"
r=$(esc_flow_reason "${sport:-0}")
t_match "the refusal is in the log" "$URG_HELD_RE" "$r"
esc_end "RST at the urgent byte" "client: $out; server: $srv; log: \"$r\""

# (b) A bare ACK that moves the urgent pointer onto the next byte, then "X"
# and cdn-evil.test's ClientHello in one segment ("not TLS" by its first
# byte; the server takes the "X" out).
esc_begin "(b) a bare ACK moving the urgent pointer ahead, then 'X' and cdn-evil.test's ClientHello in one segment"
out=$(esc_craft 1 held --dst "$LAB_CDN4" --sport 47101 --scenario urg-ack 2>&1)
t_diag "craft: $out"
n=$(esc_evil_upstream 47101)
t_eq "urg-ack: no byte naming cdn-evil.test reached the upstream" 0 "$n"
t_match "urg-ack: the crafted client got no byte from the server" "data bytes 0," "$out"
r=$(esc_flow_reason 47101)
t_match "urg-ack: the refusal is in the log" "$URG_HELD_RE" "$r"
esc_end "RST at the bare ACK" "upstream: $n packets naming cdn-evil.test; client: $out; log: \"$r\""

# (c) DNS over TCP to the guard's resolver: a whole allowed query sent
# urgent (the resolver's TCP takes its last byte out of the stream).
esc_begin "(c) DNS over TCP: a query sent urgent to the guard's resolver"
out=$(esc_craft 1 dns --server "$LAB_RESOLVER4" --tcp --oob --name api.github.test --timeout 2 2>&1)
t_diag "client: $out"
sport=$(printf '%s\n' "$out" | sed -n 's/^sport \([0-9]*\);.*/\1/p')
t_match "the client connected (its port is known)" '^[0-9]+$' "$sport"
n=$(esc_upstream "tcp and src port ${sport:-0} and dst port 53 and (tcp[tcpflags] & tcp-urg != 0 or tcp[18:2] != 0)")
t_eq "no urgent segment reached the resolver" 0 "$n"
t_match "the connection was reset" "^sport [0-9]+; reset" "$out"
r=$(esc_flow_reason "${sport:-0}")
t_match "the refusal is in the log" "$URG_DNS_RE" "$r"
esc_end "RST at the urgent query" "client: $out; upstream: $n urgent segments to port 53; log: \"$r\""

# Nothing else changed: a real client on the shared address still works.
esc_begin "curl https://cdn-good.test (IPv4): a real TLS client on the shared address"
t_match "works" "^cdn-good.test ok" \
	"$(lab_sb 1 curl -sS -4 --max-time 5 --cacert "$LAB_CA" https://cdn-good.test/ 2>&1)"
t_match "DNS over TCP to the guard's resolver works" "^NOERROR" \
	"$(esc_craft 1 dns --server "$LAB_RESOLVER4" --tcp --name api.github.test --timeout 2)"
esc_end "allowed" "curl and DNS over TCP as before"

t_done
