# A clsact hook bound to a shared block (`ingress_block 22`) holds the
# block's filters, which the kernel lists under the block's index and no
# device: the checker matched them to no interface and judged them
# nowhere. Sandbox 1's port's ingress, on block 22, redirects every frame
# to the uplink, past every chain (entry 25, by another way).
desc="tc on pcv1 ingress via shared block 22: u32 match all, mirred egress redirect dev up0"
expect=hole
names='tc filter on port pcv1 ingress: mirred'
need() {
	gw tc qdisc add dev pcv1 ingress_block 22 clsact 2>/dev/null ||
		{ echo "no shared tc blocks"; return 1; }
	gw tc qdisc del dev pcv1 clsact
}
apply() {
	gw tc qdisc add dev pcv1 ingress_block 22 clsact
	gw tc filter add block 22 protocol ip u32 match u32 0 0 action mirred egress redirect dev up0
}
