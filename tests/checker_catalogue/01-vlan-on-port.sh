# Issue 23 item 1: a VLAN device stacked on a sandbox port, with an address:
# tags are stripped before the bridge sees the frame, so tagged frames from
# the sandbox reach the VLAN device's own IP stack, outside pcbr0's chains.
desc="VLAN device pcv1.42 stacked on sandbox port pcv1, with an address"
expect=hole
names='pcv1\.42'
need() {
	gw ip link add link pcv1 name ckprobe type vlan id 4000 2>/dev/null ||
		{ echo "this kernel has no 802.1Q VLAN devices (8021q)"; return 1; }
	gw ip link del ckprobe
}
apply() {
	gw ip link add link pcv1 name pcv1.42 type vlan id 42
	gw ip addr add 10.99.42.1/24 dev pcv1.42
	gw ip link set pcv1.42 up
}
traffic() {
	local mac
	mac=$(gw cat /sys/class/net/pcv1.42/address)
	sb 1 ip addr add 10.99.42.2/24 dev eth0
	esc_craft 1 --gw-mac "$mac" vlan --vid 42 --dst $X4 --dport 9 >/dev/null || true
	probe 1
}
revert() { gw ip link del pcv1.42 2>/dev/null || true; }
