#!/usr/bin/env bash
# `portcullis policy test` answers as the running engine decides: each case
# is asked of `policy test` and then tried for real from sandbox 1 through
# the lab's real portcullisd, and the verdict (allowed or refused), the
# rule and the reason `policy test` gives must be those of the engine's
# record of the attempt. Cases on addresses come before any name is
# resolved: `policy test` answers for a sandbox that has resolved nothing
# but the name it is asked about, as a fresh engine would.
set -u
. "$PC_TOP/tests/lib/guard.sh"

guard_lab 1
guard_agent1 <<EOF
  - cidr: $LAB_SSH4/32
    ports: [22]
  - cidr: $LAB_SSH4/32
    ports: [5000]
    proto: udp
  - host: api.github.test
    ports: [443]
  - host: ssh.test
    ports: [5000]
    proto: udp
EOF
guard_start || { t_fail "guard started" true; t_done; }

# case_run TARGET PORT PROTO ANSWER-ADDRESS -- COMMAND...: ask, then try
case_run() {
	local target=$1 port=$2 proto=$3 addr=$4 before pt want got
	shift 5
	pt=$(guard_cli policy test agent-1 "$target" "$port" --proto "$proto" \
		${addr:+--address "$addr"} --json)
	before=$(guard_records | wc -l)
	lab_sb 1 timeout 6 "$@" >/dev/null 2>&1 </dev/null
	sleep 0.3
	# the record that decided: the last connect (a DNS query for port 53,
	# or when the name was refused and nothing connected)
	got=$(guard_records | tail -n +$((before + 1)) | python3 -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin if l.strip()]
recs = [r for r in recs if r.get("event.action") in ("connect", "dns-query")]
want = "dns-query" if sys.argv[1] == "53" else "connect"
mine = [r for r in recs if r.get("event.action") == want] or recs
r = mine[-1] if mine else {}
print(json.dumps({"allowed": r.get("event.outcome") == "success",
                  "rule": r.get("rule.name", ""), "reason": r.get("event.reason", ""),
                  "found": bool(r)}))' "$port")
	want=$(printf '%s' "$pt" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"allowed": d["allowed"], "rule": d["rule"], "reason": d["reason"], "found": True}))')
	t_eq "policy test agent-1 $target $port/$proto answers as the engine decided" "$got" "$want"
	t_match "... (the engine's record of the attempt was found, with its reason or rule)" \
		'"(reason|rule)": "[^"]+".*"found": true' "$got"
}

SSH=$LAB_SSH4
SB1=$(lab_sb_ip4 1)
# addresses, before any name is resolved
case_run "$SSH" 22 tcp "" -- socat -T 2 - TCP:$SSH:22
case_run "$SSH" 80 tcp "" -- curl -s --max-time 3 http://$SSH/
case_run "$SSH" 5000 udp "" -- sh -c "echo x | socat -T 2 - UDP:$SSH:5000"
case_run "$SSH" 6000 udp "" -- sh -c "echo x | socat -T 2 - UDP:$SSH:6000"
case_run "$LAB_DIRECT4" 443 tcp "" -- curl -sk --max-time 3 https://$LAB_DIRECT4/
case_run "$LAB_API4" 443 tcp "" -- curl -sk --max-time 3 https://$LAB_API4/
# names: the query through the guard, the answer, then the flow
case_run api.github.test 53 udp "$LAB_API4" -- getent ahostsv4 api.github.test
case_run paste.evil.test 53 udp "$LAB_PASTE4" -- getent ahostsv4 paste.evil.test
case_run paste.evil.test 443 tcp "$LAB_PASTE4" -- curl -sk --max-time 3 https://paste.evil.test/
case_run api.github.test 443 tcp "$LAB_API4" -- curl -sk --max-time 3 https://api.github.test/
case_run api.github.test 443 udp "$LAB_API4" -- sh -c "echo x | socat -T 2 - UDP4:api.github.test:443"
case_run ssh.test 5000 udp "$SSH" -- sh -c "echo x | socat -T 2 - UDP4:ssh.test:5000"

# Exit codes and the text form.
guard_cli policy test agent-1 api.github.test 443 >/dev/null && rc=0 || rc=$?
t_eq "allowed: exit 0" 0 "$rc"
guard_cli policy test agent-1 paste.evil.test 443 >/dev/null && rc=0 || rc=$?
t_eq "refused: exit 1" 1 "$rc"
guard_cli policy test no-such-sandbox api.github.test 443 >/dev/null 2>&1 && rc=0 || rc=$?
t_eq "an unknown sandbox: exit 2" 2 "$rc"
out=$(guard_cli policy test agent-1 api.github.test 443)
t_match "the text form names the rule" 'allowed: agent-1 api.github.test port 443/tcp by agent-1/allow\[2\]' "$out"
t_match "... and says the engine enforces this policy" 'the one the engine enforces' "$out"

# policy lint, on the gateway itself: a cidr of the gateway's own address on
# the sandbox bridge can never match (lint reads the bridge's addresses).
mkdir -p "$GUARD_DIR/lint.d"
printf 'sandbox: x\nmatch: {source: 10.203.0.50/32}\nallow:\n  - {cidr: %s, ports: [22]}\n' \
	"$LAB_GW4" >"$GUARD_DIR/lint.d/x.yaml"
sed "s|^rules: .*|rules: $GUARD_DIR/lint.d|" "$GUARD_CONF" >"$GUARD_DIR/lint.yaml"
out=$(lab_gw "$GUARD_BIN/portcullis" -c "$GUARD_DIR/lint.yaml" policy lint 2>&1)
t_match "lint on the gateway: the bridge's own address never matches" \
	"x.yaml:4:12: warning: cidr $LAB_GW4/32 of sandbox 'x' can never match: it is the gateway's own address on the sandbox bridge" "$out"
t_done
