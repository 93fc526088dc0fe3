# A second reader of the log: tests/integration/logd_oracle.py reads the
# file as docs/logd.md describes it, with Python's json, base64 and hashlib
# and the cryptography package's Ed25519 — no code of tlog/. A log the
# real portcullis-logd wrote is intact for both; copies of it with one byte
# changed (each byte of the signatures' base64 in its case and its high
# bit, every 31st other byte in its low, case or high bit) are judged by
# both, and they must agree on each. Before base64 was read strictly,
# `log verify` took a signature whose '/' was written as a byte from 0x80,
# which Python's decoder refuses.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

if ! lg_has_oracle; then
	t_skip "a second reader of the log" "python3-cryptography is not installed (make deps)"
	t_done
	exit
fi
lg_init logd-oracle
lg_config checkpoint: "  records: 4" "  interval_ms: 100000"
logd_start
t_match "the client's 11 records are acknowledged" "^acked 12$" "$(lg_client -n 11 -b 3 -q)"
logd_stop_ok
pub=$D/state/log.key.pub
out=$(PC log verify 2>&1)
t_eq "log verify: intact" 0 $?
t_match "log verify counts 12 records" "intact: 12 records" "$out"
out=$(lg_oracle verify "$L" "$pub" 2>&1)
t_eq "the second reader: intact" 0 $?
t_match "the second reader counts the same records and checkpoints" \
	"intact: 12 records, $(grep -c '^{"checkpoint":' "$L") checkpoints, 0 unsealed" "$out"
# a check that cannot fail is a bug: the reader refuses a record changed
sed 's/"event.sequence":5,/"event.sequence":6,/' "$L" >"$D/edited"
out=$(lg_oracle verify "$D/edited" "$pub" 2>&1)
t_eq "the second reader refuses an edited record" 1 $?
t_match "... naming its line" "^line [0-9]+: hash is not the leaf hash" "$out"
out=$(lg_oracle mutate "$L" "$pub" "$B/portcullis" "$D/p.yaml" 31 2>&1)
rc=$?
t_eq "log verify and the second reader agree on every changed copy" 0 "$rc"
t_match "... and judged them" "^[0-9]{3,} copies judged, 0 disagreements$" "$(tail -1 <<<"$out")"
t_diag "$(tail -1 <<<"$out")"
[ "$rc" = 0 ] || t_diag "$(head -20 <<<"$out")"
out=$(PC log verify 2>&1)
t_eq "the log is put back as it was" 0 $?
# a log of the older format (records without their sender, the key's bare
# name as origin) is intact for both as well
O=$PC_TOP/tests/integration/logd_old
t_ok "the second reader reads logd_old/ as intact" \
	lg_oracle verify "$O/verdicts.jsonl" "$O/log.key.pub"
t_done
