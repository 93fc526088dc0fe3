# The checker against generated configurations (issue 31, deliverable 4).
# tests/checker_catalogue/generate.py composes gateway configurations from
# a grammar (nftables chains of every family and hook, xt targets, policy
# rules and routes in every table, links of every kind this kernel builds
# in the gateway's namespace or another, tc, sysctls, bridge port flags);
# this applies each one on a running gateway (the real engine and logd, a
# sandbox whose flows to a shared address are held for their ClientHello),
# runs `portcullis check`, sends the probe battery and classifies:
#
#   unsound      proven, and something reached the upstream: a FAILURE,
#                shrunk to a minimal configuration and printed as a
#                tests/checker_catalogue entry
#   false alarm  refused, and nothing reached the upstream (a TAP comment;
#                the rate is printed and reported in docs/checker.md)
#   sound        the rest
#
# The probe battery, from sandbox 1 at once: TCP, UDP and ICMP over both
# families to 203.0.113.77 / 2001:db8:77::77 (nothing may reach them) by
# the default route and, for each address the configuration puts on a
# device (10.99.H.1, fd00:99:H::1), to .80+H by way of it; a VLAN-tagged
# frame and one to a link-local group MAC; and a ClientHello naming
# cdn-evil.test on a flow held for cdn-good.test (the same address: only
# the ClientHello tells them apart), which must never reach the upstream;
# nor may an ICMP error the gateway meant for a sandbox (it quotes the
# probe's bytes: a redirect of the bridge's egress carries them out).
# Where the configuration has a VXLAN device, the battery also sends it,
# at the gateway's own addresses, a frame with a datagram to X4 inside.
# "Reached the upstream" is the upstream namespace's capture on all its
# interfaces. A configuration whose mode is "killed" is probed again with
# the engine SIGKILLed and the ruleset flushed (what the routing half of
# the proof claims to survive) when the first battery got nothing out.
#
# And the running engine against the same configurations: it checks every
# 2 s here (engine.recheck_interval_s) besides at the events it hears, so
# a configuration the checker refuses, applied while the engine serves
# after a proof, must cut the sandboxes off within 10 s, whatever made it
# (a change no event announces included), and once it is undone the
# engine must serve again by itself within 10 s. Either missed is a
# FAILURE ("served on", "stayed cut off"), listed by number.
#
# One lab for every configuration: apply, check, probe, revert, and wait
# until the lab proves again. PC_GEN_SEED (default 31) and PC_GEN_COUNT
# (default 40) choose the run; PC_SOAK=1 runs 300 with a random seed,
# printed so that a failure can be replayed; PC_GEN_ONLY="I J ..." runs
# only those configurations of the seed.
set -u
. "$PC_TOP/tests/integration/checker_setup.bash"
. "$PC_TOP/tests/escape/escape_lib.bash"

GEN=$PC_TOP/tests/checker_catalogue/generate.py
X4=203.0.113.77
X6=2001:db8:77::77
HELD_PORTS=40100-40199
if [ -n "${PC_SOAK:-}" ]; then
	SEED=${PC_GEN_SEED:-$RANDOM$RANDOM}
	COUNT=${PC_GEN_COUNT:-300}
else
	SEED=${PC_GEN_SEED:-31}
	COUNT=${PC_GEN_COUNT:-40}
fi
gw() { lab_gw "$@"; }
sb() { lab_sb "$@"; }
ox() { lab_in "$LAB_ID-ckx" "$@"; }

# What reached the upstream: the probes' destinations, or a ClientHello
# (a TLS handshake record) from the held-flow probe's ports.
ARRIVED="dst net 203.0.113.64/26 or dst net 2001:db8:77::/64 or (tcp src portrange $HELD_PORTS and tcp dst port 443 and tcp[((tcp[12:1] & 0xf0) >> 2):1] = 0x16) or (inbound and icmp and dst net $LAB_SB_NET4)"

