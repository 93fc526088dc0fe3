# Issue 32, findings 3 and 4: one history per log key at the witness.
# Someone who can write the log's directory (not the key), with a witness
# in a network namespace of its own and logd in another:
# - 3: the previous segment put back in place of the current one (current
#   segment, sidecar and .witnessed deleted): logd refuses to start,
#   naming the recovery, and the witness never lets the superseded origin
#   grow; putting the newest segment back is the recovery;
# - a witness that was away when a segment ended is caught up from the
#   previous segment's file, and cosigns the segment that continues it;
# - 4: everything deleted and one line planted beside the log
#   ({"event.sequence":1000,): logd refuses to start, the witness cosigns
#   no new origin; the documented recovery (--new-segment over the
#   witness's checkpoint) is cosigned; without a witness the new log's seq
#   does not come from the planted (unverified) file, nor from a forged line
#   in a broken file set aside by --new-segment.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "logd history" "$B/portcullis-logd" "$B/portcullis" "$B/tests/helpers/logd_client"
if [ "$(id -u)" != 0 ]; then
	t_skip "logd history" "needs root (network namespaces)"
	t_done
	exit
fi

lg_init logd-history
GWNS=$LAB_ID-gw
WNS=$LAB_ID-wit
WADDR=192.0.2.2:7380
WPID=
lh_cleanup() {
	[ -z "$WPID" ] || kill "$WPID" 2>/dev/null
	[ -z "$LOGD_PID" ] || kill "$LOGD_PID" 2>/dev/null
	wait 2>/dev/null
	_lab_ns_del "$GWNS"
	_lab_ns_del "$WNS"
	LOGD_PID=
	lg_cleanup
}
trap lh_cleanup EXIT
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
	lab_ns_check "$WNS"
	ip netns exec "$WNS" "$B/portcullis-logd" --witness --listen "$WADDR" --key "$D/wit/w.key" \
		--state "$D/wit/state" --log "$D/state/log.key.pub" 2>>"$D/witness.err" &
	WPID=$!
	lab_wait_until lab_in "$GWNS" bash -c "exec 3<>/dev/tcp/${WADDR%:*}/${WADDR#*:}" 2>/dev/null
}
witness_stop() { kill "$WPID" 2>/dev/null; wait "$WPID" 2>/dev/null; WPID=; }
# logd in its namespace; 0 once it serves, else its exit status (1 if it
# neither serves nor exits in time)
lh_start() { # args...
	rm -f "$D/run/logd.sock"
	lab_ns_check "$GWNS"
	ip netns exec "$GWNS" "$B/portcullis-logd" -c "$D/p.yaml" "$@" 2>>"$D/logd.err" &
	LOGD_PID=$!
	for _ in $(seq 150); do
		lab_unix_ready "$D/run/logd.sock" && kill -0 "$LOGD_PID" 2>/dev/null && return 0
		if ! kill -0 "$LOGD_PID" 2>/dev/null; then
			wait "$LOGD_PID"
			local rc=$?
			LOGD_PID=
			return "$rc"
		fi
		sleep 0.1
	done
	return 1
}
# .witnessed is "ORIGIN SIZE"
wit_is() { [ "$(sed -n '1p;2p' "$L.witnessed" 2>/dev/null | paste -sd' ')" = "$1 $2" ]; }
# the witness's own state for origin ORIGIN's seq: its size, or "none"
state_size() { # seg
	local f
	f=$(ls "$D/wit/state"/log-*-"$1".checkpoint 2>/dev/null | head -1)
	if [ -n "$f" ]; then sed -n 2p "$f"; else echo none; fi
}
# every origin the witness holds, as SEG:SIZE
state_segs() {
	local s
	for s in $(ls "$D/wit/state" | sed -n 's/^log-[0-9a-f]*-\([0-9]*\)\.checkpoint$/\1/p' | sort -n); do
		printf '%s:%s ' "$s" "$(state_size "$s")"
	done
}
# the log directory emptied (it stays the log user's)
log_clear() { find "$D/log" -mindepth 1 -delete; }
wconfig() {
	lg_config "checkpoint:" "  interval_ms: 100" "witness:" "  address: \"$WADDR\"" \
		"  key: $D/wit/w.key.pub"
}

lg_config
mkdir -p "$D/state"
PC log keygen --name gw1/portcullis-log >/dev/null
O=gw1/portcullis-log
witness_start
wconfig

# --- three segments, each cosigned: origins /1, /22, /33
lh_start
t_eq "logd starts with a witness" 0 $?
lg_client -n 20 -q >/dev/null
lab_wait_until wit_is "$O/1" 21
t_ok "the witness cosigned the first segment (21 records)" wit_is "$O/1" 21
logd_stop
lh_start --new-segment "test: second segment"
t_eq "a second segment begins" 0 $?
lg_client -n 10 -q >/dev/null
lab_wait_until wit_is "$O/22" 11
t_ok "the witness cosigned the second segment, a new origin" wit_is "$O/22" 11
t_match "... whose checkpoints name the first segment's last one as their previous" \
	'^previous 1 21 [A-Za-z0-9+/]{43}=$' "$(cat "$L.witnessed")"
logd_stop
lh_start --new-segment "test: third segment"
t_eq "a third segment begins" 0 $?
lg_client -n 5 -q >/dev/null
lab_wait_until wit_is "$O/33" 6
t_ok "the witness cosigned the third segment" wit_is "$O/33" 6
logd_stop
mkdir -p "$D/backup"
cp -a "$D/log/." "$D/backup/"
held22=$(state_size 22)

