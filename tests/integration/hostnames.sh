# One host-name grammar on every path (issue 17; docs/policy.md, "Host
# names"), with real packets: a rule may name my_svc.cdn-good.test, the
# sandbox resolves it, and a real TLS client's ClientHello naming it on the
# held flow is accepted by the engine (its parser used to refuse '_' as
# malformed while the policy and the vault accepted it). And a server name
# with a trailing dot gets the same verdict from the engine (a held flow to
# cdn-good.test) as from the vault (api.github.test, bound to a secret):
# refused, both (the engine used to drop the dot and allow it, the vault
# refused it). Real engine, vault, logd, dnsmasq, nginx; clients are curl
# and openssl s_client in sandbox 1.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

LAB_DNS_EXTRA="--host-record=my_svc.cdn-good.test,$LAB_CDN4,$LAB_CDN6"
V_ALLOW1_EXTRA='  - host: cdn-good.test
    ports: [443]
  - host: my_svc.cdn-good.test
    ports: [443]'
vault_up
[ "$VAULT_REDIRECT" = engine ] || { t_skip "portcullisd is not built: no held flows"; t_done; }

# The last verdict record of a flow to address $1 port 443 (JSON line),
# after line $2 of the log.
record_to() { # addr from-line
	sleep 0.3
	v_verdicts | tail -n +$(($2 + 1)) | grep -F "\"destination.ip\":\"$1\"" |
		grep -F '"destination.port":443,' | tail -1
}
field_of() { python3 -c 'import json,sys
l = sys.stdin.read().strip()
print(json.loads(l).get(sys.argv[1], "(none)") if l else "(no record)")' "$1"; }
reason_of() { python3 -c 'import json,sys
l = sys.stdin.read().strip()
print(json.loads(l).get("event.reason", "(no reason)") if l else "(no record)")'; }
outcome_of() { python3 -c 'import json,sys
l = sys.stdin.read().strip()
print(json.loads(l).get("event.outcome", "(none)") if l else "(no record)")'; }
# A TLS handshake from sandbox 1 with exactly this server name; prints
# "handshake done" or "handshake refused".
s_client() { # connect-addr sni
	local out
	out=$(lab_sb 1 timeout 8 openssl s_client -connect "$1:443" -servername "$2" \
		-CAfile "$LAB_CA" -verify_quiet </dev/null 2>&1)
	if grep -q '^New, TLS' <<<"$out" || grep -q 'Cipher is [A-Z]' <<<"$out"; then
		echo "handshake done"
	else
		echo "handshake refused"
	fi
	t_diag "s_client $2: $(grep -iE 'errno|alert|error' <<<"$out" | head -2 | tr '\n' ' ')" >&2
}

# ---- '_': the policy accepts it, so the engine's held flow must -------------------
t_match "sandbox 1 resolves my_svc.cdn-good.test (the DNS guard takes '_')" "^$LAB_CDN4\$" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 my_svc.cdn-good.test A)"
n0=$(v_verdicts | wc -l)
r=$(lab_sb 1 curl -sS -4 -k --max-time 5 https://my_svc.cdn-good.test/ 2>&1)
t_match "curl https://my_svc.cdn-good.test/: its ClientHello passes the held flow" \
	"^my_svc.cdn-good.test ok" "$r"
rec=$(record_to "$LAB_CDN4" "$n0")
t_eq "the engine's record: allowed" success "$(outcome_of <<<"$rec")"
t_eq "... for the server name sent" my_svc.cdn-good.test "$(field_of tls.client.server_name <<<"$rec")"
t_nomatch "... not refused as a malformed ClientHello" "malformed" "$(reason_of <<<"$rec")"
t_match "the upstream got the name as sent" 'my_svc.cdn-good.test "GET / HTTP/1.1" 200 .*sni="my_svc.cdn-good.test"' \
	"$(v_upstream_log | grep -F my_svc)"

# ---- a trailing dot: the same verdict from the engine and the vault --------------
t_match "sandbox 1 resolves cdn-good.test" "^$LAB_CDN4\$" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test A)"
t_match "sandbox 1 resolves api.github.test" "^$LAB_API4\$" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 api.github.test A)"
t_eq "control: the engine takes SNI cdn-good.test" "handshake done" "$(s_client "$LAB_CDN4" cdn-good.test)"
t_eq "control: the vault takes SNI api.github.test" "handshake done" \
	"$(LAB_CA=$LAB_DIR/vault-ca.pem s_client "$LAB_API4" api.github.test)"

n0=$(v_verdicts | wc -l)
engine=$(s_client "$LAB_CDN4" cdn-good.test.)
rec=$(record_to "$LAB_CDN4" "$n0")
t_eq "engine: SNI cdn-good.test. on a held flow is refused" "handshake refused" "$engine"
t_match "engine: recorded as refused" "^failure$" "$(outcome_of <<<"$rec")"
t_diag "engine record: $(reason_of <<<"$rec")"

n0=$(v_verdicts | wc -l)
vault=$(LAB_CA=$LAB_DIR/vault-ca.pem s_client "$LAB_API4" api.github.test.)
rec=$(v_verdicts | tail -n +$((n0 + 1)) | grep -F 'server name' | tail -1)
t_eq "vault: SNI api.github.test. is refused" "handshake refused" "$vault"
t_match "vault: recorded with the reason" "bad TLS server name" "$(reason_of <<<"$rec")"
t_eq "engine and vault: the same verdict on a trailing dot" "$vault" "$engine"

t_done
