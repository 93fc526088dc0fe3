# Seeded misconfigurations of a clean lab guarded by the real portcullisd
# and portcullis-logd: each one is detected, named precisely, and makes
# `portcullis check` exit 1; the lab is restored (our tables by the engine
# itself) and proven again between seeds, so each finding belongs to its
# own seed. The engine puts back its tables the moment another program
# changes them (docs/engine.md, "Fail closed without nftables"): the seeds
# that edit them pause it (SIGSTOP) until the check has read them, and it
# repairs them by itself once continued.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/checker_setup.bash"

ck_setup 2
P1=$(lab_sb_port 1) P2=$(lab_sb_port 2)
ENGINE_PID=$(guard_engine_pid)

# seed NAME EXPECTED-ERE SEED-CMD RESTORE-CMD
seed() {
	local name=$1 re=$2 out rc
	eval "$3" >/dev/null 2>&1 || { t_fail "$name: seeding failed" true; return; }
	out=$(ck_pc check 2>&1) && rc=0 || rc=$?
	t_eq "$name: check exits 1" 1 "$rc"
	t_match "$name: named" "$re" "$out"
	eval "$4" >/dev/null 2>&1
	# the engine follows link changes (its port set) on its own: wait
	ck_wait_proven || t_ok "$name: restored lab is proven again" ck_pc check
}
g() { lab_gw "$@"; }

t_ok "the clean lab is proven" ck_pc check

seed "uplink enslaved to the sandbox bridge" \
	"second exit: interface up0 is a port of the sandbox bridge pcbr0 but not a sandbox port" \
	"g ip link set up0 master pcbr0" \
	"g ip link set up0 nomaster; g ip route replace default via $LAB_UPLINK_UP4; g ip -6 route replace default via $LAB_UPLINK_UP6"
seed "port isolation off" "second exit: bridge port $P2 is not isolated" \
	"g ip link set $P2 type bridge_slave isolated off" \
	"g ip link set $P2 type bridge_slave isolated on"
seed "earlier-priority chain in another table that accepts and NATs" \
	"second exit: table ip early chain pre_nat rule handle [0-9]+: dnat to 192.0.2.2 changes the destination" \
	"g nft add table ip early; g nft add chain ip early pre '{ type filter hook prerouting priority -300; }'; g nft add rule ip early pre iifname pcbr0 accept; g nft add chain ip early pre_nat '{ type nat hook prerouting priority -199; }'; g nft add rule ip early pre_nat iifname pcbr0 tcp dport 443 dnat to 192.0.2.2" \
	"g nft delete table ip early"
seed "netdev ingress dup on a sandbox port" \
	"second exit: table netdev tap chain in rule handle [0-9]+: dup sends a copy" \
	"g nft add table netdev tap; g nft add chain netdev tap in '{ type filter hook ingress device $P1 priority -500; }'; g nft add rule netdev tap in dup to up0" \
	"g nft delete table netdev tap"
seed "netdev ingress fwd on a sandbox port" \
	"second exit: table netdev tap chain in rule handle [0-9]+: fwd sends sandbox packets out of another interface" \
	"g nft add table netdev tap; g nft add chain netdev tap in '{ type filter hook ingress device $P1 priority -500; }'; g nft add rule netdev tap in fwd to up0" \
	"g nft delete table netdev tap"
seed "tc mirred redirect" "second exit: tc filter on port $P1 ingress: mirred egress redirect dev up0" \
	"g tc qdisc add dev $P1 clsact; g tc filter add dev $P1 ingress protocol all u32 match u32 0 0 action mirred egress redirect dev up0" \
	"g tc qdisc del dev $P1 clsact"
seed "XDP program on a port" "unproven: XDP program id [0-9]+ on port $P2" \
	"g $K_BIN/tests/helpers/checker_xdp $P2 attach" \
	"g $K_BIN/tests/helpers/checker_xdp $P2 detach"
seed "second bridge holding a sandbox port" \
	"second exit: sandbox port $P2 is enslaved to bridge br2, not to the sandbox bridge pcbr0" \
	"g ip link add br2 type bridge; g ip link set $P2 nomaster; g ip link set $P2 master br2" \
	"g ip link set $P2 nomaster; g ip link del br2; g ip link set $P2 master pcbr0; g ip link set $P2 type bridge_slave isolated on"
seed "our table edited: rule removed" "second exit: our tables differ from what the engine installs" \
	"kill -STOP $ENGINE_PID; h=\$(g nft -a list chain inet portcullis prerouting | awk '/ct state new/ && !/limit rate/ {print \$NF}'); g nft delete rule inet portcullis prerouting handle \$h" \
	"kill -CONT $ENGINE_PID"
seed "our table edited: policy changed to accept" \
	"second exit: our tables differ from what the engine installs.*policy accept" \
	"kill -STOP $ENGINE_PID; g nft chain inet portcullis prerouting '{ policy accept; }'" \
	"kill -CONT $ENGINE_PID"
