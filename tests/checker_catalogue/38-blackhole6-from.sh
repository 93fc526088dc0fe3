# Issue 31 finding 6: the IPv6 form of 35, a blackhole default that
# selects a source prefix. Only lookups from 2001:db8::/32 end there; the
# sandboxes' addresses fall through to `lookup main` once the ruleset is
# gone. The engine is stopped for the check, as in 35.
desc="blackhole ::/0 from 2001:db8::/32 in table 28771 instead of blackhole ::/0 (engine stopped)"
expect=hole
names='IPv6 blackhole table 28771 has no unconditional blackhole default route: its blackhole route to ::/0 from 2001:db8::/32'
need() {
	gw ip -6 route add blackhole ::/0 from 2001:db8::/32 table 28770 2>/dev/null || {
		echo "this kernel has no IPv6 source routing (CONFIG_IPV6_SUBTREES)"
		return 1
	}
	gw ip -6 route del blackhole ::/0 from 2001:db8::/32 table 28770
}
apply() {
	kill -STOP "$(guard_engine_pid)"
	gw ip -6 route del blackhole ::/0 table 28771
	gw ip -6 route add blackhole ::/0 from 2001:db8::/32 table 28771
}
traffic() {
	kill -CONT "$(guard_engine_pid)"
	probe 1
}
revert() {
	gw ip -6 route del blackhole ::/0 from 2001:db8::/32 table 28771 2>/dev/null || true
	gw ip -6 route add blackhole ::/0 table 28771 2>/dev/null || true
}
