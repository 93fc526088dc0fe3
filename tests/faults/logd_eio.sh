# Fault: the log's file system fails under logd the way an ext4 error with
# errors=remount-ro fails it when the error aborts the journal under the
# write in flight: the batch's sync returns EIO, and taking the batch back
# (ftruncate) meets a file system already read-only, EROFS
# (tests/preload/faillogsync.c, LD_PRELOADed into portcullis-logd only).
# tests/faults/logd_readonly.sh, with a real ext4 image, meets this order
# only now and then (CI saw it once, where logd said no more than
# "Input/output error"). logd must say that the file system went read-only
# and stop, holding nothing; the engine refuses what it cannot record; once
# logd runs again without the fault, service resumes and the log verifies.
set -u
. "$PC_TOP/tests/lib/guard.sh"

guard_need_bins
PRELOAD=$GUARD_BIN/tests/preload/faillogsync.so
[ -f "$PRELOAD" ] || { echo "1..0 # SKIP $PRELOAD not built (make)"; exit 0; }
guard_lab 1
# acknowledged means synced: every batch meets the failing sync
sed -i 's/^log:$/log:\n  fsync_batch: true/' "$GUARD_CONF"
guard_agent1 <<Y
  - cidr: $LAB_DIRECT4/32
    ports: [80]
Y
TRIG=$LAB_DIR/failsync
LD_PRELOAD=$PRELOAD PC_TEST_FAILSYNC=$TRIG guard_logd_start || { t_fail "logd started" true; t_done; }
guard_engine_start || { t_fail "engine started" true; t_done; }
gone() { [ -z "$(ps -o stat= -p "$1" 2>/dev/null | grep -v Z)" ]; } # exited (or a zombie)
flow_ok() { [ "$(guard_http_rc)" = 0 ]; }

t_eq "baseline: the allowed flow works" 0 "$(guard_http_rc)"
served0=$(guard_http_served)
touch "$TRIG"
t_eq "the sync fails: the next flow is refused (curl 7)" 7 "$(guard_http_rc)"
t_eq "... and the upstream served nothing more" "$served0" "$(guard_http_served)"
t_match "logd says the file system went read-only, and the error it met" \
	"Input/output error: the log's file system went read-only; logd stops" \
	"$(cat "$GUARD_DIR/logd.log")"
t_ok "logd stopped (it holds nothing on the broken file system)" \
	lab_wait_until gone "$(cat "$LAB_DIR/guard-logd.pid")"
t_ok "the engine keeps running" kill -0 "$(guard_engine_pid)"
t_eq "still refused" 7 "$(guard_http_rc)"

rm -f "$TRIG"
guard_logd_start || t_fail "logd started again" true
t_ok "service back: the flow is allowed again" lab_wait_until flow_ok
t_ok "the log verifies" guard_cli log verify

# The same disk, but one whose errors leave the file system writable and
# fail the take-back too (EIO): logd can neither keep nor undo the batch.
# It must say both errors and that it stops, not only the first.
guard_logd_stop
LD_PRELOAD=$PRELOAD PC_TEST_FAILSYNC=$TRIG PC_TEST_FAILSYNC_TRUNC=EIO guard_logd_start ||
	t_fail "logd started with the take-back failing" true
t_ok "service back with the second fault armed" lab_wait_until flow_ok
served0=$(guard_http_served)
touch "$TRIG"
t_eq "sync and take-back fail: the next flow is refused (curl 7)" 7 "$(guard_http_rc)"
t_eq "... and the upstream served nothing more" "$served0" "$(guard_http_served)"
t_match "logd names both errors and says it stops" \
	"Input/output error, and taking the batch back failed too: Input/output error: .*logd stops" \
	"$(cat "$GUARD_DIR/logd.log")"
t_ok "logd stopped" lab_wait_until gone "$(cat "$LAB_DIR/guard-logd.pid")"
t_eq "still refused" 7 "$(guard_http_rc)"
rm -f "$TRIG"
guard_logd_start || t_fail "logd started again" true
t_ok "service back after the second fault" lab_wait_until flow_ok
t_ok "the log verifies after the second fault" guard_cli log verify
guard_stop
t_done
