# Already handled: tc mirred on a port redirects sandbox frames to the
# uplink, past every chain.
desc="tc on pcv1 ingress: u32 match all, mirred egress redirect dev up0"
expect=hole
names='mirred'
need() {
	gw tc qdisc add dev pcv1 clsact 2>/dev/null || { echo "no clsact qdisc"; return 1; }
	gw tc qdisc del dev pcv1 clsact
}
apply() {
	gw tc qdisc add dev pcv1 clsact
	gw tc filter add dev pcv1 ingress protocol ip u32 match u32 0 0 \
		action mirred egress redirect dev up0
}
