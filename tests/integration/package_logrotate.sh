#!/usr/bin/env bash
# The shipped /etc/logrotate.d/portcullis, run by the real logrotate
# against a real portcullis-logd: twice forced rotation (the second one
# compressing the first rotated file), logd reopening on the signal the
# postrotate sends, no record lost or truncated, the new file logd's own
# (0640, portcullis-log), and the rotated files, the compressed one
# included, verifying as one chain. The config is used as shipped except
# for the log path and the postrotate command (there is no systemd here:
# "systemctl reload portcullis-logd" is replaced by the SIGHUP it sends).
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)} PC_BUILD=${PC_BUILD:-build}
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "shipped logrotate configuration" "$B/portcullis-logd" "$B/portcullis" \
	"$B/tests/helpers/logd_client"
if ! command -v logrotate >/dev/null || ! getent passwd portcullis-log >/dev/null; then
	t_skip "shipped logrotate configuration" "logrotate or user portcullis-log missing (make deps)"
	t_done
	exit
fi

lg_init logrotate
lg_config checkpoint: "  records: 10"
logd_start
t_eq "logd runs" 0 $?
send() { lg_client -q -s agent-rot "$@" >/dev/null; }

sed -e "s|^/var/log/portcullis/verdicts.jsonl {|$L {|" \
	-e "s|systemctl reload portcullis-logd.service.*|kill -HUP $LOGD_PID|" \
	"$PC_TOP/packaging/logrotate/portcullis" >"$D/lr.conf"
t_match "the config was adapted (path)" "^$L \\{" "$(cat "$D/lr.conf")"
t_match "the config was adapted (postrotate)" "kill -HUP $LOGD_PID" "$(cat "$D/lr.conf")"
t_match "it rotates as the log's owner" 'su portcullis-log portcullis-log' "$(cat "$D/lr.conf")"

# wait_new: logd has started a fresh file after the rotation.
wait_new() {
	for _ in $(seq 50); do
		grep -q '"event.reason":"reopened on SIGHUP' "$L" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

send -n 30 -b 10
size1=$(stat -c %s "$L")
logrotate -s "$D/lr.state" -f "$D/lr.conf" 2>"$D/lr.err"
t_eq "logrotate -f succeeds" "" "$(cat "$D/lr.err")"
t_ok "logd reopened on the postrotate signal" wait_new
t_eq "the rotated file is whole (nothing truncated in place)" "$size1" \
	"$(stat -c %s "$L.1" 2>/dev/null || echo missing)"
t_match "the rotated file ends with its final checkpoint" '^\{"checkpoint":' "$(tail -1 "$L.1")"
t_eq "the new file is logd's own" "portcullis-log:portcullis-log 640" "$(stat -c '%U:%G %a' "$L")"

send -n 20 -b 10
logrotate -s "$D/lr.state" -f "$D/lr.conf" 2>"$D/lr.err"
t_eq "a second logrotate -f succeeds" "" "$(cat "$D/lr.err")"
for _ in $(seq 50); do [ -s "$L" ] && break; sleep 0.1; done
t_ok "the older rotated file is compressed (delaycompress)" test -s "$L.2.gz"
t_ok "the newer one is not yet" test -s "$L.1"
send -n 10 -b 10
logd_stop

zcat "$L.2.gz" >"$D/first.jsonl"
t_eq "every record is in one of the files" 60 \
	"$(cat "$D/first.jsonl" "$L.1" "$L" | grep -c '"portcullis.sandbox":"agent-rot"')"
t_ok "the three files verify as one chain" PC log verify "$D/first.jsonl" "$L.1" "$L"
t_done
