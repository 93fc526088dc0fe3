# The vault's limits: a sandbox that holds its connection quota open is
# refused more while another sandbox is served; a slow client is cut off by
# the header timeout while others proceed; an idle connection is closed; an
# oversized head is refused. No slow or hostile client starves the others.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

V_MAX_CONNS=3 V_HANDSHAKE_MS=1500 V_IDLE_MS=3000 vault_up

# hold N TLS connections from sandbox 1 open (handshake done, no request)
lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" 3 15 "$LAB_DIR/held" <<-'EOF' &
	import socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	held = [ctx.wrap_socket(socket.create_connection(("api.github.test", 443), timeout=5),
	                        server_hostname="api.github.test") for _ in range(int(sys.argv[2]))]
	open(sys.argv[4], "w").close()
	time.sleep(float(sys.argv[3]))
	EOF
holder=$!
for _ in $(seq 1 100); do [ -e "$LAB_DIR/held" ] && break; sleep 0.1; done
t_fail "sandbox 1 at its connection limit: a fourth connection is refused" \
	vcurl 1 https://api.github.test/
t_match "the refusal is logged" '"event.action":"connect".*"connection limit reached"' "$(v_verdicts)"
t_eq "sandbox 2 is served meanwhile" "api.github.test ok" "$(vcurl 2 https://api.github.test/)"

# idle connections are closed after vault.idle_timeout_ms: the quota frees
for _ in $(seq 1 24); do
	again=$(vcurl 1 https://api.github.test/ 2>/dev/null) && break
	sleep 0.25
done
t_eq "after the idle timeout (the holder still holds them open) sandbox 1 is served again" \
	"api.github.test ok" "$again"
kill $holder 2>/dev/null
wait $holder 2>/dev/null

# a slowloris head: one byte every 200 ms, cut off by the header timeout
lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" >"$LAB_DIR/slow.out" 2>&1 <<-'EOF' &
	import socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	s = ctx.wrap_socket(socket.create_connection(("api.github.test", 443), timeout=10),
	                    server_hostname="api.github.test")
	start = time.time()
	try:
	    for b in b"GET / HTTP/1.1\r\nHost: api.github.test\r\nX-Slow: " + b"a" * 100:
	        s.send(bytes([b]))
	        time.sleep(0.2)
	    print("never cut off")
	except OSError:
	    pass
	print("response:", s.recv(200).split(b"\r\n")[0].decode(errors="replace"))
	print("after %.1f s" % (time.time() - start))
	EOF
slow=$!
sleep 0.5
t_eq "a fast request is served while the slow one trickles" "api.github.test ok" \
	"$(vcurl 1 https://api.github.test/)"
wait $slow
t_match "the slow head is answered 400 by the header timeout" "response: HTTP/1.1 400" \
	"$(cat "$LAB_DIR/slow.out")"
t_nomatch "... and cut off" "never cut off" "$(cat "$LAB_DIR/slow.out")"

# an oversized head
big=$(head -c 40000 /dev/zero | tr '\0' a)
code=$(vcurl 1 -o /dev/null -w '%{http_code}' -H "X-Big: $big" https://api.github.test/ 2>/dev/null)
t_eq "a head over vault.max_header_bytes is refused" 400 "$code"
t_eq "the vault is still serving" "api.github.test ok" "$(vcurl 1 https://api.github.test/)"

# A reload replaces the workers: the retiring worker of sandbox 1 keeps
# serving the connections it has, and they still count against the
# sandbox's quota; its new worker does not get a quota of its own on top
# (it used to: each reload gave a sandbox another max_conns_per_sandbox).
lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" 3 "$LAB_DIR/held2" >"$LAB_DIR/held2.out" 2>&1 <<-'EOF' &
	import os, socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	held = [ctx.wrap_socket(socket.create_connection(("api.github.test", 443), timeout=5),
	                        server_hostname="api.github.test") for _ in range(int(sys.argv[2]))]
	def ping(s):  # a request on each: served, and not idle
	    s.sendall(b"GET / HTTP/1.1\r\nHost: api.github.test\r\n\r\n")
	    return s.recv(4096).split(b"\r\n")[0].decode()
	print("before:", " ".join(ping(s) for s in held))
	open(sys.argv[3], "w").close()
	while os.path.exists(sys.argv[3]):
	    for s in held:
	        ping(s)
	    time.sleep(0.5)
	print("after:", " ".join(ping(s) for s in held))
	EOF
holder=$!
for _ in $(seq 1 100); do [ -e "$LAB_DIR/held2" ] && break; sleep 0.1; done
t_fail "sandbox 1 holds its 3 connections: a fourth is refused" vcurl 1 https://api.github.test/
wpid() { pgrep -P "$V_VAULT_PID" -x vault-worker | while read -r p; do
	tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -- "-W $1 " && echo "$p"; done | sort -n | tr '\n' ' '; }
old_w=$(wpid agent-1)
kill -HUP "$V_VAULT_PID"
sleep 0.5
t_fail "after a reload (its worker retired, the 3 connections on it): a fourth is still refused" \
	vcurl 1 https://api.github.test/
now_w=$(wpid agent-1)
t_eq "... by sandbox 1's new worker, the old one still serving the 3" "2 $old_w" \
	"$(wc -w <<<"$now_w") $(grep -ow -- "${old_w% }" <<<"$now_w") "
t_eq "sandbox 2 is served meanwhile" "api.github.test ok" "$(vcurl 2 https://api.github.test/)"
rm -f "$LAB_DIR/held2"
wait $holder
t_eq "the retired worker served the held connections to their end" \
	"before: HTTP/1.1 200 OK HTTP/1.1 200 OK HTTP/1.1 200 OK after: HTTP/1.1 200 OK HTTP/1.1 200 OK HTTP/1.1 200 OK" \
	"$(tr '\n' ' ' <"$LAB_DIR/held2.out" | sed 's/ $//')"
for _ in $(seq 1 50); do
	again=$(vcurl 1 https://api.github.test/ 2>/dev/null) && break
	sleep 0.1
done
t_eq "once they are closed, sandbox 1 is served again" "api.github.test ok" "$again"

t_done
