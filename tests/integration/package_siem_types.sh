#!/usr/bin/env bash
# Every kind of record the log writes lands in the shipped Elastic index
# template (packaging/siem) with a mapping for each of its fields and a JSON
# type the mapping takes (keyword/ip/date/long ...), under the ECS version
# the records declare and the template maps: one record of each action and
# verdict (logd_client --every-kind), logd's own (the log-segment records of
# a new log and of a rotation, the checkpoints), an oversize record; each as
# the file has it and as logd exports it (the JSON MSG a collector gets).
# And the Splunk stanza beside it (props.conf, transforms.conf) takes the
# same messages: its header-stripping and timestamp rules, run here on the
# exported messages, leave the record's JSON and its own time, and its
# structured-data extraction gives each field once. A real portcullis-logd
# in a directory of the test's own; its syslog export goes to a socket
# this test reads (no system syslog).
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)} PC_BUILD=${PC_BUILD:-build}
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "SIEM field types" "$B/portcullis-logd" "$B/tests/helpers/logd_client"
lg_init siemtypes
S=$PC_TOP/packaging/siem
RECV_PID=""
cleanup() {
	[ -z "$RECV_PID" ] || kill "$RECV_PID" 2>/dev/null
	lg_cleanup
}
trap cleanup EXIT

# The collector: every datagram logd sends, one a line.
python3 - "$D/export.sock" "$D/export.log" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o666) # logd sends as portcullis-log
with open(sys.argv[2], "ab", buffering=0) as f:
    while True:
        f.write(s.recv(1 << 17).replace(b"\n", b"\\n") + b"\n")
PY
RECV_PID=$!
for _ in $(seq 50); do [ -S "$D/export.sock" ] && break; sleep 0.1; done
t_ok "the test's collector listens" test -S "$D/export.sock"

export_has_seq() { # n: the collector has a record of seq n
	grep -q "\"event.sequence\":$1," "$D/export.log" 2>/dev/null
}
wait_export() { # n
	for _ in $(seq 100); do
		export_has_seq "$1" && return 0
		sleep 0.1
	done
	return 1
}

lg_config syslog: "  local: true" "  socket: $D/export.sock"
logd_start
t_match "one record of each action and verdict, acknowledged" "^acked [0-9]+" \
	"$(lg_client --every-kind)"
# an oversize record: the export cuts its values and says "truncated"
big=$(printf '\001%.0s' $(seq 3000))
t_match "an oversize record, acknowledged" "^acked [0-9]+" \
	"$(lg_client -n 1 -V refused -m "$big")"
# a rotation: the new file's log-segment record names the old file
mv "$L" "$L.1"
kill -HUP "$LOGD_PID"
for _ in $(seq 50); do [ -s "$L" ] && break; sleep 0.1; done
last=$(lg_client -n 1 -V allowed)
t_match "a record after the rotation, acknowledged" "^acked [0-9]+" "$last"
t_ok "every record was exported" wait_export "${last#acked }"
logd_stop_ok

t_eq "the new log's segment record, the rotation's and the oversize one are in the files" \
	"2 1" "$(cat "$L.1" "$L" | grep -c '"event.action":"log-segment"') $(grep -c 'u0001' "$L.1")"
