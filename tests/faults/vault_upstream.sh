# Fault: the secret-bound upstream misbehaves — nothing listening, packets
# dropped, accepts and never answers, resets after reading the request, and
# echoes the injected credential then resets mid-body (chunked, and with a
# Content-Length). The sandbox gets a clear error, and no byte run of the
# real value reaches it: the vault's response scrubber holds back what
# could be the start of a value, and a truncated body is never flushed.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

FLAKY4=203.0.113.30
vault_need_bins
LAB_DNS_EXTRA="--host-record=flaky.test,$FLAKY4"
lab_up 2
vault_config
python3 - "$V/rules.d/agents.yaml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace("allow:\n", "allow:\n  - host: flaky.test\n    ports: [443]\n", 1)
s = s.replace("secrets:\n", "secrets:\n  - name: FLAKY_TOKEN\n    host: flaky.test\n", 1)
open(p, "w").write(s)
PY
vault_secrets
VALUE="flaky-VAULTTEST$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s\n' "$VALUE" | "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets set FLAKY_TOKEN >/dev/null 2>&1
PH=$("$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets placeholder FLAKY_TOKEN)
vault_logd_start
vault_start
vault_redirect
lab_upstream ip addr add $FLAKY4/32 dev lo
# flaky.test's certificate, from the lab CA the vault trusts upstream
p=$LAB_DIR/pki
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=flaky.test \
	-keyout "$p/flaky.key" -out "$p/flaky.csr" 2>/dev/null
printf 'subjectAltName=DNS:flaky.test\n' >"$p/flaky.ext"
openssl x509 -req -in "$p/flaky.csr" -CA "$p/ca.pem" -CAkey "$p/ca.key" -CAcreateserial -days 1 \
	-extfile "$p/flaky.ext" -out "$p/flaky.pem" 2>/dev/null
MODE=$LAB_DIR/flaky.mode
cat >"$LAB_DIR/flaky.py" <<'PY'
import socket, ssl, struct, sys, threading, time
addr, cert, key, modefile = sys.argv[1:5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((addr, 443))
ls.listen(16)
def reset(raw):
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.close()
def serve(raw):
    mode = open(modefile).read().strip()
    try:
        s = ctx.wrap_socket(raw, server_side=True)
        head = b""
        while b"\r\n\r\n" not in head:
            c = s.recv(4096)
            if not c:
                return
            head += c
        auth = b""
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"authorization:"):
                auth = line.split(b":", 1)[1].strip()
        if mode == "silent":
            time.sleep(30)
        elif mode == "reset":
            reset(raw)
        elif mode == "echo-chunked":
            body = b"auth=" + auth[:-1]            # all of the value but its last byte
            s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                      b"%x\r\n" % len(body) + body + b"\r\n")
            time.sleep(0.3)
            reset(raw)
        elif mode == "echo-length":
            body = b"auth=" + auth
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + body)
            time.sleep(0.3)
            reset(raw)
        elif mode == "ok":
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nflaky ok\n")
            time.sleep(0.3)
    except (OSError, ssl.SSLError):
        pass
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
echo ok >"$MODE"
lab_ns_check "$LAB_UP"
ip netns exec "$LAB_UP" python3 "$LAB_DIR/flaky.py" $FLAKY4 "$p/flaky.pem" "$p/flaky.key" "$MODE" &
FLAKY_PID=$! # (ip netns exec execs: this is the server's own pid)
lab_wait_tcp "$LAB_UP" $FLAKY4 443

req() { # -> "CODE|X-Portcullis-Error" and the whole output in $LAB_DIR/out
	vcurl 1 -D "$LAB_DIR/hdrs" -o "$LAB_DIR/body" -w '%{http_code}' --max-time 20 \
		https://flaky.test/ -H "Authorization: Bearer $PH" >"$LAB_DIR/code" 2>"$LAB_DIR/err"
	cat "$LAB_DIR/hdrs" "$LAB_DIR/body" "$LAB_DIR/err" >"$LAB_DIR/out" 2>/dev/null
	printf '%s|%s' "$(cat "$LAB_DIR/code")" \
		"$(tr -d '\r' <"$LAB_DIR/hdrs" 2>/dev/null | sed -n 's/^X-Portcullis-Error: //p')"
}
no_value() { # mode: no 12-byte run of the value in what the sandbox got
	local i leaked=""
	for i in $(seq 0 4 $((${#VALUE} - 12))); do
		grep -qF "${VALUE:$i:12}" "$LAB_DIR/out" && leaked="$leaked ${VALUE:$i:12}"
	done
	t_eq "$1: no part of the value reached the sandbox" "" "$leaked"
}

t_match "baseline: the upstream answers through the vault" "^200\|" "$(req)"

for mode in closed blackhole silent reset echo-chunked echo-length; do
	case $mode in
	closed) kill $FLAKY_PID; wait $FLAKY_PID 2>/dev/null ;;
	blackhole) lab_upstream nft -f - <<-N
		table inet flaky {
			chain in {
				type filter hook input priority 0; policy accept;
				ip daddr $FLAKY4 tcp dport 443 drop
			}
		}
		N
		;;
	*) echo $mode >"$MODE" ;;
	esac
	r=$(req)
	t_diag "$mode: $r $(head -c 200 "$LAB_DIR/err")"
	case $mode in
	echo-*)
		# the head went out before the body broke: the sandbox sees a broken
		# body (curl 18/56), never a complete one, never the value
		t_match "$mode: the sandbox gets an error, not a complete body" "^(200|502)\|" "$r"
		t_match "$mode: curl reports the broken transfer" "curl: \((18|56|92)\)|^$" "$(cat "$LAB_DIR/err")"
		;;
	*)
		t_match "$mode: the sandbox gets 502 with the reason" "^502\|.+" "$r"
		[ $mode != silent ] ||
			t_match "silent: the reason says no response came in time" \
				"^502\|upstream sent no response within" "$r"
		;;
	esac
	no_value "$mode"
	case $mode in
	closed)
		ip netns exec "$LAB_UP" python3 "$LAB_DIR/flaky.py" $FLAKY4 "$p/flaky.pem" "$p/flaky.key" "$MODE" &
		FLAKY_PID=$!
		lab_wait_tcp "$LAB_UP" $FLAKY4 443 ;;
	blackhole) lab_upstream nft delete table inet flaky ;;
	esac
done
echo ok >"$MODE"
t_match "the upstream healthy again: served" "^200\|" "$(req)"
t_nomatch "the value is in no verdict record" "$VALUE" "$(v_verdicts)"
t_ok "the vault is still running" kill -0 "$(v_pid portcullis-vault)"
kill $FLAKY_PID 2>/dev/null
t_done
