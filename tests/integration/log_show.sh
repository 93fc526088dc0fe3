#!/usr/bin/env bash
# `portcullis log show` filters (--sandbox, --action, --outcome, --since),
# --json, and --follow: lines appended are shown as they come, a rotation
# (the path renamed, a new file made, as logd and logrotate do) is
# followed to the new file, SIGTERM ends it with exit 0. Over a log file
# this test writes (show reads; it does not verify: log verify does).
set -u
. "$PC_TOP/tests/lib/tap.sh"

PC=$PC_TOP/$PC_BUILD/portcullis
case $PC_BUILD in /*) PC=$PC_BUILD/portcullis ;; esac
T=$(mktemp -d /tmp/pc-logshow-XXXXXX)
trap 'kill $fpid 2>/dev/null; rm -rf "$T"' EXIT
fpid=
L=$T/verdicts.jsonl

# rec SEQ TIME SANDBOX ACTION OUTCOME REASON: one record line as logd writes it
rec() {
	local type=allowed res=success
	[ "$5" = refused ] && type=denied res=failure
	printf '{"seq":%s,"@timestamp":"%s","event.kind":"event","event.category":["network"],"event.type":["connection","%s"],"event.action":"%s","event.outcome":"%s","event.reason":"%s","sandbox":"%s","destination.ip":"203.0.113.%s","destination.port":443,"dns.question.name":"x%s.example","prev":"00","hash":"00"}\n' \
		"$1" "$2" "$type" "$4" "$res" "$6" "$3" "$1" "$1"
}
{
	rec 1 2026-11-01T10:00:00.000Z a connect allowed "allowed address"
	rec 2 2026-11-01T10:00:01.000Z a dns-query refused "name not on the allow list"
	rec 3 2026-11-20T09:00:00.000Z b connect refused "not on the allow list"
	rec 4 2026-12-01T08:00:00.000Z a connect refused "no allowed name resolved to this address"
	printf '{"checkpoint":"x"}\n'
} >"$L"

show() { "$PC" log show "$L" "$@" 2>"$T/err"; }
seqs() { show "$@" | grep -oE '^#[0-9]+' | tr -d '#' | tr '\n' ' '; }

t_eq "no filter: every record" "1 2 3 4 " "$(seqs)"
t_eq "--sandbox a" "1 2 4 " "$(seqs --sandbox a)"
t_eq "--sandbox b" "3 " "$(seqs --sandbox b)"
t_eq "--outcome refused" "2 3 4 " "$(seqs --outcome refused)"
t_eq "--outcome allowed" "1 " "$(seqs --outcome allowed)"
t_eq "--action dns-query" "2 " "$(seqs --action dns-query)"
t_eq "--since a UTC date" "3 4 " "$(seqs --since 2026-11-15)"
t_eq "--since a UTC time" "4 " "$(seqs --since 2026-12-01T07:59:59Z)"
t_eq "--since a duration back from now (3650d: as far back as 2026-01-01 here)" \
	"$(seqs --since 2026-01-01)" "$(seqs --since 3650d)"
t_eq "filters combine (and)" "4 " "$(seqs --sandbox a --outcome refused --action connect)"
t_eq "--json: the record lines as they are" "$(sed -n 3p "$L")" "$(show --json --sandbox b)"
t_eq "--json without a filter: records only (no checkpoint)" 4 "$(show --json | wc -l)"
"$PC" log show "$L" --outcome maybe >/dev/null 2>&1 && rc=0 || rc=$?
t_eq "--outcome maybe: usage error (2)" 2 "$rc"
"$PC" log show "$L" --since yesterday >/dev/null 2>"$T/err" && rc=0 || rc=$?
t_eq "--since yesterday: usage error (2)" 2 "$rc"
t_match "... saying what it takes" "neither a duration" "$(cat "$T/err")"

# --follow
"$PC" log show "$L" --follow --sandbox a --outcome refused >"$T/follow" 2>&1 &
fpid=$!
wait_lines() { # n: until the output has n lines (5 s)
	for _ in $(seq 50); do
		[ "$(wc -l <"$T/follow")" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
t_ok "--follow shows what is there first" wait_lines 2
rec 5 2026-12-01T09:00:00.000Z a connect refused "not on the allow list" >>"$L"
rec 6 2026-12-01T09:00:01.000Z b connect refused "not on the allow list" >>"$L"
rec 7 2026-12-01T09:00:02.000Z a connect allowed "allowed host" >>"$L"
t_ok "--follow shows a matching line appended" wait_lines 3
mv "$L" "$L.1"
rec 8 2026-12-01T10:00:00.000Z a dns-query refused "name not on the allow list" >"$L"
t_ok "--follow follows a rotation to the new file" wait_lines 4
sleep 0.5
t_eq "only the matching records, in order" "2 4 5 8 " \
	"$(grep -oE '^#[0-9]+' "$T/follow" | tr -d '#' | tr '\n' ' ')"
kill -TERM $fpid
wait $fpid && rc=0 || rc=$?
fpid=
t_eq "--follow ends on SIGTERM with exit 0" 0 "$rc"
t_done
