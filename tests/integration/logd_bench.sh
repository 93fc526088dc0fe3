# bench/logd measures what it says (issue 32, issue 34.5): it runs to the
# end, its accept rows are the real portcullis-logd fed by senders of the
# engine's user (records written as "engine", not by a server inside the
# bench as root), the witnessed row has a real witness that cosigned the
# whole log, each accept row has its CPU time per record, and nothing it
# started is left running. A small run; no rate is asserted (the numbers
# are the bench's business, never a test's).
set -u
. "$PC_TOP/tests/lib/tap.sh"

B=$PC_TOP/${PC_BUILD:-build}
t_need_built portcullis-logd portcullis
if [ "${PC_BUILD:-build}" != build ]; then
	# bench/logd builds its program with the default flags against that
	# build's archives (make's BUILD=build): a sanitized or clang build
	# is not what it measures
	t_skip "bench/logd" "measured on the default build only (PC_BUILD=$PC_BUILD)"
	t_done
	exit
fi
if [ "$(id -u)" != 0 ]; then
	t_skip "bench/logd" "needs root (logd drops to its user, the witness has a network namespace)"
	t_done
	exit
fi
t_tmpdir logd-bench
N=3000

out=$(cd "$PC_TOP" && timeout 120 bench/logd -n "$N" -d "$D" 2>&1)
t_eq "bench/logd -n $N runs to the end (exit 0)" 0 $?
t_match "it prints the accept row" '^  accept \+ seal \+ write \+ ack \(socket\) +[0-9]+ ' "$out"
t_match "... with its CPU time per record, logd's and the senders'" \
	'^    CPU per record: portcullis-logd [0-9.]+ us \(all threads\), senders [0-9.]+ us$' \
	"$(printf '%s\n' "$out" | grep -A1 '^  accept + seal + write + ack (socket)' | sed -n 2p)"
t_match "the witnessed row, with logd's, the senders' and the witness's CPU per record" \
	'^    CPU per record: portcullis-logd [0-9.]+ us \(all threads\), senders [0-9.]+ us, witness [0-9.]+ us$' \
	"$(printf '%s\n' "$out" | grep -A1 '^  witnessed: accept + seal + write + ack  *[0-9]' | sed -n 2p)"
t_match "the record round trip through a ring, beside two bare processes" \
	'^  record round trip \(one record through the ring, then its acknowledgement; 60 times\): [0-9.]+ us, CPU per round trip portcullis-logd [0-9.]+ us, sender [0-9.]+ us; two processes ringing eventfds: [0-9.]+ us, CPU [0-9.]+ \+ [0-9.]+ us$' \
	"$out"
t_match "the targets line measured both accept rows" \
	'targets: accept\+write >= 200000/s \((met|not met)\), .* with a witness >= 200000/s \((met|not met)\)' "$out"
[ "$T_FAILED" = 0 ] || t_diag "$out"

for row in plain witnessed; do
	f=$D/$row/verdicts.jsonl
	t_eq "$row: the real portcullis-logd wrote all $N records as the engine's (portcullis.sender)" \
		"$N" "$(grep -c '"portcullis\.sender":"engine"' "$f" 2>/dev/null)"
	t_eq "$row: no record of another client sender" 0 \
		"$(grep '^{"event.sequence"' "$f" 2>/dev/null | grep -vc '"portcullis\.sender":"\(engine\|logd\)"')"
	t_ok "$row: the log verifies" "$B/portcullis" log verify --key "$D/state/log.key.pub" "$f"
done
# the round trip's 60 records and 200 before them, through the ring
t_eq "ring: the real portcullis-logd wrote the round trip's 260 records as the engine's" \
	260 "$(grep -c '"portcullis\.sender":"engine"' "$D/ring/verdicts.jsonl" 2>/dev/null)"
t_ok "ring: the log verifies" "$B/portcullis" log verify --key "$D/state/log.key.pub" "$D/ring/verdicts.jsonl"
size=$(sed -n 2p "$D/witnessed/verdicts.jsonl.checkpoint" 2>/dev/null)
t_eq "the witness cosigned the witnessed log's last checkpoint" "$size" \
	"$(sed -n 2p "$D/witnessed/verdicts.jsonl.witnessed" 2>/dev/null)"
t_match "... and the bench says so" "the witness cosigned a checkpoint for $size of $size records" "$out"
# (the shell's own loop, not grep over /proc: grep's command line names
# the directory)
left=
for p in /proc/[0-9]*; do
	[[ $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) != *"$D"* ]] || left+=" ${p#/proc/}"
done
t_eq "no daemon of the bench left running" "" "$left"
t_done
