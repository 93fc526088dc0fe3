# Escape attempts, class "starvation": sandbox 1 fills the tables every
# sandbox shares on a queue thread — held flows waiting for a ClientHello,
# DNS-over-TCP streams being put together — and floods the queue with
# packets conntrack calls invalid, to deny sandbox 2 its allowed traffic
# (issue 16, hole 3). What must hold: sandbox 2 still connects and resolves
# over TCP while sandbox 1 holds its whole share — of the held flows, the
# whole table, lent while nobody else needs it, and a place given back when
# sandbox 2 does; sandbox 1's refusals name the quota in the log and are
# counted per sandbox in status and metrics;
# the invalid flood spends sandbox 1's new-flow tokens (its limit drops it)
# and sandbox 2's queries go on.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init starve "Starvation of other sandboxes (engine tables, queue)"
# One queue thread: both sandboxes share one held table (4096) and one
# DNS-over-TCP table (256), whatever the kernel's flow hash would do.
GUARD_QUEUE_COUNT=1
export GUARD_QUEUE_COUNT
# Sandbox 1's held flows go to a listener of their own (nginx would run out
# of connections for sandbox 2 before the engine's table did).
ESC_ALLOW1='  - host: cdn-good.test
    ports: [9443]'
esc_up 2
HOLD_PORT=9443
N_HELD=4400 # past the table (4096), let alone sandbox 1's share (2048)
N_STREAMS=400 # past the table (256), let alone sandbox 1's share (128)
quota_field() { # sandbox-index key
	guard_status_field "s['quotas']['sandboxes'][$1]['$2']"
}
metric() { # the value of one sample of portcullis metrics
	guard_cli metrics 2>/dev/null | grep -F -- "$1 " | awk '{print $2} END {if (!NR) print "absent"}' | tail -1
}

# The listener: accepts and keeps every connection, reads nothing.
lab_upstream python3 - "$LAB_CDN4" "$HOLD_PORT" >"$LAB_DIR/hold-srv.out" 2>&1 <<'EOF' &
import os, resource, socket, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
print("pid", os.getpid(), flush=True)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(8192)
print("listening", flush=True)
keep = []
while True:
    c, _ = s.accept()
    keep.append(c)
EOF
hold_srv=$!
for i in $(seq 1 50); do grep -q listening "$LAB_DIR/hold-srv.out" && break; sleep 0.1; done

# ---- segments of flows already opened ---------------------------------------------------------
# Every segment of a held flow and of DNS over TCP is queued: sandbox 1
# opens one connection of each kind and floods it with in-window ACKs.
# First of the attempts: its connections need sandbox 1's buckets and
# shares, which the attempts after it spend for a minute.
ack_flood() { # dst port count -> "sent N"
	lab_sb 1 env ESC_GW_MAC="$ESC_GW_MAC" PYTHONPATH="$PC_TOP/tests/escape" python3 - "$@" 2>&1 <<'EOF'
import socket, struct, sys, time
import craft
dst, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
src = craft.own_addr(socket.AF_INET)
sn = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
sn.bind((craft.IFACE, 0))
sn.settimeout(5)
try:  # the connection the flood rides on
    c = socket.create_connection((dst, port), timeout=10)
except OSError as e:
    sys.exit("no connection to flood on: %s" % e)
sport = c.getsockname()[1]
while True:  # the SYN-ACK: the server's sequence number and the ACK it wants
    f = sn.recv(2048)
    ip = f[14:]
    ihl = (ip[0] & 15) * 4
    t = ip[ihl:]
    sp, dp, seq, ack, _, fl = struct.unpack("!HHIIBB", t[:14])
    if sp == port and dp == sport and fl & 0x12 == 0x12:
        break
l2 = craft.L2(craft.os.environ["ESC_GW_MAC"])
for i in range(n):
    l2.ip(craft.ipv4(src, dst, 6, craft.tcp(src, dst, sport, port, "A", seq=ack, ack=seq + 1)))
print("sent %d ACKs on %s:%d -> %s:%d" % (n, src, sport, dst, port), flush=True)
time.sleep(0.5)
c.close()
EOF
}
esc_begin "segment flood: sandbox 1 sends 20,000 ACKs on a held flow and 20,000 on a DNS-over-TCP connection"
t_match "sandbox 1 resolves cdn-good.test" "^$LAB_CDN4\$" \
	"$(lab_sb 1 dig +short +time=3 +tries=2 @$LAB_RESOLVER4 cdn-good.test A)"
