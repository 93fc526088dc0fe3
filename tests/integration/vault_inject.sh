# portcullis-vault in the lab: a placeholder sent to its bound host reaches
# the upstream as the real value and never comes back; every other place a
# placeholder can go is refused with a reason, logged as exfiltration, and
# the upstream sees nothing. Real nginx upstream, real curl and python3
# clients in the sandboxes, real logd.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

vault_up
t_diag "redirect: $VAULT_REDIRECT"

# request: sandbox url curl-args... -> sets R_CODE, R_BODY, R_HDRS
req() {
	local i=$1
	shift
	R_CODE=$(vcurl "$i" -o "$LAB_DIR/r.body" -D "$LAB_DIR/r.hdrs" -w '%{http_code}' "$@" 2>&1)
	R_BODY=$(cat "$LAB_DIR/r.body" 2>/dev/null)
	R_HDRS=$(cat "$LAB_DIR/r.hdrs" 2>/dev/null)
	rm -f "$LAB_DIR/r.body" "$LAB_DIR/r.hdrs"
}
upstream_lines() { v_upstream_log | wc -l; }

# --- the promise ----------------------------------------------------------
req 1 https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH"
t_eq "placeholder to its bound host: 200" 200 "$R_CODE"
t_match "the upstream received the real value" "auth=\"Bearer $V_GH_VALUE\"" "$(v_upstream_log)"
t_match "the reflected header comes back as the placeholder" "auth=Bearer $V_PH_GH" "$R_BODY"
t_nomatch "the sandbox never sees the value" "$V_GH_VALUE" "$R_BODY$R_HDRS"
t_match "the request is logged with the secret's name" \
	'"event.action":"http-request".*"url.path":"/echo".*"portcullis.secrets":\["GITHUB_TOKEN"\]' "$(v_verdicts)"

req 1 -6 https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH"
t_eq "over IPv6: 200" 200 "$R_CODE"
t_match "over IPv6: the upstream received the real value at its IPv6 address" \
	"^$LAB_API6 api.github.test .*auth=\"Bearer $V_GH_VALUE\"" "$(v_upstream_log | tail -1)"
t_nomatch "over IPv6: the value does not come back" "$V_GH_VALUE" "$R_BODY"

req 1 https://pypi.test/echo -H "X-Api-Key: $V_PH_PYPI"
t_eq "second secret, custom header and format: 200" 200 "$R_CODE"
t_match "upstream got X-Api-Key as the bare value" "xkey=\"$V_PYPI_VALUE\"" "$(v_upstream_log)"
t_nomatch "reflected X-Api-Key scrubbed" "$V_PYPI_VALUE" "$R_BODY"

req 1 https://api.github.test/echo
t_eq "no placeholder: the request passes without injection" 200 "$R_CODE"
t_match "... and upstream saw no credential" 'GET /echo HTTP/1.1" 200 auth="-"' \
	"$(v_upstream_log | tail -1)"

# --- refusals: reason, exfiltration record, upstream saw nothing ----------
refusal() { # desc want-status want-reason-ERE exfil(yes|no) sandbox curl-args...
	local desc=$1 want=$2 why=$3 exfil=$4 i=$5 before after
	shift 5
	before=$(upstream_lines)
	req "$i" "$@"
	after=$(upstream_lines)
	t_eq "$desc: $want" "$want" "$R_CODE"
	t_match "$desc: X-Portcullis-Error says why" "X-Portcullis-Error: .*$why" "$R_HDRS"
	t_eq "$desc: the upstream saw nothing" "$before" "$after"
	if [ "$exfil" = yes ]; then
		t_match "$desc: logged as exfiltration" \
			"\"event.action\":\"exfiltration\".*$why" "$(v_verdicts | tail -3)"
	fi
	# CODE=...: the event.code the vault decided the refusal by (its own,
	# not "other"), in the record with that reason
	if [ -n "${CODE:-}" ]; then
		t_match "$desc: event.code $CODE" \
			"$why[^\"]*\",\"event.code\":\"$CODE\"" "$(v_verdicts | tail -3)"
	fi
}

