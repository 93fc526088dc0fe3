# Issue 23 item 12: another program bound to the engine's queue numbers
# while the engine is down (suricata -q 100).
desc="engine stopped, another program bound to queues 100 and 101"
expect=hole
names='queue 10[01] is bound by'
apply() {
	guard_engine_stop
	lab_ns_check "$LAB_GW"
	ip netns exec "$LAB_GW" python3 "$CAT/nfq_bind.py" 100 101 >"$LAB_DIR/nfq_bind.out" 2>&1 &
	echo $! >"$LAB_DIR/nfq_bind.pid"
	lab_wait_until grep -q bound "$LAB_DIR/nfq_bind.out"
}
revert() {
	kill "$(cat "$LAB_DIR/nfq_bind.pid")" 2>/dev/null
	wait "$(cat "$LAB_DIR/nfq_bind.pid")" 2>/dev/null
	guard_engine_start || lab_die "the engine did not restart"
}
