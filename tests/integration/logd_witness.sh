# logd's witness: portcullis-logd --witness runs in a network namespace of
# its own (another host); logd, in a second one, sends it each durable
# checkpoint with a consistency proof and keeps the cosigned checkpoint in
# verdicts.jsonl.witnessed. Checked: log verify reports the cosignature; a
# log cut back to an in-file checkpoint with its sidecar rewritten is
# refused against the witnessed checkpoint; a restarted witness keeps its
# state; a second log under the same key (a split view) is refused by the
# witness (409) and logd refuses to start; with the witness down logd keeps
# acknowledging (log.witness.required: false) or refuses records once
# nothing was cosigned for log.witness.max_lag_ms (required: true). A
# rotation starts a new origin that the witness cosigns from 0, while the
# old origin stays append-only; verify compares the witnessed checkpoint
# within one origin and refuses an earlier segment put back in place.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "logd witness" "$B/portcullis-logd" "$B/portcullis" "$B/tests/helpers/logd_client"
if [ "$(id -u)" != 0 ]; then
	t_skip "logd witness" "needs root (network namespaces)"
	t_done
	exit
fi

lg_init logd-witness
GWNS=$LAB_ID-gw
WNS=$LAB_ID-wit
WADDR=192.0.2.2:7380
WPID=
wl_cleanup() {
	[ -z "$WPID" ] || kill "$WPID" 2>/dev/null
	[ -z "$LOGD_PID" ] || kill "$LOGD_PID" 2>/dev/null
	wait 2>/dev/null
	_lab_ns_del "$GWNS"
	_lab_ns_del "$WNS"
	LOGD_PID=
	lg_cleanup
}
trap wl_cleanup EXIT
lab_clean_stale
_lab_ns_add "$GWNS"
_lab_ns_add "$WNS"
ip -n "$GWNS" link add wv0 type veth peer name wv1 netns "$WNS"
lab_in "$GWNS" ip addr add 192.0.2.1/24 dev wv0
lab_in "$GWNS" ip link set wv0 up
lab_in "$WNS" ip addr add 192.0.2.2/24 dev wv1
lab_in "$WNS" ip link set wv1 up