capture_start() {
	lab_ns_check "$LAB_UP"
	ip netns exec "$LAB_UP" tcpdump -i any -n -U --immediate-mode -s 256 -Z root \
		-w "$LAB_DIR/upstream.pcap" 2>"$LAB_DIR/tcpdump.err" &
	echo $! >"$LAB_DIR/tcpdump.pid"
	lab_wait_until grep -q "listening on" "$LAB_DIR/tcpdump.err" || lab_die "tcpdump did not start"
}
# (the engine answers status only while it runs: no settling when it does not)
settle() {
	if [ "$ENGINE" = up ]; then esc_settle; else sleep 0.3; fi
}
arrived() {
	settle
	esc_upstream_show "$ARRIVED" | wc -l | tr -d ' '
}

# The other namespace (a container's): its own way to the upstream.
ckx_up() {
	_lab_ns_add "$LAB_ID-ckx"
	ip -n "$LAB_ID-ckx" link add ckxu type veth peer name ckx0 netns "$LAB_UP"
	ox ip addr add 10.97.0.2/30 dev ckxu
	ox ip -6 addr add fd00:97::2/64 dev ckxu nodad
	ox ip link set ckxu up
	ox ip route add default via 10.97.0.1
	ox ip -6 route add default via fd00:97::1
	ox sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
	lab_upstream ip addr add 10.97.0.1/30 dev ckx0
	lab_upstream ip -6 addr add fd00:97::1/64 dev ckx0 nodad
	lab_upstream ip link set ckx0 up
}
ckx_down() {
	[ -e "/run/netns/$LAB_ID-ckx" ] || return 0
	_lab_ns_del "$LAB_ID-ckx"
	LAB_NAMESPACES=${LAB_NAMESPACES//" $LAB_ID-ckx"/}
}

probe_battery() {
	local h
	for h in $gen_hops4; do
		sb 1 ip addr add 10.99.$h.2/24 dev eth0 2>/dev/null
		sb 1 ip route replace 203.0.113.$((80 + h))/32 via 10.99.$h.1 2>/dev/null
	done
	for h in $gen_hops6; do
		sb 1 ip -6 addr add fd00:99:$h::2/64 dev eth0 nodad 2>/dev/null
		sb 1 ip -6 route replace 2001:db8:77::$((80 + h))/128 via fd00:99:$h::1 2>/dev/null
	done
	local d4="$X4" d6="$X6"
	for h in $gen_hops4; do d4="$d4 203.0.113.$((80 + h))"; done
	for h in $gen_hops6; do d6="$d6 2001:db8:77::$((80 + h))"; done
	local c1 c2
	esc_craft 1 vlan --vid 42 --count 1 --dst $X4 --dport 9 >/dev/null 2>&1 &
	c1=$!
	esc_craft 1 --gw-mac 01:80:c2:00:00:0e udp --dst $X6 --dport 9 >/dev/null 2>&1 &
	c2=$!
	HELD_PORT=$((HELD_PORT + 1))
	[ "$HELD_PORT" -le 40199 ] || HELD_PORT=40100
	# (a held flow needs the engine: paused or killed, the TCP probes to the
	# same routes say all the ClientHello could)
	local held=":"
	[ "$ENGINE" != up ] || held="timeout 1 getent ahostsv4 cdn-good.test >/dev/null
		  curl -sk --max-time 1.2 --local-port $HELD_PORT \
			--resolve cdn-evil.test:443:$LAB_CDN4 https://cdn-evil.test/ >/dev/null 2>&1"
	sb 1 bash -c "
		for d in $d4; do
			timeout 1.2 bash -c \"exec 3<>/dev/tcp/\$d/80\" 2>/dev/null &
			echo probe >/dev/udp/\$d/5353 2>/dev/null &
			ping -c 1 -W 1 \$d >/dev/null 2>&1 &
		done
		for d in $d6; do
			timeout 1.2 bash -c \"exec 3<>/dev/tcp/\$d/443\" 2>/dev/null &
			echo probe >/dev/udp/\$d/5353 2>/dev/null &
			ping -6 -c 1 -W 1 \$d >/dev/null 2>&1 &
		done
		{ $held; } &
		wait" || true
	# a VXLAN device of the configuration: frames tunnelled to it, sent to
	# the gateway's own addresses, with a datagram to X4 inside
	[ -z "$gen_vx" ] ||
		sb 1 python3 "$(dirname "$GEN")/vxlan_send.py" $X4 "$gen_vx" $LAB_GW4 $LAB_UPLINK_GW4 ||
		true
	wait $c1 $c2 2>/dev/null || true
}

# Everything a configuration may leave, put back to the lab as it was.
reset_all() {
	local t fam name
	# links first, the other namespace with them (its veths' gateway ends
	# go when the kernel has cleaned it up: waited for), the nftables
	# tables last: the engine's check of that batch then meets the lab
	ckx_down
	for t in $(gw_ck_links); do
		gw ip link del "$t" 2>/dev/null || true
	done
	PC_START_TIMEOUT=3 lab_wait_until no_ck_links || true
	gw nft list tables 2>/dev/null | while read -r _ fam name; do
		[ "$name" = portcullis ] && { [ "$fam" = inet ] || [ "$fam" = bridge ]; } && continue
		gw nft delete table "$fam" "$name"
	done
	for t in 1 2; do
		gw ip link set "pcv$t" master $LAB_BR 2>/dev/null || true
		gw ip link set "pcv$t" type bridge_slave isolated on learning on state 3 flood on hairpin off \
			proxy_arp off neigh_suppress off mcast_flood on bcast_flood on 2>/dev/null || true
	done
	for t in pcv1 pcv2 $LAB_BR up0; do gw tc qdisc del dev $t clsact 2>/dev/null || true; done
	sb 1 ip addr flush dev eth0 to 10.99.0.0/16 2>/dev/null || true
	sb 1 ip -6 addr flush dev eth0 to fd00:99::/32 2>/dev/null || true
	sb 1 ip route flush 203.0.113.64/26 2>/dev/null || true
	sb 1 ip -6 route flush 2001:db8:77::/64 2>/dev/null || true
	# (a device of the next configuration may take a hop's address with
	# another MAC: a stale neighbour entry would hide it for seconds)
	sb 1 ip neigh flush all 2>/dev/null || true
	sb 1 ip -6 neigh flush all 2>/dev/null || true
	gw ip -4 route replace default via $LAB_UPLINK_UP4 2>/dev/null || true
	gw ip -6 route replace default via $LAB_UPLINK_UP6 2>/dev/null || true
	gw ip -4 route flush table 100 2>/dev/null || true
	gw ip -6 route flush table 100 2>/dev/null || true
	gw sysctl -q -p "$LAB_DIR/sysctl.base" >/dev/null 2>&1 || true
	if [ "$ENGINE" != up ]; then
		guard_engine_start || lab_die "the engine did not start again"
		ENGINE=up
		gw ip link set pcv1 up
		gw ip link set pcv2 up
	fi
}

gw_ck_links() { gw ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^ck'; }
no_ck_links() { [ -z "$(gw_ck_links)" ]; }

# The routing rules and routes that are not the lab's: what a rule or route
# atom's own revert missed (the engine puts its own back).
routing_state() {
	local v
	for v in 4 6; do
		gw ip -$v rule show
		gw ip -$v route show table all | grep -v '^local\|^multicast\|^fe80\|^ff00\|proto kernel'
	done
}

# One configuration: apply, check, probe (both modes when needed), revert.
# Sets CLASS (unsound, alarm, sound, unbuilt) and OUT (the check's output).
run_one() { # index keep
	local idx=$1 keep=${2:-} rc n=0 cut t0=$(date +%s%N)
	tm() { TIMES="$TIMES $1 $((($(date +%s%N) - t0) / 1000000))"; }
	TIMES=""
	eval "$(python3 "$GEN" config --caps "$LAB_DIR/caps" --seed "$SEED" --index "$idx" ${keep:+--keep "$keep"})"
	[ "$gen_other" = 0 ] || ckx_up
	# the engine proved this lab itself: what follows is containment lost
	PC_START_TIMEOUT=5 lab_wait_until guard_check_is '.*' proven || true
	RUNS0=$(ck_engine_runs)
	if ! gen_apply >"$LAB_DIR/apply.out" 2>&1; then
		CLASS=unbuilt
		gen_revert >/dev/null 2>&1
		reset_all
		return
	fi
	# the engine's own check of a foreign nftables batch or routing change
	# first (it cuts the sandboxes off until it proves): ours then meets the
	# settled state, and the battery does not meet a cut-off it began
	if [ "$gen_nft" = 1 ]; then
		PC_START_TIMEOUT=1 lab_wait_until ck_engine_checked || true
	fi
	tm applied
	OUT=$(ck_pc check 2>&1) && rc=0 || rc=$?
	RC=$rc
	tm checked
	ESC_T0=$(date +%s.%N)
	cut=0
	SERVED_ON=0
	if [ "$rc" != 0 ] && [ "$ENGINE" = up ] && ! PC_START_TIMEOUT=10 lab_wait_until guard_cut_is true; then
		SERVED_ON=1
		ESC_T0=$(date +%s.%N)
	fi
	if [ "$rc" = 0 ]; then
		PC_START_TIMEOUT=3 lab_wait_until guard_cut_is false || true
	elif guard_cut_is true; then
		# refused and cut off: the battery must measure what the
		# configuration lets out (a false alarm or not), not the cut-off.
		# The engine restarted meets the configuration as its state, not
		# as a change: it serves, ports up, held flows and all.
		guard_engine_stop
		guard_engine_start || lab_die "the engine did not start again"
		gw ip link set pcv1 up
		gw ip link set pcv2 up
		if ! PC_START_TIMEOUT=2 lab_wait_until guard_cut_is false; then
			# still cut off: paused instead (its queue keeps what it is
			# sent; no held flow then), the port brought up
			cut=1
			kill -STOP "$(guard_engine_pid)"
			ENGINE=paused
			gw ip link set pcv1 up
		fi
	fi
	tm settled
	probe_battery
	n=$(arrived)
	tm probed
	if [ "$cut" = 1 ]; then
		gw ip link set pcv1 down
		kill -CONT "$(guard_engine_pid)"
		ENGINE=up
	fi
	if [ "$n" = 0 ] && [ "$gen_kill" = 1 ]; then
		guard_engine_stop KILL
		ENGINE=down
		gw nft flush ruleset
		gw ip link set pcv1 up
		ESC_T0=$(date +%s.%N)
		probe_battery
		n=$(arrived)
		tm killed-probed
		MODE="killed"
	else
		MODE="running"
	fi
	ARRIVED_N=$n
	if [ "$rc" = 0 ] && [ "$n" != 0 ]; then CLASS=unsound
	elif [ "$rc" != 0 ] && [ "$n" = 0 ]; then CLASS=alarm
	else CLASS=sound; fi
	gen_revert >/dev/null 2>&1
	reset_all
	tm reset
}
ck_engine_runs() {
	guard_status_field 's["check"]["runs"]' 2>/dev/null || echo 0
}
ck_engine_checked() { # a check of the engine's ran after the change, and ended
	[ "$(guard_status_field 'str(s["check"]["runs"] > '"$RUNS0"' and not s["check"]["running"])' 2>/dev/null)" = True ]
}
undone() {
	ck_wait_proven && return 0
	# proven, but the engine's own check ran before the lab was whole (a
	# link of a namespace still being cleaned up): a reload checks again
	ck_pc reload >/dev/null 2>&1
	ck_wait_proven
}

# Shrink an unsound configuration: drop one atom (or the killed mode) at a
# time while it stays unsound.
shrink() { # index
	local idx=$1 keep cur k try
	cur=$gen_atoms
	local changed=1
	while [ "$changed" = 1 ]; do
		changed=0
		for k in ${cur//,/ }; do
			try=$(printf '%s\n' ${cur//,/ } | grep -vx "$k" | paste -sd, -)
			[ -n "$try" ] && [ "$try" != k ] || continue
			run_one "$idx" "$try"
			undone || lab_die "the lab does not prove after shrinking step $try"
			t_diag "  shrinking: atoms $try: $CLASS (check exit $RC, arrived $ARRIVED_N)"
			if [ "$CLASS" = unsound ]; then
				cur=$try
				changed=1
				break
			fi
		done
	done
	SHRUNK=$cur
}

ck_need_bins
lab_up 2 >/dev/null 2>&1 || lab_die "lab_up failed"
GUARD_RECHECK_S=${GUARD_RECHECK_S-2}
ck_config
guard_rules agents <<-EOF
sandbox: agent-1
match: { source: [$(lab_sb_ip4 1)/32, "$(lab_sb_ip6 1)/128"], port: $(lab_sb_port 1) }
allow:
  - host: cdn-good.test
    ports: [443]
  - cidr: $LAB_SSH4/32
    ports: [22]
---
sandbox: agent-2
match: { source: $(lab_sb_ip4 2)/32, port: $(lab_sb_port 2) }
allow:
  - host: pypi.test
    ports: [443]
EOF
guard_start || lab_die "the guard did not start: $(tail -5 "$K/engine.log" 2>/dev/null)"
ENGINE=up
HELD_PORT=40100
ESC_GW_MAC=$(lab_gw cat /sys/class/net/$LAB_BR/address)
export ESC_GW_MAC
capture_start

# What this kernel offers: each capability tried once in a scratch namespace.
_lab_ns_add "$LAB_ID-ckp"
lab_in "$LAB_ID-ckp" ip link add br0 type bridge
lab_in "$LAB_ID-ckp" ip link add up0 type veth peer name up1
lab_in "$LAB_ID-ckp" ip addr add 192.0.2.1/24 dev up0
lab_in "$LAB_ID-ckp" ip link set up0 up
python3 "$GEN" probes | while IFS=$'\t' read -r cap cmd; do
	lab_in "$LAB_ID-ckp" sh -c "$cmd" >/dev/null 2>&1 && echo "$cap"
	lab_in "$LAB_ID-ckp" sh -c 'ip link del ckp0; tc qdisc del dev br0 clsact; tc qdisc del dev br0 root; nft flush ruleset' >/dev/null 2>&1
done >"$LAB_DIR/caps"
_lab_ns_del "$LAB_ID-ckp"
t_diag "this kernel offers: $(tr '\n' ' ' <"$LAB_DIR/caps")"
for k in $(python3 "$GEN" sysctls); do
	v=$(gw sysctl -n "$k" 2>/dev/null) && echo "$k = $v"
done >"$LAB_DIR/sysctl.base"
routing_state >"$LAB_DIR/routing.base"

t_ok "the clean lab proves" ck_wait_proven
# The controls: the battery gets nothing out of the clean lab, and the
# capture sees an allowed held flow's ClientHello (the filter is live).
gen_hops4="" gen_hops6="" gen_vx=""
ESC_T0=$(date +%s.%N)
probe_battery
t_eq "the clean lab: nothing of the battery reaches the upstream" 0 "$(arrived)"
# Up to three tries: under the sanitizers, in a full parallel run, one
# curl of 3 s once saw no ClientHello leave (the control is that the
# capture can see one, not how fast the lab makes it).
hellos() {
	esc_upstream_show "tcp src portrange 40090-40099 and tcp dst port 443 and tcp[((tcp[12:1] & 0xf0) >> 2):1] = 0x16" |
		wc -l
}
ESC_T0=$(date +%s.%N)
for try in 1 2 3; do
	sb 1 curl -sk --max-time 5 --local-port 40090-40099 https://cdn-good.test/ >/dev/null 2>&1
	[ "$(hellos)" -gt 0 ] && break
done
t_lt "the capture sees an allowed held flow's ClientHello (the evidence is live)" 0 "$(hellos)"

t_diag "seed $SEED, $COUNT configurations (replay: PC_GEN_SEED=$SEED PC_GEN_COUNT=$COUNT)"
n_built=0 n_unbuilt=0 n_unsound=0 n_alarm=0 n_sound=0 n_refused=0 served_on= stuck=
t_start=$SECONDS
for i in ${PC_GEN_ONLY:-$(seq 0 $((COUNT - 1)))}; do
	run_one "$i"
	if [ "$CLASS" = unbuilt ]; then
		n_unbuilt=$((n_unbuilt + 1))
		t_diag "config $i: not built by this kernel ($(head -c 200 "$LAB_DIR/apply.out" | tr '\n' ' ')): $gen_desc"
		undone || { t_fail "config $i: undone, the lab proves again" true; break; }
		continue
	fi
	n_built=$((n_built + 1))
	[ "$RC" = 0 ] || n_refused=$((n_refused + 1))
	verdict=$(printf '%s\n' "$OUT" | grep -E '^(NOT )?proven: ' | head -1)
	t_diag "config $i [$CLASS, check exit $RC, $MODE, arrived $ARRIVED_N]: $gen_desc"
	if [ "$SERVED_ON" = 1 ]; then
		served_on="$served_on $i"
		t_diag "  SERVED ON: refused by the checker, yet the running engine did not cut the sandboxes off within 10 s"
	fi
	case $CLASS in
	alarm)
		n_alarm=$((n_alarm + 1))
		t_diag "  false alarm: $(printf '%s\n' "$OUT" | grep -E '^(second exit|unproven): ' | head -2 | tr '\n' ' ')"
		;;
	sound) n_sound=$((n_sound + 1)) ;;
	unsound)
		n_unsound=$((n_unsound + 1))
		undone || { t_fail "config $i: undone, the lab proves again" true; break; }
		shrink "$i"
		t_eq "config $i: no false proof (proven, yet the battery reached the upstream)" sound \
			"unsound: $gen_desc (shrunk to atoms $SHRUNK); as a tests/checker_catalogue entry:
$(python3 "$GEN" entry --caps "$LAB_DIR/caps" --seed "$SEED" --index "$i" --keep "$SHRUNK" \
				--baseline "$LAB_DIR/sysctl.base")"
		;;
	esac
	u0=$SECONDS
	if ! undone; then
		t_fail "config $i: undone, the lab proves again" true
		t_diag "$(ck_pc check 2>&1 | tail -5)"
		break
	fi
	if [ "$ENGINE" = up ] && ! PC_START_TIMEOUT=10 lab_wait_until guard_cut_is false; then
		stuck="$stuck $i"
		t_diag "  STAYED CUT OFF: undone and proven, yet the engine did not serve again within 10 s"
	fi
	[ -z "${PC_GEN_TRACE:-}" ] || t_diag "  ms:$TIMES; undone in $((SECONDS - u0)) s"
done
rate=$(python3 -c "import sys; b, a, r = map(int, sys.argv[1:]); print('%.1f%% of %d built, %.1f%% of %d refused' % (100.0 * a / max(b, 1), b, 100.0 * a / max(r, 1), r))" \
	"$n_built" "$n_alarm" "$n_refused")
t_diag "generated: seed $SEED, $COUNT configurations in $((SECONDS - t_start)) s: $n_built built ($n_unbuilt not buildable here), $n_unsound unsound, $n_alarm false alarms ($rate), $n_sound sound"
t_eq "no unsound configuration (seed $SEED)" 0 "$n_unsound"
t_eq "the running engine cut off every configuration the checker refused (seed $SEED)" "" \
	"${served_on# }"
t_eq "... and served again by itself once each was undone (seed $SEED)" "" "${stuck# }"
t_done
