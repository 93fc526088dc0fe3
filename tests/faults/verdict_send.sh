# Fault: the kernel does not take a verdict message — sendmsg on the queue's
# netlink socket fails with ENOBUFS, as it does when the kernel cannot
# allocate the message — for a refusal, and the engine's retries fail too
# (tests/preload/failverdict.c, LD_PRELOADed into portcullisd only). The
# refused SYN stays queued in the kernel, and the next run of allowed SYNs
# is given one VERDICT_BATCH, which covers every queued id up to its own:
# before the fix the stuck SYN went out with the allowed ones' ALLOW mark.
# Now the failed range is dropped first, with one NF_DROP batch, before
# any other verdict is sent, or on its own within a second when no other
# verdict follows; nothing reaches the denied address, and the guard goes
# on.
set -u
. "$PC_TOP/tests/escape/escape_lib.bash"

guard_need_bins
PRELOAD=$GUARD_BIN/tests/preload/failverdict.so
[ -f "$PRELOAD" ] || { echo "1..0 # SKIP $PRELOAD not built (make)"; exit 0; }
lab_up 1
trap 'esc_finish' EXIT
# one queue: every SYN of the test gets its id from the same counter
GUARD_QUEUE_COUNT=1 guard_config
esc_policy
TRIG=$LAB_DIR/failverdict
guard_logd_start || { t_fail "logd started" true; t_done; }
LD_PRELOAD=$PRELOAD PC_TEST_FAILVERDICT=$TRIG guard_engine_start ||
	{ t_fail "engine started" true; t_done; }
ESC_GW_MAC=$(lab_gw cat /sys/class/net/$LAB_BR/address)
export ESC_GW_MAC
esc_capture_start
ESC_T0=0
t_match "baseline: the allowed flow works" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
t_lt "the upstream capture sees it" 0 \
	"$(esc_upstream "src host $SB1_4 and dst host $LAB_DIRECT4 and tcp port 80")"

fails() { grep -c "sending verdicts: No buffer space available" "$GUARD_DIR/engine.log"; }
for round in 1 2 3; do
	ESC_T0=$(date +%s.%N)
	before=$(fails)
	sleep 0.01 # a new mtime: the shim fails one refusal per write
	: >"$TRIG"
	# the refusal whose verdict message fails, then a run of allowed SYNs
	lab_sb 1 python3 "$ESC_CRAFT" synflood --dst $LAB_PASTE4 --dport 443 --count 1 >/dev/null
	lab_sb 1 python3 "$ESC_CRAFT" synflood --dst $LAB_DIRECT4 --dport 80 --count 200 >/dev/null
	esc_settle
	t_eq "round $round: the refusal's verdict message failed (the fault was taken)" \
		$((before + 1)) "$(fails)"
	t_lt "round $round: allowed SYNs reached the upstream after it" 0 \
		"$(esc_upstream_show "tcp[tcpflags] & tcp-syn != 0 and dst host $LAB_DIRECT4" | wc -l | tr -d ' ')"
	t_eq "round $round: nothing reached the denied address" 0 \
		"$(esc_upstream_show "dst host $LAB_PASTE4" | wc -l | tr -d ' ')"
done
# A refusal whose message failed, and nothing after it: the drop goes
# out on its own (its packet held a place in the kernel's queue).
queued_in_kernel() { lab_gw awk '{ n += $3 } END { print n + 0 }' /proc/net/netfilter/nfnetlink_queue; }
ESC_T0=$(date +%s.%N)
before=$(fails)
sleep 0.01
: >"$TRIG"
lab_sb 1 python3 "$ESC_CRAFT" synflood --dst $LAB_PASTE4 --dport 443 --count 1 >/dev/null
failed_more() { [ "$(fails)" -gt "$before" ]; }
t_ok "alone: the refusal's verdict message failed" lab_wait_until failed_more
drained() { [ "$(queued_in_kernel)" = 0 ]; }
t_ok "alone: its packet leaves the kernel's queue with no other packet to carry the drop" \
	lab_wait_until drained
t_diag "packets in the kernel's queues now: $(queued_in_kernel)"
t_eq "alone: nothing reached the denied address" 0 \
	"$(esc_upstream_show "dst host $LAB_PASTE4" | wc -l | tr -d ' ')"
t_match "the engine said why" "sending verdicts: No buffer space available" \
	"$(cat "$GUARD_DIR/engine.log")"
t_eq "every packet the engine took got a verdict it counted" ok \
	"$(guard_cli status --json | python3 -c 'import json,sys; q=json.load(sys.stdin)["queues"][0]; print("ok" if q["accepted"]+q["refused"]==q["queued"] else q)')"
t_match "the engine goes on: the flow works" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
t_ok "the verdict log verifies" guard_cli log verify
t_done
