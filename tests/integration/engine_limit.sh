# The per-sandbox new-flow limit (docs/engine.md, "New-flow limit"): a SYN
# flood from sandbox 2 is cut in the kernel, before the queue, and counted
# on sandbox 2's limit rule; nothing of it reaches upstream beyond what its
# policy allows; sandbox 1's allowed requests all succeed while the flood
# runs (functional: each must simply work, with a generous timeout; no
# timing threshold); the containment check proves the ruleset with the
# limit's meters filled by traffic; the drops are in the signed log too, as
# summary records (engine/limitlog.c) that add up to the kernel's counter
# exactly, none for sandbox 1; a bad limit is a lint error with its
# position, and a reload installs a changed limit.
set -u
. "$PC_TOP/tests/lib/guard.sh"

guard_need_bins
command -v tcpdump >/dev/null || { echo "1..0 # SKIP tcpdump not installed (make deps)"; exit 0; }
lab_up 2
FLOOD=$LAB_DIR/flood # bench/flood's sender: bare SYNs from a raw socket, random source ports
cc -O2 -std=gnu11 -Wall -Wextra -Werror -o "$FLOOD" "$PC_TOP/bench/flood.c" ||
	lab_die "could not build bench/flood.c"
SB1=$(lab_sb_ip4 1) SB2=$(lab_sb_ip4 2)
guard_config
rules() { # sandbox 2's rate and burst
	guard_agent1 <<-EOF
	  - cidr: $LAB_DIRECT4/32
	    ports: [80]
	---
	sandbox: agent-2
	match: { source: $SB2/32, port: $(lab_sb_port 2) }
	limits: { new_flows_per_second: $1, new_flows_burst: $2 }
	allow:
	  - cidr: $LAB_DIRECT4/32
	    ports: [80]
	EOF
}
rules 20 40
guard_start || { t_fail "guard started" true; t_done; }

# the prerouting rules of one sandbox's limit (lim0 = agent-1, lim1 = agent-2:
# sandboxes in name order), as nft(8) shows them
limit_rules() { lab_gw nft list chain inet portcullis prerouting 2>/dev/null | grep -E "update @$1 "; }
limit_drops() { limit_rules "$1" | grep -oE 'counter packets [0-9]+' | awk '{s += $3} END {print s + 0}'; }
queued() { guard_status_field 'sum(q["queued"] for q in s["queues"])'; }
qdrops() { guard_status_field 'sum(q["kernel_dropped"] + q["user_dropped"] for q in s["queues"])'; }

# ---- the rules ---------------------------------------------------------------------
r=$(limit_rules lim1)
t_match "sandbox 2's limit is in the kernel: its own rate and burst, over it: drop" \
	"limit rate over 20/second burst 40 packets \} ip saddr @limsb4 counter packets [0-9]+ bytes [0-9]+ drop" "$r"
t_match "keyed by the bridge port's stamp" "update @lim1 \{ meta mark & 0x00ffffff" "$r"
t_match "sandbox 1 has the configuration's default (1000/s, burst 2000)" \
	"limit rate over 1000/second burst 2000 packets" "$(limit_rules lim0)"
t_ok "portcullis check: proven with the limit rules" guard_cli check

# ---- a flood of denied SYNs while sandbox 1 works -----------------------------------
lab_ns_check "$LAB_UP"
ip netns exec "$LAB_UP" tcpdump -i eth0 -n -U --immediate-mode -s 128 -w "$LAB_DIR/up.pcap" \
	2>"$LAB_DIR/tcpdump.err" &
TCPDUMP=$!
for i in $(seq 1 100); do
	grep -q "listening on" "$LAB_DIR/tcpdump.err" 2>/dev/null && break
	sleep 0.05
done
t_match "sandbox 1's allowed address works before the flood" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 10 http://$LAB_DIRECT4/ 2>&1)"
q0=$(queued) d0=$(qdrops) l1_0=$(limit_drops lim1) l0_0=$(limit_drops lim0)
N=2000000
# ip netns exec directly, so that $! is the sender itself; bounded by count and time
lab_ns_check "$(lab_sb_ns 2)"
ip netns exec "$(lab_sb_ns 2)" "$FLOOD" "$SB2" $LAB_PASTE4 443 60 $N >"$LAB_DIR/flood1.out" 2>&1 &
fpid=$!
# the flood is on: the limit is dropping it (readiness, not timing)
for i in $(seq 1 200); do
	[ "$(limit_drops lim1)" -gt $((l1_0 + 1000)) ] && break
	sleep 0.05
