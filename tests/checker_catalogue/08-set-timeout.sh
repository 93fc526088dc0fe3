# Issue 23 item 7: a lookup in a set with timeouts is not a certain match.
# The element naming pcbr0 expires after a second; the dnat behind the
# "not in the set" test then applies to the sandbox's allowed flow.
desc="nat prerouting: iifname != @guarded dnat to $X4, @guarded holds pcbr0 with a 1 s timeout"
expect=hole
names='table ip cknat chain pre rule'
apply() {
	gw nft -f - <<-EOF2
	table ip cknat {
		set guarded { type ifname; flags timeout; elements = { "$LAB_BR" timeout 1s }; }
		chain pre { type nat hook prerouting priority -100; iifname != @guarded dnat to $X4; }
	}
	EOF2
}
traffic() {
	sleep 1.2 # the element expires
	probe_ssh
}
