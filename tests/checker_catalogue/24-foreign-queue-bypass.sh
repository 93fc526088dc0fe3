# Already handled: a queue with bypass to another queue number (the xt
# NFQUEUE target: this kernel may lack the native queue expression).
desc="iptables-nft -t raw -A PREROUTING -j NFQUEUE --queue-num 7 --queue-bypass"
expect=hole
names='queue 7'
need() { need_cmd iptables-nft; }
apply() { gw iptables-nft -t raw -A PREROUTING -j NFQUEUE --queue-num 7 --queue-bypass; }
