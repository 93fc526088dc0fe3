# The daemons under valgrind (memcheck): portcullis-logd, portcullisd and
# portcullis-vault (its workers too) run the lab's traffic — a secret-bound
# request through the vault, an allowed flow, refused flows and DNS, a
# reload that cuts an open flow — then stop cleanly.
# Each must exit 0 with no memcheck error (--error-exitcode=99; definite
# leaks count as errors). Run by `make valgrind`, which CI runs after
# `make test` (not by tests/run: a .bash file) — see docs/security.md.
set -u
export PC_VALGRIND=1 # (lab_start_timeout: daemons under memcheck start slowly)
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

command -v valgrind >/dev/null || { echo "1..0 # SKIP valgrind not installed"; exit 0; }
vault_need_bins
lab_up 2
vault_config
vault_secrets
VG="valgrind --tool=memcheck --vgdb=no --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
	--show-leak-kinds=definite --track-fds=no --num-callers=30"
# The vault's workers (exec'd by its monitor) run under memcheck too
# (--trace-children; a log per process): valgrind cannot run a seccomp
# filter, so they serve unfiltered on valgrind when this variable says it is
# this test (vault/seccomp.c); vault_privsep shows the filter.
export PORTCULLIS_VAULT_TEST_VALGRIND=1
start() { # name binary [valgrind options]: under valgrind in the gateway namespace; pid in $LAB_DIR/vg-NAME.pid
	local d=$1 b=$2
	shift 2
	lab_ns_check "$LAB_GW"
	# a log per process, in a directory the vault user (its workers, which
	# valgrind starts after the monitor dropped root) can write
	mkdir -p "$LAB_DIR/vg-$d"
	[ "$d" != vault ] || chown portcullis-vault: "$LAB_DIR/vg-$d"
	ip netns exec "$LAB_GW" $VG --log-file="$LAB_DIR/vg-$d/log.%p" "$@" "$V_BIN/$b" \
		-c "$V/portcullis.yaml" 2>>"$LAB_DIR/vg-$d.stderr" &
	echo $! >"$LAB_DIR/vg-$d.pid"
}
ready() { # name command...: wait (bounded by lab_start_timeout) until it succeeds
	local d=$1
	shift
	lab_wait_until -p "$(cat "$LAB_DIR/vg-$d.pid")" "$@" && return 0
	t_fail "$d came up under valgrind" true
	return 1
}
start logd portcullis-logd
ready logd lab_unix_ready "$V/run/logd.sock"
start vault portcullis-vault --trace-children=yes
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

# A reload that takes paste.evil.test away while a connection to it is open:
# the engine re-judges its allowed flows and deletes the one it no longer
# allows from conntrack (the netlink messages a reload sends, under memcheck).
cat >"$LAB_DIR/held.py" <<'EOF'
import os, socket, sys, time
s = socket.create_connection((sys.argv[1], 443), timeout=30)
print("connected", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
try:
    s.sendall(b"x" * 100)
    print("after", "eof" if not s.recv(100) else "data", flush=True)
except Exception as e:
    print("after", type(e).__name__, flush=True)
EOF
lab_sb 1 python3 "$LAB_DIR/held.py" $LAB_PASTE4 "$LAB_DIR/go" >"$LAB_DIR/held.out" 2>&1 &
held=$!
lab_wait_until -p $held grep -q connected "$LAB_DIR/held.out"
sed -i '/host: paste.evil.test/,+1d' "$V/rules.d/agents.yaml"
t_ok "a reload that takes paste.evil.test away (under valgrind)" \
	lab_gw "$V_BIN/portcullis" -c "$V/portcullis.yaml" reload
touch "$LAB_DIR/go"
wait $held
t_eq "the open connection to it (held for its ClientHello, then not TLS) is cut" \
	"connected|after ConnectionResetError" "$(tr '\n' '|' <"$LAB_DIR/held.out" | sed 's/|$//')"
t_match "... refused on its address under the new policy, and recorded" \
	"\"event.reason\":\"names resolved to this address are not allowed on this port\".*\"destination.ip\":\"$LAB_PASTE4\"" \
	"$(cat "$V/log/verdicts.jsonl")"
t_fail "a new request to it is refused" \
	lab_sb 1 curl -sS --max-time 5 --cacert "$LAB_CA" https://paste.evil.test/

for d in engine vault logd; do
	pid=$(cat "$LAB_DIR/vg-$d.pid")
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	t_eq "$d stops cleanly under memcheck (exit 0, not 99)" 0 "$rc"
	sum=$(grep -h "ERROR SUMMARY" "$LAB_DIR"/vg-$d/log.* 2>/dev/null | sed 's/^==[0-9]*== //' | sort -u)
	t_diag "$d: $sum"
	t_nomatch "$d: memcheck found no error" "ERROR SUMMARY: [1-9]" "$sum"
	[ "$rc" = 0 ] || grep -hA12 -E "Invalid|uninitialised|definitely lost" "$LAB_DIR"/vg-$d/log.* | head -40 | sed 's/^/# /'
done
# the workers (agent-1's served the requests above) ran under memcheck,
# and each ended with its report (not killed at the monitor's deadline)
wlogs=$(grep -l -- "-W agent-" "$LAB_DIR"/vg-vault/log.* 2>/dev/null)
t_ok "a worker ran under memcheck" test -n "$wlogs"
for f in $wlogs; do
	t_ok "$(grep -o -- '-W agent-[0-9]*' "$f" | head -1): memcheck's summary at its exit" \
		grep -q "ERROR SUMMARY" "$f"
done
t_ok "the log verifies" "$V_BIN/portcullis" -c "$V/portcullis.yaml" log verify
t_done
