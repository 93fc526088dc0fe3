# Issue 31 finding 5: the blackhole table's default replaced by one with a
# tos. It ends only lookups of tos 0x10: the rest of the bridge's traffic
# falls through to `lookup main` once the ruleset is gone. The engine is
# stopped (SIGSTOP) for the check, as it would be killed: running, it puts
# the unconditional default back at the route event. It runs again for the
# probes (a stopped engine judges nothing and the probes wait for verdicts).
desc="blackhole default tos 0x10 in table 28771 instead of blackhole default (engine stopped)"
expect=hole
names='IPv4 blackhole table 28771 has no unconditional blackhole default route: its blackhole route to 0\.0\.0\.0/0 tos 0x10'
need() {
	gw ip route add blackhole default tos 0x10 table 28770 2>/dev/null || {
		echo "this kernel refuses a route with a tos"
		return 1
	}
	gw ip route del blackhole default tos 0x10 table 28770
}
apply() {
	kill -STOP "$(guard_engine_pid)"
	gw ip route del blackhole default table 28771
	gw ip route add blackhole default tos 0x10 table 28771
}
traffic() {
	kill -CONT "$(guard_engine_pid)"
	probe 1
}
revert() {
	gw ip route del blackhole default tos 0x10 table 28771 2>/dev/null || true
	gw ip route add blackhole default table 28771 2>/dev/null || true
}
