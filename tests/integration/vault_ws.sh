# A WebSocket echo through the vault: the upgrade request gets the real
# value, messages pass both ways, a credential the upstream reflects in a
# fragmented message comes back as the placeholder, and a placeholder in a
# message from the sandbox ends the tunnel (logged as exfiltration) before
# that message reaches the upstream.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

vault_up
t_diag "redirect: $VAULT_REDIRECT"
WSLOG=$LAB_DIR/ws.log
: >"$WSLOG"
lab_upstream python3 "$PC_TOP/tests/integration/vault_ws_echo.py" "$LAB_API4" 8444 \
	"$LAB_DIR/pki/api.github.test.pem" "$LAB_DIR/pki/api.github.test.key" "$WSLOG" &
lab_wait_tcp "$LAB_UP" "$LAB_API4" 8444

# The sandbox's client: standard library only; prints what it received.
ws_client() { # placeholder message...
	lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" "$@" <<-'EOF'
	import base64, os, socket, ssl, struct, sys
	ca, ph, msgs = sys.argv[1], sys.argv[2], sys.argv[3:]
	ctx = ssl.create_default_context(cafile=ca)
	s = ctx.wrap_socket(socket.create_connection(("api.github.test", 8444), timeout=10),
	                    server_hostname="api.github.test")
	key = base64.b64encode(os.urandom(16)).decode()
	s.sendall(("GET /ws HTTP/1.1\r\nHost: api.github.test:8444\r\nUpgrade: websocket\r\n"
	           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
	           "Sec-WebSocket-Extensions: permessage-deflate\r\n"
	           "Authorization: Bearer %s\r\n\r\n" % (key, ph)).encode())
	head = b""
	while b"\r\n\r\n" not in head:
	    c = s.recv(1)
	    if not c: sys.exit("no upgrade response")
	    head += c
	print(head.split(b"\r\n")[0].decode())
	if b" 101 " not in head.split(b"\r\n")[0]: sys.exit(0)
	def send(op, p, fin=True):
	    m = os.urandom(4)
	    h = bytes([(0x80 if fin else 0) | op])
	    h += bytes([0x80 | len(p)]) if len(p) < 126 else bytes([0x80 | 126]) + struct.pack("!H", len(p))
	    s.sendall(h + m + bytes(b ^ m[i % 4] for i, b in enumerate(p)))
	def recv():
	    h = s.recv(2)
	    if len(h) < 2: return None
	    n = h[1] & 0x7f
	    if n == 126: n = struct.unpack("!H", s.recv(2))[0]
	    p = b""
	    while len(p) < n:
	        c = s.recv(n - len(p))
	        if not c: return None
	        p += c
	    return p.decode()
	for m in msgs:
	    if m == "FRAGMENTED":
	        send(1, b"frag-one ", fin=False); send(0, b"frag-two")
	    else:
	        send(1, m.encode())
	    try:
	        r = recv()
	    except OSError:
	        r = None
	    print("recv", r if r is not None else "<closed>")
	    if r is None: break
	EOF
}

out=$(ws_client "$V_PH_WS" hello whoami FRAGMENTED)
t_match "the upgrade is switched through the vault" "^HTTP/1.1 101" "$out"
t_match "the upstream got the real value on the upgrade request" "upgrade auth=Bearer $V_WS_VALUE" \
	"$(cat "$WSLOG")"
t_match "compression is not negotiated (scrubbing needs plain frames)" "ext=-" "$(cat "$WSLOG")"
t_match "a message is echoed" "recv hello" "$out"
t_match "a reflected credential in a fragmented message comes back as the placeholder" \
	"recv auth=Bearer $V_PH_WS" "$out"
t_nomatch "the sandbox never sees the value" "$V_WS_VALUE" "$out"
t_match "a fragmented message passes" "recv frag-one frag-two" "$out"

out=$(ws_client "$V_PH_WS" hello "leak $V_PH_GH")
t_match "a placeholder inside a message ends the tunnel" "recv <closed>" "$out"
t_nomatch "that message never reached the upstream" "leak" "$(cat "$WSLOG")"
t_match "logged as exfiltration" '"event.action":"exfiltration".*placeholder of GITHUB_TOKEN in a WebSocket message' \
	"$(v_verdicts)"

out=$(ws_client "$V_PH_GH" hello)
t_match "the placeholder of a secret bound elsewhere on the upgrade request is refused" \
	"^HTTP/1.1 403" "$out"

t_done
