# Log files change without breaking verification: rotation by size (each
# new file's log-segment record links to the last checkpoint of the one
# before), logrotate's rename + SIGHUP, a SIGHUP without a rename (same
# file goes on), and the operator's --new-segment for a file that no longer
# verifies (refused without it, naming the line). `log verify FILE...`
# checks that the files form one chain and names a missing one.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_init logd-rotate
config() { lg_config "rotate_bytes: $1" checkpoint: "  records: 10"; }
send() { lg_client -q "$@"; }

# --- by size ---
config 20000
logd_start
t_eq "logd starts" 0 $?
acked=$(send -n 300 -b 25)
logd_stop
n=$(ls "$D/log" | grep -c '^verdicts\.jsonl\.[0-9TZ]*-[0-9]*$')
t_ok "the file was rotated by size ($n files set aside)" test "$n" -ge 5
t_eq "the 300 records are in the files" 300 "$(cat "$D"/log/verdicts.jsonl* | grep -c '"event.action":"connect"')"
last=$(grep '^{"event.sequence"' "$L" | tail -1 | sed 's/{"event.sequence":\([0-9]*\),.*/\1/')
t_eq "one log-segment record more per file" $((301 + n)) "$last"
t_match "the client's last record was acknowledged" "^acked (${last}|$((last - 1)))$" "$acked"
first=$(ls "$D/log"/verdicts.jsonl.*-* | head -1)
t_ok "a rotated file verifies alone" PC log verify "$first"
t_match "a new file starts with a log-segment record naming the old file and its last checkpoint" \
	'"event.action":"log-segment".*"event.reason":"rotation: the file reached log.rotate_bytes".*"portcullis.log.previous.file":"verdicts\.jsonl\.[0-9TZ]+-[0-9]+","portcullis.log.previous.checkpoint":"[^"]*\\n[0-9]+\\n' \
	"$(head -1 "$L")"
out=$(PC log verify "$D"/log/verdicts.jsonl* 2>&1)
t_eq "all the files verify as one chain (given in any order)" 0 $?
t_match "the chain covers every seq" "files form one unbroken chain, seq 1-$last" "$out"
second=$(ls "$D/log"/verdicts.jsonl.*-* | sed -n 2p)
mv "$second" "$D/missing"
out=$(PC log verify "$D"/log/verdicts.jsonl.*-* "$L" 2>&1)
t_eq "a missing file breaks the chain" 1 $?
t_match "and is named" "does not continue .*: a file is missing in between" "$out"
mv "$D/missing" "$second"

# --- logrotate: rename, then SIGHUP; and SIGHUP alone ---
rm -f "$D"/log/verdicts.jsonl.*
config 0
logd_start
send -n 20 >/dev/null
kill -HUP "$LOGD_PID"
sleep 0.3
send -n 5 >/dev/null
t_eq "SIGHUP without a rename keeps appending to the same segment" 1 \
	"$(grep -c '"event.action":"log-segment"' "$L")"
mv "$L" "$L.1"
kill -HUP "$LOGD_PID"
for _ in $(seq 50); do [ -s "$L" ] && break; sleep 0.1; done
t_match "after logrotate's rename and SIGHUP, logd starts a new file" '"event.reason":"reopened on SIGHUP' \
	"$(head -1 "$L" 2>/dev/null)"
send -n 10 >/dev/null
logd_stop
t_match "the renamed file ends with its final checkpoint" '^\{"checkpoint":' "$(tail -1 "$L.1")"
t_ok "the renamed and the new file verify as one chain" PC log verify "$L.1" "$L"

# --- a file that no longer verifies: refused, unless the operator says why ---
sed -i '5s/host/hxst/' "$L"
logd_start
t_eq "logd refuses to append to a file that does not verify" 1 $?
t_match "and names the line" "verdicts.jsonl: line 5: record seq [0-9]+ was edited.*--new-segment" \
	"$(cat "$D/logd.err")"
logd_start --new-segment "disk restored from backup, ticket 4711"
t_eq "with --new-segment REASON it starts" 0 $?
t_ok "the damaged file was set aside as it was" ls "$D"/log/verdicts.jsonl.*-broken
t_match "the new segment says why" '"event.action":"log-segment".*disk restored from backup, ticket 4711.*line 5' \
	"$(head -1 "$L")"
send -n 3 >/dev/null
logd_stop
t_ok "the new file verifies" PC log verify
t_fail "the set-aside file still shows the damage" PC log verify "$D"/log/verdicts.jsonl.*-broken

# --- key rotation (docs/logd.md): stop, new key, --new-segment ---
PC log keygen --force --name gw2/portcullis-log >/dev/null
oldpub=$(ls "$D"/state/log.key.pub.* | head -1)
logd_start
t_eq "with a new key, logd refuses the file the old key signed" 1 $?
logd_start --new-segment "key rotation"
t_eq "--new-segment after a key rotation starts" 0 $?
aside=$(ls -t "$D"/log/verdicts.jsonl.*-[0-9]* | head -1)
t_match "the old file is set aside as sound (named by its first seq, not broken)" \
	'verdicts\.jsonl\.[0-9TZ]+-[0-9]+$' "$aside"
t_match "the new segment names the earlier key and carries the new one" \
	'"event.reason":"key rotation; the previous file is signed by the earlier key [^"]+/portcullis-log\+[0-9a-f]{8}".*"portcullis.log.key":"gw2/portcullis-log\+' \
	"$(head -1 "$L")"
send -n 2 >/dev/null
logd_stop
t_ok "the old file verifies with the old public key" PC log verify "$aside" --key "$oldpub"
t_ok "the new file verifies with the new key" PC log verify

t_done
