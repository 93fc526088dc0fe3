# logd tamper matrix: a log written by the real portcullis-logd verifies
# untouched; every kind of tampering (edit, edit with a recomputed hash,
# deletion, insertion, reordering, truncation, a torn line, a forged or
# replayed checkpoint, a wrong key, a cut head, a foreign line) makes
# `portcullis log verify` exit 1 naming the line. Inclusion proofs verify
# without the log and fail when altered; `log show` prints the short form.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_init logd-tamper
lg_config checkpoint: "  records: 10" "  interval_ms: 100000"

logd_start
t_match "the client's 45 records are acknowledged" "^acked 46$" "$(lg_client -n 45 -b 9 -q)"
logd_stop_ok
cp "$L" "$D/orig"
# The layout (checkpoints every 10 records, the log-segment record first):
# line 1 seq 1, 2 checkpoint(1), 3-12 seq 2-11, 13 checkpoint(11),
# 14-23 seq 12-21, 24 checkpoint(21), ... 47-51 seq 42-46, 52 checkpoint(46).
# The client's record i has seq i+2 and destination host<i>.example.
t_match "line 13 is the checkpoint of 11 records" '^\{"checkpoint":"[^"]*\\n11\\n' "$(sed -n 13p "$L")"
t_match "line 14 is seq 12" '^\{"event.sequence":12,.*host10\.example' "$(sed -n 14p "$L")"

out=$(PC log verify 2>&1)
t_eq "an untouched log verifies (exit 0)" 0 $?
t_match "verify reports the records and checkpoints" "intact: 46 records \(seq 1-46\), 6 checkpoints" "$out"
t_match "verify reports no unsealed tail" "no unsealed tail" "$out"

# ed CODE: run python CODE on a fresh copy of the log, as list L of lines
# (L[0] is line 1); rehash(n) recomputes line n's hash as a forger would.
ed() {
	cp "$D/orig" "$L"
	python3 - "$L" "$1" <<'PY'
import hashlib, sys
path, code = sys.argv[1], sys.argv[2]
L = open(path, 'rb').read().decode().split('\n')
def rehash(n):
    body = L[n - 1][:-81] + '}'
    h = hashlib.sha256(b'\0' + body.encode()).hexdigest()
    L[n - 1] = L[n - 1][:-81] + ',"event.hash":"' + h + '"}'
exec(code)
open(path, 'wb').write('\n'.join(L).encode())
PY
}
# ... and the second reader of the file (logd_oracle.py, which shares no
# code with log verify) refuses it too, where it can run
ORACLE=
lg_has_oracle && ORACLE=1
tamper() { # desc pattern python-code
	local rc
	ed "$3"
	out=$(PC log verify 2>&1)
	rc=$?
	t_eq "$1: verify exits 1" 1 "$rc"
	t_match "$1: names the place" "$2" "$out"
	[ -z "$ORACLE" ] ||
		t_fail "$1: the second reader refuses it too" \
			lg_oracle verify "$L" "$D/state/log.key.pub"
}

tamper "edited record" "line 14: record seq 12 was edited" \
	"L[13] = L[13].replace('host10', 'host99')"
tamper "edited record, its hash recomputed" "line 15: prev of seq 13 is not the hash of seq 12 on line 14" \
	"L[13] = L[13].replace('host10', 'host99'); rehash(14)"
tamper "edited last record, its hash recomputed" \
	"line 51: .*checkpoint for 46 records.* a record between line 46 \\(the last checkpoint\\) and here was changed" \
	"L[50] = L[50].replace('host44', 'host99'); rehash(51)"
tamper "deleted record" "line 14: seq 13 follows seq 11: a record was deleted" "del L[13]"
tamper "inserted (repeated) record" "line 15: seq 12 follows seq 12: a record was inserted" \
	"L.insert(14, L[13])"
tamper "reordered records" "line 14: seq 13 follows seq 11" "L[13], L[14] = L[14], L[13]"
tamper "truncated: the last checkpoint and records cut" \
	"ends at 41 records, but a checkpoint signed for it covers 46: .*truncated" "del L[46:52]"
tamper "torn last line" "line 52: the last line is incomplete" "L[51] = L[51][:50]; L.pop()"
tamper "forged checkpoint (root changed)" "line 13: checkpoint does not verify with key" \
	"i = L[12].index('\\\\n11\\\\n') + 6; L[12] = L[12][:i] + ('A' if L[12][i] != 'A' else 'B') + L[12][i+1:]"
tamper "replayed checkpoint (an old one copied later)" \
	"line 24: checkpoint covers 11 records but 21 precede it: .*replayed" "L[23] = L[12]"
tamper "records cut from the head" "line 1: the first record \(seq 2\) is not a log-segment record" \
	"del L[0:2]"
