# Issue 23 item 12: another program bound to the engine's queue numbers
# while the engine is down (suricata -q 100).
desc="engine stopped, another program bound to queues 100 and 101"
expect=hole
names='queue 10[01] is bound by'
apply() {
	guard_engine_stop
	bg_start nfq_bind bound nfq_bind.py 100 101
}
revert() {
	bg_stop nfq_bind
	guard_engine_start || lab_die "the engine did not restart"
}
