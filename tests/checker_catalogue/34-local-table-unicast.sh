# Issue 31 finding 4: a unicast route put into table local. The kernel's
# rule 0 (`lookup local`) comes before the engine's rules for every packet,
# so without our ruleset (engine killed, `nft flush ruleset`) bridge
# traffic to X4/X6 is routed out of the uplink, never blackholed. The
# checker used to exempt `lookup local` without reading the table.
desc="ip route add $X4/32 via the upstream table local (and $X6/128)"
expect=hole
names='rule 0: .*lookup 255 comes before the blackhole rule .* reaches table 255, which holds a unicast route to (203\.0\.113\.77/32|2001:db8:77::77/128)'
apply() {
	gw ip route add $X4/32 via "$LAB_UPLINK_UP4" table local
	gw ip -6 route add $X6/128 via "$LAB_UPLINK_UP6" table local
}
revert() {
	gw ip route del $X4/32 table local 2>/dev/null || true
	gw ip -6 route del $X6/128 table local 2>/dev/null || true
}
