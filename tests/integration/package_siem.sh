#!/usr/bin/env bash
# The shipped rsyslog relay (packaging/siem/rsyslog-portcullis.conf) works as
# operations.md tells the admin to use it: portcullis-logd sends to the
# relay's socket (log.syslog.socket), the relay forwards over TLS with name
# checking to a collector, and every record arrives there with its RFC 5424
# structured data (seq, hash, outcome, destination, sandbox) equal to the
# signed log. Both rsyslogs are started by this test in a network namespace
# of its own (loopback only); the system's rsyslog is never touched. The
# snippet is used as shipped except for paths, the collector's address and
# port, and the CA file.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)} PC_BUILD=${PC_BUILD:-build}
if [ "${1:-}" != inner ]; then
	exec unshare -n -- bash "$0" inner
fi
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "rsyslog relay snippet" "$B/portcullis-logd" "$B/tests/helpers/logd_client"
if ! command -v rsyslogd >/dev/null || ! ls /usr/lib/*/rsyslog/lmnsd_ossl.so >/dev/null 2>&1; then
	t_skip "rsyslog relay snippet" "rsyslog or rsyslog-openssl missing (make deps)"
	t_done
	exit
fi

lg_init siem
mkdir -p "$D/relay" "$D/coll"
RELAY_PID="" COLL_PID=""
cleanup() {
	for p in $RELAY_PID $COLL_PID; do kill "$p" 2>/dev/null; done
	lg_cleanup
}
trap cleanup EXIT
ip link set lo up

# The collector's certificate names siem.example.org, the peer the snippet
# permits; its CA replaces the system bundle in the snippet.
lg_certs siem.example.org DNS:siem.example.org
t_ok "test certificates made" test -s "$D/srv.pem"

# The collector: TLS on 127.0.0.1:16514, one line per message with the
# parsed structured data.
cat >"$D/coll.conf" <<EOF
$(rs_global "$D/coll")
module(load="imtcp")
module(load="mmpstrucdata")
input(type="imtcp" port="16514" address="127.0.0.1" ruleset="in" streamDriver.name="ossl"
      streamDriver.mode="1" streamDriver.authMode="anon")
template(name="t" type="list") {
  property(name="app-name") constant(value="|")
  property(name="msgid") constant(value="|")
$(rs_sd_fields event.sequence event.hash event.outcome destination.domain destination.port)
  property(name="\$!rfc5424-sd!portcullis@32473!portcullis.sandbox") constant(value="\n")
}
ruleset(name="in") { action(type="mmpstrucdata") action(type="omfile" file="$D/coll.log" template="t") }
EOF

# The relay: Debian's rsyslog.conf loads imuxsock (without the system socket
# here), then the snippet as shipped, with this test's paths and collector.
sed -e "s|/run/rsyslog-portcullis.sock|$D/relay.sock|" \
	-e "s|/var/log/portcullis-syslog.log|$D/relay-local.log|" \
	-e "s|/etc/ssl/certs/ca-certificates.crt|$D/ca.pem|" \
	-e 's|target="siem.example.org" port="6514"|target="127.0.0.1" port="16514"|' \
	"$PC_TOP/packaging/siem/rsyslog-portcullis.conf" >"$D/snippet.conf"
t_match "the snippet still forwards to its documented collector name" \
	'StreamDriverPermittedPeers="siem.example.org"' "$(cat "$D/snippet.conf")"
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

# logd, configured as operations.md says: log.syslog.socket = the relay's,
# and an enterprise number for the SD-ID (32473, the documentation one, in
# a test: without one there is no structured data, logd_syslog.sh).
lg_config syslog: "  local: true" "  socket: $D/relay.sock" "  enterprise_number: 32473"
logd_start
t_match "40 records acknowledged by logd" "^acked" \
	"$(lg_client -n 40 -b 10 -s agent-siem -q)"

for _ in $(seq 100); do
	n=$(grep -c '|agent-siem$' "$D/coll.log" 2>/dev/null)
	[ "${n:-0}" -ge 40 ] && break
	sleep 0.1
done
logd_stop

expected=$(python3 - "$D/log/verdicts.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get('event.action') == 'connect' and r.get('portcullis.sandbox') == 'agent-siem':
        print('|'.join(str(x) for x in ('portcullis-logd', 'connect', r['event.sequence'], r['event.hash'],
              r['event.outcome'], r['destination.domain'], r['destination.port'], r['portcullis.sandbox'])))
PY
)
t_eq "the signed log has the 40 records" 40 "$(printf '%s\n' "$expected" | grep -c .)"
t_eq "through the relay over TLS: every record arrived, structured data as in the signed log" \
	"$expected" "$(grep '|agent-siem$' "$D/coll.log" 2>/dev/null)"
t_match "the relay kept a local RFC 5424 copy with the structured data" \
	'portcullis-logd [0-9]+ connect \[portcullis@32473 event.sequence="[0-9]+" event.hash="[0-9a-f]{64}"' \
	"$(cat "$D/relay-local.log" 2>/dev/null)"
t_nomatch "the relay reported no error" 'error|invalid' "$(cat "$D/relay.err" 2>/dev/null)"
t_done
