# Escape attempts, class "fail closed": the guard's ruleset taken away
# under traffic — `nft flush ruleset` (what Debian's stock nftables.conf
# does on every `systemctl restart nftables`), the engine's routing rules
# deleted, and the ruleset flushed while the engine is dead (SIGKILL). The
# evidence is the upstream capture (nothing from the sandbox that the
# policy does not allow, from the flush on), the time the engine took to
# put its tables back, and the engine's journal and log records; and a
# foreign table that copies the sandbox's frames out: the sandboxes cut off
# until a check proves the guard again.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init failclosed "Fail closed without nftables"
esc_up 1

# Sandbox 1 keeps opening TCP connections (and sending UDP datagrams) to
# addresses and ports the policy does not allow, for $1 seconds, every
# 10 ms: with the guard gone for a moment, any of them would be forwarded.
hammer() { # seconds [tcp-port]
	lab_sb 1 python3 - "$1" "$LAB_DIRECT4" "${2:-443}" "$LAB_UPLINK_UP6" <<-'EOF'
	import socket, sys, time
	end = time.time() + float(sys.argv[1])
	n = 0
	while time.time() < end:
	    for fam, dst, port in ((socket.AF_INET, sys.argv[2], int(sys.argv[3])),
	                           (socket.AF_INET6, sys.argv[4], 443)):
	        s = socket.socket(fam, socket.SOCK_STREAM)
	        s.setblocking(False)
	        try:
	            s.connect((dst, port))
	        except (BlockingIOError, OSError):
	            pass
	        u = socket.socket(fam, socket.SOCK_DGRAM)
	        try:
	            u.sendto(b"x", (dst, 5353))
	        except OSError:
	            pass
	        u.close()
	        time.sleep(0.005)
	        s.close()
	    n += 1
	print(n)
	EOF
}
NOT_ALLOWED="src host $SB1_4 and dst host $LAB_DIRECT4 and (tcp port 443 or udp port 5353)"
NOT_ALLOWED6="src host $SB1_6 and dst host $LAB_UPLINK_UP6"

tables_in() { lab_gw nft list table inet portcullis && lab_gw nft list table bridge portcullis; }
metric() { guard_cli metrics 2>/dev/null | grep "^portcullis_engine_$1"; }
rule_in() { [ -n "$(lab_gw ip "$1" rule show pref "$2")" ]; }
check_after() { # trigger (an ERE): the engine's own check ran after that trigger and proved
	[[ "$(guard_status_field 's["check"].get("trigger","") + " " + s["check"]["result"] + " " + str(s["check"]["running"])' 2>/dev/null)" =~ ^($1)\ proven\ False$ ]]
}

t_match "the routing rules are in place (IPv4: marked bridge traffic to main, the rest to the blackhole table)" \
	"1000:.*fwmark 0x80000000/0x80000000 iif $LAB_BR lookup main.*1010:.*iif $LAB_BR lookup 28771" \
	"$(lab_gw ip -4 rule show | tr '\n' ' ')"
t_match "... and IPv6" "1010:.*iif $LAB_BR lookup 28771" "$(lab_gw ip -6 rule show | tr '\n' ' ')"
t_match "the blackhole table holds only blackhole defaults" "^blackhole default" \
	"$(lab_gw ip -4 route show table 28771) $(lab_gw ip -6 route show table 28771)"

out=$(guard_cli check --verbose 2>&1) && rc=0 || rc=$?
t_eq "the checker proves the guard with the routing rules in place (exit 0)" 0 "$rc"
t_match "... and says why (paths-guarded evidence)" \
	"IPv4: bridge $LAB_BR routed by the main table only with a mark of our ruleset" "$out"

# ---- nft flush ruleset under traffic ---------------------------------------------
esc_begin "nft flush ruleset while the sandbox hammers unallowed addresses"
queued() { guard_status_field 'sum(q["queued"] for q in s["queues"])'; }
q0=$(queued)
hammer 4 >"$LAB_DIR/hammer.out" &
hpid=$!
hammering() { [ "$(queued)" -gt "$1" ]; }
t0=$(date +%s%N)
lab_wait_until -p "$hpid" hammering $((q0 + 20))
t_diag "the hammer was at work after $((($(date +%s%N) - t0) / 1000000)) ms"
lab_gw nft flush ruleset
ms=$(guard_ms_until tables_in)
wait $hpid
t_diag "flushed: the engine's tables were back after $ms ms ($(cat "$LAB_DIR/hammer.out") rounds of attempts)"
t_nomatch "the engine put its tables back by itself (within 5 s)" "^never$" "$ms"
esc_expect_nothing "TCP/UDP to an unallowed IPv4 address during and after the flush" "$NOT_ALLOWED"
n4=$ESC_N
esc_expect_nothing "TCP/UDP to an unallowed IPv6 address during and after the flush" "$NOT_ALLOWED6"
t_match "the engine's journal names the change and the reinstall" \
	"tables inet/bridge portcullis changed by nft \(pid [0-9]+\); reinstalled" \
	"$(cat "$GUARD_DIR/engine.log")"
