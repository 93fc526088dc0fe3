# Lab smoke test: with open forwarding and no portcullis, a sandbox resolves
# a test name and fetches an HTTPS page upstream — proves the lab itself works
# before any test blames portcullis.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/lab/lab.sh"

lab_up 2

t_eq "sandbox resolves api.github.test through the lab resolver" "$LAB_API4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 api.github.test A)"
t_eq "CNAME chain resolves" "$LAB_PYPI4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 a.chain.test A | tail -1)"
t_eq "AAAA resolves" "$LAB_API6" "$(lab_sb 1 dig +short +time=2 +tries=1 api.github.test AAAA)"
t_match "sandbox fetches HTTPS from api.github.test" "^api.github.test ok" \
	"$(lab_sb 1 curl -sS --max-time 5 --cacert "$LAB_CA" https://api.github.test/)"
t_match "sandbox fetches over IPv6" "^api.github.test ok" \
	"$(lab_sb 1 curl -sS -6 --max-time 5 --cacert "$LAB_CA" https://api.github.test/)"
t_match "the shared CDN address serves both names" "^cdn-evil.test ok" \
	"$(lab_sb 2 curl -sS --max-time 5 --cacert "$LAB_CA" https://cdn-evil.test/)"
t_match "resolver logged the query" "query\[A\] api.github.test from 10.203.0.11" \
	"$(cat "$LAB_DIR/dnsmasq.log")"
t_fail "the untrusted upstream fails TLS verification" \
	lab_sb 1 curl -sS --max-time 5 --cacert "$LAB_CA" https://untrusted.test/
t_match "TCP echo on the cidr host" "^hello$" \
	"$(echo hello | lab_sb 1 socat -T 2 - TCP:$LAB_SSH4:22)"
t_fail "sandboxes cannot reach each other across the isolated bridge" \
	lab_sb 1 ping -c 1 -W 1 "$(lab_sb_ip4 2)"
t_fail "the lab refuses a namespace that is not its own" lab_in "notours-gw" true

t_done
