# Nothing passes because something broke: logd down, engine killed or
# stopped (queue full), a broken policy on reload; and a reload that takes a
# permission away cuts the flows it allowed. Real daemons in the lab.
set -u
. "$PC_TOP/tests/lib/guard.sh"

GUARD_QUEUE_COUNT=1 GUARD_QUEUE_MAXLEN=16 guard_lab 1
SB1=$(lab_sb_ip4 1)
rules_v1() {
	guard_agent1 <<-EOF
	  - cidr: $LAB_DIRECT4/32
	    ports: [80]
	  - cidr: $LAB_SSH4/32
	    ports: [22]
	EOF
}
rules_v1
guard_start || { t_fail "guard started" true; t_done; }

http_ok() { lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/ 2>&1; }
records_allowed_http() {
	guard_records | grep '"event.action":"connect"' | grep '"event.outcome":"success"' |
		grep -c "\"destination.ip\":\"$LAB_DIRECT4\",\"destination.port\":80" || true
}

t_match "baseline: the allowed flow works" "^http 203.0.113.99 ok" "$(http_ok)"
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1]); time.sleep(3)' "$GUARD_DIR/run/engine.sock" &
sleep 0.2
t_match "a control client that never sends holds up no one (status answers)" '"ok":true' \
	"$(timeout 0.5 "$GUARD_BIN/portcullis" -c "$GUARD_CONF" status --json)"

# ---- engine.sock refuses what is not its protocol, and keeps serving ---------------
# One raw request, its reply decoded by hand (docs/engine.md, "Control socket").
eng_raw() {
	python3 - "$GUARD_DIR/run/engine.sock" "$1" <<-'PY'
	import socket, struct, sys
	s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
	s.connect(sys.argv[1])
	s.send(bytes.fromhex(sys.argv[2]))
	s.settimeout(3)
	r = s.recv(1 << 20)
	v, t, proto, n = struct.unpack(">BBHI", r[:8])
	if t == 0x80:
	    code, ml = struct.unpack(">HI", r[8:14])
	    print("version %d type 0x%02x code %d: %s" % (v, t, code, r[14:14 + ml].decode()))
	else:
	    print("version %d type 0x%02x proto 0x%04x len %d/%d" % (v, t, proto, n, len(r)))
	PY
}
t_match "engine.sock: a request of another version gets an error naming both versions" \
	"type 0x80 code 11: this engine speaks engine.sock protocol version 1, the client 2" \
	"$(eng_raw 0201454300000008)"
t_match "... and the engine logs it" "a client speaks protocol version 2, this engine 1" \
	"$(cat "$GUARD_DIR/engine.log")"
t_match "... the old protocol's word is a malformed request" \
	"type 0x80 code 4: malformed request" "$(eng_raw 7374617475730a)"
t_match "... as is another protocol's message (logd's header)" \
	"type 0x80 code 4: malformed request: protocol id" "$(eng_raw 0101000000000008)"
t_match "... and an unknown request type" "code 4: malformed request: unknown request type 9" \
	"$(eng_raw 0109454300000008)"
t_match "... a typed status request is answered with a status reply" \
	"version 1 type 0x81 proto 0x4543 len ([0-9]+)/\\1" "$(eng_raw 0101454300000008)"
t_match "... and the engine still serves status" '"ok":true' \
	"$("$GUARD_BIN/portcullis" -c "$GUARD_CONF" status --json)"

out=$(lab_gw timeout 10 "$GUARD_BIN/portcullisd" -c "$GUARD_CONF" 2>&1) && rc=0 || rc=$?
t_eq "a second engine on the same queues refuses to start (exit 3)" 3 "$rc"
t_match "... and says why" "queue 100: bind.*another engine bound to it" "$out"
t_match "... the first one is untouched" "^http 203.0.113.99 ok" "$(http_ok)"

