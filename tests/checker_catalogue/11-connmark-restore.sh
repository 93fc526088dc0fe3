# Issue 23 item 9, iptables form: CONNMARK --restore-mark.
desc="iptables-nft -t mangle -A PREROUTING -j CONNMARK --restore-mark"
expect=hole
names='CONNMARK --restore-mark'
need() { command -v iptables-nft >/dev/null || { echo "no iptables-nft"; return 1; }; }
apply() { gw iptables-nft -t mangle -A PREROUTING -j CONNMARK --restore-mark; }
