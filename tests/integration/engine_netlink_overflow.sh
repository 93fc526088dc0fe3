#!/usr/bin/env bash
# A thousand bridge ports created and brought up at once (issue 34, point
# 2): their link, address and route events overflowed the engine's
# rtnetlink sockets (ENOBUFS). A lost event is read as a possible foreign
# change, so the engine cuts the sandboxes off and checks again — right —
# but the end of that cut-off, bringing 1,000 ports up, overflowed the
# routing monitor again, and the engine cut off again: it never stayed
# released without a restart. Here the engine must come back to proven by
# itself, stay released, and sandbox 1 be served. Real daemons in the lab.
set -u
. "$PC_TOP/tests/lib/guard.sh"

N=1000
guard_lab 1
guard_agent1 <<-EOF2
  - cidr: $LAB_DIRECT4/32
    ports: [80]
EOF2
# the 1,000 sandboxes in the policy before their ports exist (the bench's
# shape: one source and one port each)
for ((k = 2; k <= N + 1; k++)); do
	printf -- '---\nsandbox: many-%04d\nmatch: { source: "fd00:203::1:%x/128", port: pcs%d }\nallow: []\n' "$k" "$k" "$k"
done | guard_rules many
guard_start || {
	t_fail "guard started" true
	t_done
}

field() { guard_status_field "$1" 2>/dev/null; }
# released, with no check of the engine's running: the state the engine
# must reach by itself, and stay in
released() {
	[ "$(field 'str(s["cutoff"]["active"]) + str(s["check"]["running"])')" = "FalseFalse" ]
}

wait_for() { # seconds, command...: poll with a deadline
	local end=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.2
	done
}

t_ok "sandbox 1 is served before the ports come" lab_wait_until guard_served

PARK=$LAB_ID-park # removed by lab_down with the lab's other namespaces
ip netns add "$PARK"
{
	for ((k = 2; k <= N + 1; k++)); do
		printf 'link add pcs%d type veth peer name pk%d netns %s\n' "$k" "$k" "$PARK"
		printf 'link set pcs%d master %s\n' "$k" "$LAB_BR"
		printf 'link set pcs%d type bridge_slave isolated on learning on\n' "$k"
		printf 'link set pcs%d up\n' "$k"
	done
} >"$LAB_DIR/ports.batch"
for ((k = 2; k <= N + 1; k++)); do printf 'link set pk%d up\n' "$k"; done >"$LAB_DIR/park.batch"
t_ok "$N ports created and brought up at once" \
	sh -c "ip netns exec $LAB_GW ip -batch $LAB_DIR/ports.batch && ip netns exec $PARK ip -batch $LAB_DIR/park.batch"


# Events lost for sure: the engine stopped (SIGSTOP: its sockets fill, no
# verdict is given meanwhile) while the ports flap, more events than any
# buffer holds; then it runs again and meets ENOBUFS on its sockets.
t_ok "the engine's first check of the $N ports is done, released" wait_for 120 released
cuts0=$(field 's["cutoff"]["count"]')
# each port's link, address and route events fit the monitors' buffers:
# nothing lost, so no cut-off for it
t_eq "$N ports brought up at once lost no event: no cut-off" 0 "$cuts0"
epid=$(guard_engine_pid)
kill -STOP "$epid"
for ((r = 0; r < 12; r++)); do
	for ((k = 2; k <= N + 1; k++)); do
		printf 'link set pcs%d down\nlink set pcs%d up\n' "$k" "$k"
	done
done >"$LAB_DIR/flap.batch"
ip netns exec "$LAB_GW" ip -batch "$LAB_DIR/flap.batch"
kill -CONT "$epid"

overflowed() { [ "$(field 's["cutoff"].get("netlink_overflows", 0)')" -gt 0 ]; }
t_ok "the lost events are counted (status cutoff.netlink_overflows)" wait_for 60 overflowed
t_ok "... and logged with the resynchronisation" \
	grep -q 'rtnetlink events lost (ENOBUFS' "$GUARD_DIR/engine.log"

# While cut off, sandbox 1 gets nothing through. A sample counts only when
# the engine says cut off both before and after the try (2: inconclusive).
blocked_sample() {
	local got=1
	guard_cut_is true || return 2
	guard_served 1 && got=0
	guard_cut_is true || return 2
	[ "$got" = 1 ]
}
res=2 end=$((SECONDS + 60))
while [ "$res" = 2 ] && [ "$SECONDS" -lt "$end" ] && ! released; do
	blocked_sample
	res=$?
done
if [ "$res" != 2 ]; then
	t_eq "while it resynchronises (cut off), nothing from sandbox 1 passes" 0 "$res"
else
	t_diag "no moment cut off long enough to try sandbox 1"
fi

# (a check at 1,000 ports takes seconds on a loaded machine)
t_ok "the engine releases the sandboxes by itself when proven (no restart)" \
	wait_for 120 released
released || {
	t_diag "status: $(field 'json.dumps({"cutoff": s["cutoff"], "check": s["check"]})')"
	t_diag "$(grep -v 'containment check: ' "$GUARD_DIR/engine.log" | tail -15)"
}
cuts=$(field 's["cutoff"]["count"]')
t_ok "sandbox 1 is served again" wait_for 60 guard_served
t_ok "at most one cut-off for the lost events: its end (1,000 ports up) began no other" \
	test "$cuts" -le "$((cuts0 + 1))"
# a quiet period before a negative observation: the released ports' own
# events (links, addresses, routes) must not begin another cut-off
sleep 2
t_eq "... nor later (count stays $cuts)" "$cuts" "$(field 's["cutoff"]["count"]')"
t_ok "... and the engine has them still released" released
t_ok "portcullis check: the lab with $((N + 1)) sandboxes is proven" wait_for 60 guard_cli check
t_diag "rtnetlink overflows: $(field 's["cutoff"].get("netlink_overflows")'); cut-offs: $cuts"
t_done
