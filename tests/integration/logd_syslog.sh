# Syslog export to a real rsyslog, started by this test in a network
# namespace of its own (loopback only; the system's rsyslog is never
# touched): every record arrives over TCP (octet counting) and over the
# local datagram socket with its structured data parsed by rsyslog and equal
# to the signed log's fields and hash; checkpoints arrive; records written
# while the collector is down are spooled and arrive when it is back; over
# TLS every record arrives, and a collector whose certificate does not
# verify gets nothing while the file still has everything. A record whose
# syslog form is over 16 KiB arrives cut, with the marker; with the spool
# full while the collector is away, records give way but every checkpoint
# arrives.
set -u
if [ "${1:-}" != inner ]; then
	exec unshare -n -- bash "$0" inner
fi
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_init logd-syslog
RS_PID=
cleanup() {
	[ -z "$RS_PID" ] || kill "$RS_PID" 2>/dev/null
	lg_cleanup
}
trap cleanup EXIT
ip link set lo up

# a CA and the collector's certificate (for 127.0.0.1), and a second CA
# nobody trusts
lg_certs collector IP:127.0.0.1
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=otherca" -keyout "$D/otherca.key" -out "$D/otherca.pem" 2>/dev/null
t_ok "test certificates made" test -s "$D/srv.pem"

# rsyslog: plain TCP on 10514, TLS on 6514, a local socket; each to its own
# file, one line per message with the parsed structured data.
cat >"$D/rs.conf" <<EOF
$(rs_global "$D")
module(load="imtcp")
module(load="imuxsock" SysSock.Use="off")
module(load="mmpstrucdata")
input(type="imtcp" port="10514" address="127.0.0.1" ruleset="tcp")
input(type="imtcp" port="6514" address="127.0.0.1" ruleset="tls" streamDriver.name="ossl"
      streamDriver.mode="1" streamDriver.authMode="anon")
input(type="imuxsock" Socket="$D/local.sock" ruleset="local" UseSpecialParser="off"
      ParseHostname="on")
