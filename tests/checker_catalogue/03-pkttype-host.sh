# Issue 23 item 3: frames to a link-local group MAC (01:80:c2:00:00:0e) are
# not forwarded by the bridge but handed to the port's own IP stack; a
# netdev chain that rewrites their packet type to "host" makes that stack
# forward them (ip forwarding is on for every interface).
desc="netdev ingress chain on pcv1: meta pkttype set host"
expect=hole
names='pkttype'
apply() { nft_chain netdev ckpt in "type filter hook ingress device pcv1 priority 0" "meta pkttype set host"; }
traffic() {
	esc_craft 1 --gw-mac 01:80:c2:00:00:0e udp --dst $X6 --dport 9 >/dev/null || true
	esc_craft 1 --gw-mac 01:80:c2:00:00:0e udp --dst $X4 --dport 9 >/dev/null || true
	probe 1
}
