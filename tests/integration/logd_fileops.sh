# The log user against the log (issue 32, deliverable 6): seeded sequences
# of file operations by someone who can write the log's directory but not
# the key — truncate (mid-line too), delete, rename, an earlier copy of any
# file put back, the sidecar or .witnessed edited, files planted beside the
# log, rotation (mv + SIGHUP), logd killed (-9) and started at any step,
# records appended through the real socket — with a witness in a network
# namespace of its own. After each step the oracle (logd_fileops.py) holds
# `log verify` (every segment, the witness key) and logd to its own model:
# a record that is acknowledged and covered by a checkpoint the witness
# cosigned either verifies where it was, or verify objects, or logd
# refuses to start; verify never claims consistency with a .witnessed the
# witness did not return; the witness never cosigns two trees of one key.
# A violation is shrunk to a minimal sequence and printed.
#
# Seeded and bounded: seed $PC_FILEOPS_SEED (32), $PC_FILEOPS_COUNT
# sequences (24) of $PC_FILEOPS_LEN operations (14); PC_SOAK=1 (make soak):
# 150 sequences from a random seed, printed. PC_FILEOPS_SEQS=N,N replays
# those sequences of the seed. PC_FILEOPS_BIN=DIR takes portcullis-logd,
# portcullis and tests/helpers/logd_client from DIR (a build of an older
# commit, to show what the oracle finds there).
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"
B=${PC_FILEOPS_BIN:-$B}

lg_need_bins "logd file operations" "$B/portcullis-logd" "$B/portcullis" "$B/tests/helpers/logd_client"
if [ "$(id -u)" != 0 ]; then
	t_skip "logd file operations" "needs root (network namespaces)"
	t_done
	exit
fi

if [ -n "${PC_SOAK:-}" ]; then
	SEED=${PC_FILEOPS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
	COUNT=${PC_FILEOPS_COUNT:-150}
else
	SEED=${PC_FILEOPS_SEED:-32}
	COUNT=${PC_FILEOPS_COUNT:-24}
fi
# PC_FILEOPS_SEQS=N,N: only those sequences of the seed, each step traced
[ -z "${PC_FILEOPS_SEQS:-}" ] || COUNT=$(($(tr -cd , <<<"$PC_FILEOPS_SEQS" | wc -c) + 1))
t_diag "seed $SEED, $COUNT sequences (rerun: PC_FILEOPS_SEED=$SEED PC_FILEOPS_COUNT=$COUNT)"

# Holes known and still open, each with where it is being fixed: their
# violations are counted and reported as skipped (with a reproducer),
# never passed in silence; any other violation fails. PC_FILEOPS_STRICT=1:
# none is excused. Remove an entry when its fix lands.
declare -A OPEN=()
open_spec=""
if [ -z "${PC_FILEOPS_STRICT:-}" ]; then
	for k in "${!OPEN[@]}"; do open_spec+="$k;"; done
fi

lg_init logd-fileops
GWNS=$LAB_ID-gw
WNS=$LAB_ID-wit
OPID=
fo_cleanup() {
	[ -z "$OPID" ] || kill "$OPID" 2>/dev/null
	wait 2>/dev/null
	_lab_ns_del "$GWNS"
	_lab_ns_del "$WNS"
	lg_cleanup
}
trap fo_cleanup EXIT
lab_clean_stale
_lab_ns_add "$GWNS"
_lab_ns_add "$WNS"
ip -n "$GWNS" link add wv0 type veth peer name wv1 netns "$WNS"
lab_in "$GWNS" ip addr add 192.0.2.1/24 dev wv0
lab_in "$GWNS" ip link set wv0 up
lab_in "$WNS" ip addr add 192.0.2.2/24 dev wv1
lab_in "$WNS" ip link set wv1 up

# the log's key; the witness's key, made by its first start
lg_config
mkdir -p "$D/state" "$D/wit" "$D/runs"
chmod 755 "$D/runs"
PC log keygen --name gw1/portcullis-log >/dev/null
t_eq "the log key exists" 0 $?
lab_ns_check "$WNS"
ip netns exec "$WNS" "$B/portcullis-logd" --witness --listen 192.0.2.2:7380 --key "$D/wit/w.key" \
	--state "$D/wit/state0" --log "$D/state/log.key.pub" 2>>"$D/witness.err" &
wpid=$!
lab_wait_until test -s "$D/wit/w.key.pub"
kill "$wpid" 2>/dev/null
wait "$wpid" 2>/dev/null
t_ok "the witness made its key" test -s "$D/wit/w.key.pub"

cat >"$D/fileops.json" <<EOF
{"bin": "$B", "wns": "$WNS", "waddr": "192.0.2.2:7380", "paddr": "192.0.2.1:7381",
 "dir": "$D/runs", "state": "$D/state", "logkey_pub": "$D/state/log.key.pub",
 "wkey": "$D/wit/w.key.pub", "wkey_priv": "$D/wit/w.key"}
EOF
lab_ns_check "$GWNS"
PC_FILEOPS_OPEN="$open_spec" ip netns exec "$GWNS" python3 "$PC_TOP/tests/integration/logd_fileops.py" \
	"$D/fileops.json" "$SEED" "$COUNT" >"$D/oracle.out" 2>&1 &
OPID=$!
wait "$OPID"
rc=$?
OPID=
out=$(cat "$D/oracle.out")
printf '%s\n' "$out" | sed 's/^/# /'
t_eq "the oracle ran to its end" 0 "$rc"
t_match "the oracle checked $COUNT operation sequences (seed $SEED)" "^sequences: $COUNT, steps: [0-9]+$" "$out"
for kind in fork silent-loss verify-lie; do
	n=$(printf '%s\n' "$out" | sed -n "s/^kind $kind: //p")
	t_eq "$kind: no sequence violates it" 0 "${n:-missing}"
	o=$(printf '%s\n' "$out" | sed -n "s/^open $kind: //p")
	if [ "${o:-0}" != 0 ]; then
		t_skip "$kind: $o sequences of a hole known open" "${OPEN[$kind]}"
	fi
done
t_done