t_match "... and the signed log has the record" \
	'"event.action":"policy-load".*"event.reason":"guard reinstalled after another program changed it"' \
	"$(guard_records | tail -n +$((ESC_REC0 + 1)))"
t_nomatch "the engine checked the reinstalled tables: proven" "^never$" "$(guard_ms_until check_after "nftables|cutoff")"
t_eq "one reinstall for one flush: the engine does not loop on its own batches" 1 \
	"$(grep -c 'changed by .*; reinstalled' "$GUARD_DIR/engine.log")"
rms=$(guard_ms_until guard_served)
t_nomatch "service is back: the allowed flow works (within 5 s)" "^never$" "$rms"
t_diag "the allowed flow was served again $rms ms after the check proved the reinstalled tables"
t_match "metrics count the reinstall" \
	'^portcullis_engine_guard_reinstalls_total\{what="tables",outcome="ok"\} 1$' \
	"$(metric guard_reinstalls_total)"
t_match "... and the check after it: proven" '^portcullis_engine_check_result\{result="proven"\} 1$' \
	"$(metric check_result)"
esc_end "blackholed until the engine reinstalled its tables ($ms ms)" \
	"upstream: $n4 packets of the unallowed flows; journal: changed by nft, reinstalled"

# ---- the routing rules deleted ---------------------------------------------------
esc_begin "ip rule del of the engine's routing rules"
lab_gw ip -4 rule del pref 1010
lab_gw ip -6 rule del pref 1000
lab_gw ip -4 route del blackhole default table 28771
ms=$(guard_ms_until rule_in -4 1010)
t_nomatch "the IPv4 catch-all rule is back (within 5 s)" "^never$" "$ms"
t_nomatch "... the IPv6 marked-traffic rule too" "^never$" "$(guard_ms_until rule_in -6 1000)"
t_match "... and the blackhole route" "^blackhole default" "$(lab_gw ip -4 route show table 28771)"
t_match "the journal says so" "routing: [0-9]+ rules?/routes? of bridge $LAB_BR were missing; reinstalled" \
	"$(cat "$GUARD_DIR/engine.log")"
t_nomatch "the engine checked again: proven" "^never$" "$(guard_ms_until check_after routing)"
t_match "the allowed flow still works" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
t_match "metrics count the routing reinstall" \
	'^portcullis_engine_guard_reinstalls_total\{what="routing",outcome="ok"\} [1-9]' \
	"$(metric guard_reinstalls_total)"
esc_end "reinstalled ($ms ms)" "ip rule show: priorities 1000-1010 back; journal: reinstalled"

# ---- a foreign table that opens a way out, without touching ours ---------------
# Another program adds a table of its own: a netdev ingress hook on the
# sandbox's port that copies every frame to the uplink, before any of our
# chains see it. Nothing of ours changed, so nothing is reinstalled; the
# engine cuts the sandboxes off at once (their bridge ports down: no
# nftables rule sees a frame that never arrives), checks again, and stays
# cut off while the check finds the exit; once the table is gone a check
# proves the guard and service resumes by itself (issue 18).
esc_begin "a foreign nftables table opens a way out while the engine runs"
before=$(metric foreign_nftables_changes_total | awk '{print $2}')
cuts0=$(metric cutoffs_total | awk '{print $2}')
lab_gw nft -f - <<EOF
table netdev foreign {
	chain in {
		type filter hook ingress device "$(lab_sb_port 1)" priority -500;
		dup to "$LAB_UPLINK"
	}
}
EOF
cms=$(guard_ms_until guard_cut_is true)
t_nomatch "the engine cut the sandboxes off by itself (within 5 s)" "^never$" "$cms"
# From the cut on (the engine cannot act before it sees the change: that
# window is in the journal, not in this capture), nothing of the
# sandbox's may reach the upstream: neither the flows it may not open,
# nor the one it may, nor the dup's copies of any of them.
ESC_T0=$(date +%s.%N)
hammer 2 80 >/dev/null
crc=$(guard_http_rc 2)
t_nomatch "cut off: even the allowed flow does not get through (curl fails)" "^0$" "$crc"
lab_sb 1 ping -c 2 -W 1 -i 0.2 "$LAB_UPLINK_UP4" >/dev/null 2>&1 || true
esc_expect_nothing "while the foreign table is present: nothing from sandbox 1 reaches the upstream (IPv4, dup copies included)" \
	"src host $SB1_4"
