# Escape attempts, class "vault edges" (issue 33): what tests/escape/vault.sh
# leaves out at the edges of a request and of a reflection —
#  1. a placeholder that ends a request body: its last bytes in a chunk
#     of their own, in 1-byte chunks, after 1 MiB (a streamed body), or at
#     the end of a Content-Length body; only a body's end judges it;
#  2. a secret holding '/', '+', '=', '"' and '\' reflected by a hostile
#     upstream in every form servers write (JSON, PHP's \/, \u escapes,
#     percent-encoding, base64 and base64url with and without padding or
#     wrapped in lines inside a longer blob, HTML references): the sandbox
#     must get none of it;
#  3. methods and Host spelt otherwise: "trace", "connect", a method
#     outside the standard ones, X-HTTP-Method-Override (and its cousins)
#     with a credential; a Host in capitals with a trailing dot and a port
#     with a leading zero, forwarded only as the canonical name;
#  4. a placeholder percent-encoded or case-changed in the target, a header,
#     a body (its trailer fields and chunk extensions too), a WebSocket
#     message; cut between two WebSocket messages;
#  5. a body trickled a byte a second, each read under the idle timeout:
#     vault.request_timeout_ms ends it (408, recorded);
#  6. the bound header not exactly the secret's format with the
#     placeholder: bytes before or after it, another scheme or none, the
#     scheme in another case, a Basic base64 wrapper (padded or not, the
#     URL-safe alphabet, stray bytes, a padded run before it; the
#     placeholder in it as written or in another case), two placeholders,
#     the header twice or beside the sandbox's own, the placeholder in
#     another secret's bound header: refused, recorded, never forwarded.
# Real engine, vault, logd, nginx (api.github.test:443) and the reflecting
# upstream tests/integration/vault_ws_echo.py (api.github.test:8444).
. "$PC_TOP/tests/escape/escape_lib.bash"
. "$PC_TOP/tests/integration/vault_setup.bash"

esc_init vault_edges "vault edges: body ends, escaped reflections, method and Host spellings"
vault_need_bins
lab_up 2
# section 5: a whole request (head and body) must arrive within 4 s; the
# idle timeout (5 s) bounds each read only
V_REQUEST_MS=4000
vault_config
# a secret bound to the reflecting upstream in a header of its own, its
# value full of the characters encoders escape
cat >>"$V/rules.d/agents.yaml" <<-EOF
  - name: FORMS_TOKEN
    host: api.github.test
    port: 8444
    header: X-Forms-Auth
    format: "{secret}"
