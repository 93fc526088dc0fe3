# Issue 23 item 9, iptables form: CONNMARK --restore-mark.
desc="iptables-nft -t mangle -A PREROUTING -j CONNMARK --restore-mark"
expect=hole
names='CONNMARK --restore-mark'
need() { need_cmd iptables-nft; }
apply() { gw iptables-nft -t mangle -A PREROUTING -j CONNMARK --restore-mark; }
