# The checker tested against reality (issue 23): for each gateway
# configuration of the catalogue (tests/checker_catalogue/NN-*.sh), on one
# lab with the real engine and logd, apply it, run `portcullis check`, send
# real traffic from a sandbox (TCP, UDP, ICMP, IPv6, and tagged or
# link-local-group frames where the configuration is about them) toward
# TEST-NET addresses no flow may reach, and undo it.
#
# A false proof — "proven" while anything reached those addresses — fails.
# A configuration of the issue's list (expect=hole) must be NOT proven
# (exit 1) with a finding naming its device or rule; a benign look-alike
# (expect=benign) must be proven — if the checker refuses one and nothing
# arrived, that is a false alarm: reported (a TAP comment) and listed in
# docs/checker.md's known limitations. What this kernel cannot build is
# skipped with the reason.
#
# Entry files define: desc, expect (hole|benign), names (an ERE the findings
# must match, holes), need (prints why it cannot be built, returns 1),
# apply, traffic (default: probe 1), revert (before the generic reset),
# final (set: it leaves what cannot be undone; the last entry),
# arrived_also (prints how many probe packets reached a way out the
# upstream's capture does not see, e.g. another namespace; default 0).
# CK_CAT_ONLY (an ERE on the entry's name, e.g. '^(29|30)-') runs only the
# entries it matches: to see a new entry fail on an older checker without
# the whole catalogue.
# They build with the helpers below (nft_chain, tc_ingress_all, gw_bridge,
# gw_veth_to, bg_start/bg_stop, probe_ssh...) so each says only what differs.
set -u
. "$PC_TOP/tests/integration/checker_setup.bash"
. "$PC_TOP/tests/escape/escape_lib.bash"

CAT=$PC_TOP/tests/checker_catalogue
X4=203.0.113.77     # TEST-NET-3: nothing serves it, nothing may reach it
X6=2001:db8:77::77  # documentation prefix, likewise
gw() { lab_gw "$@"; }
sb() { lab_sb "$@"; }

# The standard probes from sandbox N: TCP, UDP and ICMP over both
# families, at once (each bounded), toward X4/X6; then a tagged frame
# (VLAN 42) and a frame to a link-local group MAC, crafted at layer 2.
probe() { # sandbox
	local i=${1:-1}
	esc_craft "$i" vlan --vid 42 --count 1 --dst $X4 --dport 9 >/dev/null 2>&1 || true
	esc_craft "$i" --gw-mac 01:80:c2:00:00:0e udp --dst $X6 --dport 9 >/dev/null 2>&1 || true
	sb "$i" bash -c "
		timeout 1.5 bash -c 'exec 3<>/dev/tcp/$X4/80' 2>/dev/null &
		timeout 1.5 bash -c 'exec 3<>/dev/tcp/$X6/443' 2>/dev/null &
		echo probe >/dev/udp/$X4/5353 2>/dev/null &
		echo probe >/dev/udp/$X6/5353 2>/dev/null &
		ping -c 1 -W 1 $X4 >/dev/null 2>&1 &
		ping -6 -c 1 -W 1 $X6 >/dev/null 2>&1 &
		wait" || true
}

# Helpers for the entries, so that each says only what it builds.
# Entries that need a command: need() { need_cmd iptables-nft; }
need_cmd() { command -v "$1" >/dev/null || { echo "no $1"; return 1; }; }

# One foreign base chain in a table of its own (cat_reset deletes it).
nft_chain() { # family table chain "type ... hook ... priority N" "rule"
	gw nft -f - <<-EOF2
	table $1 $2 {
		chain $3 { $4; $5; }
	}
	EOF2
}

# A tc action on every frame entering DEV (clsact ingress, u32 match all),
# built from need(): when this kernel cannot, prints WHY and returns 1.
tc_ingress_all() { # dev why action...
	local dev=$1 why=$2
	shift 2
	gw tc qdisc add dev "$dev" clsact 2>/dev/null
	if ! gw tc filter add dev "$dev" ingress protocol all u32 match u32 0 0 \
		action "$@" 2>/dev/null; then
		gw tc qdisc del dev "$dev" clsact 2>/dev/null
		echo "$why"
		return 1
	fi
}

# A bridge of the gateway (not the sandboxes') with the gateway's address.
gw_bridge() { # name address/prefix
	gw ip link add "$1" type bridge
	gw ip addr add "$2" dev "$1"
	gw ip link set "$1" up
}

# A veth from the gateway (END) into another namespace (PEER there).
gw_veth_to() { # end peer netns
	ip -n "$LAB_GW" link add "$1" type veth peer name "$2" netns "$3"
}

# A helper program (tests/checker_catalogue/SCRIPT) run in the gateway in
# the background until it prints WORD; bg_stop NAME ends it (revert).
bg_start() { # name word script args...
	local name=$1 word=$2 script=$3
	shift 3
	lab_ns_check "$LAB_GW"
	ip netns exec "$LAB_GW" python3 "$CAT/$script" "$@" >"$LAB_DIR/$name.out" 2>&1 &
	echo $! >"$LAB_DIR/$name.pid"
	lab_wait_until grep -q "$word" "$LAB_DIR/$name.out"
}
bg_stop() { # name
	kill "$(cat "$LAB_DIR/$1.pid")" 2>/dev/null
	wait "$(cat "$LAB_DIR/$1.pid")" 2>/dev/null
}

# Taps ckt0 (the sandbox VM's, an isolated port of pcbr0) and ckt1 (on
# bridge ckbr1 with the gateway's 10.98.1.1/24), once a VM holds them.
vm_taps_bridged() {
	gw ip link set ckt0 master $LAB_BR
	gw ip link set ckt0 type bridge_slave isolated on
	gw ip link set ckt0 up
	gw_bridge ckbr1 10.98.1.1/24
	gw ip link set ckt1 master ckbr1 up
}

