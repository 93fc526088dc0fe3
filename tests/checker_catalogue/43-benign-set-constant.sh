# Benign twin of 08: the same rule over a constant set (no timeout, no rule
# writes it): pcbr0 is always in it, the dnat never applies to sandboxes.
desc="nat prerouting: iifname != @guarded dnat to $X4, @guarded a constant { pcbr0 }"
expect=benign
apply() {
	gw nft -f - <<-EOF2
	table ip cknat {
		set guarded { type ifname; elements = { "$LAB_BR" }; }
		chain pre { type nat hook prerouting priority -100; iifname != @guarded dnat to $X4; }
	}
	EOF2
}
traffic() { probe_ssh; }