refusal "placeholder to another bound host" 403 "bound to api.github.test:443, not pypi.test:443" \
	yes 1 https://pypi.test/echo -H "Authorization: Bearer $V_PH_GH"
refusal "placeholder to an allowed host sharing the bound host's address" 403 \
	"bound to api.github.test:443, not www.github.test:443" yes 1 \
	https://www.github.test/echo -H "Authorization: Bearer $V_PH_GH"
CODE=vault_host_mismatch refusal "Host header differs from the TLS name" 421 "Host header does not match" no 1 \
	https://api.github.test/echo -H "Host: paste.evil.test" -H "Authorization: Bearer $V_PH_GH"
CODE=vault_placeholder_in_url refusal "placeholder in the query string" 403 "placeholder of GITHUB_TOKEN in the request URL" yes 1 \
	"https://api.github.test/echo?t=$V_PH_GH"
refusal "Basic auth toward the wrong host" 403 "bound to api.github.test:443, not pypi.test:443" yes 1 \
	https://pypi.test/echo -u "agent:$V_PH_GH"
# the bound header must be exactly its format, once: curl -u's Basic
# wrapping, or the client's own credential beside the placeholder, would
# put bytes the sandbox chose next to the value
CODE=vault_placeholder_not_format refusal "Basic auth wrapping the placeholder toward its bound host" 403 \
	"Authorization header must be sent once, exactly as .* with the placeholder for .secret." yes 1 \
	https://api.github.test/echo -u "agent:$V_PH_GH"
CODE=vault_placeholder_not_format refusal "a client credential next to the placeholder" 403 \
	"Authorization header must be sent once, exactly as .* with the placeholder for .secret." yes 1 \
	https://api.github.test/echo \
	-H "Authorization: Bearer attacker-chosen" -H "Authorization: Bearer $V_PH_GH"
refusal "placeholder in another header" 403 "outside its header Authorization" yes 1 \
	https://api.github.test/echo -H "X-Api-Key: $V_PH_GH"
refusal "TRACE" 405 "TRACE is refused" yes 1 -X TRACE https://api.github.test/echo
CODE=vault_placeholder_in_body refusal "placeholder in the request body" 403 "placeholder of GITHUB_TOKEN in the request body" yes 1 \
	https://api.github.test/echo --data-binary "token=$V_PH_GH"
refusal "placeholder from a sandbox the secret is not bound for" 403 \
	"not bound for sandbox agent-2" yes 2 https://api.github.test/echo \
	-H "Authorization: Bearer $V_PH_GH"
refusal "request smuggling shape (CL and TE)" 400 "both Content-Length and Transfer-Encoding" no 1 \
	https://api.github.test/echo -H "Content-Length: 5" -H "Transfer-Encoding: chunked" \
	--data-binary hello
refusal "untrusted upstream certificate" 502 "not trusted" no 1 \
	https://untrusted.test/echo -H "Authorization: Bearer $V_PH_ROGUE"
refusal "upstream certificate for another name" 502 "not trusted: hostname mismatch" no 1 \
	https://wrong-cert.test/echo -H "Authorization: Bearer $V_PH_WRONG"
t_nomatch "nginx never served untrusted.test or wrong-cert.test" "untrusted.test|wrong-cert.test" \
	"$(v_upstream_log)"

