# Benign twin of 09: the CT target without a helper, on the uplink only.
desc="iptables-nft -t raw -A PREROUTING -i up0 -p udp --dport 123 -j CT --notrack"
expect=benign
need() { command -v iptables-nft >/dev/null || { echo "no iptables-nft"; return 1; }; }
apply() { gw iptables-nft -t raw -A PREROUTING -i up0 -p udp --dport 123 -j CT --notrack; }
