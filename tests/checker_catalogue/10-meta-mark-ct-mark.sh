# Issue 23 item 9: the conntrack mark copied into the packet mark before
# the engine's chain: a held flow's packets then carry its decision bits.
desc="prerouting -300: meta mark set ct mark"
expect=hole
names='table ip ckmark chain pre rule'
apply() { nft_chain ip ckmark pre "type filter hook prerouting priority -300" "meta mark set ct mark"; }
