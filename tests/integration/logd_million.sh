# A log of 1,000,000 records, written by the real portcullis-logd from a
# client that sends in batches and waits for the acknowledgements, verifies
# as a whole; a record deep inside it is proven included; one changed byte
# in the middle is found and named; and logd restarts on it (verifying it
# all again) and continues.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_init logd-million
lg_config
LG_START_TRIES=600 # a restart verifies the million records first

logd_start
t_eq "logd starts" 0 $?
s=$SECONDS
lg_client -n 1000000 -b 200 -q -t 10000 >"$D/acked" &
client=$!
# verified while logd writes: a line being written is no tampering
live=0
size() { stat -c %s "$D/log/verdicts.jsonl" 2>/dev/null || echo 0; }
grew() { [ "$(size)" -gt "$1" ]; }
for _ in 1 2 3; do
	lab_wait_until -p "$client" grew "$(size)" # logd wrote more since
	PC log verify >"$D/live.out" 2>&1 || live=1
done
t_eq "the log verifies while logd writes to it" 0 "$live"
[ "$live" = 0 ] || t_diag "$(cat "$D/live.out")"
wait "$client"
t_match "1,000,000 records sent and acknowledged" "^acked 1000001$" "$(cat "$D/acked")"
t_diag "written in $((SECONDS - s)) s"
logd_stop
s=$SECONDS
out=$(PC log verify 2>&1)
t_eq "the 1,000,000-record log verifies" 0 $?
t_diag "verified in $((SECONDS - s)) s"
t_match "every record, every checkpoint" "intact: 1000001 records \(seq 1-1000001\), 100[0-9] checkpoints" "$out"
t_match "nothing unsealed after a clean stop" "no unsealed tail" "$out"

t_ok "a record deep inside is proven" PC log prove 765432 -o "$D/proof"
t_ok "and the proof checks without the log" PC log verify --proof "$D/proof"
t_match "against a tree of a million" "leaf 765431 of the 1000001-record tree" \
	"$(PC log verify --proof "$D/proof")"

# one byte in the middle: sed on a 600 MB file would be slow, dd is not
off=$(grep -b -m1 '^{"event.sequence":500000,' "$D/log/verdicts.jsonl" | cut -d: -f1)
line=$(grep -n -m1 '^{"event.sequence":500000,' "$D/log/verdicts.jsonl" | cut -d: -f1)
printf '9' | dd of="$D/log/verdicts.jsonl" bs=1 seek=$((off + 19)) conv=notrunc 2>/dev/null
out=$(PC log verify 2>&1)
t_eq "one changed byte in the middle fails verify" 1 $?
t_match "and its line is named" "line $line: " "$out"
printf '0' | dd of="$D/log/verdicts.jsonl" bs=1 seek=$((off + 19)) conv=notrunc 2>/dev/null

logd_start
t_eq "logd restarts on the million-record file (verifying it first)" 0 $?
t_match "and continues its seq" "^acked 1000002$" \
	"$(lg_client -n 1)"
t_done
