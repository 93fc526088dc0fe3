# logd crash safety: portcullis-logd is killed with SIGKILL while a client
# streams records; it restarts on the same file, the file verifies, every
# record the client saw acknowledged is in it, and seq continues. Both fsync
# policies (at checkpoints, the default, and log.fsync_batch) keep every
# acknowledged record across a kill, because acknowledgements follow
# write(2); those after the last checkpoint are set aside at the restart
# (no signature vouches for them) into a quarantine file a record names. A
# line left half-written is cut at restart, never acknowledged.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_init logd-crash
config() { lg_config "fsync_batch: $1"; }
last_seq() { # the last record's seq in the file
	grep '^{"event.sequence":' "$D/log/verdicts.jsonl" | tail -1 | sed 's/^{"event.sequence":\([0-9]*\),.*/\1/'
}

for mode in false true; do
	config "$mode"
	rm -rf "$D/log" "$D/run"
	logd_start
	t_eq "fsync_batch=$mode: logd starts" 0 $?
	for round in 1 2 3; do
		lg_client -n 2000000 -b 50 >"$D/acked" 2>&1 &
		client=$!
		sleep 0.$((3 + round * 2))
		kill -9 "$LOGD_PID"
		wait "$LOGD_PID" 2>/dev/null
		LOGD_PID=
		wait "$client"
		crc=$?
		acked=$(grep '^acked' "$D/acked" | tail -1 | cut -d' ' -f2)
		t_eq "fsync_batch=$mode round $round: the client saw logd die (flush failed)" 1 "$crc"
		t_match "fsync_batch=$mode round $round: records were acknowledged before the kill" \
			'^[0-9]+$' "$acked"
		logd_start
		t_eq "fsync_batch=$mode round $round: logd restarts on the killed file" 0 $?
		last=$(last_seq)
		# Acknowledged records the last checkpoint did not cover are set
		# aside at the restart (nothing vouches that logd wrote them),
		# into a quarantine file a record of the log names: kept, once.
		kept=$(cat "$L" "$D"/log/verdicts.jsonl.*-quarantine 2>/dev/null | grep -c "^{\"event.sequence\":${acked:-x},")
		t_eq "fsync_batch=$mode round $round: acknowledged seq $acked is kept, in the log or set aside" \
			1 "$kept"
		if ! grep -q "^{\"event.sequence\":${acked:-x}," "$L"; then
			q=$(grep -l "^{\"event.sequence\":${acked:-x}," "$D"/log/verdicts.jsonl.*-quarantine)
			t_match "fsync_batch=$mode round $round: a record of the log names the quarantine file" \
				"\"portcullis.quarantine.file\":\"${q##*/}\"" "$(cat "$L")"
		else # (the kill fell after a checkpoint: one assertion either way)
			t_eq "fsync_batch=$mode round $round: seq $acked stayed in the log, no quarantine file has it" \
				0 "$(cat "$D"/log/verdicts.jsonl.*-quarantine 2>/dev/null | grep -c "^{\"event.sequence\":${acked:-x},")"
		fi
		out=$(PC log verify 2>&1)
		t_eq "fsync_batch=$mode round $round: the file verifies" 0 $?
		next=$(lg_client -n 1 | cut -d' ' -f2)
		t_eq "fsync_batch=$mode round $round: seq continues after the restart" \
			$((last + 1)) "$next"
	done
	logd_stop
done

# A half-written last line (what a kill in the middle of write(2) leaves):
# cut at restart and reported, the rest continues.
printf '{"event.sequence":999999,"@timestamp":"2026-' >>"$D/log/verdicts.jsonl"
t_fail "verify sees the torn line" PC log verify
logd_start
t_eq "logd restarts on a torn last line" 0 $?
t_match "logd says it removed the incomplete line" "ended in an incomplete line of [0-9]+ bytes .*removed" \
	"$(cat "$D/logd.err")"
t_ok "the file verifies after the repair" PC log verify

t_done