# ---- logd down: no record, no connection ------------------------------------------
guard_logd_stop
before=$(guard_http_served)
t_eq "logd stopped: a new allowed flow is refused at once (curl 7)" 7 "$(guard_http_rc)"
t_eq "... and upstream saw nothing" "$before" "$(guard_http_served)"
t_match "... the engine says why" "logd did not take the records" "$(cat "$GUARD_DIR/engine.log")"
guard_logd_start
t_match "logd back: the flow is allowed again" "^http 203.0.113.99 ok" "$(http_ok)"
t_eq "every allowed flow that reached upstream has its record" "$(guard_http_served)" \
	"$(records_allowed_http)"

# ---- reload with a broken file keeps the old policy --------------------------------
old=$(guard_status_field 's["policy"]')
guard_rules agents <<EOF
sandbox: agent-1
match: { source: $SB1/32, port: $(lab_sb_port 1) }
allow:
  - cidr: $LAB_SSH4/32
    ports: [22]
EOF
printf 'sandbox: agent-9\nmatch: { source: 10.203.0.99/32 }\nallow:\n  - cidr: [oops\n' \
	>"$GUARD_DIR/rules.d/zz-broken.yaml"
out=$(guard_cli reload 2>&1) && rc=0 || rc=$?
t_eq "reload with a broken file: exit 1 (negative answer)" 1 "$rc"
t_match "the error names the file and line" "zz-broken.yaml:[45]:[0-9]+" "$out"
t_eq "the old policy is still in force (status)" "$old" "$(guard_status_field 's["policy"]')"
t_match "the old policy is still in force (traffic it allows still flows)" \
	"^http 203.0.113.99 ok" "$(http_ok)"
kill -HUP "$(guard_engine_pid)"
sleep 0.5
t_match "SIGHUP with the broken file: refused, logged with the line" \
	"reload refused.*zz-broken.yaml:[45]" "$(cat "$GUARD_DIR/engine.log")"
t_match "... traffic still follows the old policy" "^http 203.0.113.99 ok" "$(http_ok)"
out=$(lab_gw runuser -u nobody -- "$GUARD_BIN/portcullis" -c "$GUARD_CONF" reload 2>&1) && rc=0 || rc=$?
t_eq "only root may reload (exit 3)" "3" "$rc"
t_match "... and is told why" "permission denied" "$out"

# ---- a good reload cuts the flows it no longer allows ---------------------------------
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
rules_v1 # the broken file is still there: fix the policy, keep ssh allowed for now
rm -f "$GUARD_DIR/rules.d/zz-broken.yaml"
t_ok "reload with a good policy succeeds" guard_cli reload
lab_sb 1 python3 "$LAB_DIR/longflow.py" echo $LAB_SSH4 22 "$LAB_DIR/go" >"$LAB_DIR/cut.out" 2>&1 &
p1=$!
lab_sb 1 python3 "$LAB_DIR/longflow.py" http $LAB_DIRECT4 80 "$LAB_DIR/go" >"$LAB_DIR/kept.out" 2>&1 &
p2=$!
for i in $(seq 1 50); do
	grep -q before "$LAB_DIR/cut.out" && grep -q before "$LAB_DIR/kept.out" && break
	sleep 0.1
done
guard_rules agents <<EOF
sandbox: agent-1
match: { source: $SB1/32, port: $(lab_sb_port 1) }
allow:
  - cidr: $LAB_DIRECT4/32
    ports: [80]
EOF
out=$(guard_cli reload 2>&1)
t_match "reload taking port 22 away: new policy in force" "policy sha256:[0-9a-f]{64} in force" "$out"
touch "$LAB_DIR/go"
wait $p1 $p2
t_eq "the flow the new policy no longer allows is cut (reset)" \
	"before ok|after ConnectionResetError" "$(tr '\n' '|' <"$LAB_DIR/cut.out" | sed 's/|$//')"
t_eq "the flow it still allows goes on" "before ok|after ok" \
	"$(tr '\n' '|' <"$LAB_DIR/kept.out" | sed 's/|$//')"
