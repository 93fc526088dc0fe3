# Issue 23 item 6: a sandbox's second NIC on another bridge of the gateway
# (libvirt's default NAT network, docker0), with the gateway's address on
# that bridge: the sandbox routes through it.
desc="second NIC of sandbox 1 on bridge ckbr1 (10.98.0.1/24)"
expect=hole
names='ckv1'
apply() {
	gw_bridge ckbr1 10.98.0.1/24
	gw_veth_to ckv1 eth1 "$(lab_sb_ns 1)"
	gw ip link set ckv1 master ckbr1 up
	sb 1 ip addr add 10.98.0.2/24 dev eth1
	sb 1 ip link set eth1 up
	sb 1 ip route add $X4/32 via 10.98.0.1
}