seed "queue rule with bypass" "second exit: table ip mangle chain PREROUTING rule handle [0-9]+: queue 100 with bypass" \
	"g iptables-nft -t mangle -A PREROUTING -i pcbr0 -j NFQUEUE --queue-num 100 --queue-bypass" \
	"g nft delete table ip mangle"
seed "a rule in another table setting our decision mark" \
	"second exit: table ip marks chain pre rule handle [0-9]+: ct mark set may set the engine's mark bits" \
	"g nft add table ip marks; g nft add chain ip marks pre '{ type filter hook prerouting priority -150; }'; g nft add rule ip marks pre ct mark set 0x80000000" \
	"g nft delete table ip marks"
seed "DNAT of sandbox DNS to an unguarded resolver" \
	"second exit: table ip nat chain prerouting rule handle [0-9]+: dnat to $LAB_ROGUE_RESOLVER4 changes the destination after our decision" \
	"g nft add table ip nat; g nft add chain ip nat prerouting '{ type nat hook prerouting priority dstnat; }'; g nft add rule ip nat prerouting iifname pcbr0 udp dport 53 dnat to $LAB_ROGUE_RESOLVER4" \
	"g nft delete table ip nat"
seed "IPv6 forwarding with no IPv6 guard" \
	"second exit: IPv6 packets from port $P1 are forwarded without passing our queue" \
	"kill -STOP $ENGINE_PID; g sysctl -qw net.ipv6.conf.all.forwarding=1; g nft insert rule inet portcullis prerouting meta nfproto ipv6 accept; g nft insert rule inet portcullis forward meta nfproto ipv6 accept" \
	"kill -CONT $ENGINE_PID"
seed "the forward rule before issue 16: what the engine released, to any address" \
	"second exit: table inet portcullis chain forward rule handle [0-9]+: accepts IPv4 packets the engine released \\(mark PASS\\) from pcbr0 toward an address other than a resolver's port 53" \
	"kill -STOP $ENGINE_PID; g nft insert rule inet portcullis forward iifname pcbr0 meta mark and 0xff000000 == 0x10000000 accept" \
	"kill -CONT $ENGINE_PID"
seed "bridge netfilter on where the ruleset relies on it being off" \
	"unproven: bridge netfilter is on for IPv4 .* our ruleset expects it off" \
	"g ip link set pcbr0 type bridge nf_call_iptables 1" \
	"g ip link set pcbr0 type bridge nf_call_iptables 0"
# a local service on an extra bridge address: the listener can only bind
# once the address exists; its pid file lets lab_down stop it too
local_service() {
	g ip addr add 10.203.0.2/24 dev pcbr0 || return 1
	lab_gw socat TCP-LISTEN:8080,bind=10.203.0.2,fork,reuseaddr - </dev/null >/dev/null 2>&1 &
	echo $! >"$LAB_DIR/checker-socat.pid"
	for _ in $(seq 1 50); do
		g ss -ltnH 'sport = :8080' | grep -q 10.203.0.2 && return 0
		sleep 0.1
	done
	return 1
}
local_service_stop() {
	kill "$(cat "$LAB_DIR/checker-socat.pid")" 2>/dev/null
	rm -f "$LAB_DIR/checker-socat.pid"
	g ip addr del 10.203.0.2/24 dev pcbr0
}
seed "extra address on the bridge with a local service" \
	"second exit: address 10.203.0.2/24 on bridge pcbr0 is not the gateway address: .*listening: tcp 10.203.0.2:8080" \
	local_service local_service_stop
seed "an unknown expression (osf)" \
	"unproven: table inet fw chain pre rule handle [0-9]+: expression 'osf' not modelled" \
	"g nft add table inet fw; g nft add chain inet fw pre '{ type filter hook prerouting priority 0; }'; g nft add rule inet fw pre osf name Linux counter" \
	"g nft delete table inet fw"
seed "a host veth enslaved to the sandbox bridge" \
	"second exit: interface hv0 is a port of the sandbox bridge pcbr0 but not a sandbox port: a veth whose peer is in the gateway's own namespace" \
	"g ip link add hv0 type veth peer name hv1; g ip link set hv0 master pcbr0" \
	"g ip link del hv0"
seed "a macvlan interface stacked on the bridge" \
	"second exit: interface pcmv0 \\(macvlan\\) is stacked on the sandbox bridge" \
	"g ip link add link pcbr0 name pcmv0 type macvlan mode bridge" \
	"g ip link del pcmv0"

# stdout only: a warning on stderr (docs/checker.md) must not spoil the JSON
out=$(ck_pc check --json 2>"$LAB_DIR/check-json.err")
st=$(printf '%s' "$out" | jq -r .status 2>/dev/null)
[ "$st" = proven ] || t_diag "check --json said on stderr: $(cat "$LAB_DIR/check-json.err")"
t_eq "after every seed was removed the lab is proven again" proven "$st"
t_ok "the same engine ran through every seed" kill -0 "$ENGINE_PID"
t_done
