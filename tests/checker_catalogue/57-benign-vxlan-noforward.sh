# Entry 32's VXLAN device with forwarding off on it (IPv4 and IPv6): what
# it decapsulates is delivered to the gateway, never routed on, so the
# same tunnelled datagrams, with the engine killed and the ruleset
# flushed, reach nothing upstream, and the checker proves it (naming the
# tunnel in its evidence).
desc="vxlan ckvx1 as entry 32, forwarding off on it, probed with the engine killed"
expect=benign
VX_MAC=02:00:00:00:77:01
need() {
	gw ip link add ckvx1 type vxlan id 1 dstport 4789 2>/dev/null || { echo "no vxlan"; return 1; }
	gw ip link del ckvx1
}
apply() {
	gw ip link add ckvx1 address $VX_MAC type vxlan id 1 dstport 4789 \
		local $LAB_UPLINK_GW4 remote $LAB_UPLINK_UP4
	gw sysctl -qw net.ipv4.conf.ckvx1.forwarding=0 net.ipv6.conf.ckvx1.forwarding=0
	gw ip addr add 10.99.1.1/24 dev ckvx1
	gw ip link set ckvx1 up
}
vx_send() { sb 1 python3 "$CAT/vxlan_send.py" $X4 $VX_MAC/1/1 $LAB_GW4 $LAB_UPLINK_GW4; }
traffic() {
	probe 1
	guard_engine_stop KILL
	gw nft flush ruleset
	gw ip link set pcv1 up
	gw ip link set pcv2 up
	vx_send
	sleep 0.3
}
revert() {
	guard_engine_start || lab_die "the engine did not start again"
	gw ip link set pcv1 up
	gw ip link set pcv2 up
}
