# Issue 31, finding 1: a macvlan whose parent is the sandbox bridge, moved
# into another namespace (what a Docker macvlan network with parent pcbr0
# does). It leaves the gateway's link dump but stays pcbr0's receive
# handler: a sandbox routing to its address reaches that namespace's stack.
desc="macvlan ckm0 on pcbr0 moved into another namespace, holding $X4"
expect=hole
names='ckm0 .*another network namespace'
need() {
	gw ip link add ckm0 link $LAB_BR type macvlan mode bridge 2>/dev/null ||
		{ echo "no macvlan in this kernel"; return 1; }
	gw ip link del ckm0
}
apply() {
	_lab_ns_add "$LAB_ID-ckm"
	gw ip link add ckm0 link $LAB_BR type macvlan mode bridge
	gw ip link set ckm0 netns "$LAB_ID-ckm"
	lab_in "$LAB_ID-ckm" ip addr add $X4/32 dev ckm0
	lab_in "$LAB_ID-ckm" ip link set ckm0 up
	lab_in "$LAB_ID-ckm" ip route add "$(lab_sb_ip4 1)/32" dev ckm0
}
traffic() {
	sb 1 ip route add $X4/32 dev eth0
	probe 1
}
# what reached the other namespace: the sandbox's pings answered there
arrived_also() {
	local n
	n=$(sb 1 ping -c 2 -W 1 $X4 2>/dev/null | sed -n 's/.* \([0-9]*\) received.*/\1/p')
	echo "${n:-0}"
}
revert() { _lab_ns_del "$LAB_ID-ckm"; }
