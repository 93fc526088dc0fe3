# A worker serves all of its sandbox's connections from one event loop
# (docs/vault.md, "Concurrency model"): a peer that stalls must stall only
# its own connection. Sandbox 1 holds three stalled connections in its
# worker — a head half sent, a TCP connection that never starts its TLS
# handshake, a client that stopped reading a 4 MB response (the vault's
# write waits) — while its fourth connection's keep-alive requests and
# sandbox 2's requests complete; then the stalled ones are served to the end.
# (A connection that never has to wait takes turns too: check_vault_vloop,
# where that does not depend on how fast the machine is.)
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

# the stalls must outlast the requests they must not delay
LAB_BIG_SIZE=4M V_HANDSHAKE_MS=20000 V_IDLE_MS=20000 vault_up

lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" "$LAB_DIR/go" "$LAB_DIR/seen" >"$LAB_DIR/stall.out" 2>&1 <<-'EOF' &
	import os, socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	def tls():
	    return ctx.wrap_socket(socket.create_connection(("api.github.test", 443), timeout=30),
	                           server_hostname="api.github.test")
	def head(s):
	    b = b""
	    while b"\r\n\r\n" not in b:
	        c = s.recv(4096)
	        if not c:
	            break
	        b += c
	    return b
	def req(d):  # one keep-alive request, its body read: served?
	    d.sendall(b"GET / HTTP/1.1\r\nHost: api.github.test\r\n\r\n")
	    r = head(d)
	    if not r.startswith(b"HTTP/1.1 200"):
	        return False
	    n = int([l.split(b":")[1] for l in r.split(b"\r\n")
	             if l.lower().startswith(b"content-length:")][0])
	    body = r.split(b"\r\n\r\n", 1)[1]
	    while len(body) < n:
	        body += d.recv(n - len(body))
	    return True
	# A: half a head, then nothing
	a = tls()
	a.sendall(b"GET / HTTP/1.1\r\nHost: api.github.test\r\nX-Half: ")
	# B: connected, no ClientHello
	b = socket.create_connection(("api.github.test", 443), timeout=30)
	# C: asks for 4 MB, reads the start of the answer, then stops reading
	cs = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
	cs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # fills soon
	cs.settimeout(30)
	cs.connect(("api.github.test", 443))
	c = ctx.wrap_socket(cs, server_hostname="api.github.test")
	c.sendall(b"GET /big HTTP/1.1\r\nHost: api.github.test\r\n\r\n")
	got_c = c.recv(100)
	print("C started:", got_c.split(b"\r\n")[0].decode(errors="replace"), flush=True)
	open(sys.argv[2], "w").close()  # sandbox 2 starts too
	# D: keep-alive requests on a fourth connection of the same worker
	d = tls()
	worst, ok = 0.0, 0
	for i in range(40):
	    t = time.monotonic()
	    ok += req(d)
	    worst = max(worst, time.monotonic() - t)
	print("D served: %d of 40, slowest %.2f s" % (ok, worst), flush=True)
	# the stalled ones were kept, not given up on
	a.sendall(b"1\r\n\r\n")
	print("A answered:", head(a).split(b"\r\n")[0].decode(errors="replace"), flush=True)
	# C stays stalled until the test saw the vault's write wait
	for _ in range(600):
	    if os.path.exists(sys.argv[3]):
	        break
	    time.sleep(0.05)
	total = len(got_c)
	while True:
	    x = c.recv(65536)
	    if not x:
	        break
	    total += len(x)
	    if total >= 4 * 1024 * 1024:
	        break
	print("C received: %s" % ("all" if total >= 4 * 1024 * 1024 else total), flush=True)
	b.close()
	EOF
stall=$!
lab_wait_until test -e "$LAB_DIR/go"
# C's response fills the vault's socket: its write to C waits
c_blocked() {
	lab_gw ss -Htn state established "( sport = :$V_PORT )" |
		awk '$2 > 10000 { f = 1 } END { exit !f }'
}
lab_wait_until c_blocked && blocked=yes || blocked=no
touch "$LAB_DIR/seen"
two=$(for _ in 1 2 3 4 5; do vcurl 2 --max-time 5 https://api.github.test/; done)
wait $stall
out=$(cat "$LAB_DIR/stall.out")

t_match "the response to C started (its connection is in the worker)" "C started: HTTP/1.1 200" "$out"
t_eq "the vault's write to C waits (over 10 kB unsent in its socket)" yes "$blocked"
t_match "40 keep-alive requests of the same sandbox are served while three of its connections stall, none taking 5 s" \
	"D served: 40 of 40, slowest [0-4]\.[0-9]+ s" "$out"
t_eq "sandbox 2 is served meanwhile (5 requests)" 5 "$(grep -c '^api.github.test ok$' <<<"$two")"
t_match "the half-sent head, completed afterwards, is answered" "A answered: HTTP/1.1 200" "$out"
t_match "the client that stopped reading, reading again, gets its whole response" "C received: all" "$out"
t_eq "one worker served sandbox 1's connections" 1 \
	"$(grep -c 'worker agent-1: serving' "$LAB_DIR/vault.stderr" 2>/dev/null || echo 0)"
t_done