n4=$ESC_N
esc_expect_nothing "... nor IPv6" "src host $SB1_6"
# (trigger cutoff: while cut off every link event is checked again, the
# bridge losing its carrier as the ports go down among them)
ms=$(guard_ms_until guard_check_is "foreign|cutoff" "exit found")
t_nomatch "the engine found the exit by itself, without a reload (within 5 s)" "^never$" "$ms"
t_match "... the status names it" "table netdev foreign chain in" \
	"$(guard_status_field 's["check"]["first"]')"
t_match "... the journal says what changed and that it checks" \
	"nftables: nft \(pid [0-9]+\) changed another table; checking containment again" \
	"$(cat "$GUARD_DIR/engine.log")"
t_match "... the journal says the sandboxes are cut off, and why" \
	"bridge $LAB_BR: sandboxes cut off \([0-9]+ ports? down\) after nft \(pid [0-9]+\) changed another nftables table" \
	"$(cat "$GUARD_DIR/engine.log")"
t_match "... and that they stay cut off while not proven" \
	"bridge $LAB_BR: sandboxes stay cut off: containment exit found" "$(cat "$GUARD_DIR/engine.log")"
t_match "... status: cut off, after what" "^True nft \(pid [0-9]+\) changed another nftables table$" \
	"$(guard_status_field 'str(s["cutoff"]["active"]) + " " + s["cutoff"]["after"]')"
t_match "... the signed log has the cut-off" \
	'"event.action":"check".*"event.reason":"sandboxes cut off until containment is proven again"' \
	"$(guard_records | tail -n +$((ESC_REC0 + 1)))"
t_match "... metrics: no longer proven" '^portcullis_engine_check_result\{result="proven"\} 0$' \
	"$(metric check_result)"
t_match "... metrics: cut off" '^portcullis_engine_sandboxes_cut_off 1$' "$(metric sandboxes_cut_off)"
t_ok "... metrics: one more cut-off" test "$(metric cutoffs_total | awk '{print $2}')" -gt "${cuts0:-0}"
t_match "... metrics: the foreign change counted" "^portcullis_engine_foreign_nftables_changes_total [0-9]+$" \
	"$(metric foreign_nftables_changes_total)"
t_ok "... one more than before" test "$(metric foreign_nftables_changes_total | awk '{print $2}')" -gt "${before:-0}"
t_eq "our tables were not reinstalled for it" 1 \
	"$(grep -c 'tables inet/bridge portcullis changed by .*; reinstalled' "$GUARD_DIR/engine.log")"
# Not proven after a reload either: the cut-off stays (there is no override).
guard_cli reload >/dev/null 2>&1 || true
t_nomatch "a reload's check finds the exit too" "^never$" "$(guard_ms_until guard_check_is "reload|cutoff" "exit found")"
t_ok "... and the sandboxes stay cut off" guard_cut_is true
t_nomatch "... the allowed flow still does not get through" "^0$" "$(guard_http_rc 2)"
esc_expect_nothing "... nothing reached the upstream meanwhile" "src host $SB1_4"
lab_gw nft delete table netdev foreign
t_nomatch "the foreign table removed: proven again, by itself" "^never$" "$(guard_ms_until guard_check_is "foreign|cutoff" proven)"
t_ok "... and the cut-off is over" guard_cut_is false
rms=$(guard_ms_until guard_served)
t_nomatch "service resumes by itself: the allowed flow works (within 5 s)" "^never$" "$rms"
t_diag "the allowed flow was served again $rms ms after the cut-off ended"
t_match "... the journal says so" "bridge $LAB_BR: service resumed after [0-9]+ ms cut off" \
	"$(cat "$GUARD_DIR/engine.log")"
t_match "... metrics: not cut off" '^portcullis_engine_sandboxes_cut_off 0$' "$(metric sandboxes_cut_off)"
esc_end "cut off ${cms} ms after the foreign table appeared; exit found ($ms ms); resumed once removed" \
	"upstream: $n4 packets from the sandbox while cut off; status: check trigger foreign, exit named"

