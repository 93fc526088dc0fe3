# logd at start and across rotation never signs what it did not write, and
# never loses its place (issue 21, docs/logd.md "Recovery"):
#  - a forged tail after kill -9: records appended that chain on are set
#    aside into a quarantine file, named by a record of their own (seq
#    range, bytes, sha256); nothing forged is in the log, which verifies;
#  - a log truncated to zero, or removed, while its sidecar names a larger
#    tree: refused with the recovery named; --new-segment records the loss;
#  - a rotation that fails (directory not writable): the records of the
#    batch are written and acknowledged, the failure counted and retried;
#  - a power cut before export: the collector never received a checkpoint
#    the disk did not hold (cut to its last synced point, restarted: every
#    checkpoint the collector holds matches the log's);
#  - a crash at each step of a rotation (PORTCULLIS_LOGD_CRASH_AT): logd
#    starts again without --new-segment and the files form one chain.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_init logd-recover
lg_config checkpoint: "  records: 10" "  interval_ms: 100000"
# each part begins without a logd (one the old code left running, say)
running_stop() { [ -z "$LOGD_PID" ] || logd_stop; }
fresh() { running_stop; rm -rf "$D/log"; }

# --- a forged tail after kill -9 ---
logd_start
t_eq "logd starts" 0 $?
t_match "15 records acknowledged" "^acked 16$" "$(lg_client -n 15 -b 5 -q)"
kill -9 "$LOGD_PID"
wait "$LOGD_PID" 2>/dev/null
LOGD_PID=
python3 - "$L" <<'PY'
import hashlib, sys
path = sys.argv[1]
lines = open(path).read().split('\n')[:-1]
last = [l for l in lines if l.startswith('{"event.sequence":')][-1]
seq = int(last[18:last.index(',')])
prev = last[-66:-2]
out = []
for i in range(3):
    seq += 1
    body = '{"event.sequence":%d' % seq + last[last.index(','):-81].replace('agent-1', 'forged-1')
    body = body[:-65] + prev + '"'
    h = hashlib.sha256(b'\0' + (body + '}').encode()).hexdigest()
    out.append(body + ',"event.hash":"' + h + '"}')
    prev = h
open(path, 'a').write('\n'.join(out) + '\n')
PY
out=$(PC log verify 2>&1)
t_eq "the forged tail chains on: verify alone cannot tell (unsealed)" 0 $?
logd_start
t_eq "logd restarts on the file with the forged tail" 0 $?
t_match "it says it set the unsealed tail aside" "set aside at start: 8 lines .* seq 12-19.*-quarantine" \
	"$(cat "$D/logd.err")"
t_eq "no forged record is in the log" 0 "$(grep -c forged-1 "$L")"
q=$(ls "$D"/log/verdicts.jsonl.*-quarantine)
t_eq "the quarantine file holds the 5 unsealed and 3 forged records" "5 3" \
	"$(grep -vc forged-1 "$q") $(grep -c forged-1 "$q")"
rec=$(grep '"portcullis.quarantine.sha256"' "$L")
t_match "a log-segment record names the file, the bytes, the hash and the seqs" \
	"\"event.action\":\"log-segment\".*\"portcullis.quarantine.file\":\"${q##*/}\",\"portcullis.quarantine.bytes\":$(stat -c %s "$q"),\"portcullis.quarantine.sha256\":\"$(sha256sum "$q" | cut -d' ' -f1)\",\"portcullis.quarantine.seq\":\"12-19\"" \
	"$rec"
t_match "its seq skips every seq set aside (none is given twice)" '^\{"event.sequence":20,' "$rec"
t_match "seq continues after it" "^acked 22$" "$(lg_client -n 2 -q)"
logd_stop_ok
out=$(PC log verify 2>&1)
t_eq "the log verifies" 0 $?
t_match "and every record is sealed" "no unsealed tail" "$out"

# --- truncated to zero, or removed ---
: >"$L"
logd_start
t_eq "an empty log whose sidecar names a larger tree is refused" 1 $?
t_match "with the reason and the recovery" \
	"verdicts.jsonl is empty, but .*verdicts.jsonl.checkpoint \(signed .*\) covers 14 records of it: the log was truncated or removed.*--new-segment REASON" \
	"$(tail -1 "$D/logd.err")"
t_eq "the sidecar is left as it was" 14 "$(sed -n 2p "$L.checkpoint")"
running_stop
rm -f "$L"
logd_start
t_eq "a missing log whose sidecar names a tree is refused" 1 $?
t_match "named as missing" "verdicts.jsonl is missing, but" "$(tail -1 "$D/logd.err")"
running_stop
logd_start --new-segment "disk replaced, ticket 99"
t_eq "--new-segment REASON begins again" 0 $?
t_match "its first record says what was lost" \
	'"event.action":"log-segment".*disk replaced, ticket 99; the log file was missing, but verdicts.jsonl.checkpoint .*covered 14 records.*"portcullis.log.previous.checkpoint":"[^"]*\\n14\\n' \
	"$(head -1 "$L")"
# (the set-aside lines' seqs, 15-19, are in a quarantine file nothing
# verifies: seqs never come from such files, issue 32)
t_match "seq goes on after the signed checkpoint that showed the loss" '^\{"event.sequence":15,' "$(head -1 "$L")"
logd_stop_ok

