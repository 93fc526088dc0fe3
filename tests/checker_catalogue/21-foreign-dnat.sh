# Already handled: a foreign dnat after our decision takes an allowed flow
# elsewhere.
desc="ip nat prerouting: tcp dport 22 dnat to $X4"
expect=hole
names='table ip ckdnat chain pre rule.*dnat'
apply() { nft_chain ip ckdnat pre "type nat hook prerouting priority -100" "tcp dport 22 dnat to $X4"; }
traffic() { probe_ssh; }
