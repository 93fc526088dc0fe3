# Fault: logd down while a sandbox talks to a host entry (a held flow:
# judged on its first bytes, promoted on the server's acknowledgement).
# No record, no bytes to the server: plain HTTP, whose first segment is the
# request itself, and TLS reach nothing upstream while logd is gone, and
# every request the upstream served has its acknowledged record.
set -u
. "$PC_TOP/tests/lib/guard.sh"

guard_lab 1
guard_agent1 <<-EOF
  - host: api.github.test
    ports: [80, 443]
EOF
guard_start || { t_fail "guard started" true; t_done; }

served() { grep -c "^$LAB_API4 api.github.test \"GET /held-" "$LAB_DIR/nginx-access.log" 2>/dev/null || true; }
records() {
	guard_records | grep '"event.action":"connect"' | grep '"event.outcome":"success"' |
		grep -c '"destination.domain":"api.github.test"' || true
}
# The name is resolved (and its address learned) while logd runs; later
# requests skip DNS, so only the flow itself meets the missing log.
http() { # path -> curl's exit code
	local rc
	lab_sb 1 curl -s -o /dev/null --max-time 3 --resolve "api.github.test:80:$LAB_API4" \
		"http://api.github.test/held-$1" && rc=0 || rc=$?
	echo "$rc"
}
https() {
	local rc
	lab_sb 1 curl -s -o /dev/null --max-time 3 --cacert "$LAB_CA" \
		--resolve "api.github.test:443:$LAB_API4" "https://api.github.test/held-$1" && rc=0 || rc=$?
	echo "$rc"
}

t_match "the sandbox resolves api.github.test" "^$LAB_API4\$" \
	"$(lab_sb 1 dig +short +time=3 +tries=1 @$LAB_RESOLVER4 api.github.test A)"
t_eq "baseline: plain HTTP to the host entry is served" 0 "$(http base)"
t_eq "baseline: HTTPS too" 0 "$(https base)"

guard_logd_stop
before=$(served)
rc=$(http down)
t_ok "logd stopped: plain HTTP fails (curl $rc)" test "$rc" -ne 0
rc=$(https down)
t_ok "logd stopped: HTTPS fails (curl $rc)" test "$rc" -ne 0
sleep 0.5
t_eq "... and the upstream served neither request" "$before" "$(served)"
t_match "... the engine says why" "logd did not take the records" "$(cat "$GUARD_DIR/engine.log")"

guard_logd_start
t_eq "logd back: plain HTTP is served again" 0 "$(http back)"
t_eq "... and HTTPS" 0 "$(https back)"
sleep 0.5
t_ok "every request the upstream served has its allowed record ($(served) served)" \
	test "$(records)" -ge "$(served)"
t_ok "the log verifies" guard_cli log verify
t_done