# --- HTTP/1.1 features ------------------------------------------------------
before=$(upstream_lines)
out=$(vcurl 1 -v -w 'status=%{http_code}\n' -H "Authorization: Bearer $V_PH_GH" \
	https://api.github.test/echo https://api.github.test/ https://api.github.test/echo 2>&1)
t_eq "keep-alive: three responses, all 200" 3 "$(printf '%s\n' "$out" | grep -c '^status=200$')"
t_eq "keep-alive: three requests, three upstream requests" $((before + 3)) "$(upstream_lines)"
t_match "keep-alive: curl reused the connection" "Re-using existing connection" "$out"
t_eq "keep-alive: every reflection scrubbed" 2 "$(printf '%s\n' "$out" | grep -c "auth=Bearer $V_PH_GH")"

head -c 300000 /dev/urandom | base64 -w 76 >"$LAB_DIR/upload.txt"
req 1 https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH" \
	-H "Transfer-Encoding: chunked" --data-binary "@$LAB_DIR/upload.txt"
t_eq "chunked upload of 400 kB: 200" 200 "$R_CODE"
t_match "chunked upload reached the upstream with the value injected" \
	"POST /echo HTTP/1.1\" 200 auth=\"Bearer $V_GH_VALUE\"" "$(v_upstream_log | tail -1)"
req 1 https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH" \
	-H "Expect: 100-continue" --data-binary "@$LAB_DIR/upload.txt"
t_eq "Expect: 100-continue upload: 200" 200 "$R_CODE"

# a 100 MB body streamed back (chunked re-framing), intact
sum_up=$(lab_upstream sha256sum "$LAB_DIR/www/big" | cut -d' ' -f1)
sum_sb=$(vcurl 1 https://api.github.test/big -H "Authorization: Bearer $V_PH_GH" | sha256sum | cut -d' ' -f1)
t_eq "a 100 MB response arrives intact through the scrubber" "$sum_up" "$sum_sb"

# pipelining: two requests in one write
pipe=$(printf 'GET /echo HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer %s\r\n\r\nGET / HTTP/1.1\r\nHost: api.github.test\r\nConnection: close\r\n\r\n' "$V_PH_GH" |
	lab_sb 1 timeout 10 openssl s_client -quiet -connect $LAB_API4:443 -servername api.github.test \
		-CAfile "$LAB_DIR/vault-ca.pem" 2>/dev/null)
t_eq "pipelining: both responses arrive" 2 "$(printf '%s\n' "$pipe" | grep -c '^HTTP/1.1 200')"
t_nomatch "pipelining: value scrubbed" "$V_GH_VALUE" "$pipe"

# python3 urllib as a second real client
py=$(lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" "$V_PH_GH" <<-'EOF'
	import ssl, sys, urllib.request
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	r = urllib.request.Request("https://api.github.test/echo", headers={"Authorization": "Bearer " + sys.argv[2]})
	print(urllib.request.urlopen(r, context=ctx, timeout=10).read().decode())
	try:
	    urllib.request.urlopen("https://pypi.test/echo?x=" + sys.argv[2], context=ctx, timeout=10)
	except urllib.error.HTTPError as e:
	    print("refused", e.code, e.headers["X-Portcullis-Error"])
	EOF
)
t_match "python3 urllib: injected and scrubbed" "auth=Bearer $V_PH_GH" "$py"
t_match "python3 urllib: refusal with reason" "refused 403 placeholder of GITHUB_TOKEN in the request URL" "$py"

# --- the vault itself --------------------------------------------------------
t_fail "a direct connection to the vault port is refused" \
	lab_sb 1 curl -sS --max-time 5 -k "https://$LAB_GW4:$V_PORT/"
if [ "$VAULT_REDIRECT" = engine ]; then
	t_nomatch "... by the engine, before it reaches the vault" "not redirected" \
		"$(cat "$LAB_DIR/vault.stderr")"
else
	t_match "... by the vault, as not redirected" "not redirected" "$(v_verdicts)"
fi
t_fail "TLS without a server name is refused" \
	lab_sb 1 curl -sS --max-time 5 --cacert "$LAB_DIR/vault-ca.pem" "https://$LAB_API4/"
t_eq "the vault runs as its own user" portcullis-vault "$(ps -o user= -p "$V_VAULT_PID" | tr -d ' ')"
t_eq "the vault's monitor keeps only CAP_KILL effective (to stop its workers)" \
	0000000000000020 "$(awk '/^CapEff/{print $2}' "/proc/$V_VAULT_PID/status")"

# SIGHUP: a removed secret is no longer injected (its placeholder is unknown)
"$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets rm PYPI_TOKEN
kill -HUP "$V_VAULT_PID"
for _ in $(seq 1 50); do grep -q "reloaded" "$LAB_DIR/vault.stderr" && break; sleep 0.1; done
req 1 https://pypi.test/echo -H "X-Api-Key: $V_PH_PYPI"
t_match "after rm + SIGHUP the old placeholder is not replaced" "xkey=\"$V_PH_PYPI\"" \
	"$(v_upstream_log | tail -1)"

# a reload with a broken policy keeps the running one
cp "$V/rules.d/agents.yaml" "$LAB_DIR/agents.yaml.good"
printf 'sandbox: [broken\n' >"$V/rules.d/zz-broken.yaml"
kill -HUP "$V_VAULT_PID"
for _ in $(seq 1 50); do grep -q "reload failed" "$LAB_DIR/vault.stderr" && break; sleep 0.1; done
t_match "a broken policy on SIGHUP is refused, with the file named" \
	"reload failed, keeping the running state: .*zz-broken.yaml" "$(cat "$LAB_DIR/vault.stderr")"
req 1 https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH"
t_match "... and the running policy still injects" "auth=Bearer $V_PH_GH" "$R_BODY"
rm -f "$V/rules.d/zz-broken.yaml"

# fail closed: logd gone -> no record, no request. The connection is made
# (and used once) while logd runs, so that neither DNS nor the engine, which
# also need logd, stand between the sandbox and the vault afterwards.
lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" "$V_PH_GH" "$LAB_DIR/logd-gone" >"$LAB_DIR/ka.out" 2>&1 <<-'EOF' &
	import http.client, os, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	c = http.client.HTTPSConnection("api.github.test", context=ctx, timeout=10)
	h = {"Authorization": "Bearer " + sys.argv[2]}
	c.request("GET", "/echo", headers=h); r = c.getresponse(); r.read()
	print("first", r.status, flush=True)
	for _ in range(100):
	    if os.path.exists(sys.argv[3]): break
	    time.sleep(0.1)
	c.request("GET", "/echo", headers=h); r = c.getresponse()
	print("second", r.status, r.getheader("X-Portcullis-Error"))
	EOF
ka=$!
for _ in $(seq 1 100); do grep -q first "$LAB_DIR/ka.out" && break; sleep 0.1; done
kill "$V_LOGD_PID" 2>/dev/null
for _ in $(seq 1 50); do kill -0 "$V_LOGD_PID" 2>/dev/null || break; sleep 0.1; done
before=$(upstream_lines)
touch "$LAB_DIR/logd-gone"
wait $ka
t_match "logd up: the first request on the connection is served" "first 200" "$(cat "$LAB_DIR/ka.out")"
t_match "logd down: the next request on it gets 503 with the reason" \
	"second 503 no log record: logd did not acknowledge" "$(cat "$LAB_DIR/ka.out")"
t_eq "logd down: the upstream saw nothing" "$before" "$(upstream_lines)"

# fail closed: the vault gone (logd back) -> the redirected flow finds
# nothing, and nothing reaches the upstream
vault_logd_start
kill "$V_VAULT_PID"
for _ in $(seq 1 50); do kill -0 "$V_VAULT_PID" 2>/dev/null || break; sleep 0.1; done
before=$(upstream_lines)
t_fail "vault down: the request fails" vcurl 1 --resolve "api.github.test:443:$LAB_API4" \
	https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH"
t_eq "vault down: the upstream saw nothing" "$before" "$(upstream_lines)"

# the value is in no file the vault or logd wrote, nor in the vault's stderr
t_eq "the value appears in no file under the run's directory but nginx's log" "" \
	"$(grep -rlF -e "$V_GH_VALUE" -e "$V_PYPI_VALUE" "$LAB_DIR" | grep -v nginx-access.log)"

t_done