# What follows each change that opens a way out while the engine runs:
# the sandboxes cut off by the engine itself (CMS: after how long), its
# check (trigger ERE) found the exit (MS), the status names it (first
# finding ERE) and what began the cut-off (cutoff.after ERE), one more
# cut-off counted since cuts0.
cut_off_found() { # trigger first after
	CMS=$(guard_ms_until guard_cut_is true)
	t_nomatch "the engine cut the sandboxes off by itself (within 5 s)" "^never$" "$CMS"
	MS=$(guard_ms_until guard_check_is "$1" "exit found")
	t_nomatch "... its check found the exit (within 5 s)" "^never$" "$MS"
	t_match "... the status names it" "$2" "$(guard_status_field 's["check"]["first"]')"
	t_match "... status: cut off, after what" "^True $3" \
		"$(guard_status_field 'str(s["cutoff"]["active"]) + " " + s["cutoff"]["after"]')"
	t_ok "... metrics: one more cut-off" test "$(metric cutoffs_total | awk '{print $2}')" -gt "${cuts0:-0}"
}
# ... and once it is undone: proven again by the engine's own check, the
# cut-off over, the allowed flow served (RMS: after how long).
resumed_by_itself() { # trigger
	t_nomatch "undone: proven again, by itself" "^never$" "$(guard_ms_until guard_check_is "$1" proven)"
	t_ok "... and the cut-off is over" guard_cut_is false
	RMS=$(guard_ms_until guard_served)
	t_nomatch "service resumes by itself (within 5 s)" "^never$" "$RMS"
}

# ---- a foreign tc filter that opens a way out, while the engine runs -------------
# tc runs before every nftables hook, and the engine sets no tc object of
# its own: one added is another program's. The same cut-off as for a
# foreign table, begun by the tc event itself — here a mirred on a shared
# block that the sandbox port's ingress is bound to, which the checker
# before 2026-12-07 did not see either. Before the engine watched tc, the
# sandbox's frames went out of the uplink until someone ran a check.
esc_begin "a foreign tc filter (shared block, mirred to the uplink) while the engine runs"
cuts0=$(metric cutoffs_total | awk '{print $2}')
lab_gw tc qdisc add dev "$(lab_sb_port 1)" ingress_block 22 clsact
lab_gw tc filter add block 22 protocol ip u32 match u32 0 0 action mirred egress redirect dev "$LAB_UPLINK"
cut_off_found "foreignroute|cutoff" "tc filter on port $(lab_sb_port 1) ingress: mirred" \
	"another program added or changed a tc "
ESC_T0=$(date +%s.%N)
hammer 2 80 >/dev/null
lab_sb 1 ping -c 2 -W 1 -i 0.2 "$LAB_UPLINK_UP4" >/dev/null 2>&1 || true
esc_expect_nothing "while the filter is there: nothing from sandbox 1 reaches the upstream" "src host $SB1_4"
n4=$ESC_N
lab_gw tc qdisc del dev "$(lab_sb_port 1)" clsact
resumed_by_itself "foreignroute|cutoff"
esc_end "cut off ${CMS} ms after the tc filter appeared; exit found ($MS ms); resumed once removed" \
	"upstream: $n4 packets from the sandbox while cut off"

# ---- a device stacked on the bridge, while the engine runs -----------------------
# A macvlan whose lower device is the sandbox bridge, made straight into
# another namespace (what a Docker macvlan network with parent pcbr0
# does): frames for its MAC are taken off the bridge into that
# namespace's stack. The gateway's namespace hears of it only as an event
# of the bridge itself. Before 2026-12-07 the engine checked only when the
# port set changed, and a check that found a way out cut nothing off: the
# sandbox's pings were answered there until someone ran a check. Now the
# bridge's event is checked, and containment lost between two checks cuts
# the sandboxes off as a foreign change does.
esc_begin "a macvlan on the bridge made in another namespace while the engine runs"
MV_NS="$LAB_ID-mv"
MV4=203.0.113.78 # TEST-NET-3, held by the macvlan in the other namespace
answered() { # pings from sandbox 1 answered by MV4
	local n
	n=$(lab_sb 1 ping -c 2 -W 1 -i 0.2 "$MV4" 2>/dev/null | sed -n 's/.* \([0-9]*\) received.*/\1/p')
	echo "${n:-0}"
}
cuts0=$(metric cutoffs_total | awk '{print $2}')
_lab_ns_add "$MV_NS"
lab_gw ip link add pcmv1 link "$LAB_BR" netns "$MV_NS" type macvlan mode bridge
lab_in "$MV_NS" ip addr add "$MV4/32" dev pcmv1
lab_in "$MV_NS" ip link set pcmv1 up
lab_in "$MV_NS" ip route add "$SB1_4/32" dev pcmv1
lab_sb 1 ip route add "$MV4/32" dev eth0
cut_off_found "links|cutoff" "pcmv1 .*another network namespace" "containment lost "
t_eq "... and the other namespace answers none of the sandbox's pings" 0 "$(answered)"
_lab_ns_del "$MV_NS"
resumed_by_itself "links|cutoff"
esc_end "cut off ${CMS} ms after the macvlan appeared; exit found ($MS ms); resumed once removed" \
	"the other namespace answered none of the sandbox's pings while cut off"

