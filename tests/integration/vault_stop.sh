# portcullis-vault stops on SIGTERM without waiting out its timeouts: an
# idle keep-alive connection and a half-sent request head (both far from
# their timeouts) are cut, every connection thread is joined and what they
# used is freed (under ASan/LSan or valgrind this is where a leak shows),
# and the daemon exits 0 with the log intact.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

vault_need_bins
lab_up 2
# timeouts far beyond the test's bounds: only the shutdown can end these
V_HANDSHAKE_MS=60000 V_IDLE_MS=120000 vault_config
vault_secrets
vault_logd_start
lab_ns_check "$LAB_GW"
ip netns exec "$LAB_GW" "$V_BIN/portcullis-vault" -c "$V/portcullis.yaml" \
	2>>"$LAB_DIR/vault.stderr" &
vpid=$!
for _ in $(seq 1 300); do
	lab_gw ss -Hltn "sport = :$V_PORT" | grep -q . && break
	sleep 0.05
done
vault_redirect

t_eq "served before the stop" "api.github.test ok" "$(vcurl 1 https://api.github.test/)"

# an idle keep-alive connection (one request answered) and a connection
# whose request head stops halfway; each reports how it ended
lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" "$LAB_DIR/held" >"$LAB_DIR/held.out" 2>&1 <<-'EOF' &
	import socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	def conn():
	    return ctx.wrap_socket(socket.create_connection(("api.github.test", 443), timeout=60),
	                           server_hostname="api.github.test")
	idle, half = conn(), conn()
	idle.sendall(b"GET / HTTP/1.1\r\nHost: api.github.test\r\n\r\n")
	first = idle.recv(4096)
	half.sendall(b"GET / HTTP/1.1\r\nHost: api.git")
	open(sys.argv[2], "w").close()
	print("idle: first response", first.split(b"\r\n")[0].decode())
	for name, s in (("idle", idle), ("half", half)):
	    try:
	        rest = s.recv(4096)
	        print(name, "ended", "(EOF)" if not rest else rest[:40])
	    except OSError as e:
	        print(name, "ended", type(e).__name__)
	EOF
held=$!
for _ in $(seq 1 100); do [ -e "$LAB_DIR/held" ] && break; sleep 0.1; done
sleep 0.3

kill -TERM $vpid
# a bound for a hung daemon, far below the timeouts above
for _ in $(seq 1 200); do kill -0 $vpid 2>/dev/null || break; sleep 0.1; done
t_fail "the vault ended within 20 s (its timeouts are 60 and 120 s)" kill -0 $vpid
kill -KILL $vpid 2>/dev/null
wait $vpid
t_eq "it exits 0" 0 $?
wait $held
out=$(cat "$LAB_DIR/held.out")
t_match "the idle client had been served" "idle: first response HTTP/1.1 200" "$out"
t_match "the idle keep-alive connection was closed" "idle ended" "$out"
t_match "the half-sent request's connection was closed" "half ended" "$out"
t_nomatch "no sanitizer or thread error on the way out" "Sanitizer|did not end" \
	"$(cat "$LAB_DIR/vault.stderr")"
t_match "the vault said it stops" "stopping" "$(cat "$LAB_DIR/vault.stderr")"
t_ok "the log verifies" "$V_BIN/portcullis" -c "$V/portcullis.yaml" log verify
t_done
