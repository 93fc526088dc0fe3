# Issue 23 item 10: the engine's allow bit set on the uplink's ingress by tc
# skbedit (and saved to conntrack): inbound connections pass as allowed.
desc="tc on up0 ingress: skbedit mark 0x80000000"
expect=hole
names='up0'
need() { # (builds it when it can: apply has nothing left to do)
	gw tc qdisc add dev up0 clsact 2>/dev/null
	if ! gw tc filter add dev up0 ingress protocol all u32 match u32 0 0 \
		action skbedit mark 0x80000000 2>/dev/null; then
		gw tc qdisc del dev up0 clsact 2>/dev/null
		echo "this kernel has no tc skbedit action (act_skbedit)"
		return 1
	fi
}