mkdir -p "$D/wit"
witness_start() {
	lab_ns_check "$WNS" # ip itself, not lab_in: $! must be the daemon
	ip netns exec "$WNS" "$B/portcullis-logd" --witness --listen "$WADDR" --key "$D/wit/w.key" \
		--state "$D/wit/state" --log "$D/state/log.key.pub" 2>>"$D/witness.err" &
	WPID=$!
	lab_wait_until lab_in "$GWNS" bash -c "exec 3<>/dev/tcp/${WADDR%:*}/${WADDR#*:}" 2>/dev/null
}
witness_stop() { # its exit status (0: a clean stop on SIGTERM)
	local rc
	kill "$WPID" 2>/dev/null
	wait "$WPID" 2>/dev/null
	rc=$?
	WPID=
	return "$rc"
}
# logd in its namespace: the same as logd_start, run by ip netns exec
logd_ns_start() {
	rm -f "$D/run/logd.sock"
	lab_ns_check "$GWNS"
	ip netns exec "$GWNS" "$B/portcullis-logd" -c "$D/p.yaml" 2>>"$D/logd.err" &
	LOGD_PID=$!
	for _ in $(seq 100); do
		lab_unix_ready "$D/run/logd.sock" && kill -0 "$LOGD_PID" 2>/dev/null && return 0
		kill -0 "$LOGD_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
metrics() { PC metrics 2>/dev/null | grep "^portcullis_logd_witness_$1 " | cut -d' ' -f2; }
witnessed_size() { sed -n 2p "$L.witnessed" 2>/dev/null; }
wsize_is() { [ "$(witnessed_size)" = "$1" ]; }
refusing_is() { [ "$(metrics refusing)" = "$1" ]; }
wconfig() { # required max_lag_ms
	lg_config "checkpoint:" "  interval_ms: 100" "witness:" "  address: \"$WADDR\"" \
		"  key: $D/wit/w.key.pub" "  required: $1" "  max_lag_ms: $2"
}

# The log's key first (the witness is told which log it serves), then
# the witness, which creates its own key at its first start.
lg_config
mkdir -p "$D/state"
PC log keygen --name gw1/portcullis-log >/dev/null
t_eq "the log key exists" 0 $?
witness_start
t_ok "the witness listens in its own namespace" test -s "$D/wit/w.key.pub"
t_match "its public key is a cosignature/v1 key" '^[^+]+\+[0-9a-f]{8}\+B' "$(cat "$D/wit/w.key.pub")"

wconfig false 10000
t_ok "logd -t accepts the witness settings" "$B/portcullis-logd" -c "$D/p.yaml" -t
logd_ns_start
t_eq "logd starts with a witness" 0 $?
lg_client -n 300 -b 50 -q >/dev/null
t_eq "records are acknowledged" 0 $?
lab_wait_until wsize_is 301
t_eq "the witness cosigned the checkpoint for 301 records (300 and the segment record)" 301 "$(witnessed_size)"
out=$(PC log verify 2>&1)
t_eq "the log verifies" 0 $?
t_match "verify reports the cosignature, checked with log.witness.key" \
	'consistent with the witnessed checkpoint .*: 301 records, cosigned by [^ ]+\+[0-9a-f]{8} \(cosignature verified' "$out"
t_eq "metrics: the witness is reachable" 1 "$(metrics reachable)"
t_eq "metrics: the cosigned size" 301 "$(metrics cosigned_size)"
out=$(PC log status)
t_eq "log status: exit 0 with a reachable witness" 0 $?
t_match "log status names the witness, reachable, and what it cosigned" \
	'witness: 192.0.2.2:7380 \([^)]+\): reachable; cosigned 301 records .*not required' "$out"
# --json: the same facts as one object, the same exit status
js=$(PC log status --json)
t_eq "log status --json: exit 0 as without" 0 $?
read -r tree next unsealed <<<"$(sed -nE 's/^log: ([0-9]+) records in the current tree, next seq ([0-9]+), ([0-9]+) unsealed$/\1 \2 \3/p' <<<"$out")"
t_eq "... the tree, next seq and unsealed records the text says" "true $tree $next $unsealed" \
	"$(jq -r '"\(.ok) \(.log.tree_records) \(.log.next_seq) \(.log.unsealed)"' <<<"$js")"
wkey=$(sed -nE 's/^witness: [^ ]+ \(([^)]+)\).*/\1/p' <<<"$out")
t_eq "... the witness: address, key, reachable, cosigned, conflicts, required, refusing" \
	"192.0.2.2:7380 $wkey true 301 0 false false" \
	"$(jq -r '.witness | "\(.address) \(.key) \(.reachable) \(.cosigned_records) \(.conflicts) \(.required) \(.refusing)"' <<<"$js")"
t_match "... when it cosigned" '^20[0-9-]+T[0-9:.]+Z [0-9]+$' "$(jq -r '.witness | "\(.cosigned_time) \(.cosigned_age_s)"' <<<"$js")"

# a checkpoint of 301 records in the file: the cut-back target
cp300=$(grep -n '^{"checkpoint"' "$L" | tail -1 | cut -d: -f1)
lg_client -n 200 -b 50 -q >/dev/null
lab_wait_until wsize_is 501
t_eq "the witness cosigned 501 records, with a proof from 301" 501 "$(witnessed_size)"
t_nomatch "no conflict was reported" 'split view|refused|cut back' "$(cat "$D/logd.err")"

# prove --consistency writes a tlog-witness body the witness accepts
PC log prove --consistency 301 501 -o "$D/p300" 2>"$D/prove.err"
t_eq "log prove --consistency 301 501" 0 $?
t_eq "the proof starts with old 301" "old 301" "$(head -1 "$D/p300")"
code=$(lab_in "$GWNS" curl -s -o "$D/resp" -w '%{http_code}' --data-binary @"$D/p300" \
	"http://$WADDR/add-checkpoint")
t_eq "the witness answers a stale old size with 409" 409 "$code"
t_eq "... and the size it knows" 501 "$(cat "$D/resp")"

# Clients that connect and say nothing hold their own slot only: with 21
# of them open (each may wait IO_TIMEOUT_MS, 5 s), a request is still
# answered at once. A witness that served one connection at a time made
# it wait 20 x 5 s, and a log with witness.required stopped behind them.
# (from three other addresses, 7 each: one source holds at most 8)
for a in 3 4 5; do lab_in "$GWNS" ip addr add 192.0.2.$a/24 dev wv0; done
lab_in "$GWNS" python3 -c '
import socket, sys, time
h, p = sys.argv[1].split(":")
held = []
for a in (3, 4, 5):
    for _ in range(7):
        s = socket.socket(); s.bind(("192.0.2.%d" % a, 0)); s.connect((h, int(p))); held.append(s)
print("open", flush=True); time.sleep(60)' "$WADDR" >"$D/idle.out" 2>&1 &
idle=$!
lab_wait_until grep -q open "$D/idle.out"
code=$(lab_in "$GWNS" curl -s --max-time 4 -o "$D/resp" -w '%{http_code}' --data-binary @"$D/p300" \
	"http://$WADDR/add-checkpoint")
t_eq "with 21 idle connections open, the witness still answers at once (409)" 409 "$code"
kill "$idle" 2>/dev/null
wait "$idle" 2>/dev/null

# cut-back: stop logd, cut the file to the checkpoint line of 300
# records, rewrite the sidecar from it: without the witness this verifies
logd_stop
cp "$L" "$D/full.jsonl"
head -n "$cp300" "$D/full.jsonl" >"$L"
sed -n "${cp300}p" "$L" | python3 -c 'import json,sys; sys.stdout.write(json.loads(sys.stdin.read())["checkpoint"])' >"$L.checkpoint"
mv "$L.witnessed" "$D/witnessed"
out=$(PC log verify 2>&1)
t_eq "the cut-back file verifies on its own (what the witness is for)" 0 $?
t_match "... and says no witnessed checkpoint vouches for it" \
	'no witnessed checkpoint: .*\.witnessed is missing: the witness has cosigned none' "$out"
mv "$D/witnessed" "$L.witnessed"
out=$(PC log verify 2>&1)
t_eq "verify refuses the cut-back against the witnessed checkpoint (exit 1)" 1 $?
t_match "... and says records were cut off" 'holds 301 records but the witnessed checkpoint .* covers 501.*cut off' "$out"
out=$(PC log verify --against "$L.witnessed" "$L" 2>&1)
t_eq "log verify --against names the same" 1 $?
cp "$D/full.jsonl" "$L"
t_ok "the whole file verifies against it again" PC log verify

# a restarted witness keeps its state
witness_stop
t_eq "the witness stops on SIGTERM (exit 0)" 0 $?
witness_start
code=$(lab_in "$GWNS" curl -s -o "$D/resp" -w '%{http_code}' --data-binary @"$D/p300" \
	"http://$WADDR/add-checkpoint")
t_eq "a restarted witness still knows 501 records (409)" "409 501" "$code $(cat "$D/resp")"

# a split view: another log under the same key, from an empty file. Its
# origin is the first one's (seq 1 again), of which the witness holds 501
# records: logd refuses to start (issue 32: one history per key)
mkdir -p "$D/aside"
mv "$L" "$L.checkpoint" "$L.witnessed" "$D/aside/"
: >"$D/logd.err"
logd_ns_start
t_eq "a second log under the same key does not start" 1 $?
wait "$LOGD_PID"
t_eq "... exit 3" 3 $?
LOGD_PID=
t_match "logd says the witness refuses it, and the recovery" \
	'witness 192.0.2.2:7380 refuses this log: .*does not extend the newest checkpoint it cosigned.*refusing to start: put back the newest segment' \
	"$(cat "$D/logd.err")"
t_ok "the split log has no witnessed checkpoint" test ! -e "$L.witnessed"
rm -f "$L" "$L.checkpoint"
mv "$D/aside/"* "$(dirname "$L")/"

# Rotation with a witness: each segment is its own origin, "<key name>/<seq
# of its first record>", which the witness starts at size 0; an origin it
# has seen stays append-only (docs/logd.md "Checkpoints").
worigin() { sed -n 1p "$L.witnessed" 2>/dev/null; }
wis() { [ "$(worigin) $(witnessed_size)" = "$1 $2" ]; }
first_seq() { head -1 "$1" | grep -o '^{"event.sequence":[0-9]*' | cut -d: -f2; }
sidecar_from() { # the sidecar rewritten from FILE's last checkpoint
	sed -n "$(grep -n '^{"checkpoint"' "$1" | tail -1 | cut -d: -f1)p" "$1" |
		python3 -c 'import json,sys; sys.stdout.write(json.loads(sys.stdin.read())["checkpoint"])' >"$L.checkpoint"
}
sidecar_from "$L" # the cut-back above left it at 301 records
: >"$D/logd.err"
: >"$D/witness.err"
logd_ns_start
t_eq "logd resumes the first segment" 0 $?
lg_client -n 20 -b 10 -q >/dev/null
seg1=gw1/portcullis-log/$(first_seq "$L")
n1=$(($(grep -c '^{"event.sequence"' "$L")))
lab_wait_until wis "$seg1" "$n1"
t_eq "the first segment's checkpoints carry the origin <key name>/<its first seq>" \
	"$seg1 $n1" "$(worigin) $(witnessed_size)"
cp "$L.witnessed" "$D/seg1.witnessed"
mv "$L" "$L.1"
kill -HUP "$LOGD_PID"
lab_wait_until test -s "$L"
seg2=gw1/portcullis-log/$(first_seq "$L")
t_eq "the new segment starts after the last seq of the first" "$(($(first_seq "$L.1") + n1))" \
	"${seg2##*/}"
lg_client -n 30 -b 10 -q >/dev/null
t_eq "records are acknowledged after the rotation" 0 $?
lab_wait_until wis "$seg2" 31
t_eq "the witness cosigned the new segment under its own origin (31 records)" "$seg2 31" \
	"$(worigin) $(witnessed_size)"
t_nomatch "logd saw no conflict after the rotation" 'split view|refused|cut back|has cosigned' \
	"$(cat "$D/logd.err")"
t_eq "metrics: no conflict" 0 "$(metrics conflicts_total)"
t_nomatch "the witness refused nothing" 'split view|not consistent' "$(cat "$D/witness.err")"
cpn=$(grep -n '^{"checkpoint"' "$L" | head -2 | tail -1 | cut -d: -f1)
cpsize=$(sed -n "${cpn}p" "$L" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["checkpoint"].split("\n")[1])')
lg_client -n 20 -b 10 -q >/dev/null
lab_wait_until wis "$seg2" 51
t_eq "... and extends it (51 records)" "$seg2 51" "$(worigin) $(witnessed_size)"
code=$(lab_in "$GWNS" curl -s -o "$D/resp" -w '%{http_code}' --data-binary @"$D/p300" \
	"http://$WADDR/add-checkpoint")
t_eq "the first origin is still append-only at the witness: a stale size is refused (409)" \
	"409 $n1" "$code $(cat "$D/resp")"
logd_stop
out=$(PC log verify 2>&1)
t_eq "the new segment verifies" 0 $?
t_match "... against the witnessed checkpoint of its own origin" \
	'consistent with the witnessed checkpoint .*: 51 records, cosigned by [^ ]+ \(cosignature verified' "$out"
out=$(PC log verify --against "$D/seg1.witnessed" "$L.1" 2>&1)
t_eq "the first segment verifies against what the witness cosigned for it" 0 $?
t_match "... all of it" "consistent with the checkpoint $D/seg1.witnessed: $n1 records" "$out"
t_ok "both files verify as one chain" PC log verify "$L.1" "$L"
out=$(PC log verify --against "$D/seg1.witnessed" "$L" 2>&1)
t_eq "a checkpoint of another origin is not taken as the new segment's" 1 $?
t_match "... and verify says so" "is of origin $seg1 but this file's checkpoints are of $seg2" "$out"
# just after a rotation the witnessed checkpoint is still the old segment's
cp "$L.witnessed" "$D/seg2.witnessed"
cp "$D/seg1.witnessed" "$L.witnessed"
out=$(PC log verify 2>&1)
t_eq "an earlier segment's witnessed checkpoint does not fail the new one" 0 $?
t_match "... and is named as not compared" 'not compared with the witnessed checkpoint .*earlier segment' "$out"
cp "$D/seg2.witnessed" "$L.witnessed"
# an earlier segment put back in the log's place
mv "$L" "$D/seg2.jsonl"
cp "$L.1" "$L"
sidecar_from "$L"
out=$(PC log verify 2>&1)
t_eq "the old segment in the log's place is refused (the witness saw a later one)" 1 $?
t_match "... as a rollback" 'later segment was cosigned.*rollback' "$out"
# a rollback within the new origin: cut back to an in-file checkpoint
head -n "$cpn" "$D/seg2.jsonl" >"$L"
sed -n "${cpn}p" "$L" | python3 -c 'import json,sys; sys.stdout.write(json.loads(sys.stdin.read())["checkpoint"])' >"$L.checkpoint"
out=$(PC log verify 2>&1)
t_eq "a cut-back of the new segment is refused against its witnessed checkpoint" 1 $?
t_match "... records were cut off" "holds $cpsize records but the witnessed checkpoint .* covers 51.*cut off" "$out"
mv "$D/seg2.jsonl" "$L"
sidecar_from "$L"
t_ok "the whole new segment verifies again" PC log verify

# witness down, not required: logd keeps acknowledging and says so
witness_stop
: >"$D/logd.err"
logd_ns_start
lg_client -n 200 -b 50 -q >/dev/null
t_eq "witness down, required: false: records are acknowledged" 0 $?
lab_wait_until grep -q 'keeps acknowledging' "$D/logd.err"
t_match "logd says it works without the witness" 'witness .*logd keeps acknowledging' "$(cat "$D/logd.err")"
t_eq "metrics: the witness is unreachable" 0 "$(metrics reachable)"
t_eq "metrics: not refusing" 0 "$(metrics refusing)"
out=$(PC log status)
t_eq "log status: exit 1 with the witness down" 1 $?
t_match "log status says it is not reachable and logd keeps working" \
	'NOT reachable.*logd keeps acknowledging records without it' "$out"
js=$(PC log status --json)
t_eq "log status --json: exit 1 as without" 1 $?
t_eq "... not ok, the witness not reachable, records not refused" "false false false" \
	"$(jq -r '"\(.ok) \(.witness.reachable) \(.witness.refusing)"' <<<"$js")"
logd_stop

# witness down, required: records are refused once nothing was cosigned
# for max_lag_ms; they are acknowledged again once the witness is back
wconfig true 1000
logd_ns_start
t_eq "logd starts with a required witness that is down" 0 $?
sleep 1.5
lg_client -n 10 -b 10 -t 500 -q >/dev/null 2>&1
t_eq "required: true and nothing cosigned for 1 s: records are refused" 1 $?
t_eq "metrics: refusing" 1 "$(metrics refusing)"
t_match "log status says records are refused" 'REFUSING records' "$(PC log status)"
t_eq "log status --json says so too (required, refusing)" "true true" \
	"$(PC log status --json | jq -r '"\(.witness.required) \(.witness.refusing)"')"
t_match "logd says why" 'no witness cosigned a checkpoint recently' "$(cat "$D/logd.err")"
witness_start
lab_wait_until refusing_is 0
ok=1
for _ in $(seq 30); do
	lg_client -n 10 -b 10 -q >/dev/null 2>&1 && ok=0 && break
	sleep 0.2
done
t_eq "the witness back: records are acknowledged again" 0 "$ok"
logd_stop_ok
witness_stop
t_eq "the witness stops cleanly" 0 $?

t_done
