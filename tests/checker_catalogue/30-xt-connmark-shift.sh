# Issue 31 class 3: two xt targets off the sandbox path, each harmless on
# its own to a checker that reads only their constants: MARK sets a low
# bit, CONNMARK --save-mark shifts it left by 31 into the conntrack mark,
# onto the engine's ALLOW bit.
desc="iptables-nft -t mangle PREROUTING -i up0 --sport 443: MARK --set-mark 0x1, CONNMARK --save-mark --left-shift-mark 31"
expect=hole
names='CONNMARK --save-mark'
need() { need_cmd iptables-nft; }
apply() {
	gw iptables-nft -t mangle -A PREROUTING -i up0 -p tcp --sport 443 -j MARK --set-mark 0x1
	gw iptables-nft -t mangle -A PREROUTING -i up0 -p tcp --sport 443 -j CONNMARK \
		--save-mark --left-shift-mark 31
}
