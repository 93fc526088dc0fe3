# Fault: the engine stopped (SIGSTOP) while many flows arrive — thousands of
# SYNs with distinct ports, to an allowed and to a denied address, plus real
# connection attempts. The queue (maxlen 64) overflows: the kernel drops
# what does not fit, and nothing is accepted without a verdict. After
# SIGCONT, every SYN that reached the upstream belongs to a flow the log
# records as allowed; nothing reached the denied address.
set -u
. "$PC_TOP/tests/escape/escape_lib.bash"

guard_need_bins
lab_up 2
GUARD_QUEUE_COUNT=1 GUARD_QUEUE_MAXLEN=64 guard_config
esc_policy
guard_start || { t_fail "guard started" true; t_done; }
ESC_GW_MAC=$(lab_gw cat /sys/class/net/$LAB_BR/address)
export ESC_GW_MAC
esc_capture_start
t_match "baseline: the allowed flow works" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
ESC_T0=$(date +%s.%N)
kill -STOP "$(guard_engine_pid)"
lab_sb 1 python3 "$ESC_CRAFT" synflood --dst $LAB_DIRECT4 --dport 80 --count 3000 >/dev/null &
a=$!
lab_sb 1 python3 "$ESC_CRAFT" synflood --dst $LAB_PASTE4 --dport 443 --count 3000 >/dev/null &
b=$!
cpids=()
for i in $(seq 1 30); do
	lab_sb 2 curl -s -o /dev/null --max-time 2 http://$LAB_DIRECT4/ && echo ok >>"$LAB_DIR/stopped.out" &
	cpids+=($!)
done
wait $a $b "${cpids[@]}" # every attempt ended (curl gives up after 2 s)
t_eq "while the engine is stopped, no connection attempt succeeds" 0 \
	"$(cat "$LAB_DIR/stopped.out" 2>/dev/null | wc -l | tr -d ' ')"
t_eq "... and no SYN reaches the upstream" 0 \
	"$(esc_upstream_show "tcp[tcpflags] & tcp-syn != 0 and src net 10.203.0.0/24" | wc -l | tr -d ' ')"
kill -CONT "$(guard_engine_pid)"
esc_settle
sleep 1
st=$(guard_cli status --json)
kd=$(printf '%s' "$st" | python3 -c 'import json,sys; print(sum(q["kernel_dropped"] for q in json.load(sys.stdin)["queues"]))')
t_lt "the kernel dropped what did not fit the queue (kernel_dropped)" 1000 "$kd"
t_eq "every packet the engine took got a verdict" ok \
	"$(printf '%s' "$st" | python3 -c 'import json,sys; q=json.load(sys.stdin)["queues"][0]; print("ok" if q["accepted"]+q["refused"]==q["queued"] else q)')"
t_eq "nothing reached the denied address" 0 "$(esc_upstream_show "dst host $LAB_PASTE4" | wc -l | tr -d ' ')"
# every SYN upstream (after the stop) has an allowed record with its source port
ports_up=$(esc_upstream_show "tcp[tcpflags] & tcp-syn != 0 and dst host $LAB_DIRECT4 and dst port 80" |
	grep -oE "10\.203\.0\.1[12]\.[0-9]+ >" | awk -F. '{print $5}' | tr -d ' >' | sort -u)
unjudged=$(guard_records | python3 -c 'import json, sys
ok = set()
for l in sys.stdin:
    r = json.loads(l)
    if r.get("event.outcome") == "success" and r.get("destination.port") == 80:
        ok.add(str(r.get("source.port")))
up = set(sys.argv[1].split())
print(len(up), sorted(up - ok)[:10])' "$ports_up")
t_match "every SYN that reached the upstream was judged and allowed (none unjudged)" "^[0-9]+ \[\]$" "$unjudged"
t_diag "SYNs upstream after SIGCONT: ${unjudged%% *}; kernel_dropped $kd"
t_match "the engine goes on: the flow works" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
t_ok "the verdict log verifies" guard_cli log verify
t_done
