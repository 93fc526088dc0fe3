# Shared by the fault tests that take logd's disk away (logd_disk.sh,
# logd_readonly.sh; sourced after guard_config): the log directory $L, and
# portcullis-logd started in a private mount namespace of its own, so that
# nothing outside the test sees the file system mounted there.
#
#   mountns_logd_start 'MOUNT' [ARG...]
#       MOUNT: sh commands run in the new namespace before logd starts, with
#       $1 the log directory and $6... the ARGs; a sleeping anchor process
#       ($LAB_DIR/anchor holds its pid) keeps the namespace. 0 once logd
#       accepts connections.
#   inns CMD...          run CMD in that mount namespace
#   log_lines            every record line of the log there, and of the files beside it
#   flow_records         allowed-flow records for $LAB_DIRECT4 among them

L=$GUARD_DIR/log
mkdir -m 0750 "$L"

mountns_logd_start() { # mount-commands [arg...]
	local mnt=$1
	shift
	lab_ns_check "$LAB_GW"
	unshare -m --propagation private sh -c "$mnt"' &&
		{ sleep 900 & echo $! >"$2"; } && exec ip netns exec "$3" "$4/portcullis-logd" -c "$5"' \
		sh "$L" "$LAB_DIR/anchor" "$LAB_GW" "$GUARD_BIN" "$GUARD_CONF" "$@" \
		2>>"$GUARD_DIR/logd.log" &
	echo $! >"$LAB_DIR/guard-logd.pid"
	for _ in $(seq 1 100); do
		lab_unix_ready "$GUARD_DIR/run/logd.sock" && [ -s "$LAB_DIR/anchor" ] && return 0
		sleep 0.05
	done
	return 1
}

inns() { nsenter -t "$(cat "$LAB_DIR/anchor")" -m "$@"; }

# The log and every file logd closed beside it: what a restart set aside
# (<log>.<time>-quarantine, and .N after it when two came in one second;
# docs/logd.md "Recovery") and rotated segments.
log_lines() { inns sh -c "cat $L/verdicts.jsonl $L/verdicts.jsonl.* 2>/dev/null"; }

flow_records() {
	log_lines | grep '"event.outcome":"success"' | grep -c "\"destination.ip\":\"$LAB_DIRECT4\""
}