# Sandbox 1 opens an allowed flow (ssh to the lab's server: what a foreign
# nat rule may take elsewhere), then the standard probes.
probe_ssh() {
	sb 1 timeout 1.5 bash -c "exec 3<>/dev/tcp/$LAB_SSH4/22" 2>/dev/null || true
	probe 1
}

# Everything the entries change, put back: foreign tables, extra links,
# addresses, tc, sysctls, the ports' bridge settings, sandbox routes.
cat_reset() {
	local t
	gw nft list tables 2>/dev/null | while read -r _ fam name; do
		[ "$name" = portcullis ] && { [ "$fam" = inet ] || [ "$fam" = bridge ]; } && continue
		gw nft delete table "$fam" "$name"
	done
	for t in $(gw ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^ck'); do
		gw ip link del "$t" 2>/dev/null || true
	done
	for t in 1 2; do
		gw ip link set "pcv$t" master $LAB_BR 2>/dev/null || true
		gw ip link set "pcv$t" type bridge_slave isolated on learning on state 3 2>/dev/null || true
		gw ip addr flush dev "pcv$t" scope global 2>/dev/null || true
		gw tc qdisc del dev "pcv$t" clsact 2>/dev/null || true
		gw tc qdisc del dev "pcv$t" root 2>/dev/null || true
		sb "$t" ip link del eth1 2>/dev/null || true
		sb "$t" ip addr flush dev eth0 to 10.99.0.0/16 2>/dev/null || true
		sb "$t" ip route del $X4/32 2>/dev/null || true
	done
	gw tc qdisc del dev up0 clsact 2>/dev/null || true
	gw tc qdisc del dev $LAB_BR clsact 2>/dev/null || true
	gw ip addr del 10.203.0.254/24 dev $LAB_BR 2>/dev/null || true
	gw sysctl -qw net.ipv4.conf.all.accept_source_route=0 net.ipv6.conf.all.accept_ra=1 \
		net.ipv6.conf.$LAB_BR.accept_ra=1 >/dev/null 2>&1 || true
	gw sysctl -qw net.bridge.bridge-nf-call-iptables=0 net.bridge.bridge-nf-call-ip6tables=0 \
		>/dev/null 2>&1 || true
}

ck_setup 2
lab_gw conntrack -F >/dev/null 2>&1 || true
ESC_GW_MAC=$(lab_gw cat /sys/class/net/$LAB_BR/address)
export ESC_GW_MAC
esc_capture_start
t_ok "the clean lab proves before the catalogue" ck_wait_proven

n_hole=0 n_benign=0 n_alarm=0 n_skip=0
for f in "$CAT"/[0-9]*.sh; do
	desc="" expect="" names="" final=""
	arrived_also() { echo 0; }
	need() { return 0; }
	apply() { :; }
	traffic() { probe 1; }
	revert() { :; }
	. "$f"
	id=$(basename "$f" .sh)
	[ -z "${CK_CAT_ONLY:-}" ] || [[ $id =~ $CK_CAT_ONLY ]] || continue
	# what need() tried (a tc qdisc, a device) is a change the engine
	# answers with a cut-off of its own: the entry meets the lab served
	if ! why=$(need); then
		ck_wait_proven || true
		t_skip "$id: $desc" "$why"
		n_skip=$((n_skip + 1))
		continue
	fi
	ck_wait_proven || true
	t_diag "entry $id ($expect): $desc"
	apply
	out=$(ck_pc check 2>&1) && rc=0 || rc=$?
	ESC_T0=$(date +%s.%N)
	traffic
	arrived=$(esc_upstream "dst host $X4 or dst host $X6")
	arrived=$((arrived + $(arrived_also)))
	verdict=$(printf '%s\n' "$out" | grep -E '^(NOT )?proven: ' | head -1)
	t_diag "  check exit $rc: $verdict; packets that reached $X4/$X6: $arrived"
	if [ "$rc" = 0 ] && [ "$arrived" != 0 ]; then
		t_eq "$id: no false proof (proven, yet $arrived packet(s) arrived)" 0 \
			"$arrived $(esc_upstream_show "dst host $X4 or dst host $X6" | head -3)"
	else
		t_ok "$id: no false proof" true
	fi
	case $expect in
	hole)
		n_hole=$((n_hole + 1))
		t_eq "$id: NOT proven (exit 1)" 1 "$rc"
		t_match "$id: a finding names it ($names)" "$names" \
			"$(printf '%s\n' "$out" | grep -E '^(second exit|unproven): ')"
		[ "$rc" = 0 ] || [ "$arrived" != 0 ] ||
			t_diag "  (refused; nothing arrived from these probes: the path needs more than they send)"
		;;
	benign)
		n_benign=$((n_benign + 1))
		if [ "$rc" != 0 ]; then
			n_alarm=$((n_alarm + 1))
			t_diag "  FALSE ALARM: refused though nothing arrived=$arrived (docs/checker.md, known limitations):"
			t_diag "$(printf '%s\n' "$out" | grep -E '^(second exit|unproven): ' | sed 's/^/    /')"
		fi
		t_ok "$id: benign look-alike checked (exit $rc)" true
		;;
	esac
	revert
	cat_reset
	# (final: what it leaves cannot be undone in this namespace)
	[ -n "$final" ] || t_ok "$id: undone, the lab proves again" ck_wait_proven
done
t_diag "catalogue: $n_hole holes, $n_benign benign look-alikes ($n_alarm false alarm(s)), $n_skip skipped"
t_done
