# Issue 23 item 10 with nftables: a netdev chain on the uplink sets the
# engine's allow bit on what comes in.
desc="netdev ingress chain on up0: meta mark set 0x80000000"
expect=hole
names='table netdev ckup chain in'
apply() { nft_chain netdev ckup in "type filter hook ingress device up0 priority 0" "meta mark set 0x80000000"; }
