# Benign twin of 03: a packet type rewrite on the uplink's ingress, which no
# sandbox frame crosses.
desc="netdev ingress chain on up0: meta pkttype set host"
expect=benign
apply() {
	gw nft -f - <<-EOF2
	table netdev ckpt {
		chain in { type filter hook ingress device up0 priority 0; meta pkttype set host; }
	}
	EOF2
}
