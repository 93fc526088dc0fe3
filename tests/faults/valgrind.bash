# The daemons under valgrind (memcheck): portcullis-logd, portcullisd and
# portcullis-vault run the lab's traffic — a secret-bound request through
# the vault, an allowed flow, refused flows and DNS — then stop cleanly.
# Each must exit 0 with no memcheck error (--error-exitcode=99; definite
# leaks count as errors). Run by `make valgrind` (not by tests/run: a .bash
# file) until its findings are fixed — see docs/security.md.
set -u
export PC_VALGRIND=1 # (lab_start_timeout: daemons under memcheck start slowly)
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

command -v valgrind >/dev/null || { echo "1..0 # SKIP valgrind not installed"; exit 0; }
vault_need_bins
lab_up 2
vault_config
vault_secrets
VG="valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
	--show-leak-kinds=definite --track-fds=no --num-callers=30"
start() { # name binary: under valgrind in the gateway namespace; pid in $LAB_DIR/vg-NAME.pid
	lab_ns_check "$LAB_GW"
	ip netns exec "$LAB_GW" $VG --log-file="$LAB_DIR/vg-$1.log" "$V_BIN/$2" -c "$V/portcullis.yaml" \
		2>>"$LAB_DIR/vg-$1.stderr" &
	echo $! >"$LAB_DIR/vg-$1.pid"
}
ready() { # name command...: wait (bounded by lab_start_timeout) until it succeeds
	local d=$1
	shift
	lab_wait_until -p "$(cat "$LAB_DIR/vg-$d.pid")" "$@" && return 0
	t_fail "$d came up under valgrind" true
	return 1
}
start logd portcullis-logd
ready logd test -S "$V/run/logd.sock"
start vault portcullis-vault
ready vault lab_gw bash -c "ss -Hltn 'sport = :$V_PORT' | grep -q ."
start engine portcullisd
ready engine lab_gw "$V_BIN/portcullis" -c "$V/portcullis.yaml" status --json

t_match "a secret-bound request through the vault (under valgrind)" "auth=Bearer $V_PH_GH" \
	"$(vcurl 1 --max-time 30 https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH")"
t_match "an allowed flow on a host entry" "^paste.evil.test ok" \
	"$(lab_sb 1 curl -sS --max-time 30 --cacert "$LAB_CA" https://paste.evil.test/)"
t_fail "a refused flow" lab_sb 1 curl -s --max-time 5 -k https://$LAB_DIRECT4/
t_match "a refused name" "REFUSED" "$(lab_sb 1 dig +time=5 +tries=1 cdn-evil.test)"
t_match "a placeholder refusal in the vault" "^403" \
	"$(vcurl 1 -o /dev/null -w '%{http_code}' --max-time 30 https://pypi.test/echo -H "Authorization: Bearer $V_PH_GH")"

for d in engine vault logd; do
	pid=$(cat "$LAB_DIR/vg-$d.pid")
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	t_eq "$d stops cleanly under memcheck (exit 0, not 99)" 0 "$rc"
	sum=$(grep -h "ERROR SUMMARY" "$LAB_DIR"/vg-$d.log* 2>/dev/null | sed 's/^==[0-9]*== //' | sort -u)
	t_diag "$d: $sum"
	t_nomatch "$d: memcheck found no error" "ERROR SUMMARY: [1-9]" "$sum"
	[ "$rc" = 0 ] || grep -hA12 -E "Invalid|uninitialised|definitely lost" "$LAB_DIR"/vg-$d.log* | head -40 | sed 's/^/# /'
done
t_ok "the log verifies" "$V_BIN/portcullis" -c "$V/portcullis.yaml" log verify
t_done