tamper "a foreign line" "line 20: not a log record or checkpoint" "L[19] = 'hello'"
# A checkpoint line has one spelling: its signature block is the log's one
# line, its base64 the one encoding of its bytes (libsodium alone reads
# every byte from 0x80 as '/': the signature then verified, the bytes
# changed). Index 12 is line 13, the checkpoint of 11 records.
tamper "a stranger's signature line added to a checkpoint" \
	"line 13: checkpoint carries more than the log's one signature line" \
	"L[12] = L[12][:-2] + '\u2014 other/witness AAAAAQ==\\\\n\"}'"
tamper "the log's signature line twice in a checkpoint" \
	"line 13: checkpoint carries more than the log's one signature line" \
	"i = L[12].rindex('\u2014 '); L[12] = L[12][:-2] + L[12][i:-2] + '\"}'"
cp "$D/orig" "$L"
slash=$(python3 - "$L" <<'PY'
import sys
path = sys.argv[1]
L = open(path, 'rb').read().split(b'\n')
for n, line in enumerate(L):
    if line.startswith(b'{"checkpoint":'):
        sig = line.rindex(b' ') + 1
        i = line.find(b'/', sig)
        if i > 0:
            L[n] = line[:i] + b'\xaf' + line[i + 1:]
            open(path, 'wb').write(b'\n'.join(L))
            print(n + 1)
            break
PY
)
if [ -n "$slash" ]; then
	out=$(PC log verify 2>&1)
	t_eq "a '/' of a signature written as byte 0xaf: verify exits 1" 1 $?
	t_match "a '/' written as byte 0xaf: names the line" \
		"line $slash: checkpoint does not verify with key .*signature is not base64" "$out"
else # each signature holds a '/' 3 times in 4: none of 6 about once in 6,000 runs
	t_skip "a '/' of a signature written as byte 0xaf" "no checkpoint's signature holds a '/'"
fi
cp "$D/orig" "$L"

# a wrong key: a second key pair; the log was not signed by it
cp "$D/orig" "$L"
cp "$D/state/log.key" "$D/log.key.save"
cp "$D/state/log.key.pub" "$D/log.key.pub.save"
PC log keygen --force --name other/portcullis-log >/dev/null
out=$(PC log verify 2>&1)
t_eq "wrong key: verify exits 1" 1 $?
t_match "wrong key: names the first checkpoint" "line 2: checkpoint does not verify with key other/portcullis-log" "$out"
t_ok "keygen --force kept the old public key" ls "$D"/state/log.key.pub.*
out=$(PC log verify --key "$D/log.key.pub.save" 2>&1)
t_eq "the right key given with --key: verifies" 0 $?
cp "$D/state/log.key.pub" "$D/other.pub"
cp "$D/log.key.save" "$D/state/log.key"
cp "$D/log.key.pub.save" "$D/state/log.key.pub"

# inclusion proofs
out=$(PC log prove 17 -o "$D/proof" 2>&1)
t_eq "log prove 17 writes a proof" 0 $?
t_match "the proof carries the record" '^record \{"event.sequence":17,' "$(sed -n 3p "$D/proof")"
mv "$L" "$D/away" # checked without the log
out=$(PC log verify --proof "$D/proof" 2>&1)
t_eq "the proof verifies without the log" 0 $?
t_match "it says which leaf of which tree" "record seq 17 is leaf 16 of the 46-record tree" "$out"
mv "$D/away" "$L"
sed 's/host15/host99/' "$D/proof" >"$D/proof.bad"
t_fail "a proof whose record was changed fails" PC log verify --proof "$D/proof.bad"
# (its first character changed: to B where it was A, else to A — one proof
# in 64 starts with A, and an unchanged proof verifies)
awk 'NR == 5 { $0 = "hash " (substr($0, 6, 1) == "A" ? "B" : "A") substr($0, 7) } 1' \
	"$D/proof" >"$D/proof.bad"
t_eq "the path was changed" 1 "$(cmp -s "$D/proof" "$D/proof.bad"; echo $?)"
out=$(PC log verify --proof "$D/proof.bad" 2>&1)
t_match "a proof whose path was changed fails" "is not leaf 16 of the tree" "$out"
t_fail "a proof checked with the wrong key fails" \
	PC log verify --proof "$D/proof" --key "$D/other.pub"
t_fail "proving a seq that does not exist fails" PC log prove 999
PC log prove 17 >/dev/full 2>/dev/null
t_eq "log prove to a full stdout: exit 3, not 0" 3 $?

# the human form
show=$(PC log show)
t_match "show: the refused form, with date, time and sandbox" '^#5 20[0-9]{2}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}Z [a-z0-9-]+ refused CONNECT host3\.example:443 \(not on the allow list\)$' "$show"
t_match "show: the allowed form" '^#6 [0-9-]{10} [0-9:]{8}Z [a-z0-9-]+ allowed CONNECT host4\.example:443 \(allowed by rule\)$' "$show"
t_eq "show: one line per record" 46 "$(printf '%s\n' "$show" | wc -l)"

t_done
