# A filter attached to an HTB class lives in the class's own block, which
# a dump of the qdisc's filters does not list: the checker read each
# qdisc's filters, not its classes'. (u32 hides nothing there: its filters
# share hash tables across a qdisc's blocks and are listed with the
# qdisc's; cls_bpf, flower, matchall and basic are not.) On sandbox 1's
# port, egress: the root filter sends every IPv4 packet to inner class
# 1:10 (a u32 classid, no action), whose own filter — classic BPF that
# matches all — redirects it to the uplink. The gateway's refusals of
# sandbox 1's probes, ICMP errors with the probes' bytes quoted in them,
# then leave on the uplink's wire (ARP stays: sandbox 1 still reaches the
# gateway).
desc="HTB on pcv1 egress, a bpf filter on inner class 1:10: mirred egress redirect dev up0"
expect=hole
names='egress class 1:10: mirred'
need() {
	local ok=0
	gw tc qdisc add dev pcv1 root handle 1: htb default 20 2>/dev/null ||
		{ echo "no htb qdisc"; return 1; }
	gw tc filter add dev pcv1 parent 1: protocol all bpf bytecode "1,6 0 0 4294967295" \
		2>/dev/null || ok=1
	gw tc qdisc del dev pcv1 root
	[ $ok = 0 ] || { echo "no cls_bpf"; return 1; }
}
apply() {
	gw tc qdisc add dev pcv1 root handle 1: htb default 20
	gw tc class add dev pcv1 parent 1: classid 1:10 htb rate 1gbit 2>/dev/null
	gw tc class add dev pcv1 parent 1:10 classid 1:11 htb rate 1gbit 2>/dev/null
	gw tc class add dev pcv1 parent 1: classid 1:20 htb rate 1gbit 2>/dev/null
	gw tc filter add dev pcv1 parent 1: protocol ip u32 match u32 0 0 classid 1:10
	gw tc filter add dev pcv1 parent 1:10 protocol ip bpf bytecode "1,6 0 0 4294967295" \
		action mirred egress redirect dev up0
}
# ICMP errors the gateway meant for sandbox 1 (from the bridge's MAC, the
# probes quoted), received by the upstream.
arrived_also() {
	esc_upstream "icmp and ether src $(gw cat /sys/class/net/$LAB_BR/address) and dst host $SB1_4"
}
revert() { gw tc qdisc del dev pcv1 root 2>/dev/null || true; }
