# A reload cuts the flows the new policy does not allow, and records each
# cut as what it is (issue 36, point 6): a flow whose sandbox is still in
# the policy but lost its permission is a refused connect naming the
# sandbox; the flows of a sandbox that left the policy (what `portcullis
# sandbox run` does as it ends: its rules file goes, the engine reloads)
# were refused nothing: one informational connect record (no verdict,
# event.code sandbox_flows_ended) names the sandbox and counts them, and no
# refusal is written for them. Either way the flows are cut. Real daemons
# in the lab.
set -u
. "$PC_TOP/tests/lib/guard.sh"

guard_lab 1
SB1=$(lab_sb_ip4 1)
guard_agent1 <<EOF
  - cidr: $LAB_DIRECT4/32
    ports: [80]
  - cidr: $LAB_SSH4/32
    ports: [22]
EOF
guard_start || { t_fail "guard started" true; t_done; }

# A connection that answers once, waits for its go file, and says whether
# it still works.
cat >"$LAB_DIR/longflow.py" <<'EOF'
import os, socket, sys, time
mode, host, port, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = socket.create_connection((host, port), timeout=5)
def once():
    if mode == "echo":
        s.sendall(b"ping\n")
    else:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    return s.recv(1000)
print("before", "ok" if once() else "eof", flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
try:
    print("after", "ok" if once() else "eof", flush=True)
except Exception as e:
    print("after", type(e).__name__, flush=True)
EOF
FLOWS=()
flow() { # name mode host port: in the background, output in $LAB_DIR/NAME.out
	lab_sb 1 python3 "$LAB_DIR/longflow.py" "$2" "$3" "$4" "$LAB_DIR/go-$1" \
		>"$LAB_DIR/$1.out" 2>&1 &
	FLOWS+=($!)
}
flows_wait() { # (the daemons run in the background too: wait for the flows only)
	wait "${FLOWS[@]}"
	FLOWS=()
}
started() { # name...
	local n
	for n in "$@"; do grep -q '^before ok' "$LAB_DIR/$n.out" 2>/dev/null || return 1; done
}
outcome() { tr '\n' '|' <"$LAB_DIR/$1.out" | sed 's/|$//'; }
# the records written since line $1 of the log
records_since() { guard_records | tail -n +"$(($1 + 1))"; }

# ---- a reload takes a permission away: a refusal that names the sandbox -------------
flow ssh echo "$LAB_SSH4" 22
t_ok "a flow to port 22 is up" lab_wait_until started ssh
n0=$(guard_records | wc -l)
guard_rules agents <<EOF
sandbox: agent-1
match: { source: $SB1/32, port: $(lab_sb_port 1) }
allow:
  - cidr: $LAB_DIRECT4/32
    ports: [80]
EOF
t_match "reload taking port 22 away: new policy in force" "policy sha256:[0-9a-f]{64} in force" \
	"$(guard_cli reload 2>&1)"
touch "$LAB_DIR/go-ssh"
flows_wait
t_eq "the flow it no longer allows is cut (reset)" "before ok|after ConnectionResetError" \
	"$(outcome ssh)"
cut=$(records_since "$n0" | grep '"event.code":"cut_by_reload"')
t_eq "one cut record" 1 "$(grep -c . <<<"$cut")"
t_match "... a refused connect" '"event.action":"connect",.*"event.outcome":"failure"' "$cut"
t_match "... naming the sandbox and the flow" \
	"\"portcullis.sandbox\":\"agent-1\".*\"destination.ip\":\"$LAB_SSH4\",\"destination.port\":22" "$cut"

# ---- the sandbox leaves the policy: its flows end, one record says so ---------------
flow web1 http "$LAB_DIRECT4" 80
flow web2 http "$LAB_DIRECT4" 80
t_ok "two flows to port 80 are up" lab_wait_until started web1 web2
n0=$(guard_records | wc -l)
rm "$GUARD_DIR/rules.d/agents.yaml"
t_match "reload without the sandbox (as sandbox run does at its end): new policy in force" \
	"policy sha256:[0-9a-f]{64} in force" "$(guard_cli reload 2>&1)"
touch "$LAB_DIR/go-web1" "$LAB_DIR/go-web2"
flows_wait
# (its address is no sandbox's now: what it sends is dropped, not reset)
t_match "its flows are cut, as before: nothing more passes" \
	"^before ok\|after (ConnectionResetError|TimeoutError) before ok\|after (ConnectionResetError|TimeoutError)\$" \
	"$(outcome web1) $(outcome web2)"
since=$(records_since "$n0")
t_eq "no refusal is recorded for them" "" \
	"$(grep '"event.action":"connect"' <<<"$since" | grep '"event.outcome"')"
ended=$(grep '"event.code":"sandbox_flows_ended"' <<<"$since")
t_eq "one record for the sandbox's end" 1 "$(grep -c . <<<"$ended")"
t_match "... a connect with no verdict, an end of connections" \
	'"event.type":\["connection","end"\],"event.action":"connect","event.reason":"sandbox left the policy' \
	"$ended"
t_match "... naming the sandbox and counting its flows" \
	'"portcullis.sandbox":"agent-1".*"message":"2 flows of sandbox agent-1 ended with it \(2 TCP, 0 UDP, 0 other; 0 through the vault\)"' \
	"$ended"
t_done
