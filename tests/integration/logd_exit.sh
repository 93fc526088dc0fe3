# portcullis-logd's exit status when its final checkpoint cannot be
# written (docs/man/portcullis-logd.8, "EXIT STATUS": 3, "a write to the
# log failed"). It exited 253 once: main returned logw_close's negative
# PC_E* code. The seal is made to fail for real: records go in with no
# checkpoint due, then the running daemon's file size limit (prlimit
# RLIMIT_FSIZE, which logd meets as a write error: it ignores SIGXFSZ) is
# set to the file's size (by logd's own user), so the closing checkpoint
# cannot be appended.
# A control run without the limit stops with 0.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "logd exit status" "$B/portcullis-logd" "$B/tests/helpers/logd_client"
command -v prlimit >/dev/null || { t_skip "logd exit status" "prlimit not installed"; t_done; exit; }
lg_init logd-exit
# no checkpoint before the shutdown: it is the final one that must fail
lg_config "checkpoint:" "  records: 1000000" "  interval_ms: 3600000"

# ---- control: records in, SIGTERM, sealed, 0 ------------------------------------
logd_start
t_eq "logd starts" 0 $?
t_match "records are acknowledged" "^acked [0-9]+$" "$(lg_client -n 5 -b 5 -q)"
logd_stop
t_eq "control: the final checkpoint is written and logd exits 0" 0 $?
t_ok "control: the file verifies" PC log verify

# ---- the final seal fails: 3, and why ---------------------------------------------
logd_start
t_eq "logd starts again on the same file" 0 $?
t_match "more records are acknowledged" "^acked [0-9]+$" "$(lg_client -n 5 -b 5 -q)"
size=$(stat -c %s "$L")
# as logd's own user (uid and gid match: no CAP_SYS_RESOURCE needed)
u=$(ps -o user= -p "$LOGD_PID")
t_ok "the file may grow no further (prlimit --fsize=$size on logd, as $u)" \
	setpriv --reuid="$u" --regid="$(ps -o group= -p "$LOGD_PID")" --clear-groups \
	prlimit --pid "$LOGD_PID" --fsize="$size"
: >"$D/logd.err.before"
cp "$D/logd.err" "$D/logd.err.before"
logd_stop
rc=$?
t_eq "the final checkpoint cannot be written: logd exits 3, as documented" 3 "$rc"
t_match "logd says why" "File too large" "$(diff "$D/logd.err.before" "$D/logd.err")"
t_eq "the file did not grow" "$size" "$(stat -c %s "$L")"

t_done
