# Already handled: dup copies sandbox packets to another host.
desc="prerouting -300: ip saddr 10.203.0.0/24 dup to $X4"
expect=hole
names='table ip ckdup chain pre rule.*dup'
apply() { nft_chain ip ckdup pre "type filter hook prerouting priority -300" "ip saddr 10.203.0.0/24 dup to $X4"; }