# --- a rotation that fails: the written records stand ---
fresh
lg_config "rotate_bytes: 4000" checkpoint: "  records: 10" "  interval_ms: 100000"
logd_start
lg_client -n 3 -q >/dev/null
chmod 0555 "$D/log" # logd (portcullis-log) can append, not create or rename
out=$(lg_client -n 40 -b 10 2>&1)
t_eq "every batch is acknowledged although the rotation fails" 0 $?
t_match "up to the last record" "acked 44$" "$out"
t_match "the failure is logged and will be retried" \
	"rotating .*verdicts.jsonl failed \(the records written stand and are acknowledged; retried" \
	"$(cat "$D/logd.err")"
t_eq "the records are in the file" 43 "$(grep -c '"event.action":"connect"' "$L")"
chmod 0750 "$D/log"
sleep 1.1
lg_client -n 1 -q >/dev/null
for _ in $(seq 30); do ls "$D"/log/verdicts.jsonl.*-1 >/dev/null 2>&1 && break; sleep 0.1; done
t_ok "once the directory is writable again the rotation is done" ls "$D"/log/verdicts.jsonl.*-1
logd_stop_ok
t_ok "the files form one chain" PC log verify "$D"/log/verdicts.jsonl*
fresh

# --- a power cut before export ---
python3 - "$D/col.sock" "$D/col.log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], 'ab', buffering=0) as f:
    while True:
        f.write(s.recv(65536).replace(b'\n', b' ') + b'\n')
PY
col=$!
for _ in $(seq 50); do [ -S "$D/col.sock" ] && break; sleep 0.1; done
chmod 666 "$D/col.sock"
lg_config checkpoint: "  records: 10" "  interval_ms: 5000" syslog: "  local: true" "  socket: $D/col.sock" "  enterprise_number: 32473"
logd_start
t_match "25 records acknowledged" "^acked 26$" "$(lg_client -n 25 -b 5 -q)"
sleep 0.5 # the exporter sends what it was given
kill -9 "$LOGD_PID"
wait "$LOGD_PID" 2>/dev/null
LOGD_PID=
t_eq "the collector received the records" 25 "$(grep -c ' connect ' "$D/col.log")"
# the last synced point: the checkpoint line the sidecar names (logd writes
# the sidecar only once the file is synced up to it)
synced=$(sed -n 2p "$L.checkpoint")
python3 - "$L" "$synced" <<'PY'
import sys, json
path, size = sys.argv[1], int(sys.argv[2])
keep = []
for l in open(path):
    keep.append(l)
    if l.startswith('{"checkpoint":') and json.loads(l)['checkpoint'].split('\n')[1] == str(size):
        break
open(path, 'w').write(''.join(keep))
PY
maxcp=$(grep -o 'portcullis.checkpoint.size="[0-9]*"' "$D/col.log" | grep -o '[0-9]*' | sort -n | tail -1)
t_ok "the collector holds no checkpoint beyond the synced tree of $synced (it has ${maxcp:-none})" \
	test "${maxcp:-0}" -le "$synced"
logd_start
t_eq "logd starts on the file as the power cut left it" 0 $?
lg_client -n 25 -b 5 -q >/dev/null
logd_stop_ok
sleep 0.3
split=$(python3 - "$L" "$D/col.log" <<'PY'
import sys, json, re, base64
path, col = sys.argv[1], sys.argv[2]
mine = {}
for l in open(path):
    if l.startswith('{"checkpoint":'):
        n = json.loads(l)['checkpoint'].split('\n')
        mine[int(n[1])] = base64.b64decode(n[2]).hex()
bad = []
for l in open(col):
    m = re.search(r'portcullis.checkpoint.size="(\d+)".*portcullis.checkpoint.root="([0-9a-f]+)"', l)
    if m and int(m.group(1)) in mine and mine[int(m.group(1))] != m.group(2):
        bad.append(m.group(1))
print(' '.join(bad) or 'none')
PY
)
t_eq "no checkpoint the collector holds disagrees with the log (no split view)" none "$split"
t_ok "the collector now holds the log's checkpoints" grep -q 'portcullis.checkpoint.size="' "$D/col.log"
kill "$col"
wait "$col" 2>/dev/null
fresh

# --- a crash at each step of a rotation ---
lg_config "rotate_bytes: 3000" checkpoint: "  records: 10" "  interval_ms: 100000"
for step in rotate-sealed rotate-new-created rotate-new-written rotate-old-aside \
	rotate-new-in-place rotate-sidecar; do
	fresh
	PORTCULLIS_LOGD_CRASH_AT=$step logd_start
	lg_client -n 60 -b 4 >/dev/null 2>&1
	sleep 0.2
	if kill -0 "$LOGD_PID" 2>/dev/null; then
		t_ok "$step: logd died at the step (SIGKILL)" false
		running_stop
		continue
	fi
	wait "$LOGD_PID" 2>/dev/null
	t_eq "$step: killed by the fault-injection hook" 137 $?
	LOGD_PID=
	logd_start
	t_eq "$step: logd starts again without --new-segment" 0 $?
	t_match "$step: and serves" "^acked [0-9]+$" "$(lg_client -n 5 -q)"
	logd_stop_ok
	t_eq "$step: nothing was set aside" "" "$(ls "$D"/log | grep -e quarantine -e broken -e '\.new$')"
	out=$(PC log verify "$D"/log/verdicts.jsonl* 2>&1)
	t_eq "$step: the files verify as one chain" 0 $?
done

t_done
