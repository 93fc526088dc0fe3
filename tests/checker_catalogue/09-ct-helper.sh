# Issue 23 item 8: a conntrack helper through the xt CT target; the
# connections it expects inherit the master flow's (allow) mark.
desc="iptables-nft -t raw -A PREROUTING -p tcp --dport 6667 -j CT --helper irc"
expect=hole
names='helper .irc.'
need() { need_cmd iptables-nft; }
apply() { gw iptables-nft -t raw -A PREROUTING -p tcp --dport 6667 -j CT --helper irc; }