EOF
vault_secrets
hex8() { head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
V_FORMS_VALUE="f/$(hex8)+$(hex8)=$(hex8)\"$(hex8)\\$(hex8)/"
V_PH_FORMS=$(printf '%s' "$V_FORMS_VALUE" | "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets set FORMS_TOKEN 2>/dev/null)
[ -n "$V_PH_FORMS" ] || lab_die "secrets set FORMS_TOKEN failed"
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
rawreq() { # SNI REQUEST|@FILE
	client raw "$LAB_DIR/vault-ca.pem" api.github.test 443 "$1" "$2"
}
req8444() { # REQUEST
	client raw "$LAB_DIR/vault-ca.pem" api.github.test 8444 api.github.test "$1"
}
status_of() { printf '%s\n' "$1" | head -1 | awk '/^HTTP/ {print $2} !/^HTTP/ {print "none"}'; }
why_of() { printf '%s\n' "$1" | tr -d '\r' | sed -n 's/^X-Portcullis-Error: //p' | head -1; }
up_lines() { v_upstream_log | wc -l | tr -d ' '; }
ws_lines() { grep -c . "$LAB_DIR/ws.log" 2>/dev/null || echo 0; }
new_records() { v_verdicts | tail -n +$((ESC_REC0 + 1)); }

# A refused request: its status, the record the refusal left (action and
# event.code), and what the upstream saw (COUNT_FN lines before = after).
refused_as() { # name statuses-ERE output action code count-fn before
	local st why
	st=$(status_of "$3")
	why=$(why_of "$3")
	t_match "$1: refused ($2)" "^($2)$" "$st"
	t_match "$1: recorded as $4 ($5)" "\"event.action\":\"($4)\".*\"event.code\":\"$5\"|\"event.code\":\"$5\".*\"event.action\":\"($4)\"" "$(new_records)"
	t_eq "$1: the upstream saw nothing" "$7" "$($6)"
	ESC_EV="status $st${why:+, X-Portcullis-Error: $why}; record: $4 $5; upstream: no request"
}

# ---- 1. a placeholder that ends the body ----------------------------------------------------
# The body scanner holds back (longest placeholder - 1) bytes: only a
# placeholder shorter than the longest one the store knows (WS_TOKEN's:
# the shortest name) is left undecided when the body ends there.
BPH=$V_PH_WS
t_ok "(WS_TOKEN's placeholder is shorter than GITHUB_TOKEN's)" test ${#BPH} -lt ${#V_PH_GH}
q=${BPH:0:5} r=${BPH:5}
chunks1=""
for ((i = 0; i < ${#BPH}; i++)); do chunks1+="1\r\n${BPH:i:1}\r\n"; done
for case in \
	"its last bytes in a chunk of their own (5 bytes, then the rest)|$(printf '%x' ${#q})\r\n$q\r\n$(printf '%x' ${#r})\r\n$r\r\n0\r\n\r\n" \
	"in 1-byte chunks, nothing after it|${chunks1}0\r\n\r\n"; do
	name=${case%%|*} body=${case#*|}
	esc_begin "the placeholder ending a chunked body, $name"
	b=$(up_lines)
	out=$(rawreq api.github.test "POST /echo HTTP/1.1\r\nHost: api.github.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n$body")
	refused_as "chunked end, $name" 403 "$out" exfiltration vault_placeholder_in_body up_lines "$b"
	esc_end "refused" "$ESC_EV"
done

esc_begin "the placeholder ending a Content-Length body"
b=$(up_lines)
out=$(rawreq api.github.test "POST /echo HTTP/1.1\r\nHost: api.github.test\r\nContent-Length: $((${#BPH} + 2))\r\nConnection: close\r\n\r\nx=$BPH")
refused_as "Content-Length end" 403 "$out" exfiltration vault_placeholder_in_body up_lines "$b"
esc_end "refused" "$ESC_EV"

# past the 1 MiB the vault holds, the body is streamed: the upstream gets
# its start, and the request must be cut, never completed
big=$LAB_DIR/big-body.req
{
	printf 'POST /echo HTTP/1.1\r\nHost: api.github.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n'
	printf '%x\r\n' 1200000
	head -c 1200000 /dev/zero | tr '\0' a
	printf '\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n' ${#q} "$q" ${#r} "$r"
} >"$big"
chmod 0644 "$big"
esc_begin "the placeholder ending a chunked body streamed past 1 MiB, in two chunks"
out=$(rawreq api.github.test "@$big")
st=$(status_of "$out")
t_eq "streamed chunked end: refused (403)" 403 "$st"
t_match "streamed chunked end: recorded as exfiltration (vault_placeholder_in_body)" '"event.code":"vault_placeholder_in_body"' "$(new_records)"
t_nomatch "streamed chunked end: the sandbox got no upstream answer" "host=api.github.test" "$out"
esc_end "refused, the upstream connection cut" "status $st, X-Portcullis-Error: $(why_of "$out")"

# ---- 2. a value with / + = " \ reflected in every form ---------------------------------------
leak_of() { python3 "$PC_TOP/tests/escape/vault_client.py" leak "$V_FORMS_VALUE"; }
R="Host: api.github.test:8444\r\nX-Forms-Auth: $V_PH_FORMS\r\nConnection: close\r\n"
for form in raw json php_json json_u_lower json_u_upper percent_lower percent_upper \
	base64 base64_nopad base64url base64url_nopad base64_php_json base64_percent \
	base64_mime base64_pem_json html_named html_decimal html_hex; do
	esc_begin "the value, holding / + = \" \\, reflected as $form"
	out=$(req8444 "GET /forms?form=$form HTTP/1.1\r\n${R}\r\n")
	t_match "$form: served" "^HTTP/1.1 200" "$out"
	t_match "$form: the placeholder stands in its place" "$V_PH_FORMS" "$out"
	t_eq "$form: no form of the value reached the sandbox" "no leak" "$(printf '%s' "$out" | leak_of)"
	esc_end "scrubbed" "answer: $(printf '%s' "$out" | tail -1 | sed "s/$V_PH_FORMS/<placeholder>/g" | cut -c1-60)"
done
t_match "the reflecting upstream was asked for each form" "http GET /forms\?form=html_hex" "$(cat "$LAB_DIR/ws.log")"

# ---- 3. methods and Host, spelt otherwise ----------------------------------------------------
A="Host: api.github.test:8444\r\nAuthorization: Bearer $V_PH_WS\r\nConnection: close\r\n"
for case in "lowercase trace|trace /reflect HTTP/1.1\r\n$A|vault_method_reflects" \
	"lowercase connect|connect /reflect HTTP/1.1\r\n$A|vault_method_not_allowed|http-request" \
	"a method outside the standard ones (PROPFIND)|PROPFIND /reflect HTTP/1.1\r\n$A|vault_method_not_allowed" \
	"X-HTTP-Method-Override: TRACE|GET /reflect HTTP/1.1\r\n${A}X-HTTP-Method-Override: TRACE\r\n|vault_method_override" \
	"X-HTTP-Method: TRACE|POST /reflect HTTP/1.1\r\n${A}X-HTTP-Method: TRACE\r\nContent-Length: 0\r\n|vault_method_override" \
	"X-Method-Override: TRACE|GET /reflect HTTP/1.1\r\n${A}X-Method-Override: TRACE\r\n|vault_method_override"; do
	IFS='|' read -r name req code action <<<"$case"
	esc_begin "a request with a credential: $name"
	b=$(ws_lines)
	out=$(req8444 "$req\r\n")
	# CONNECT is refused whatever the request carries: not judged as exfiltration
	refused_as "$name" 405 "$out" "${action:-exfiltration}" "$code" ws_lines "$b"
	esc_end "refused" "$ESC_EV"
done

esc_begin "Host: API.github.test.:08444 (capitals, trailing dot, a leading zero in the port)"
out=$(req8444 "GET /reflect HTTP/1.1\r\nHost: API.github.test.:08444\r\nAuthorization: Bearer $V_PH_WS\r\nConnection: close\r\n\r\n")
t_match "served" "^HTTP/1.1 200" "$out"
last=$(grep '^http ' "$LAB_DIR/ws.log" | tail -1)
t_match "the upstream got the canonical Host, api.github.test:8444" ' host=api\.github\.test:8444$' "$last"
esc_end "forwarded as the canonical Host" "upstream log: ${last##* }"

# ---- 4. a placeholder in the forms an application decodes -------------------------------------
# Percent-encoded (one character, every other one, either hex case),
# upper-cased or in mixed case, in the request target, a header (its
# bound one too), a Content-Length or chunked body; and a WebSocket
# placeholder cut between two messages of one connection.
pct() { # STRING STEP CASE: every STEP-th character percent-encoded (hex in CASE)
	python3 -c 'import sys
s, st, up = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "upper"
f = "%%%02X" if up else "%%%02x"
print("".join(f % ord(c) if i % st == 0 else c for i, c in enumerate(s)), end="")' "$1" "$2" "$3"
}
upper() { printf '%s' "$1" | tr a-z A-Z; }
mixed() { python3 -c 'import sys; print("".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(sys.argv[1])), end="")' "$1"; }
P1=%70${PH:1}          # the first character percent-encoded
P2=$(pct "$PH" 2 upper) # every other character, upper-case hex
P3=$(pct "$PH" 3 lower) # every third, lower-case hex
PU=$(upper "$PH")       # PCPH_GITHUB_TOKEN_<RANDOM>
PM=$(mixed "$PH")       # pCpH_gItHuB_…
PX="PcPh_${PH:5}"       # the prefix alone in another case
B="Host: api.github.test\r\nConnection: close\r\n"
for case in "the query, %70cph_…|GET /echo?q=$P1 HTTP/1.1\r\n$B|vault_placeholder_in_url" \
	"the path, every other character %XX|GET /echo/$P2 HTTP/1.1\r\n$B|vault_placeholder_in_url" \
	"the query, every third character %xx|GET /echo?q=$P3 HTTP/1.1\r\n$B|vault_placeholder_in_url" \
	"the query, upper case|GET /echo?q=$PU HTTP/1.1\r\n$B|vault_placeholder_in_url" \
	"a header, upper case|GET /echo HTTP/1.1\r\n${B}X-Note: $PU\r\n|vault_placeholder_wrong_header" \
	"a header, case mixed|GET /echo HTTP/1.1\r\n${B}X-Note: $PM\r\n|vault_placeholder_wrong_header" \
	"a header, %70cph_…|GET /echo HTTP/1.1\r\n${B}X-Note: $P1\r\n|vault_placeholder_wrong_header" \
	"a header beside the exact placeholder, prefix in capitals|GET /echo HTTP/1.1\r\n${B}Authorization: Bearer $PH $PX\r\n|vault_placeholder_wrong_header" \
	"a form body, %70cph_…|POST /echo HTTP/1.1\r\n${B}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: $((${#P1} + 2))\r\n\r\nq=$P1|vault_placeholder_in_body" \
	"a chunked body, upper case, cut in two chunks|POST /echo HTTP/1.1\r\n${B}Transfer-Encoding: chunked\r\n\r\n$(printf '%x' 9)\r\n${PU:0:9}\r\n$(printf '%x' $((${#PU} - 9)))\r\n${PU:9}\r\n0\r\n\r\n|vault_placeholder_in_body" \
	"a chunked body's trailer field, %70cph_…|POST /echo HTTP/1.1\r\n${B}Transfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-T: $P1\r\n\r\n|vault_placeholder_in_body" \
	"a chunk extension, upper case|POST /echo HTTP/1.1\r\n${B}Transfer-Encoding: chunked\r\n\r\n2;x=$PU\r\nhi\r\n0\r\n\r\n|vault_placeholder_in_body" \
	"a chunked body, every other character %XX, cut inside an escape|POST /echo HTTP/1.1\r\n${B}Transfer-Encoding: chunked\r\n\r\n2\r\n${P2:0:2}\r\n$(printf '%x' $((${#P2} - 2)))\r\n${P2:2}\r\n0\r\n\r\n|vault_placeholder_in_body"; do
	IFS='|' read -r name req code <<<"$case"
	case $req in POST*) req=$req ;; *) req="$req\r\n" ;; esac
	esc_begin "the placeholder decoded: $name"
	b=$(up_lines)
	out=$(rawreq api.github.test "$req")
	refused_as "decoded, $name" 403 "$out" exfiltration "$code" up_lines "$b"
	esc_end "refused" "$ESC_EV"
done

esc_begin "WebSocket: the placeholder cut between two messages of one connection"
out=$(client ws "$LAB_DIR/vault-ca.pem" api.github.test 8444 api.github.test "$V_PH_WS" twomsgs "x=$V_PH_GH;")
t_match "two messages: the upgrade succeeded" "^HTTP/1.1 101" "$out"
t_nomatch "two messages: the tunnel ended, the message after was not echoed" "echo of after: True" "$out"
t_nomatch "two messages: the upstream never saw the whole placeholder" "$V_PH_GH" "$(cat "$LAB_DIR/ws.log" 2>/dev/null)"
t_match "two messages: recorded as exfiltration (vault_placeholder_in_websocket)" '"event.code":"vault_placeholder_in_websocket"' "$(new_records)"
esc_end "tunnel ended" "upstream echo log: no whole placeholder; record: exfiltration"

esc_begin "WebSocket: the placeholder cut between two messages with a ping between them"
out=$(client ws "$LAB_DIR/vault-ca.pem" api.github.test 8444 api.github.test "$V_PH_WS" twomsgs-ping "x=$V_PH_GH;")
t_match "two messages and a ping: the upgrade succeeded" "^HTTP/1.1 101" "$out"
t_nomatch "two messages and a ping: the tunnel ended, the message after was not echoed" "echo of after: True" "$out"
t_nomatch "two messages and a ping: the upstream never saw the whole placeholder" "$V_PH_GH" "$(cat "$LAB_DIR/ws.log" 2>/dev/null)"
t_match "two messages and a ping: recorded as exfiltration (vault_placeholder_in_websocket)" '"event.code":"vault_placeholder_in_websocket"' "$(new_records)"
esc_end "tunnel ended" "the ping's payload is not part of the message stream (found by vault_diff, seed 3692359356)"

esc_begin "WebSocket: the placeholder upper-cased in one message"
out=$(client ws "$LAB_DIR/vault-ca.pem" api.github.test 8444 api.github.test "$V_PH_WS" one "x=$(upper "$V_PH_GH");")
t_nomatch "upper case message: the tunnel ended" "echo of after: True" "$out"
t_match "upper case message: recorded (vault_placeholder_in_websocket)" '"event.code":"vault_placeholder_in_websocket"' "$(new_records)"
esc_end "tunnel ended" "record: exfiltration"

# ---- 5. a body trickled under the idle timeout ---------------------------------------------
esc_begin "a body trickled a byte a second (idle timeout 5 s, request timeout 4 s)"
b=$(up_lines)
out=$(client trickle "$LAB_DIR/vault-ca.pem" api.github.test 443 api.github.test \
	"POST /echo HTTP/1.1\r\nHost: api.github.test\r\nContent-Length: 1000\r\nConnection: close\r\n\r\na" 1 20)
t_match "trickle: refused with 408 once vault.request_timeout_ms passed" "^HTTP/1.1 408" "$out"
secs=$(printf '%s\n' "$out" | sed -n 's/^after \([0-9]*\)\..*/\1/p')
t_ok "trickle: answered within 4 s + 3 s of slack (took ${secs:-?} s)" test "${secs:-99}" -lt 7
t_match "trickle: recorded (vault_request_timeout)" '"event.code":"vault_request_timeout"' "$(new_records)"
t_eq "trickle: the upstream saw nothing" "$b" "$(up_lines)"
esc_end "refused" "$(printf '%s' "$out" | head -2 | tr '\n' ' ')"

# ---- 6. the bound header is the format, exactly ----------------------------------------------
# GITHUB_TOKEN: Authorization, "Bearer {secret}" (nginx on 443); on 8444
# FORMS_TOKEN: X-Forms-Auth, "{secret}", and WS_TOKEN: Authorization,
# "Bearer {secret}" (the reflecting upstream). Anything but the format
# would let the sandbox choose the bytes next to the value the upstream
# gets (issue 33, finding 3).
b64() { printf '%s' "$1" | base64 -w0; }
esc_begin "the bound header exactly as its format (the control)"
b=$(up_lines)
out=$(rawreq api.github.test "GET /echo HTTP/1.1\r\n${B}Authorization: Bearer $PH\r\n\r\n")
t_match "exact format: served" "^HTTP/1.1 200" "$out"
t_match "exact format: the upstream got exactly the format with the value" "auth=\"Bearer $V_GH_VALUE\"" "$(v_upstream_log | tail -1)"
esc_end "injected" "upstream: auth=\"Bearer <value>\""

# Basic credentials as lenient decoders read them (inject.c, b64_read):
# the URL-safe alphabet, a stray byte skipped, a '=' ending a run
lb=$(printf '\xff\xfe%s' "0123456789abcdef:$PH" | base64 -w0)
for case in "bytes after the placeholder|Authorization: Bearer $PH x" \
	"the placeholder in Basic, URL-safe alphabet|Authorization: Basic $(printf '%s' "$lb" | tr '+/' '-_')" \
	"the placeholder in Basic, a stray byte in it|Authorization: Basic ${lb:0:4}!${lb:4}" \
	"the placeholder in Basic after a padded run|Authorization: Basic YWI=$lb" \
	"bytes before the placeholder|Authorization: Bearer x$PH" \
	"another scheme (token)|Authorization: token $PH" \
	"no scheme|Authorization: $PH" \
	"the scheme in lower case|Authorization: bearer $PH" \
	"the placeholder wrapped in Basic, as the password|Authorization: Basic $(b64 "agent:$PH")" \
	"the placeholder wrapped in Basic, alone|Authorization: Basic $(b64 "$PH")" \
	"the placeholder wrapped in Basic without its padding|Authorization: Basic $(b64 "agent:$PH" | tr -d =)" \
	"the placeholder at the end of 6,000 bytes of Basic credentials|Authorization: Basic $(b64 "agent:$(printf 'a%.0s' $(seq 6000))$PH")" \
	"two placeholders in the header|Authorization: Bearer $PH $PH" \
	"the header twice, each exactly the format|Authorization: Bearer $PH\r\nAuthorization: Bearer $PH" \
	"the sandbox's own credential beside the placeholder|Authorization: Bearer mine\r\nAuthorization: Bearer $PH" \
	"the placeholder in another case, wrapped in Basic|Authorization: Basic $(b64 "agent:${PH^^}")|vault_placeholder_wrong_header" \
	"the placeholder in another case, wrapped in Basic without its padding|Authorization: Basic $(b64 "agent:${PH^^}" | tr -d =)|vault_placeholder_wrong_header"; do
	# the last two: what a server decodes Basic credentials into holds
	# the placeholder in another case, an altered one wherever it is
	IFS='|' read -r name hdr code <<<"$case"
	esc_begin "the bound header not as its format: $name"
	b=$(up_lines)
	out=$(rawreq api.github.test "GET /echo HTTP/1.1\r\n${B}$hdr\r\n\r\n")
	refused_as "format, $name" 403 "$out" exfiltration "${code:-vault_placeholder_not_format}" up_lines "$b"
	esc_end "refused" "$ESC_EV"
done

F="Host: api.github.test:8444\r\nConnection: close\r\n"
for case in "{secret} alone, bytes before it|X-Forms-Auth: x$V_PH_FORMS|vault_placeholder_not_format" \
	"{secret} alone, a Bearer scheme|X-Forms-Auth: Bearer $V_PH_FORMS|vault_placeholder_not_format" \
	"{secret} alone, wrapped in Basic|X-Forms-Auth: Basic $(b64 "u:$V_PH_FORMS")|vault_placeholder_not_format" \
	"WS_TOKEN's placeholder in FORMS_TOKEN's bound header|X-Forms-Auth: $V_PH_WS|vault_placeholder_wrong_header" \
	"FORMS_TOKEN's placeholder in WS_TOKEN's bound header|Authorization: Bearer $V_PH_FORMS|vault_placeholder_wrong_header"; do
	IFS='|' read -r name hdr code <<<"$case"
	esc_begin "two secrets on one host:port: $name"
	b=$(ws_lines)
	out=$(req8444 "GET /reflect HTTP/1.1\r\n${F}$hdr\r\n\r\n")
	refused_as "8444, $name" 403 "$out" exfiltration "$code" ws_lines "$b"
	esc_end "refused" "$ESC_EV"
done

# ---- invariants --------------------------------------------------------------------------------
t_nomatch "no sandbox output ever held a value" "$V_GH_VALUE|$V_WS_VALUE" "$(cat "$OUT")"
t_eq "no sandbox output held any form of the forms value" "no leak" "$(leak_of <"$OUT")"
t_nomatch "no verdict record holds a value" "$V_GH_VALUE|$V_WS_VALUE" "$(v_verdicts)"
t_ok "the verdict log verifies" "$V_BIN/portcullis" -c "$V/portcullis.yaml" log verify
t_done
