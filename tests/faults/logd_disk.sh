# Fault: logd's disk full, with the engine in front and a
# sandbox making requests. The log directory is a small tmpfs in a private
# mount namespace of logd's own (nothing outside the test sees it). While
# logd cannot write, new flows are refused (no record, no connection) and
# both daemons say why; when space returns, service
# resumes, and the log verifies.
set -u
. "$PC_TOP/tests/lib/guard.sh"

guard_lab 1
guard_agent1 <<Y
  - cidr: $LAB_DIRECT4/32
    ports: [80]
Y
. "$PC_TOP/tests/faults/logd_mountns.bash"
chown portcullis-log:portcullis-log "$L"
mountns_logd_start 'mount -t tmpfs -o size=2m,mode=0750,uid=$(id -u portcullis-log),gid=$(id -g portcullis-log) tmpfs "$1"' ||
	{ t_fail "logd started on the tmpfs" true; t_done; }
echo "$(cat "$LAB_DIR/anchor")" >"$LAB_DIR/anchor.pid" # (lab_down kills it)
guard_engine_start || { t_fail "engine started" true; t_done; }

t_eq "baseline: the allowed flow works with the log on the small file system" 0 "$(guard_http_rc)"
t_ok "the log is on the tmpfs" inns test -s "$L/verdicts.jsonl"

# ---- disk full -------------------------------------------------------------------------
inns dd if=/dev/zero of="$L/filler" bs=4k count=100000 2>/dev/null
# (the log file's last page may still take a record or two: then it is full)
rcs=""
for i in $(seq 1 8); do rcs="$rcs $(guard_http_rc)"; done
t_match "disk full: new flows are refused (curl 7, at once)" "( 7){4}$" "$rcs"
t_diag "curl exit codes after the disk filled: $rcs"
served=$(guard_http_served)
recs=$(flow_records)
t_ok "every flow that got through has its record ($served served, $recs records)" test "$recs" -ge "$served"
t_match "logd says why" "No space left on device" "$(cat "$GUARD_DIR/logd.log")"
t_match "the engine says why" "logd did not take the records" "$(cat "$GUARD_DIR/engine.log")"
t_ok "both daemons keep running" kill -0 "$(guard_engine_pid)" "$(cat "$LAB_DIR/guard-logd.pid")"
inns rm -f "$L/filler"
t_eq "space back: the flow is allowed again" 0 "$(guard_http_rc)"
# (read-only: tests/faults/logd_readonly.sh — a tmpfs holding a file open
# for writing cannot be remounted read-only, the kernel says busy)

served=$(guard_http_served)
recs=$(flow_records)
t_ok "every flow the upstream served has its record ($served served, $recs records)" test "$recs" -ge "$served"
t_ok "the log verifies" inns ip netns exec "$LAB_GW" "$GUARD_BIN/portcullis" -c "$GUARD_CONF" log verify
guard_engine_stop
guard_logd_stop
t_done
