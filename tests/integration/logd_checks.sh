# What logd and `log verify` say they know, and no more: logd refuses to
# start (and -t fails, exit 3) when its user cannot create files in the log
# directory, a check made as that user, not guessed from mode bits; a
# sidecar that cannot be written is a metric and a message naming the file
# and the error; `log verify` calls a file no checkpoint covers "unsigned"
# (exit 1, 0 with --allow-unsigned) and names a missing sidecar.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "logd checks" "$B/portcullis-logd" "$B/portcullis" "$B/tests/helpers/logd_client"
lg_init logd-checks
lg_config "checkpoint:" "  interval_ms: 200"
LOGD=$B/portcullis-logd
metric() { PC metrics 2>/dev/null | sed -n "s/^$1 //p"; }

# The log directory exists, root's, mode 0755: root can write there, the
# log user cannot.
mkdir -m 0755 "$D/log"
out=$("$LOGD" -c "$D/p.yaml" -t 2>&1)
t_eq "-t fails when the log user cannot create files in the log directory (exit 3)" 3 $?
t_match "... and says who cannot do what, where, and why" \
	"log\.user portcullis-log cannot create files in the log directory $D/log: Permission denied" "$out"
logd_start # not in a subshell: it starts logd in the background
rc=$?
t_eq "logd refuses to start" 1 "$rc"
[ "$rc" -ne 0 ] || logd_stop
t_match "... with the same reason" "portcullis-log cannot create files in the log directory $D/log" \
	"$(cat "$D/logd.err")"
t_eq "... and writes nothing there as root first" "" "$(ls -A "$D/log")"
# Writable by mode bits for "other" but not for the user: an ACL-free way
# to show the check is made with the user's credentials (its group here).
chgrp portcullis-log "$D/log"
chmod 0707 "$D/log"
out=$("$LOGD" -c "$D/p.yaml" -t 2>&1)
t_eq "other may write but the log user's group may not: -t still fails" 3 $?
chown portcullis-log:portcullis-log "$D/log"
chmod 0750 "$D/log"
out=$("$LOGD" -c "$D/p.yaml" -t 2>&1)
t_eq "the log user's directory: -t passes" 0 $?
t_nomatch "... and leaves no probe file" "probe" "$(ls -A "$D/log")"

# A sidecar that cannot be written while logd runs: the directory taken
# away from the log user under it.
logd_start || t_diag "logd did not start: $(cat "$D/logd.err")"
t_match "logd serves" "^acked" "$(lg_client -n 3)"
# log status without a witness: --json says the same as the text, witness null
txt=$(PC log status)
t_eq "log status without a witness: exit 0" 0 $?
js=$(PC log status --json)
t_eq "log status --json: exit 0 as without" 0 $?
t_eq "... ok, the tree the text gives, no witness" \
	"true $(sed -nE 's/^log: ([0-9]+) records in the current tree, next seq ([0-9]+), ([0-9]+) unsealed$/\1 \2 \3/p' <<<"$txt") null" \
	"$(jq -r '"\(.ok) \(.log.tree_records) \(.log.next_seq) \(.log.unsealed) \(.witness)"' <<<"$js")"
t_eq "no sidecar write error yet" 0 "$(metric portcullis_logd_sidecar_write_errors_total)"
chmod 0550 "$D/log"
t_match "records are still written" "^acked" "$(lg_client -n 3)"
sidecar_failed() { [ "$(metric portcullis_logd_sidecar_write_errors_total)" -ge 1 ] 2>/dev/null; }
lab_wait_until sidecar_failed
n=$(metric portcullis_logd_sidecar_write_errors_total)
t_ok "the failed sidecar writes are counted ($n)" test "${n:-0}" -ge 1
t_match "the message names the file and the error" \
	"checkpoint sidecar $L\.checkpoint not written: writing $L\.checkpoint\.tmp: Permission denied" \
	"$(cat "$D/logd.err")"
t_nomatch "... not \"sealing the log\"" "sealing the log" "$(cat "$D/logd.err")"
chmod 0750 "$D/log"
logd_stop_ok

# log verify: a file no checkpoint covers is unsigned.
cp "$L" "$D/real.jsonl"
cp "$L.checkpoint" "$D/real.jsonl.checkpoint"
out=$(PC log verify "$D/real.jsonl" 2>&1)
t_eq "control: logd's file verifies" 0 $?
t_nomatch "control: with its sidecar, none is said missing" "no sidecar" "$out"
grep -v '^{"checkpoint"' "$L" >"$D/nocp.jsonl"
out=$(PC log verify "$D/nocp.jsonl" 2>&1)
t_eq "its records without any checkpoint: exit 1" 1 $?
t_match "... called unsigned" "nocp\.jsonl: unsigned: 7 records \(seq 1-7\) and no checkpoint" "$out"
t_nomatch "... never intact" "intact" "$out"
t_match "... with the missing sidecar named" "no sidecar: $D/nocp\.jsonl\.checkpoint is missing" "$out"
out=$(PC log verify --allow-unsigned "$D/nocp.jsonl" 2>&1)
t_eq "--allow-unsigned accepts it: exit 0" 0 $?
t_match "... still called unsigned" "unsigned: 7 records.*accepted \(--allow-unsigned\)" "$out"
# A fully forged file: records made from nothing, hashes computed (no key
# needed for a hash chain).
python3 - "$D/forged.jsonl" <<'EOF'
import hashlib, sys
prev, out = "0" * 64, []
for seq in range(1, 6):
    act = "log-segment" if seq == 1 else "connect"
    body = ('{"seq":%d,"@timestamp":"2026-11-29T14:02:13.123Z","event.kind":"event",'
            '"event.action":"%s","prev":"%s"' % (seq, act, prev))
    h = hashlib.sha256(b"\0" + (body + "}").encode()).hexdigest()
    out.append(body + ',"hash":"%s"}' % h)
    prev = h