kinds=$(cat "$L.1" "$L" | python3 -c '
import json, sys
print(len({(r["event.action"], r.get("event.outcome")) for r in map(json.loads, sys.stdin) if "event.action" in r}))')
t_eq "the files hold every action with each outcome (9 actions x 3, and log-segment)" 28 "$kinds"

out=$(python3 "$PC_TOP/tests/lib/ecs_check.py" "$S/elastic-index-template.json" \
	"$S/elastic-ingest-pipeline.json" "$L.1" "$L" 2>&1)
t_ok "every line of the log files: each field mapped by the template, its JSON type the mapping's" \
	test $? = 0
t_diag "$out"

# The JSON MSG of each exported message (no enterprise number: the default).
sed -n 's/^<[0-9]*>1 [^ ]* [^ ]* portcullis-logd [^ ]* [^ ]* - //p' "$D/export.log" >"$D/export.json"
t_eq "every exported message has a JSON MSG" "$(grep -c . "$D/export.log")" \
	"$(grep -c . "$D/export.json")"
t_match "the oversize record was exported cut, saying so" '"truncated":[0-9]+' \
	"$(cat "$D/export.json")"
out=$(python3 "$PC_TOP/tests/lib/ecs_check.py" "$S/elastic-index-template.json" \
	"$S/elastic-ingest-pipeline.json" "$D/export.json" 2>&1)
t_ok "every exported message (records, checkpoints, the cut one): mapped, typed" test $? = 0
t_diag "$out"

# ---- Splunk ------------------------------------------------------------------
t_ok "packaging/siem has a Splunk props.conf and transforms.conf" \
	test -s "$S/splunk-props.conf" -a -s "$S/splunk-transforms.conf"
# the package's tree is make install's (debian/rules runs it)
(cd "$PC_TOP" && make -s --no-print-directory -f packaging/install.mk DESTDIR="$D/root" \
	>"$D/install.out" 2>&1)
t_eq "make install (the .deb's tree) puts them beside the Elastic files" \
	"elastic-index-template.json elastic-ingest-pipeline.json splunk-props.conf splunk-transforms.conf" \
	"$(cd "$D/root/usr/share/doc/portcullis/examples/siem" 2>/dev/null &&
		ls elastic-* splunk-* 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
out=$(python3 - "$S/splunk-props.conf" "$S/splunk-transforms.conf" "$D/export.log" "$L" 2>&1 <<'PY'
# Splunk's rules as Splunk applies them to one event: the time from
# TIME_PREFIX/TIME_FORMAT (or TIMESTAMP_FIELDS of the JSON), then SEDCMD,
# then KV_MODE=json; REPORT- transforms with FORMAT $1::$2 for the
# structured data. Each stanza and each transform it names must exist.
import configparser, datetime, json, re, sys
props = configparser.RawConfigParser(strict=True, delimiters=("=",), comment_prefixes=("#",))
props.optionxform = str
props.read(sys.argv[1])
tr = configparser.RawConfigParser(strict=True, delimiters=("=",), comment_prefixes=("#",))
tr.optionxform = str
tr.read(sys.argv[2])
bad = []
for st in ("portcullis:verdicts", "portcullis:syslog"):
    if not props.has_section(st):
        bad.append("props.conf: no [%s]" % st)
for st in props.sections():
    for k, v in props.items(st):
        if k.startswith(("REPORT-", "TRANSFORMS-")):
            for name in v.split(","):
                if not tr.has_section(name.strip()):
                    bad.append("props.conf [%s] %s names %s, not in transforms.conf" % (st, k, name.strip()))
if bad:
    print("\n".join(bad)); sys.exit(1)

def strptime(fmt, s):
    # Splunk's %3N (milliseconds) and %Z/%z for a "Z" or an offset
    py = fmt.replace("%3N", "%f").replace("%Z", "%z")
    return datetime.datetime.strptime(s, py)

def rfc3339(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))

sl = dict(props.items("portcullis:syslog"))
n = 0
for raw in open(sys.argv[3]):
    raw = raw.rstrip("\n")
    m = re.search(sl["TIME_PREFIX"], raw)
    if not m:
        bad.append("TIME_PREFIX does not match: " + raw[:80]); continue
    rest = raw[m.end():]
    look = int(sl.get("MAX_TIMESTAMP_LOOKAHEAD", "128"))
    ts = rest[:look].split(" ")[0]
    try:
        t = strptime(sl["TIME_FORMAT"], ts)
    except ValueError as e:
        bad.append("TIME_FORMAT: %s" % e); continue
    ev = raw
    for k, v in sl.items():
        if k.startswith("SEDCMD-"):
            _, pat, rep, _ = v.split("/")
            ev = re.sub(pat, rep, ev, count=1)
    if sl.get("KV_MODE") != "json":
        bad.append("[portcullis:syslog] KV_MODE is not json"); break
    try:
        doc = json.loads(ev)
    except ValueError:
        bad.append("not JSON after SEDCMD: " + ev[:80]); continue
    if "@timestamp" not in doc:
        bad.append("no @timestamp: " + ev[:80]); continue
    if rfc3339(doc["@timestamp"]) != t:
        bad.append("time %s, the record's %s" % (t, doc["@timestamp"]))
    n += 1
vd = dict(props.items("portcullis:verdicts"))
if vd.get("KV_MODE") != "json" and vd.get("INDEXED_EXTRACTIONS") != "json":
    bad.append("[portcullis:verdicts] neither KV_MODE nor INDEXED_EXTRACTIONS is json")
if vd.get("TIMESTAMP_FIELDS") != "@timestamp":
    bad.append("[portcullis:verdicts] TIMESTAMP_FIELDS is not @timestamp")
for line in open(sys.argv[4]):
    r = json.loads(line)
    if "@timestamp" in r:
        strptime(vd["TIME_FORMAT"], r["@timestamp"])
# the structured data (an enterprise number set): one value per name
sd = None
for st in props.sections():
    for k, v in props.items(st):
        if k.startswith("REPORT-") and "sd" in v:
            sd = dict(tr.items(v.strip()))
if not sd:
    bad.append("no REPORT- transform for the structured data")
else:
    msg = ('<134>1 2026-12-04T23:30:01.123Z gw portcullis-logd 7 connect [portcullis@99999 '
           'event.sequence="5" event.hash="ab" event.type="connection,denied" '
           'event.reason="a \\"quoted\\" reason \\] here"] #5 refused connect x')
    got = {}
    for m in re.finditer(sd["REGEX"], msg):
        k, v = m.group(1), m.group(2)
        if k in got:
            bad.append("structured data: %s twice" % k)
        got[k] = re.sub(r'\\(["\\\]])', r"\1", v)
    want = {"event.sequence": "5", "event.hash": "ab", "event.type": "connection,denied",
            "event.reason": 'a "quoted" reason ] here'}
    if got != want:
        bad.append("structured data extracted %r, want %r" % (got, want))
print("\n".join(bad))
print("%d exported messages read as Splunk would" % n)
sys.exit(1 if bad or not n else 0)
PY
)
t_ok "Splunk: each exported message keeps its JSON and its time; the structured data gives each field once" \
	test $? = 0
t_diag "$out"
t_done
