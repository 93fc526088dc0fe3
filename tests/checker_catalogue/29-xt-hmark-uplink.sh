# Issue 31 class 2: an xt target off the sandbox path writes the engine's
# ALLOW bit. HMARK's mark is hash % mod + offset: with mod 1 and offset
# 0x80000000 every server answer on the uplink carries ALLOW, which
# conntrack keeps for the flow: a held flow is promoted before its
# ClientHello.
desc="iptables-nft -t mangle PREROUTING -i up0 --sport 443: HMARK --hmark-mod 1 --hmark-offset 0x80000000"
expect=hole
names='HMARK.*0x80000000'
hmark() { # -A|-D
	gw iptables-nft -t mangle "$1" PREROUTING -i up0 -p tcp --sport 443 -j HMARK \
		--hmark-tuple src --hmark-mod 1 --hmark-offset 0x80000000 --hmark-rnd 1
}
need() {
	need_cmd iptables-nft || return 1
	hmark -A 2>/dev/null || { echo "no xt_HMARK in this kernel"; return 1; }
	hmark -D
}
apply() { hmark -A; }
