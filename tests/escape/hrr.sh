# Escape attempts, class "a second ClientHello" (issue 30, item 1): a held
# flow was promoted once the server acknowledged its judged ClientHello.
# A TLS 1.3 server that answers with a HelloRetryRequest (the client's key
# share is not one it takes) makes the client send a second ClientHello,
# which rode the fast path unjudged — and OpenSSL runs the server-name
# callback on it again, so the virtual host is chosen by a name the guard
# never saw. The sandbox's client sends the allowed cdn-good.test first and
# cdn-evil.test in the second. The guard now waits, on a TLS flow, for the
# server's first bytes before promoting it, and refuses the flow (recorded)
# when they are a HelloRetryRequest (docs/spec.md H13a). Evidence: the
# names the server's callback saw, the upstream capture (no byte naming
# cdn-evil.test), the guard's log. The same server without a retry still
# serves an allowed client: promotion waits for its ServerHello.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init hrr "A second ClientHello after a HelloRetryRequest"
# cdn-good.test on 8444: a TLS server of our own there takes only P-384,
# so a client's X25519 key share gets a HelloRetryRequest.
ESC_ALLOW1='  - host: cdn-good.test
    ports: [8444]'
esc_up 2
ip netns exec "$LAB_UP" python3 "$ESC_CRAFT" oob-server --listen "$LAB_CDN4" --port 8444 \
	--cert "$LAB_DIR/pki/cdn.test.pem" --key "$LAB_DIR/pki/cdn.test.key" \
	--log "$LAB_DIR/hrr-server.log" --group secp384r1 >"$LAB_DIR/hrr-server.err" 2>&1 &
echo $! >"$LAB_DIR/hrr-server.pid"
server_listens() { grep -q listening "$LAB_DIR/hrr-server.log" 2>/dev/null; }
lab_wait_until server_listens
t_match "the P-384-only server listens" listening "$(cat "$LAB_DIR/hrr-server.log" 2>&1)"
t_match "sandbox 1 resolves cdn-good.test" "$LAB_CDN4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test A)"
# the server's line for a client port (written when its connection ends)
server_line() { grep "^peer $1 " "$LAB_DIR/hrr-server.log" 2>/dev/null | tail -1; }

esc_begin "a ClientHello for cdn-good.test answered by a HelloRetryRequest, the second naming cdn-evil.test"
out=$(esc_craft 1 hrr-tls --dst "$LAB_CDN4" --dport 8444 --name cdn-good.test \
	--second cdn-evil.test 2>&1)
t_diag "client: $out"
sport=$(printf '%s\n' "$out" | sed -n 's/^sport \([0-9]*\);.*/\1/p')
t_match "the client connected (its port is known)" '^[0-9]+$' "$sport"
t_match "the client never got to send its second ClientHello" "flights 1;" "$out"
n=$(esc_evil_upstream "${sport:-0}")
t_eq "no byte naming cdn-evil.test reached the upstream" 0 "$n"
has_line() { [ -n "$(server_line "${sport:-0}")" ]; }
lab_wait_until has_line
sl=$(server_line "${sport:-0}")
t_diag "server: $sl"
t_nomatch "the server's name callback never saw cdn-evil.test" "cdn-evil" "$sl"
r=$(esc_flow_reason "${sport:-0}")
t_match "the refusal is in the log" "HelloRetryRequest" "$r"
c=$(esc_flow_code "${sport:-0}")
t_eq "its event.code" held_inconsistent "$c"
esc_end "flow refused at the HelloRetryRequest" "client: $out; server: $sl; upstream: $n packets naming cdn-evil.test; log: \"$r\" ($c)"

esc_begin "the same server, a client whose key share it takes (no retry): served"
out=$(lab_sb 1 python3 -c '
import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_ecdh_curve("secp384r1")
s = socket.create_connection((sys.argv[1], 8444), timeout=5)
t = ctx.wrap_socket(s, server_hostname="cdn-good.test")
t.sendall(b"GET / HTTP/1.1\r\nHost: cdn-good.test\r\n\r\n")
print(t.recv(4096).decode(errors="replace").splitlines()[-1])' "$LAB_CDN4" 2>&1)
t_match "served after the ServerHello promoted the flow" "oob-server cdn-good.test ok" "$out"
esc_end "allowed" "client: $out"
t_done
