# Fault: logd stops acknowledging (SIGSTOP) while a worker's requests keep
# coming, in separate rounds of its event loop: two batches of records in
# flight, the third queued behind them (vault/logq.c). No record, no
# request: each request is refused with 503 once the deadline of the
# oldest batch in flight passes (2 s: the connection is given up, and the
# second batch with it; the one queued behind goes on a fresh connection
# and waits its own), none reaches the upstream, and the worker serves
# again once logd runs. Before this test, nothing stalled logd under the
# vault: kill9.sh kills it, which the vault sees at once as a closed socket.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

vault_up

r=$(vcurl 1 -o /dev/null -w '%{http_code}' https://api.github.test/before)
t_eq "a request goes through while logd runs" 200 "$r"

# three connections of sandbox 1's worker, handshaken while logd runs;
# then, with logd stopped, one request on each, 0.3 s apart (three rounds
# of the loop: the first two requests' batches in flight, the third queued)
lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" "$LAB_DIR/go" "$LAB_DIR/ready" >"$LAB_DIR/stall.out" 2>&1 <<-'PY' &
	import os, socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	cs = [ctx.wrap_socket(socket.create_connection(("api.github.test", 443), timeout=20),
	                      server_hostname="api.github.test") for _ in range(3)]
	open(sys.argv[3], "w").close()
	while not os.path.exists(sys.argv[2]):
	    time.sleep(0.05)
	t0 = time.monotonic()
	for i, c in enumerate(cs):
	    c.sendall(b"GET /stall-%d HTTP/1.1\r\nHost: api.github.test\r\n\r\n" % i)
	    time.sleep(0.3)
	for i, c in enumerate(cs):
	    b = b""
	    try:
	        while b"\r\n\r\n" not in b:
	            d = c.recv(4096)
	            if not d:
	                break
	            b += d
	    except OSError as e:
	        b = repr(e).encode()
	    print("req %d: %s after %.1f s" % (i, b.split(b"\r\n")[0].decode(errors="replace"),
	                                      time.monotonic() - t0), flush=True)
	PY
py=$!
lab_wait_until test -e "$LAB_DIR/ready" || t_diag "the connections were not made: $(cat "$LAB_DIR/stall.out")"
kill -STOP "$V_LOGD_PID"
touch "$LAB_DIR/go"
wait $py
kill -CONT "$V_LOGD_PID"
t_diag "$(cat "$LAB_DIR/stall.out")"
t_eq "each request while logd was stopped got 503 (no log record)" 3 \
	"$(grep -c '^req [0-2]: HTTP/1.1 503' "$LAB_DIR/stall.out")"
t_nomatch "none of them reached the upstream" "/stall-" "$(v_upstream_log)"

r=$(vcurl 1 -o /dev/null -w '%{http_code}' https://api.github.test/after)
t_eq "the worker serves again once logd runs" 200 "$r"
t_match "... and that request reached the upstream" "/after" "$(v_upstream_log)"
t_done
