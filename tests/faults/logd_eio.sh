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
armed_logd_start() { # [ftruncate's errno once armed: EROFS (the default) or EIO]
	LD_PRELOAD=$PRELOAD PC_TEST_FAILSYNC=$TRIG PC_TEST_FAILSYNC_TRUNC=${1:-EROFS} guard_logd_start
}
gone() { [ -z "$(ps -o stat= -p "$1" 2>/dev/null | grep -v Z)" ]; } # exited (or a zombie)
flow_ok() { [ "$(guard_http_rc)" = 0 ]; }

# One fault, logd running under the shim: armed, the next batch's sync
# fails; what must hold after, then logd started again without it.
fault_round() { # name what-logd-says ERE-of-it
	local served0
	served0=$(guard_http_served)
	touch "$TRIG"
	t_eq "$1: the next flow is refused (curl 7)" 7 "$(guard_http_rc)"
	t_eq "$1: ... and the upstream served nothing more" "$served0" "$(guard_http_served)"
	t_match "$1: $2" "$3" "$(cat "$GUARD_DIR/logd.log")"
	t_ok "$1: logd stopped (it holds nothing on the broken file)" \
		lab_wait_until gone "$(cat "$LAB_DIR/guard-logd.pid")"
	t_ok "$1: the engine keeps running" kill -0 "$(guard_engine_pid)"
	t_eq "$1: still refused" 7 "$(guard_http_rc)"
	rm -f "$TRIG"
	guard_logd_start || t_fail "$1: logd started again" true
	t_ok "$1: service back: the flow is allowed again" lab_wait_until flow_ok
	t_ok "$1: the log verifies" guard_cli log verify
}

armed_logd_start || { t_fail "logd started" true; t_done; }
guard_engine_start || { t_fail "engine started" true; t_done; }
t_eq "baseline: the allowed flow works" 0 "$(guard_http_rc)"
fault_round "the sync fails, the file system read-only" \
	"logd says the file system went read-only, and the error it met" \
	"Input/output error: the log's file system went read-only; logd stops"

# The same disk, but one whose errors leave the file system writable and
# fail the take-back too (EIO): logd can neither keep nor undo the batch.
# It must say both errors and that it stops, not only the first.
guard_logd_stop
armed_logd_start EIO || t_fail "logd started with the take-back failing" true
t_ok "service with the second fault armed" lab_wait_until flow_ok
fault_round "sync and take-back fail" "logd names both errors and says it stops" \
	"Input/output error, and taking the batch back failed too: Input/output error: .*logd stops"
guard_stop
t_done
