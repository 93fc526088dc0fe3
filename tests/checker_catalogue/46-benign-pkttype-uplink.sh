# Benign twin of 03: a packet type rewrite on the uplink's ingress, which no
# sandbox frame crosses.
desc="netdev ingress chain on up0: meta pkttype set host"
expect=benign
apply() { nft_chain netdev ckpt in "type filter hook ingress device up0 priority 0" "meta pkttype set host"; }