t_match "the cut is in the log" "cut by reload: its address is no longer allowed" "$(guard_records)"

# ---- kill -9: nothing passes without the engine ----------------------------------------
before=$(guard_http_served)
guard_engine_stop KILL
t_eq "engine killed: a new connection fails (no listener: the kernel drops, curl 28)" 28 \
	"$(guard_http_rc 2)"
t_eq "... and upstream saw nothing new" "$before" "$(guard_http_served)"
t_match "... the tables are still in place" "table inet portcullis" "$(lab_gw nft list tables)"
guard_engine_start
t_match "engine restarted: the flow works again" "^http 203.0.113.99 ok" "$(http_ok)"

# ---- SIGSTOP: a full queue drops, nothing is accepted unjudged -------------------------------
q0=$(guard_status_field 's["queues"][0]["queued"]')
before=$(guard_http_served)
kill -STOP "$(guard_engine_pid)"
cpids=()
for i in $(seq 1 40); do
	lab_sb 1 curl -s -o /dev/null --max-time 3 http://$LAB_DIRECT4/ && echo ok >>"$LAB_DIR/stop.out" &
	cpids+=($!)
done
wait "${cpids[@]}" # every attempt ended (curl gives up after 3 s)
t_eq "engine stopped: none of 40 connection attempts succeeded" 0 \
	"$(cat "$LAB_DIR/stop.out" 2>/dev/null | wc -l)"
t_eq "... and upstream saw none of them" "$before" "$(guard_http_served)"
kill -CONT "$(guard_engine_pid)"
# the engine has caught up once every packet it took has its verdict
caught_up() { [ "$(guard_status_field 'sum(q["queued"]-q["accepted"]-q["refused"] for q in s["queues"])')" = 0 ]; }
lab_wait_until caught_up
st=$(guard_cli status --json)
kd=$(printf '%s' "$st" | python3 -c 'import json,sys; print(json.load(sys.stdin)["queues"][0]["kernel_dropped"])')
t_lt "the kernel dropped what did not fit the queue (maxlen 16)" 0 "$kd"
t_eq "every queued packet was given a verdict by the engine" "ok" \
	"$(printf '%s' "$st" | python3 -c 'import json,sys; q=json.load(sys.stdin)["queues"][0]; print("ok" if q["accepted"]+q["refused"]==q["queued"] else q)')"
t_match "engine continued: the flow works" "^http 203.0.113.99 ok" "$(http_ok)"
# (SYNs judged after SIGCONT are allowed and recorded but their clients had
# given up: more records than requests, never fewer)
n=$(guard_http_served) r=$(records_allowed_http)
t_eq "every allowed flow that reached upstream has its record" "yes" \
	"$([ "$r" -ge "$n" ] && echo yes || echo "records $r < requests $n")"

# ---- engine.remove_table_on_exit ----------------------------------------------------------------
guard_engine_stop
t_match "a clean stop leaves the routing rules of the bridge (no engine: blackholed)" \
	"1010:.*iif $LAB_BR lookup 28771" "$(lab_gw ip -4 rule show | tr '\n' ' ')"
sed -i 's/^engine:$/engine:\n  remove_table_on_exit: true/' "$GUARD_CONF"
guard_engine_start
guard_engine_stop
t_nomatch "with engine.remove_table_on_exit, a clean stop removes both tables" "portcullis" \
	"$(lab_gw nft list tables)"
t_eq "... and the routing rules and blackhole table of both families" "" \
	"$(lab_gw ip -4 rule show pref 1010; lab_gw ip -6 rule show pref 1000; lab_gw ip -4 route show table 28771 2>/dev/null; lab_gw ip -6 route show table 28771 2>/dev/null)"
guard_logd_stop
t_nomatch "nothing of ours in the root namespace" "portcullis" "$(nft list tables 2>&1)"
t_done
