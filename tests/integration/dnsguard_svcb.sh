# HTTPS/SVCB answers through the guard: the ech parameter never reaches the
# sandbox (replaced in place by key65534, same message length, over UDP and
# TCP), and the ipv4hint/ipv6hint of an allowed name are learned. dnsmasq
# serves the records (--dns-rr), dig reads them in the sandbox.
PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$PC_TOP/tests/integration/dnsguard_setup.bash"

guard_need_bins
# svc.test HTTPS 1 . alpn=h2 ipv4hint=203.0.113.11 ech=AQIDBAUGBwg= ipv6hint=2001:db8:10::20
SVC=0001000001000302683200040004cb00710b000500080102030405060708
SVC=${SVC}0006001020010db8001000000000000000000020
# svc2.test HTTPS 1 . mandatory=alpn,ech alpn=h2 ech=qrvM3Q==
SVC2=00010000000004000100050001000302683200050004aabbccdd
# evil-svc.test: the same record, for a name no sandbox may ask
LAB_DNS_EXTRA="--dns-rr=svc.test,65,$SVC --dns-rr=svc2.test,65,$SVC2 --dns-rr=evil-svc.test,65,$SVC"
lab_up 1
guard_config
guard_agent1 dual <<EOF
  - host: svc.test
    ports: [443]
  - host: svc2.test
    ports: [443]
EOF
guard_start || { t_fail "guard started" true; t_done; }

size() { sed -n 's/.*MSG SIZE  rcvd: \([0-9]*\).*/\1/p'; }
direct=$(lab_upstream dig +time=3 +tries=1 @$LAB_RESOLVER4 svc.test HTTPS)
t_match "the resolver serves svc.test's HTTPS record with ech (asked directly, upstream)" \
	'alpn="h2" ipv4hint=203.0.113.11 ech=AQIDBAUGBwg= ipv6hint=2001:db8:10::20' "$direct"

# ---- before the lookup: the hint addresses are not reachable ------------------------
t_eq "before any lookup, svc.test at its hint address: refused (curl 7)" 7 \
	"$(dg_curl_rc 1 -k --resolve "svc.test:443:$LAB_PYPI4" https://svc.test/)"

# ---- through the guard ---------------------------------------------------------------
out=$(lab_sb 1 dig +time=3 +tries=1 svc.test HTTPS)
short=$(lab_sb 1 dig +short +time=3 +tries=1 svc.test HTTPS)
t_match "the sandbox gets the record" '^1 \. alpn="h2" ipv4hint=203.0.113.11 ' "$short"
t_nomatch "... without ech" "ech=" "$short"
t_match "... the parameters that stay are intact, and ech's room is key65534 (zeros)" \
	'alpn="h2" ipv4hint=203.0.113.11 ipv6hint=2001:db8:10::20 key65534="\\000\\000\\000\\000\\000\\000\\000\\000"' \
	"$short"
t_match "... in a message of the original length" '^([1-9][0-9]*) \1$' \
	"$(echo "$direct" | size) $(echo "$out" | size)"
t_eq "... counted (ech_stripped)" 2 "$(dg_stat ech_stripped)"
t_match "the hints were learned under the asked name (the record of its answer)" \
	'"dns.question.name":"svc.test","dns.question.type":"HTTPS","dns.resolved_ip":\["203.0.113.11","2001:db8:10::20"\]' \
	"$(dg_learned svc.test)"
t_match "svc.test at its ipv4hint address now works" "^pypi.test ok" \
	"$(lab_sb 1 curl -sS -k --max-time 4 --resolve "svc.test:443:$LAB_PYPI4" https://svc.test/)"
t_match "... and at its ipv6hint address" "^svc.test ok" \
	"$(lab_sb 1 curl -sS -k --max-time 4 --resolve "svc.test:443:[$LAB_CDN6]" https://svc.test/)"
t_match "... the flow record names svc.test" \
	"\"event.outcome\":\"success\".*\"destination.ip\":\"$LAB_PYPI4\".*\"tls.client.server_name\":\"svc.test\"" \
	"$(guard_records | grep '"event.action":"connect"' | grep "$LAB_PYPI4")"

# ---- over TCP, and with ech in the mandatory list -------------------------------------------
short=$(lab_sb 1 dig +tcp +short +time=3 +tries=1 svc.test HTTPS)
t_match "over TCP: the record arrives without ech" \
	'alpn="h2" ipv4hint=203.0.113.11 ipv6hint=2001:db8:10::20 key65534=' "$short"
t_nomatch "... (no ech=)" "ech=" "$short"
direct=$(lab_upstream dig +short +time=3 +tries=1 @$LAB_RESOLVER4 svc2.test HTTPS)
t_match "svc2.test's record lists ech as mandatory (asked directly)" \
	'mandatory=alpn,ech alpn="h2" ech=qrvM3Q==' "$direct"
short=$(lab_sb 1 dig +short +time=3 +tries=1 svc2.test HTTPS)
t_match "through the guard: mandatory loses ech, ech goes" \
	'^1 \. mandatory=alpn alpn="h2" key65534="\\000\\000\\000\\000\\000\\000"$' "$short"
t_eq "ech_stripped counts every answer it was stripped from" 4 "$(dg_stat ech_stripped)"

# ---- a denied name's HTTPS record teaches nothing -------------------------------------------
m=$(dg_mark)
t_match "HTTPS for a denied name: REFUSED" "status: REFUSED" \
	"$(lab_sb 1 dig +time=3 +tries=1 evil-svc.test HTTPS)"
dg_upstream "$m"
t_nomatch "... never reached the resolver" "evil-svc.test" "$UP"
t_match "... recorded" '"event.outcome":"failure","event.reason":"name not on the allow list".*"dns.question.type":"HTTPS"' \
	"$(dg_rec evil-svc.test)"
t_eq "... nothing learned from it" "" "$(dg_learned evil-svc.test)"
guard_stop
t_nomatch "nothing of ours in the root namespace" "portcullis" "$(nft list tables 2>&1)"
t_done
