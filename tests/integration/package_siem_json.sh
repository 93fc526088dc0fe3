#!/usr/bin/env bash
# What a SIEM gets through the shipped rsyslog relay
# (packaging/siem/rsyslog-portcullis.conf) with logd's default export (no
# enterprise number: each record one JSON object as MSG): every record of
# the log arrives, seq 1 (the new log's log-segment record) included; each
# with the time logd gave it (the RFC 5424 header's time as the collector
# reads it, and the JSON's @timestamp, equal to the record's in the file);
# each MSG parses as JSON whose fields the shipped Elastic template maps
# with their ECS types (numbers stay numbers); each checkpoint carries its
# @timestamp and event.kind "state". Both rsyslogs are started by this
# test in a network namespace of its own (loopback only); the system's
# rsyslog is never touched. The snippet is used as shipped except for
# paths, the collector's address and port, and the CA file.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)} PC_BUILD=${PC_BUILD:-build}
if [ "${1:-}" != inner ]; then
	exec unshare -n -- bash "$0" inner
fi
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "rsyslog relay, JSON export" "$B/portcullis-logd" "$B/tests/helpers/logd_client"
if ! command -v rsyslogd >/dev/null || ! ls /usr/lib/*/rsyslog/lmnsd_ossl.so >/dev/null 2>&1; then
	t_skip "rsyslog relay, JSON export" "rsyslog or rsyslog-openssl missing (make deps)"
	t_done
	exit
fi

lg_init siemjson
mkdir -p "$D/relay" "$D/coll"
RELAY_PID="" COLL_PID=""
cleanup() {
	for p in $RELAY_PID $COLL_PID; do kill "$p" 2>/dev/null; done
	lg_cleanup
}
trap cleanup EXIT
ip link set lo up

lg_certs siem.example.org DNS:siem.example.org
t_ok "test certificates made" test -s "$D/srv.pem"

# The collector: TLS on 127.0.0.1:16514; per message the header's time as
# rsyslog parsed it, the MSGID and MSG.
cat >"$D/coll.conf" <<EOF
$(rs_global "$D/coll")
module(load="imtcp")
input(type="imtcp" port="16514" address="127.0.0.1" ruleset="in" streamDriver.name="ossl"
      streamDriver.mode="1" streamDriver.authMode="anon")
template(name="t" type="list") {
  property(name="timestamp" dateFormat="rfc3339") constant(value="|")
  property(name="msgid") constant(value="|")
  property(name="msg") constant(value="\n")
}
ruleset(name="in") { action(type="omfile" file="$D/coll.log" template="t") }
EOF

sed -e "s|/run/rsyslog-portcullis.sock|$D/relay.sock|" \
	-e "s|/var/log/portcullis-syslog.log|$D/relay-local.log|" \
	-e "s|/etc/ssl/certs/ca-certificates.crt|$D/ca.pem|" \
	-e 's|target="siem.example.org" port="6514"|target="127.0.0.1" port="16514"|' \
	"$PC_TOP/packaging/siem/rsyslog-portcullis.conf" >"$D/snippet.conf"
t_match "the test's collector address was substituted" 'target="127.0.0.1" port="16514"' \
	"$(cat "$D/snippet.conf")"
cat >"$D/relay.conf" <<EOF
global(workDirectory="$D/relay")
module(load="imuxsock" SysSock.Use="off")
include(file="$D/snippet.conf")
EOF
t_ok "rsyslogd accepts the relay configuration (-N1)" rsyslogd -N1 -f "$D/relay.conf"

start_rs() { # name -> pid in $!
	rsyslogd -n -f "$D/$1.conf" -i "$D/$1.pid" >>"$D/$1.err" 2>&1 &
}
start_rs coll
COLL_PID=$!
start_rs relay
RELAY_PID=$!
for _ in $(seq 50); do
	[ -S "$D/relay.sock" ] && (exec 3<>/dev/tcp/127.0.0.1/16514) 2>/dev/null && break
	sleep 0.1
done
t_ok "relay and collector run" test -S "$D/relay.sock"

# logd as operations.md says, without an enterprise number (the default);
# a new log, so seq 1 is its log-segment record.
lg_config syslog: "  local: true" "  socket: $D/relay.sock"
logd_start
t_match "one record of each kind, acknowledged" "^acked" "$(lg_client --every-kind)"
last=$(lg_client -n 20 -b 5 -s agent-json -q)
t_match "20 more, acknowledged" "^acked [0-9]+" "$last"
# one whose export is about 10 KiB, past rsyslog's default message size
# (8 KiB): 1,500 control characters, each written \u0001 in the JSON
t_match "a record exported in about 10 KiB, acknowledged" "^acked [0-9]+" \
	"$(lg_client -n 1 -s agent-json -V refused -m "$(printf '\001%.0s' $(seq 1500))")"
last=${last#acked }
for _ in $(seq 100); do
	grep -q "\"event.sequence\":$last," "$D/coll.log" 2>/dev/null && break
	sleep 0.1
done
logd_stop
# (the final checkpoint logd sends as it stops)
for _ in $(seq 50); do
	[ "$(grep -c '|checkpoint|' "$D/coll.log" 2>/dev/null)" -ge 2 ] && break
	sleep 0.1
done

out=$(python3 - "$L" "$D/coll.log" <<'PY'
import datetime, json, sys
def t(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
recs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "event.sequence" in r:
        recs[r["event.sequence"]] = r
got, cps, bad = {}, 0, []
for line in open(sys.argv[2]):
    ts, msgid, msg = line.rstrip("\n").split("|", 2)
    try:
        j = json.loads(msg)
    except ValueError:
        bad.append("MSG is not JSON: " + msg[:100]); continue
    if msgid == "checkpoint":
        cps += 1
        if j.get("event.kind") != "state" or "@timestamp" not in j:
            bad.insert(0, "checkpoint without @timestamp or event.kind state: " + msg[:100])
        elif t(j["@timestamp"]) != t(ts):
            bad.append("checkpoint: header time %s, its own %s" % (ts, j["@timestamp"]))
        continue
    seq = j.get("event.sequence")
    if not isinstance(seq, int) or seq not in recs:
        bad.append("a record of no seq in the file: " + msg[:100]); continue
    got[seq] = 1
    r = recs[seq]
    if t(ts) != t(r["@timestamp"]):
        bad.append("seq %d: arrived with time %s, logged at %s" % (seq, ts, r["@timestamp"]))
    if j.get("@timestamp") != r["@timestamp"]:
        bad.append("seq %d: @timestamp %s, the file's %s" % (seq, j.get("@timestamp"), r["@timestamp"]))
    for k in ("source.port", "destination.port", "http.response.status_code"):
        if k in r and j.get(k) != r[k]:
            bad.append("seq %d: %s %r, the file's %r" % (seq, k, j.get(k), r[k]))
missing = sorted(set(recs) - set(got))
if missing:
    bad.insert(0, "never arrived: seq %s" % ", ".join(map(str, missing[:10])))
if not cps:
    bad.append("no checkpoint arrived")
print("\n".join(bad[:20]))
print("%d records in the file, %d arrived, %d checkpoints" % (len(recs), len(got), cps))
sys.exit(1 if bad else 0)
PY
)
t_ok "every record arrived (seq 1 too), each with its time; checkpoints with theirs, as state" \
	test $? = 0
t_diag "$out"
cut -d'|' -f3- "$D/coll.log" >"$D/coll.json"
out=$(python3 "$PC_TOP/tests/lib/ecs_check.py" "$PC_TOP/packaging/siem/elastic-index-template.json" \
	"$PC_TOP/packaging/siem/elastic-ingest-pipeline.json" "$D/coll.json" 2>&1)
t_ok "every message arrived as JSON the Elastic template maps with ECS types" test $? = 0
t_diag "$out"
t_nomatch "the relay reported no error" 'error|invalid' "$(cat "$D/relay.err" 2>/dev/null)"
t_done
