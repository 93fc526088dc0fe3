# Who may hand logd records, and what happens when they cannot be written:
# SO_PEERCRED admits root, the engine's and the vault's users and refuses
# everyone else; every kind of malformed message is rejected, counted and
# ends that session while logd keeps serving; a write that fails (file size
# limit) is rolled back and its records are refused, not acknowledged; with
# logd down, a client cannot hand a record over at all.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_init logd-access
lg_config
S=$D/run/logd.sock
CLIENT=$B/tests/helpers/logd_client
cp "$CLIENT" "$D/client" # somewhere every user can run it from
chmod 755 "$D/client"
as_user() { # user cmd...
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --clear-groups "$@"
}

logd_start
t_match "root may log" "^acked" "$("$D/client" "$S" -n 3 -b 3)"
t_match "the engine's user (portcullis) may log" "^acked" "$(as_user portcullis "$D/client" "$S" -n 2)"
t_match "the vault's user (portcullis-vault) may log" "^acked" \
	"$(as_user portcullis-vault "$D/client" "$S" -n 2 -a http-request)"
before=$(grep -c '^{"event.sequence"' "$D/log/verdicts.jsonl")
t_fail "nobody is refused" as_user nobody "$D/client" "$S" -n 5 -t 1000
t_fail "logd's own user is refused (it does not write through the socket)" \
	as_user portcullis-log "$D/client" "$S" -n 1 -t 1000
t_match "logd names the refused uid" "refused a connection from pid [0-9]+ uid $(id -u nobody)" \
	"$(cat "$D/logd.err")"
t_eq "nothing of the refused clients reached the file" "$before" \
	"$(grep -c '^{"event.sequence"' "$D/log/verdicts.jsonl")"

before=$(grep -c '^{"event.sequence"' "$D/log/verdicts.jsonl")
n=0
for kind in short version length tag order utf8 oversize segment noaction; do
	t_eq "malformed message ($kind): logd ends the session" closed \
		"$("$CLIENT" --malformed "$kind" "$S")"
	n=$((n + 1))
done
t_ok "logd is still running after $n malformed messages" kill -0 "$LOGD_PID"
t_eq "no malformed message reached the file" "$before" "$(grep -c '^{"event.sequence"' "$D/log/verdicts.jsonl")"
t_match "a well-formed client is still served" "^acked" "$("$CLIENT" "$S" -n 1)"

logd_stop

# A write that fails: the log directory becomes a small tmpfs in a mount
# namespace of logd's own (nothing outside the test sees it), which a
# filler file then fills up.
mv "$D/log" "$D/log.first"
t_ok "the first log verifies" PC log verify "$D/log.first/verdicts.jsonl"
mkdir -m 0750 "$D/log"
chown portcullis-log:portcullis-log "$D/log"
unshare -m --propagation private sh -c '
	mount -t tmpfs -o size=2m,mode=0750,uid=$(id -u portcullis-log),gid=$(id -g portcullis-log) tmpfs "$1/log" &&
	{ sleep 600 & echo $! >"$1/anchor"; } && exec "$2/portcullis-logd" -c "$1/p.yaml"' \
	sh "$D" "$B" 2>>"$D/logd.err" &
LOGD_PID=$!
for _ in $(seq 50); do [ -S "$S" ] && [ -s "$D/anchor" ] && break; sleep 0.1; done
inns() { nsenter -t "$(cat "$D/anchor")" -m "$@"; }
t_match "logd serves from the small file system" "^acked" "$("$CLIENT" "$S" -n 5 -b 5)"
inns dd if=/dev/zero of="$D/log/filler" bs=4k count=100000 2>/dev/null
# The file's last page still has room for a few records: the first records
# of a send fit in it, and logd writes and acknowledges them before the one
# that fails. The client must still know those acknowledgements when the
# session ends (they are in its receive queue when its next send fails):
# the file ends at the last record acknowledged, everything after it was
# rolled back. Then with the page full, a whole batch fails: the file keeps
# its size. (The client says which seq it last heard.)
rolled_back() { # what size out
	local acked
	acked=$(sed -n 's/.*(last acknowledged seq \([0-9]*\)).*/\1/p' <<<"$3")
	if [ "${acked:-0}" = 0 ]; then
		t_eq "$1: the failed batch was rolled back (file size unchanged)" "$2" \
			"$(inns stat -c %s "$D/log/verdicts.jsonl")"
	else
		t_eq "$1: the file ends at the last record acknowledged: the failed part was rolled back" \
			"$acked" "$(inns python3 -c '
import json, sys
last = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    last = r.get("event.sequence", last)
print(last)' "$D/log/verdicts.jsonl")"
	fi
}
size=$(inns stat -c %s "$D/log/verdicts.jsonl")
out=$("$CLIENT" "$S" -n 20 -b 20 -w 50 -t 2000 2>&1)
t_eq "records that cannot be written (disk full) are not acknowledged" 1 $?
t_match "the client is told" "not acknowledge|lost|closed" "$out"
t_match "the records that fitted were acknowledged, and the client knows it" \
	"last acknowledged seq [1-9]" "$out"
t_lt "so the file grew by them" "$size" "$(inns stat -c %s "$D/log/verdicts.jsonl")"
rolled_back "one record a round" "$size" "$out"
size=$(inns stat -c %s "$D/log/verdicts.jsonl")
out=$("$CLIENT" "$S" -n 20 -b 20 -t 2000 2>&1)
t_eq "a whole batch that cannot be written is not acknowledged" 1 $?
rolled_back "one batch" "$size" "$out"
t_ok "logd keeps running" kill -0 "$LOGD_PID"
inns rm -f "$D/log/filler"
t_match "once there is room again, records are acknowledged" "^acked" "$("$CLIENT" "$S" -n 5 -b 5)"
t_ok "that log verifies" inns "$B/portcullis" -c "$D/p.yaml" log verify
logd_stop_ok
t_match "logd counted the malformed messages" "$n malformed messages rejected" "$(cat "$D/logd.err")"
t_match "logd counted the refused connections" "[1-9][0-9]* connections refused" "$(cat "$D/logd.err")"
t_match "logd counted the write error" "[1-9][0-9]* write errors" "$(cat "$D/logd.err")"
kill "$(cat "$D/anchor")"

# logd down: nothing can be handed over (the caller refuses the action)
out=$("$CLIENT" "$S" -n 1 2>&1)
t_eq "with logd down the client cannot log" 1 $?
t_match "and says why" "logd unreachable" "$out"

t_done