done
ok=0
for i in $(seq 1 10); do
	out=$(lab_sb 1 curl -sS --max-time 10 http://$LAB_DIRECT4/ 2>&1)
	[[ $out == "http 203.0.113.99 ok"* ]] && ok=$((ok + 1)) || t_diag "sandbox 1 request $i: $out"
done
running=$(kill -0 $fpid 2>/dev/null && echo yes || echo no)
t_eq "during the flood, 10 of sandbox 1's 10 allowed requests succeed" 10 "$ok"
kill -TERM $fpid 2>/dev/null
wait $fpid
sent=$(sed -n 's/^sent \([0-9]*\) .*/\1/p' "$LAB_DIR/flood1.out")
t_diag "flood: $(cat "$LAB_DIR/flood1.out"); still running when sandbox 1 finished: $running"
t_match "the flood sender ran" '^[0-9]+$' "$sent"
dropped=$(($(limit_drops lim1) - l1_0))
judged=$(($(queued) - q0))
t_lt "sandbox 2's excess was dropped in the kernel and counted on its limit rule" 0 "$dropped"
t_lt "most of the flood never reached the queue (limit drops > half of the SYNs sent)" \
	$((sent / 2)) "$dropped"
t_diag "SYNs sent $sent, dropped by the limit $dropped, queued to the engine $judged, dropped at the queue $(($(qdrops) - d0))"
t_eq "sandbox 1's limit dropped nothing" "$l0_0" "$(limit_drops lim0)"
t_eq "portcullis status shows sandbox 2's limit and what it dropped (the rules' counters)" \
	"20 40 $(limit_drops lim1)" \
	"$(guard_status_field '" ".join(str(x) for l in s["limits"] if l["sandbox"] == "agent-2" for x in (l["new_flows_per_second"], l["new_flows_burst"], l["dropped"]))')"
t_match "portcullis metrics too" \
	"portcullis_engine_new_flow_limit_dropped_total\{sandbox=\"agent-2\"\} $(limit_drops lim1)" \
	"$(guard_cli metrics 2>/dev/null)"

# ---- the drops in the signed log: summary records, as many as the kernel counted ----
# (refused connect records, event.code new_flow_limit, the count first in
# the message; written every housekeeping round, 10 s: waited for, not timed)
logged_limit() { # sandbox -> the packets its summary records account for
	guard_records | python3 -c '
import json, sys
n = 0
for line in sys.stdin:
    try:
        r = json.loads(line)
    except ValueError:
        continue  # not a record line
    if isinstance(r, dict) and r.get("event.code") == "new_flow_limit" and r.get("portcullis.sandbox") == sys.argv[1]:
        assert r.get("event.outcome") == "failure" and r.get("event.action") == "connect", r
        n += int(r["message"].split()[0])
print(n)' "$1"
}
logged_is() { [ "$(logged_limit "$1")" = "$2" ]; }
k1=$(limit_drops lim1)
lab_wait_until logged_is agent-2 "$k1"
t_eq "the log accounts for every packet sandbox 2's limit dropped (summary records = the kernel's counter)" \
	"$k1" "$(logged_limit agent-2)"
t_match "a summary says what was dropped, under which limit, over how long" \
	"\"message\":\"[0-9]+ packets \(new flows, and segments of held flows and DNS over TCP\) over the limit of 20 new flows/s, burst 40, dropped in the last [0-9]+ s" \
	"$(guard_records | grep '"event.code":"new_flow_limit"' | grep '"portcullis.sandbox":"agent-2"' | tail -1)"
t_eq "no summary record for sandbox 1 (its limit dropped nothing)" 0 "$(logged_limit agent-1)"

# what got through the limit was judged: refused, recorded, and nothing upstream
for i in $(seq 1 50); do # readiness: every queued packet has its verdict
	[ "$(guard_status_field 'sum(q["queued"] - q["accepted"] - q["refused"] for q in s["queues"])')" = 0 ] && break
	sleep 0.1
done
sleep 0.5 # let the capture write what the last verdicts let through
t_eq "nothing of the flood reached upstream (capture: packets to $LAB_PASTE4)" 0 \
	"$(tcpdump -n -r "$LAB_DIR/up.pcap" "dst host $LAB_PASTE4" 2>/dev/null | wc -l | tr -d ' ')"
t_lt "the flood's judged SYNs were refused and recorded" 0 \
	"$(guard_records | grep "\"source.ip\":\"$SB2\"" | grep "\"destination.ip\":\"$LAB_PASTE4\"" |
		grep -c '"event.outcome":"failure"')"

