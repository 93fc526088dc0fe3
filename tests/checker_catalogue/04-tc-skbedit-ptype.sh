# Issue 23 item 3, through tc: skbedit ptype host on the port's ingress.
desc="tc on pcv1 ingress: skbedit ptype host"
expect=hole
names='ptype'
need() { # (builds it when it can: apply has nothing left to do)
	gw tc qdisc add dev pcv1 clsact 2>/dev/null
	if ! gw tc filter add dev pcv1 ingress protocol all u32 match u32 0 0 \
		action skbedit ptype host 2>/dev/null; then
		gw tc qdisc del dev pcv1 clsact 2>/dev/null
		echo "this kernel has no tc skbedit action (act_skbedit)"
		return 1
	fi
}
traffic() {
	esc_craft 1 --gw-mac 01:80:c2:00:00:0e udp --dst $X6 --dport 9 >/dev/null || true
	probe 1
}
