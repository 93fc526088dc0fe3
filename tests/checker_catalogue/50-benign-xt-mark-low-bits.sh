# Benign twin of 29 and 30: the same xt targets on the uplink, with values
# the model bounds below the engine's byte: HMARK into 0x100-0x1ff, and a
# shifted CONNMARK --save-mark whose ct mask keeps it in bits 0xff00.
desc="iptables-nft -t mangle PREROUTING -i up0: HMARK into 0x100-0x1ff; MARK 0x1/0xff and CONNMARK --save-mark --nfmask 0xff --ctmask 0xff00 --left-shift-mark 8"
expect=benign
need() {
	need_cmd iptables-nft || return 1
	gw iptables-nft -t mangle -A PREROUTING -i up0 -j HMARK --hmark-tuple src \
		--hmark-mod 256 --hmark-offset 0x100 --hmark-rnd 1 2>/dev/null ||
		{ echo "no xt_HMARK in this kernel"; return 1; }
	gw iptables-nft -t mangle -F PREROUTING
}
apply() {
	gw iptables-nft -t mangle -A PREROUTING -i up0 -j HMARK --hmark-tuple src \
		--hmark-mod 256 --hmark-offset 0x100 --hmark-rnd 1
	gw iptables-nft -t mangle -A PREROUTING -i up0 -j MARK --set-xmark 0x1/0xff
	gw iptables-nft -t mangle -A PREROUTING -i up0 -j CONNMARK --save-mark \
		--nfmask 0xff --ctmask 0xff00 --left-shift-mark 8
}