# The same device made in the gateway's own namespace is another
# program's from the moment it exists (the engine makes no such device):
# cut off at the event, before any check.
esc_begin "a macvlan stacked on the bridge in the gateway's namespace while the engine runs"
cuts0=$(metric cutoffs_total | awk '{print $2}')
lab_gw ip link add pcmv2 link "$LAB_BR" type macvlan mode bridge
cut_off_found "links|cutoff" "pcmv2 \(macvlan\) is stacked on the sandbox bridge" \
	"another program added or changed a macvlan device \(pcmv2\) stacked on $LAB_BR$"
lab_gw ip link del pcmv2
resumed_by_itself "links|cutoff"
esc_end "cut off ${CMS} ms after the macvlan appeared in the gateway's namespace; resumed once removed" \
	"the check named it"
lab_sb 1 ip route del "$MV4/32" dev eth0 2>/dev/null || true

# ---- the engine killed, then the ruleset flushed -----------------------------------
esc_begin "engine SIGKILLed, then nft flush ruleset"
guard_engine_stop KILL
lab_gw nft flush ruleset
t_match "the routing rules outlive the engine" "1010:.*iif $LAB_BR lookup 28771" \
	"$(lab_gw ip -4 rule show | tr '\n' ' ')"
crc=$(guard_http_rc 2)
t_nomatch "the allowed flow is not forwarded without the engine (curl fails)" "^0$" "$crc"
hammer 1 80 >/dev/null
lab_sb 1 ping -c 2 -W 1 -i 0.2 "$LAB_UPLINK_UP4" >/dev/null 2>&1 && p4=0 || p4=$?
lab_sb 1 ping -6 -c 2 -W 1 -i 0.2 "$LAB_UPLINK_UP6" >/dev/null 2>&1 && p6=0 || p6=$?
t_nomatch "ping to the upstream fails (IPv4)" "^0$" "$p4"
t_nomatch "ping to the upstream fails (IPv6)" "^0$" "$p6"
esc_expect_nothing "no engine, no ruleset: nothing from the sandbox reaches the upstream (IPv4)" \
	"src host $SB1_4"
n4=$ESC_N
esc_expect_nothing "... nor IPv6" "src host $SB1_6"
# The checker, with no engine to repair anything: each way the routing
# rules can be undone is "NOT proven", naming the rule or route.
check_says() { # ERE: the checker's verdict is negative and names it
	local out rc
	out=$(guard_cli check 2>&1) && rc=0 || rc=$?
	[ "$rc" = 1 ] && printf '%s' "$out" | grep -Eq -- "$1" || { printf 'exit %s\n%s\n' "$rc" "$out"; return 1; }
}
lab_gw ip -4 rule del pref 1010
t_ok "checker: the IPv4 blackhole rule missing is an exit" \
	check_says "IPv4 routing rule 1010 \(iif $LAB_BR lookup 28771\) is missing"
lab_gw ip -4 rule add pref 1010 iif $LAB_BR lookup 28771
lab_gw ip -6 rule add pref 500 iif $LAB_BR lookup main
t_ok "checker: a rule before ours that routes bridge traffic is an exit" \
	check_says "IPv6 routing rule 500: iif $LAB_BR .*lookup 254 comes before the blackhole rule"
lab_gw ip -6 rule del pref 500
lab_gw ip -4 rule add pref 600 not iif lo lookup 100
t_ok "checker: ... also when it matches by not matching another interface" \
	check_says "IPv4 routing rule 600: not iif lo .*lookup 100 comes before"
lab_gw ip -4 rule del pref 600
lab_gw ip -4 route add 203.0.113.0/24 via $LAB_UPLINK_UP4 table 28771
t_ok "checker: a route in the blackhole table is an exit" \
	check_says "IPv4 blackhole table 28771 holds a unicast route to 203.0.113.0/24"
lab_gw ip -4 route del 203.0.113.0/24 table 28771
guard_engine_start || t_fail "the engine starts again" true
out=$(guard_cli check 2>&1) && rc=0 || rc=$?
[ "$rc" = 0 ] || t_diag "$out"
t_eq "the engine back: proven again (exit 0)" 0 "$rc"
t_match "the engine back: the allowed flow works" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
esc_end "blackholed (curl $crc, ping failed)" "upstream: $n4 packets from the sandbox"

t_done
