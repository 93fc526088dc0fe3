# Benign twin of 09: the CT target without a helper, on the uplink only.
desc="iptables-nft -t raw -A PREROUTING -i up0 -p udp --dport 123 -j CT --notrack"
expect=benign
need() { need_cmd iptables-nft; }
apply() { gw iptables-nft -t raw -A PREROUTING -i up0 -p udp --dport 123 -j CT --notrack; }