template(name="t" type="list") {
  property(name="msgid") constant(value="|")
$(rs_sd_fields event.sequence event.hash event.outcome destination.domain destination.port portcullis.sandbox portcullis.checkpoint.size truncated event.reason portcullis.spool.dropped)
  property(name="msg") constant(value="\n")
}
ruleset(name="tcp") { action(type="mmpstrucdata") action(type="omfile" file="$D/tcp.log" template="t") }
ruleset(name="tls") { action(type="mmpstrucdata") action(type="omfile" file="$D/tls.log" template="t") }
ruleset(name="local") { action(type="mmpstrucdata") action(type="omfile" file="$D/local.log" template="t") }
EOF
rs_start() {
	rsyslogd -n -f "$D/rs.conf" -i "$D/rs.pid" >>"$D/rs.err" 2>&1 &
	RS_PID=$!
	for _ in $(seq 50); do
		[ -S "$D/local.sock" ] && (exec 3<>/dev/tcp/127.0.0.1/10514) 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
rs_stop() {
	kill "$RS_PID"
	wait "$RS_PID" 2>/dev/null
	RS_PID=
	rm -f "$D/local.sock"
}
config() { # remote tls ca [enterprise_number]: the tests below parse portcullis@32473
	lg_config syslog: "  local: true" "  socket: $D/local.sock" "  remote: \"$1\"" "  tls: $2" \
		"  ca: \"$3\"" "  spool: 10000" "  enterprise_number: ${4:-32473}"
}
# expected: seq|hash|outcome|domain|port|sandbox for each record of the file
expected() { # from-seq
	python3 - "$D/log/verdicts.jsonl" "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if 'event.sequence' in r and r['event.sequence'] >= int(sys.argv[2]) and r['event.action'] == 'connect':
        print('|'.join(str(x) for x in (r['event.sequence'], r['event.hash'], r['event.outcome'],
              r['destination.domain'], r['destination.port'], r['portcullis.sandbox'])))
PY
}
received() { # file from-seq
	awk -F'|' -v from="$2" '$1 == "connect" && $2 >= from { print $2 "|" $3 "|" $4 "|" $5 "|" $6 "|" $7 }' "$1"
}
wait_lines() { # file pattern count
	local n
	for _ in $(seq 100); do
		n=$(grep -c "$2" "$1" 2>/dev/null)
		[ "${n:-0}" -ge "$3" ] && return 0
		sleep 0.1
	done
	return 1
}

# --- TCP and local ---
rs_start
t_eq "rsyslog runs in the test's namespace" 0 $?
config 127.0.0.1:10514 false ""
logd_start
t_match "200 records acknowledged" "^acked 201$" \
	"$(lg_client -n 200 -b 20 -s agent-7 -q)"
logd_stop_ok
wait_lines "$D/tcp.log" '^connect|' 200
exp=$(expected 2)
t_eq "TCP: every record arrived, fields and hash as in the signed log" "$exp" "$(received "$D/tcp.log" 2)"
wait_lines "$D/local.log" '^connect|' 200
t_eq "local socket: every record arrived, fields and hash as in the signed log" "$exp" \
	"$(received "$D/local.log" 2)"
t_match "TCP: the checkpoints arrived (tree size in structured data)" '^checkpoint\|\|\|\|\|\|\|201\|' \
	"$(cat "$D/tcp.log")"
t_match "the message is the short human form" '^connect\|2\|.*\|#2 refused connect host0\.example:443 \(not on the allow list\)$' \
	"$(cat "$D/tcp.log")"

# --- a record whose syslog form is over 16 KiB: cut, with the marker ---
logd_start
big=$("$B/tests/helpers/logd_latency" "$D/run/logd.sock" --oversize)
t_match "the oversize record is acknowledged" "^oversize seq [0-9]+$" "$big"
bseq=${big##* }
wait_lines "$D/tcp.log" "^exfiltration|$bseq|" 1
line=$(grep "^exfiltration|$bseq|" "$D/tcp.log")
full=$(python3 - "$L" "$bseq" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get('event.sequence') == int(sys.argv[2]):
        print(r['event.hash'], len(r['event.reason']))
PY
)
t_eq "the record is whole in the file (7,900 bytes of reason)" 7900 "${full#* }"
t_match "TCP: it reached the collector, seq and hash as in the file" "^exfiltration\|$bseq\|${full% *}\|" "$line"
t_match "with truncated=\"<length of the full form>\" (over 16384)" \
	"^([^|]*\|){8}(1[6-9][0-9]{3}|[2-9][0-9]{4})\|" "$line"
t_match "its long value cut, ending in ..." '\|\]{4096}\.\.\.\|' "$line"
t_match "MSG ends with the marker" ' \[truncated\]$' "$line"
wait_lines "$D/local.log" "^exfiltration|$bseq|" 1
t_match "local socket: it arrived too, cut with the marker" ' \[truncated\]$' \
	"$(grep "^exfiltration|$bseq|" "$D/local.log")"
logd_stop_ok

# --- the collector away: spooled, then delivered ---
rs_stop
logd_start
t_match "records are acknowledged while the collector is down (the file comes first)" "^acked" \
	"$(lg_client -n 50 -b 10 -s agent-8 -q)"
# (the export thread says so once it tried: wait for it, a readiness wait)
for _ in $(seq 50); do
	grep -q "syslog export to 127.0.0.1 unavailable" "$D/logd.err" && break
	sleep 0.1
done
t_match "logd reports the collector unavailable and spools" "syslog export to 127.0.0.1 unavailable, spooling" \
	"$(cat "$D/logd.err")"
from=$(($(grep -c '^{"event.sequence"' "$D/log/verdicts.jsonl") - 49))
rs_start
wait_lines "$D/tcp.log" '|agent-8|' 50
t_eq "the spooled records arrived once the collector was back" "$(expected "$from")" \
	"$(received "$D/tcp.log" "$from")"
logd_stop_ok

# --- the spool full while the collector is away: records give way, every
# checkpoint arrives ---
rs_stop
# (each batch of 5 is synced and sealed by its own checkpoint: the writer
# exports the newest checkpoint a sync made durable, so here every one)
lg_config syslog: "  local: false" "  remote: \"127.0.0.1:10514\"" "  spool: 10" \
	"  enterprise_number: 32473" checkpoint: "  records: 5" "fsync_batch: true"
logd_start
t_match "records acknowledged with the collector away and a spool of 10" "^acked" \
	"$(lg_client -n 100 -b 5 -s agent-13 -q)"
cps=$(python3 - "$L" <<'PY'
import json, sys
n = [json.loads(l)['checkpoint'].split('\n')[1] for l in open(sys.argv[1]) if l.startswith('{"checkpoint"')]
print(' '.join(n[-20:]))
PY
)
t_eq "20 checkpoints were written meanwhile" 20 "$(wc -w <<<"$cps")"
rs_start
last=${cps##* }
wait_lines "$D/tcp.log" "^checkpoint|.*|$last|" 1
got=$(for c in $cps; do grep -c "^checkpoint|\([^|]*|\)\{6\}$c|" "$D/tcp.log"; done | tr '\n' ' ')
t_eq "every one of them reached the collector" "$(for _ in $cps; do printf '1 '; done)" "$got"
t_match "the records that gave way are counted in a spool-overflow notice" \
	'^spool-overflow\|.*\|[1-9][0-9]*\|[0-9]+ records were not exported' "$(cat "$D/tcp.log")"
logd_stop_ok

# --- TLS ---
config 127.0.0.1:6514 true "$D/ca.pem"
logd_start
lg_client -n 30 -b 10 -s agent-9 -q >/dev/null
from=$(($(grep -c '^{"event.sequence"' "$D/log/verdicts.jsonl") - 29))
wait_lines "$D/tls.log" '|agent-9|' 30
logd_stop_ok
t_eq "TLS: every record arrived, fields and hash as in the signed log" "$(expected "$from")" \
	"$(received "$D/tls.log" "$from")"

config 127.0.0.1:6514 true "$D/otherca.pem"
logd_start
lg_client -n 5 -s agent-10 -q >/dev/null
t_eq "the records are in the file" 5 "$(grep -c '"portcullis.sandbox":"agent-10"' "$D/log/verdicts.jsonl")"
# (the export has tried once logd said why it failed)
lab_wait_until grep -q "TLS with 127.0.0.1:6514: .*certificate verify failed" "$D/logd.err"
logd_stop_ok
t_eq "TLS to a collector whose certificate does not verify: nothing sent" 0 \
	"$(grep -c '|agent-10|' "$D/tls.log")"
t_match "logd says why" "TLS with 127.0.0.1:6514: .*certificate verify failed" "$(cat "$D/logd.err")"

# --- SIGHUP re-reads the syslog settings ---
config 127.0.0.1:10514 false ""
logd_start
lg_client -n 3 -s agent-11 -q >/dev/null
wait_lines "$D/tcp.log" '|agent-11|' 3
config 127.0.0.1:6514 true "$D/ca.pem"
kill -HUP "$LOGD_PID"
sleep 0.5
lg_client -n 4 -s agent-12 -q >/dev/null
wait_lines "$D/tls.log" '|agent-12|' 4
logd_stop_ok
t_eq "after SIGHUP with new settings, records go to the new collector (TLS)" 4 \
	"$(grep -c '|agent-12|' "$D/tls.log")"
t_eq "and no longer to the old one" 0 "$(grep -c '|agent-12|' "$D/tcp.log")"
t_match "logd says so" "SIGHUP: syslog settings changed" "$(cat "$D/logd.err")"

# --- no enterprise number (the default): no structured data of ours (no
# documentation PEN), every field in a JSON MSG, as the JSON line names it
lg_config syslog: "  local: false" "  remote: \"127.0.0.1:10514\""
logd_start
lg_client -n 6 -s agent-14 -q >/dev/null
wait_lines "$D/tcp.log" 'agent-14' 6
logd_stop_ok
t_eq "default: the 6 records arrived" 6 "$(grep -c 'agent-14' "$D/tcp.log")"
t_eq "default: no structured data (no SD-ID at all)" "" \
	"$(grep 'agent-14' "$D/tcp.log" | cut -d'|' -f2-11 | tr -d '|' | sort -u)"
exp=$(python3 - "$D/log/verdicts.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get('portcullis.sandbox') == 'agent-14':
        r.pop('portcullis.prev')
        print(json.dumps(r, sort_keys=True))
PY
)
t_eq "default: the MSG is a JSON object with every field of the signed line (but prev)" "$exp" \
	"$(grep 'agent-14' "$D/tcp.log" | cut -d'|' -f12- | python3 -c '
import json, sys
for l in sys.stdin:
    print(json.dumps(json.loads(l), sort_keys=True))')"
t_match "default: the checkpoints arrive as the file's checkpoint lines" \
	'^checkpoint\|\|\|\|\|\|\|\|\|\|\|\{"checkpoint":"[^"]+\\n[0-9]+\\n' "$(tail -5 "$D/tcp.log")"
t_nomatch "nothing says 32473 by default" '32473' "$(PC config show)"

rs_stop
t_ok "the log verifies" PC log verify
t_done
