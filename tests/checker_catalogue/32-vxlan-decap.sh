# A VXLAN device on the gateway, not on the bridge, forwarding (the
# gateway's default): it decapsulates whatever reaches UDP 4789 on a local
# address, from anyone. While the guard's chains stand a sandbox reaches
# the gateway's own addresses only for DNS and the vault (A5); once they
# are gone — the engine killed, the ruleset flushed, what the routing half
# of the proof claims to survive — the sandbox's VXLAN datagram to the
# gateway's address is taken, and its inner packet comes out of ckvx1,
# routed by the main table to the upstream, not by the blackhole table.
# (Its MAC is set here, as a configuration may; an IP-in-IP or GRE tunnel
# needs none.) The traffic kills the engine; revert starts it again.
desc="vxlan ckvx1 (id 1, local 192.0.2.1, remote the upstream, 10.99.1.1/24), probed with the engine killed and the ruleset flushed"
expect=hole
names='ckvx1 \(vxlan\) decapsulates'
VX_MAC=02:00:00:00:77:01
need() {
	gw ip link add ckvx1 type vxlan id 1 dstport 4789 2>/dev/null || { echo "no vxlan"; return 1; }
	gw ip link del ckvx1
}
vx_add() {
	gw ip link add ckvx1 address $VX_MAC type vxlan id 1 dstport 4789 \
		local $LAB_UPLINK_GW4 remote $LAB_UPLINK_UP4
	gw ip addr add 10.99.1.1/24 dev ckvx1
	gw ip link set ckvx1 up
}
apply() { vx_add; }
vx_send() { sb 1 python3 "$CAT/vxlan_send.py" $X4 $VX_MAC/1/1 $LAB_GW4 $LAB_UPLINK_GW4; }
traffic() {
	probe 1
	vx_send
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