# --- 3: the second segment put back as the log
rm -f "$L" "$L.checkpoint" "$L.witnessed"
mv "$L".*Z-22 "$L"
: >"$D/logd.err"
lh_start
rc=$?
t_ok "logd refuses to start over the previous segment put back (exit $rc)" test "$rc" -ne 0
t_match "... saying the witness refuses the log, and naming the recovery" \
	"witness $WADDR refuses this log: the checkpoint of $O/22 .*refusing to start: put back the newest segment" \
	"$(cat "$D/logd.err")"
if [ -n "$LOGD_PID" ]; then # (the old logd served: give it records to fork with)
	lg_client -n 5 -q >/dev/null
	lab_wait_until wit_is "$O/22" 16
	logd_stop
fi
t_eq "the witness did not let the superseded origin /22 grow" "$held22" "$(state_size 22)"
t_match "... and said why" "$O/22: refused: a newer origin of this key \\($O/33\\)" "$(cat "$D/witness.err")"

# --- the recovery: the newest segment back from the backup
log_clear
cp -a "$D/backup/." "$D/log/"
lh_start
t_eq "with the newest segment back, logd starts" 0 $?
lg_client -n 5 -q >/dev/null
lab_wait_until wit_is "$O/33" 11
t_ok "... and the witness goes on cosigning it" wit_is "$O/33" 11
logd_stop

# --- the witness away while a segment ends: caught up from the file
witness_stop
lh_start
t_eq "logd starts without its witness" 0 $?
lg_client -n 5 -q >/dev/null
logd_stop
lh_start --new-segment "test: fourth segment, witness away"
t_eq "a fourth segment begins without the witness" 0 $?
logd_stop
t_ok "the witness holds the third segment at 11 of its 16 records" wit_is "$O/33" 11
witness_start
: >"$D/logd.err"
lh_start
t_eq "with the witness back, logd starts" 0 $?
lab_wait_until wit_is "$O/49" 1
t_ok "the witness cosigned the fourth segment ..." wit_is "$O/49" 1
t_eq "... after the third segment's last checkpoint, proven from its file" 16 "$(state_size 33)"
logd_stop
segs_before=$(state_segs)

# --- 4: everything deleted, one line planted beside the log
log_clear
printf '{"event.sequence":1000,\n' >"$L.planted"
: >"$D/logd.err"
lh_start
rc=$?
t_ok "logd refuses to start a log begun again over a history the witness holds (exit $rc)" test "$rc" -ne 0
t_match "... naming the recovery" 'does not extend the newest checkpoint it cosigned .*refusing to start' \
	"$(cat "$D/logd.err")"
if [ -n "$LOGD_PID" ]; then
	lg_client -n 5 -q >/dev/null
	lab_wait_until grep -q '/1001' "$L.witnessed"
	logd_stop
fi
t_eq "the witness cosigned nothing new for this key" "$segs_before" "$(state_segs)"

# --- the documented recovery when the newest segment is lost for good
# (docs/operations.md, "Witness refuses the log")
mkdir -p "$D/left"
mv "$L" "$L.checkpoint" "$D/left/" 2>/dev/null
cp "$(ls "$D/wit/state"/log-*-49.checkpoint)" "$L.witnessed"
chmod 644 "$L.witnessed"
lh_start --new-segment "test: the newest segment is lost"
t_eq "lost for good: --new-segment over the witness's checkpoint starts" 0 $?
lg_client -n 3 -q >/dev/null
lab_wait_until wit_is "$O/50" 4
t_ok "... and the witness cosigns the new segment, which continues its newest" wit_is "$O/50" 4
logd_stop

# --- seqs never come from files that do not verify
witness_stop
lg_config "checkpoint:" "  interval_ms: 100"
log_clear
printf '{"event.sequence":1000,\n' >"$L.planted"
lh_start
t_eq "without a witness, a new log starts beside the planted line" 0 $?
logd_stop
t_match "... at seq 1: the planted line's seq is not taken" '^\{"event.sequence":1,' "$(head -1 "$L")"
# a log that no longer verifies (a sealed record edited) with a forged
# line claiming seq 2^63-5 after it: --new-segment sets it aside, and the
# new segment's seq goes on after the file's lines, not after the claim
lh_start
lg_client -n 5 -q >/dev/null
logd_stop
python3 - "$L" <<'EOF'
import sys
f = sys.argv[1]
lines = open(f, encoding="utf-8").read().splitlines(True)
i = next(n for n, l in enumerate(lines) if n > 0 and l.startswith('{"event.sequence":'))
lines[i] = lines[i].replace('"@timestamp":"20', '"@timestamp":"19', 1)
rest = lines[i].split(",", 1)[1]
lines.append('{"event.sequence":9223372036854775803,' + rest)
open(f, "w", encoding="utf-8").writelines(lines)
EOF
lh_start --new-segment "test: broken"
t_eq "--new-segment over a broken file with a forged seq starts" 0 $?
t_match "... at a seq after the file's lines, not the forged one" '^\{"event.sequence":[0-9]{1,2},' "$(head -1 "$L")"
lg_client -n 10 -q >/dev/null
t_eq "... and goes on acknowledging records (seq is far from its end)" 0 $?
logd_stop
t_done
