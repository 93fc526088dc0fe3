# Already handled: a queue with bypass to another queue number (the xt
# NFQUEUE target: this kernel may lack the native queue expression).
desc="iptables-nft -t raw -A PREROUTING -j NFQUEUE --queue-num 7 --queue-bypass"
expect=hole
names='queue 7'
need() { command -v iptables-nft >/dev/null || { echo "no iptables-nft"; return 1; }; }
apply() { gw iptables-nft -t raw -A PREROUTING -j NFQUEUE --queue-num 7 --queue-bypass; }