open(sys.argv[1], "w").write("\n".join(out) + "\n")
EOF
out=$(PC log verify "$D/forged.jsonl" 2>&1)
t_eq "a forged file without a checkpoint: exit 1" 1 $?
t_match "... unsigned" "forged\.jsonl: unsigned: 5 records" "$out"
: >"$D/empty.jsonl"
t_eq "an empty file: exit 1 (unsigned)" 1 "$(PC log verify "$D/empty.jsonl" >/dev/null 2>&1; echo $?)"

# A signed file whose sidecar is gone.
rm "$D/real.jsonl.checkpoint"
out=$(PC log verify "$D/real.jsonl" 2>&1)
t_eq "a signed file without its sidecar still verifies (exit 0)" 0 $?
t_match "... and the missing sidecar is named, with what it costs" \
	"no sidecar: $D/real\.jsonl\.checkpoint is missing: records cut off after the last checkpoint in the file cannot be detected" \
	"$out"
out=$(PC log verify "$D/real.jsonl" --checkpoint "$L.checkpoint" 2>&1)
t_nomatch "with --checkpoint given, no sidecar is missed" "no sidecar" "$out"

# log verify --json: one object with the facts of the text form, the same
# exit status (issue 18: --json on every command that prints a result).
cp "$L.checkpoint" "$D/real.jsonl.checkpoint"
txt=$(PC log verify "$D/real.jsonl" 2>/dev/null)
js=$(PC log verify "$D/real.jsonl" --json 2>/dev/null)
t_eq "--json, intact: exit 0 as without" 0 $?
t_ok "... stdout is one JSON object" jq -e 'type == "object"' <<<"$js"
read -r n c k <<<"$(sed -nE '1s/.*intact: ([0-9]+) records .*, ([0-9]+) checkpoints, signed by ([^ ]+)$/\1 \2 \3/p' <<<"$txt")"
t_eq "... ok, intact, the records, checkpoints and key the text names" "true intact $n $c $k" \
	"$(jq -r '"\(.ok) \(.result) \(.files[0].records) \(.files[0].checkpoints) \(.files[0].signed_by)"' <<<"$js")"
t_eq "... the sidecar: its records, not missing; no error" "7 false null" \
	"$(jq -r '"\(.files[0].checkpoint.records) \(.files[0].sidecar_missing) \(.error)"' <<<"$js")"
# (the two runs may fall either side of a second: "(0 s ago)", "(1 s ago)")
ago='s/\([^()]* ago\)/(AGE ago)/g'
t_eq "... its notes are the text's lines" "$(sed -E -e 's/^ +//' -e "$ago" <<<"$txt")" \
	"$(jq -r '.notes[]' <<<"$js" | sed -E "$ago")"
js=$(PC log verify "$D/nocp.jsonl" --json 2>/dev/null)
t_eq "--json, unsigned: exit 1 as without" 1 $?
t_eq "... not ok, unsigned, 7 records, the sidecar missing, no signer" "false unsigned 7 true null" \
	"$(jq -r '"\(.ok) \(.result) \(.files[0].records) \(.files[0].sidecar_missing) \(.files[0].signed_by)"' <<<"$js")"
t_eq "--allow-unsigned --json: exit 0, ok, still unsigned" "0 true unsigned" \
	"$(js=$(PC log verify --allow-unsigned "$D/nocp.jsonl" --json 2>/dev/null); echo "$? $(jq -r '"\(.ok) \(.result)"' <<<"$js")")"
sed '3s/"event.action":"[a-z-]*"/"event.action":"connect-x"/' "$D/real.jsonl" >"$D/edited.jsonl"
err=$(PC log verify "$D/edited.jsonl" 2>&1 >/dev/null)
t_eq "control: an edited record fails (exit 1)" 1 "$(PC log verify "$D/edited.jsonl" >/dev/null 2>&1; echo $?)"
js=$(PC log verify "$D/edited.jsonl" --json 2>/dev/null)
t_eq "--json, edited: exit 1 as without" 1 $?
t_eq "... not ok, failed" "false failed" "$(jq -r '"\(.ok) \(.result)"' <<<"$js")"
t_eq "... its error is the first error the text form gives" "${err#portcullis: log verify: }" \
	"$(jq -r .error <<<"$js")"
js=$(PC log verify "$D/absent.jsonl" --json 2>/dev/null)
t_eq "--json, a file that cannot be read: exit 3 as without" 3 $?
t_eq "... result error, saying why" "error true" \
	"$(jq -r '"\(.result) \(.error | test("absent.jsonl"))"' <<<"$js")"

t_done