seg0=$(esc_counter inet prerouting '@seg0 ')
q0=$(guard_status_field 'sum(q["queued"] for q in s["queues"])')
f1=$(ack_flood "$LAB_CDN4" "$HOLD_PORT" 20000)
out=$(lab_sb 2 curl -sS --max-time 10 --cacert "$LAB_CA" https://api.github.test/ 2>&1)
f2=$(ack_flood "$LAB_RESOLVER4" 53 20000)
dig2=$(lab_sb 2 dig +tcp +short +time=5 +tries=1 @$LAB_RESOLVER4 api.github.test A 2>&1)
esc_settle
seg1=$(esc_counter inet prerouting '@seg0 ')
q1=$(guard_status_field 'sum(q["queued"] for q in s["queues"])')
t_diag "$f1; $f2; sandbox 1's segment limit dropped $((seg1 - seg0)); the engine took $((q1 - q0))"
t_match "sandbox 1 flooded its held flow" "^sent 20000 ACKs" "$f1"
t_match "sandbox 1 flooded its DNS-over-TCP connection" "^sent 20000 ACKs" "$f2"
t_match "sandbox 2 connects after the held-flow flood" "^api.github.test ok" "$out"
t_match "sandbox 2 resolves over TCP after the DNS-over-TCP flood" "^$LAB_API4\$" "$dig2"
t_lt "sandbox 1's segment limit (4x its new-flow limit) dropped the excess (≥ 10,000 of 40,000)" \
	9999 $((seg1 - seg0))
t_lt "what reached the queue stayed within its burst and rate (< 30,000 of 40,000)" \
	$((q1 - q0)) 30000
esc_end "the segments spent sandbox 1's segment tokens: $((seg1 - seg0)) dropped by its limit; sandbox 2 served" \
	"nft counters of seg0's rules; queued +$((q1 - q0)); sandbox 2: $(printf '%s' "$out" | head -1); dig +tcp: $dig2"

# N TCP connections at once, non-blocking, paced under the new-flow limit
# (1000/s, burst 2000), held open HOLD seconds with nothing sent (each a
# held flow to a named host until engine.sni_timeout_ms): how many
# connected and how many were refused.
cat >"$LAB_DIR/many.py" <<'EOF'
import os, resource, select, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
dst, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
print("pid", os.getpid(), flush=True)
socks = []
for i in range(n):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex((dst, port))
    socks.append(s)
    if i % 500 == 499:
        time.sleep(0.6)
ok = refused = 0
pending = {s.fileno(): s for s in socks}
p = select.poll()
for fd in pending:
    p.register(fd, select.POLLOUT)
end = time.time() + 20
while pending and time.time() < end:
    for fd, _ in p.poll(500):
        e = pending[fd].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        ok += e == 0
        refused += e != 0
        p.unregister(fd)
        del pending[fd]
print("connected %d refused %d pending %d" % (ok, refused, len(pending)), flush=True)
time.sleep(hold)  # held open, no ClientHello
EOF

# ---- held flows ---------------------------------------------------------------------------
esc_begin "held-flow table: sandbox 1 opens $N_HELD TLS connections to cdn-good.test:$HOLD_PORT and never sends a ClientHello"
# Non-blocking connects, paced under the new-flow limit (1000/s, burst
# 2000), then held open: each is a held flow until engine.sni_timeout_ms
# and its entry stays a minute past that.
lab_sb 1 python3 "$LAB_DIR/many.py" "$LAB_CDN4" "$HOLD_PORT" "$N_HELD" 60 >"$LAB_DIR/hold.out" 2>&1 &
holder=$!
for i in $(seq 1 300); do grep -q connected "$LAB_DIR/hold.out" && break; sleep 0.1; done
t_diag "sandbox 1: $(grep connected "$LAB_DIR/hold.out")"
held=$(guard_status_field 's["held"]')
share1=$(quota_field 0 held_flows_share)
t_diag "held flows now: $held (sandbox 1's share: $share1, the table: 4096)"
# Room is lent: with sandbox 2 holding none, sandbox 1 may fill the table
# (docs/engine.md, "Per-sandbox quotas"); only the table bounds it.
t_ok "sandbox 1 borrowed past its share (the table had room)" test "$held" -gt "$share1"
t_ok "the table holds no more than its size" test "$held" -le 4096
t_ok "sandbox 1 holds the whole table (the test filled it)" test "$held" -ge $((4096 - 16))
out=$(lab_sb 2 curl -sS --max-time 10 --cacert "$LAB_CA" https://api.github.test/ 2>&1)
t_match "meanwhile sandbox 2 connects to api.github.test (a held flow of its own)" \
	"^api.github.test ok" "$out"
g1=$(quota_field 0 held_flows_given_up)
t_lt "status: sandbox 1 gave a place up for sandbox 2's flow (its oldest held flow)" 0 "$g1"
t_eq "status: sandbox 2 gave none up" 0 "$(quota_field 1 held_flows_given_up)"
t_eq "metrics: the same count for sandbox 1" "$g1" \
	"$(metric 'portcullis_engine_quota_given_up_total{sandbox="agent-1",table="held_flows"}')"
r1=$(quota_field 0 held_flows_refused)
r2=$(quota_field 1 held_flows_refused)
t_lt "status: sandbox 1's held flows refused over its quota are counted" 0 "$r1"
t_eq "status: sandbox 2 had none refused" 0 "$r2"
t_eq "metrics: the same count for sandbox 1" "$r1" \
	"$(metric 'portcullis_engine_quota_refused_total{sandbox="agent-1",table="held_flows"}')"
esc_settle
nrec=$(guard_records | tail -n +$((ESC_REC0 + 1)) |
	grep -F '"too many connections of this sandbox waiting for a ClientHello (engine quota)"' |
	grep -cF '"portcullis.sandbox":"agent-1"')
t_eq "the log has a refusal naming the quota for each of them" "$r1" "$nrec"
# Closed (past engine.sni_timeout_ms), each flow's FIN is refused; its
# entry stays, refusing the flow's stragglers, until 60 s past its
# deadline (docs/engine.md, "Held flows"). That they then leave is checked
# last, so that the sections below run in that minute.
kill "$(awk '$1 == "pid" {print $2}' "$LAB_DIR/hold.out")" 2>/dev/null
wait "$holder" 2>/dev/null
esc_end "sandbox 1 held $held of 4096 (its share $share1), its other $r1 connections refused (quota), $g1 given up for sandbox 2, which was served" \
	"status quotas; metrics portcullis_engine_quota_refused_total; $nrec log records; sandbox 2: $(printf '%s' "$out" | head -1)"

# ---- DNS-over-TCP streams --------------------------------------------------------------------
# A stream is kept from the connection's SYN on (a segment of no stream the
# guard saw open is refused), so sandbox 1 holds its streams open as an
# attacker would: SYNs whose SYN-ACKs its own kernel drops, so it never
# answers them with a RST that would end them.
esc_begin "DNS-over-TCP table: sandbox 1 opens $N_STREAMS connections to the resolver and never completes them"
lab_sb 1 nft -f - <<'EOF'
table inet starve {
	chain in { type filter hook input priority 0; tcp sport 53 tcp flags & (syn | ack) == syn | ack drop; }
}
EOF
t_flood=$(date +%s%N) # the first streams' age counts from here
esc_craft 1 tcp --dst $LAB_RESOLVER4 --dport 53 --flags S --count $N_STREAMS \
	>"$LAB_DIR/streams.out" 2>&1
# A query whose message spans two segments (the length, then the rest)
# needs a stream; so does any message larger than one segment.
t_s2=$(date +%s%N)
out=$(lab_sb 2 python3 - "$LAB_RESOLVER4" 2>&1 <<'EOF'
import socket, struct, sys, time
q = struct.pack("!HHHHHH", 0x5151, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l for l in b"api.github.test".split(b".")) + b"\0"
q += struct.pack("!HH", 1, 1)
try:
    s = socket.create_connection((sys.argv[1], 53), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.send(struct.pack("!H", len(q)))
    time.sleep(0.05)
    s.send(q)
    l = struct.unpack("!H", s.recv(2))[0]
    r = b""
    while len(r) < l:
        r += s.recv(l - len(r))
    print("answer id %04x, %d answers" % (struct.unpack("!H", r[:2])[0], struct.unpack("!H", r[6:8])[0]))
except Exception as e:
    print("failed:", e)
EOF
)
t_match "meanwhile sandbox 2 resolves over TCP with a message in two segments" \
	"^answer id 5151, [1-9]" "$out"
dig2=$(lab_sb 2 dig +tcp +short +time=5 +tries=1 @$LAB_RESOLVER4 api.github.test A 2>&1)
t_match "and with dig +tcp" "^$LAB_API4\$" "$dig2"
t_diag "$(cat "$LAB_DIR/streams.out")"
s1=$(quota_field 0 dns_tcp_streams_refused)
t_lt "status: sandbox 1's streams refused over its quota are counted" 0 "$s1"
t_eq "status: sandbox 2 had none refused" 0 "$(quota_field 1 dns_tcp_streams_refused)"
# Sandbox 1 held every stream of the table (lent); sandbox 2's two
# connections each took the place of one of them, or found room where one
# of sandbox 1's, idle since its SYN, was forgotten (10 s) — a CI run under
# load once saw no place given up. Which of the two it was is reported, not
# asserted: check_engine (dns_queries, dnstcp_quota_fill_drain_fill) and
# the model's S14a scenario (check_engine_spec) hold the rule itself.
sg1=$(quota_field 0 dns_tcp_streams_given_up)
gap=$(((t_s2 - t_flood) / 1000000))
t_diag "sandbox 1 gave $sg1 streams up for sandbox 2's; sandbox 2 came ${gap} ms after the flood began"
t_eq "metrics: the same count for sandbox 1" "$sg1" \
	"$(metric 'portcullis_engine_quota_given_up_total{sandbox="agent-1",table="dns_tcp_streams"}')"
t_eq "metrics: the same count for sandbox 1" "$s1" \
	"$(metric 'portcullis_engine_quota_refused_total{sandbox="agent-1",table="dns_tcp_streams"}')"
srec=$(guard_records | tail -n +$((ESC_REC0 + 1)) |
	grep -F "DNS over TCP: the sandbox's quota of streams being put together is used up (engine quota)" |
	grep -cF '"portcullis.sandbox":"agent-1"')
t_eq "the log has a refusal naming the quota for each of them" "$s1" "$srec"
# Sandbox 1's kernel answers the resolver's SYN-ACKs again (RSTs end the
# streams): a connection of its own to port 53 would never complete.
lab_sb 1 nft delete table inet starve
esc_end "sandbox 1 held the table's streams, $s1 more refused (quota), $sg1 given up for sandbox 2, which resolved over TCP" \
	"status quotas; metrics; $srec log records; sandbox 2: $out; dig +tcp: $dig2"

# ---- invalid packets -------------------------------------------------------------------------
esc_begin "invalid flood: sandbox 1 sends UDP queries with a bad checksum, FINs and RSTs of no connection to the resolver"
sleep 2.5 # sandbox 1's bucket full again after the floods above
lim0=$(esc_counter inet prerouting '@lim0 ')
q0=$(guard_status_field 'sum(q["queued"] for q in s["queues"])')
lab_sb 1 env ESC_GW_MAC="$ESC_GW_MAC" PYTHONPATH="$PC_TOP/tests/escape" python3 - \
	"$LAB_RESOLVER4" >"$LAB_DIR/invalid.out" 2>&1 <<'EOF' &
import random, socket, struct, sys
import craft
dst = sys.argv[1]
src = craft.own_addr(socket.AF_INET)
l2 = craft.L2(craft.os.environ["ESC_GW_MAC"])
q = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + b"\3api\6github\4test\0" + struct.pack("!HH", 1, 1)
n = 0
for i in range(2000):
    seg = bytearray(craft.udp(src, dst, random.randrange(20000, 60000), 53, q))
    seg[6] ^= 0x55  # a bad checksum: conntrack calls it invalid
    l2.ip(craft.ipv4(src, dst, 17, bytes(seg)))
    for fl in ("F", "R"):  # no connection: invalid
        l2.ip(craft.ipv4(src, dst, 6, craft.tcp(src, dst, random.randrange(20000, 60000), 53, fl)))
    n += 3
print("sent %d invalid packets" % n, flush=True)
EOF
flood=$!
out=$(lab_sb 2 dig +short +time=3 +tries=2 @$LAB_RESOLVER4 api.github.test A 2>&1)
wait $flood
t_match "during the flood, sandbox 2's query is answered" "^$LAB_API4\$" "$out"
out2=$(lab_sb 2 dig +short +time=3 +tries=2 @$LAB_RESOLVER4 api.github.test A 2>&1)
t_match "and after it" "^$LAB_API4\$" "$out2"
esc_settle
lim1=$(esc_counter inet prerouting '@lim0 ')
q1=$(guard_status_field 'sum(q["queued"] for q in s["queues"])')
t_diag "$(cat "$LAB_DIR/invalid.out"); sandbox 1's limit dropped $((lim1 - lim0)); the engine took $((q1 - q0))"
t_lt "sandbox 1's new-flow limit counted the invalid packets (dropped ≥ 1000 of 6000)" 999 \
	$((lim1 - lim0))
t_lt "what reached the queue stayed within sandbox 1's burst and rate (< 5000 of 6000)" \
	$((q1 - q0)) 5000
esc_end "the invalid flood spent sandbox 1's tokens: $((lim1 - lim0)) dropped by its limit; sandbox 2 answered" \
	"nft counters of lim0's rules; queued +$((q1 - q0)); sandbox 2: $out"

# ---- sandbox 1's held flows go back ---------------------------------------------------------
for i in $(seq 1 80); do [ "$(guard_status_field 's["held"]')" = 0 ] && break; sleep 1; done
t_eq "closed, sandbox 1's held flows leave the table: nothing leaks" 0 "$(guard_status_field 's["held"]')"

# ---- shares at scale ---------------------------------------------------------------------------
# A share shrinks with the sandboxes: at 300 it is one DNS-over-TCP stream
# per queue thread, and a stream lives until 10 s after its connection's
# last segment. Room is lent (docs/engine.md, "Per-sandbox quotas"), so a
# sandbox may still resolve over TCP again and again while the table has
# room; with the hard cap its second connection within 10 s was refused.
esc_begin "at 300 sandboxes (shares of 1 stream and 13 held flows), sandbox 2 resolves over TCP three times in a row and opens 40 TLS connections at once"
for i in $(seq 3 300); do
	printf 'sandbox: agent-%d\nmatch: { source: 10.203.%d.%d/32 }\nallow: []\n---\n' \
		"$i" $((100 + i / 250)) $((i % 250 + 1))
done | sed '$d' | guard_rules many
t_ok "the policy of 300 sandboxes is in force" guard_cli reload
t_eq "status: a share of 1 DNS-over-TCP stream per queue thread" 1 \
	"$(quota_field 1 dns_tcp_streams_share)"
r0=$(quota_field 1 dns_tcp_streams_refused)
digs=""
for i in 1 2 3; do
	digs="$digs $(lab_sb 2 dig +tcp +short +time=3 +tries=1 @$LAB_RESOLVER4 api.github.test A 2>&1 | tr '\n' ' ')"
done
t_diag "three digs:$digs"
t_eq "each of the three was answered" 3 "$(printf '%s\n' $digs | grep -c "^$LAB_API4\$")"
t_eq "none refused over the share" "$r0" "$(quota_field 1 dns_tcp_streams_refused)"
# the same for held flows: a share of 4096 / 300 = 13 per queue thread,
# and 40 TLS connections to a named host open at once (a package manager's
# parallel downloads), each held until its ClientHello
t_eq "status: a share of 13 held flows per queue thread" 13 "$(quota_field 1 held_flows_share)"
h0=$(quota_field 1 held_flows_refused)
par=$(lab_sb 2 python3 "$LAB_DIR/many.py" "$LAB_API4" 443 40 0 | grep connected)
t_diag "40 at once: $par"
t_match "all 40 were held (room lent past the share of 13)" "^connected 40 refused 0" "$par"
t_eq "none refused over the share" "$h0" "$(quota_field 1 held_flows_refused)"
rm -f "$GUARD_DIR/rules.d/many.yaml"
t_ok "the policy of 2 sandboxes is back in force" guard_cli reload
esc_end "three DNS-over-TCP connections in a row, and 40 TLS connections at once, from one sandbox among 300: all served (borrowed room)" \
	"dig +tcp x3:$digs; 40 at once: $par; status shares and refusals"

kill "$(awk '$1 == "pid" {print $2}' "$LAB_DIR/hold-srv.out")" 2>/dev/null
wait "$hold_srv" 2>/dev/null
t_ok "the engine survived it all" guard_cli status
t_ok "the verdict log verifies" guard_cli log verify
t_done
