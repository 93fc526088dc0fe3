# Escape attempts, class "resource abuse (vault)": slowloris against the
# vault — sandbox 1 holds many connections open with TLS handshakes it
# never finishes and request heads it never ends — while sandbox 2's
# secret-bound request must still be served, during the attack.
. "$PC_TOP/tests/escape/escape_lib.bash"
. "$PC_TOP/tests/integration/vault_setup.bash"

esc_init resource_vault "Resource abuse (vault)"
V_HANDSHAKE_MS=3000
vault_up
trap 'esc_finish' EXIT
GUARD_CONF=$V/portcullis.yaml GUARD_DIR=$V GUARD_BIN=$V_BIN
PH2=$("$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets placeholder AGENT2_TOKEN)
sb2_req() { vcurl 2 -o /dev/null -w '%{http_code}' https://api.github.test/echo -H "Authorization: Bearer $PH2"; }
t_eq "baseline: sandbox 2's secret-bound request" 200 "$(sb2_req)"

slow() { # mode count seconds: hold connections to the vault from sandbox 1
	lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" "$@" <<'EOF'
import socket, ssl, sys, time
ca, mode, n, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
ctx = ssl.create_default_context(cafile=ca)
held, refused = [], 0
for i in range(n):
    try:
        s = socket.create_connection(("api.github.test", 443), timeout=5)
        if mode == "head":
            s = ctx.wrap_socket(s, server_hostname="api.github.test")
            s.sendall(b"GET /echo HTTP/1.1\r\nHost: api.gith")   # never finished
        else:
            s.sendall(b"\x16\x03\x01")                            # a handshake never finished
        held.append(s)
    except (OSError, ssl.SSLError):
        refused += 1
print("holding", len(held), "refused", refused, flush=True)
time.sleep(secs)
closed = 0
for s in held:
    try:
        s.settimeout(0.1)
        s.recv(1)       # an answer (400: head not completed in time) or the close
        closed += 1
    except (socket.timeout, ssl.SSLError, OSError) as e:
        if not isinstance(e, socket.timeout):
            closed += 1
print("answered or closed by the vault", closed, flush=True)
EOF
}

for mode in head handshake; do
	esc_begin "slowloris: sandbox 1 holds 80 connections with unfinished $([ $mode = head ] && echo 'request heads' || echo 'TLS handshakes') (quota 64)"
	slow $mode 80 6 >"$LAB_DIR/slow-$mode.out" 2>&1 &
	sp=$!
	for i in $(seq 1 100); do grep -q holding "$LAB_DIR/slow-$mode.out" && break; sleep 0.1; done
	code=$(sb2_req)
	t_eq "during the attack, sandbox 2's request is served" 200 "$code"
	t_ok "the attack was still holding its connections then" kill -0 $sp
	wait $sp
	t_diag "$(tr '\n' ' ' <"$LAB_DIR/slow-$mode.out")"
	t_match "the vault closed the held connections (timeout or quota)" "answered or closed by the vault [1-9]" \
		"$(cat "$LAB_DIR/slow-$mode.out")"
	t_eq "after it, sandbox 2 still served" 200 "$(sb2_req)"
	esc_end "sandbox 2 served during the attack" \
		"$(tr '\n' ' ' <"$LAB_DIR/slow-$mode.out"); sandbox 2: $code"
done
t_match "the quota refusals are logged" "connection limit reached" "$(v_verdicts)"
t_ok "the vault is still running" kill -0 "$V_VAULT_PID"
t_done
