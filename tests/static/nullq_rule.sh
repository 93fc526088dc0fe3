#!/bin/bash
# bench/nullq, the do-nothing queue consumer the engine's CPU per verdict
# is judged against, reads by the engine's rule for holding a read
# (engine/queue.c, queue_gather_hold_us): a floor that read otherwise would
# compare read policies, not work (bench/report-notes.md, "The hold only
# while it pays"). nullq is built alone from pkg-config flags and includes
# no engine header, so it repeats the rule's constants, each naming the
# engine's; a change to one side that the other did not follow fails here.
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
. tests/lib/tap.sh
# the value of "#define NAME VALUE" in a file ("" when absent)
def() { sed -nE "s/^#define[[:space:]]+$2[[:space:]]+([0-9]+).*/\\1/p" "$1" | head -1; }
for pair in HOLD_US:GATHER_HOLD_US GAIN:GATHER_GAIN WEIGHT:GATHER_WEIGHT \
	PROBE_MS:GATHER_PROBE_MS PROBE_HOLDS:GATHER_PROBE_HOLDS BATCH:BATCH_MAX; do
	n=${pair%%:*} e=${pair#*:}
	ev=$(def engine/queue.c "$e") nv=$(def bench/nullq.c "$n")
	t_ok "engine/queue.c defines $e" test -n "$ev"
	t_eq "bench/nullq.c's $n is the engine's $e" "$ev" "$nv"
done
# and the parser finds a mismatch (a check that cannot fail is a bug)
t_eq "a changed value is seen" 7 "$(def <(printf '#define GAIN\t 7 /* x */\n') GAIN)"
t_done