# ---- a flood of allowed SYNs: only the limit's share goes out ------------------------
up0=$(tcpdump -n -r "$LAB_DIR/up.pcap" "src host $SB2 and dst host $LAB_DIRECT4 and tcp[tcpflags] & tcp-syn != 0" 2>/dev/null | wc -l)
ip netns exec "$(lab_sb_ns 2)" "$FLOOD" "$SB2" $LAB_DIRECT4 80 5 50000 >"$LAB_DIR/flood2.out" 2>&1
secs=$(sed -n 's/.* secs \([0-9.]*\).*/\1/p' "$LAB_DIR/flood2.out")
sent=$(sed -n 's/^sent \([0-9]*\) .*/\1/p' "$LAB_DIR/flood2.out")
for i in $(seq 1 50); do
	[ "$(guard_status_field 'sum(q["queued"] - q["accepted"] - q["refused"] for q in s["queues"])')" = 0 ] && break
	sleep 0.1
done
sleep 0.5
out2=$(($(tcpdump -n -r "$LAB_DIR/up.pcap" "src host $SB2 and dst host $LAB_DIRECT4 and tcp[tcpflags] & tcp-syn != 0" 2>/dev/null | wc -l) - up0))
# the bucket: burst 40 + 20/s over the sender's own measured time, twice over
bound=$(awk -v s="$secs" 'BEGIN { printf "%d", 2 * (40 + 20 * (s + 1)) }')
t_diag "allowed flood: $(cat "$LAB_DIR/flood2.out"); SYNs upstream $out2 (bound $bound)"
t_lt "some of sandbox 2's allowed SYNs went out (the limit is a rate, not a block)" 0 "$out2"
t_lt "but no more than its limit lets through (of $sent sent)" "$out2" "$((bound + 1))"
kill $TCPDUMP 2>/dev/null
wait $TCPDUMP 2>/dev/null

# ---- the check with the meters filled; a changed limit; a bad one ----------------------
t_match "the meter holds sandbox 2's port (its ifindex, the stamp)" \
	"elements = \{ $(printf '0x%08x' "$(lab_gw cat /sys/class/net/$(lab_sb_port 2)/ifindex)") " \
	"$(lab_gw nft list set inet portcullis lim1 2>/dev/null | tr -s ' \n\t' ' ')"
t_ok "portcullis check: still proven, the meters filled by traffic" guard_cli check
rules 300 600
t_ok "portcullis reload with sandbox 2's limit changed" guard_cli reload
t_match "the new limit is installed" "limit rate over 300/second burst 600 packets" "$(limit_rules lim1)"
t_ok "portcullis check: proven after the reload" guard_cli check
h0=$(guard_cli policy hash)
printf 'sandbox: bad\nmatch: { source: 10.203.0.99/32 }\nlimits: { new_flows_per_second: 0 }\n' \
	>"$LAB_DIR/bad.yaml"
out=$(guard_cli policy lint "$LAB_DIR/bad.yaml" 2>&1)
t_eq "policy lint refuses a zero rate (exit 1)" 1 "$?"
t_match "with the file, line and column" \
	"bad.yaml:3:33: limits.new_flows_per_second: expected a whole number from 1 to 1000000, found 0" "$out"
rules 300 601
t_ne_hash() { [ "$1" != "$2" ]; }
t_ok "the limit is part of the policy hash" t_ne_hash "$h0" "$(guard_cli policy hash)"
t_ok "the verdict log verifies" guard_cli log verify
guard_stop
t_done
