# Held flows cheaper, and no weaker (issue 34, point 4): the ruleset lets a
# held flow's bare ACKs from the sandbox past the queue (prerouting, before
# the held-flow queue rule; docs/engine.md, "Held flows: what is queued"),
# and the server's bare ACKs once the ClientHello was judged as TLS
# (forward rules 13c; the server part is further down).
# The engine passed them anyway (H7): they put no byte into the server's
# stream. What this proves, through the lab's real kernel, on the address
# shared by an allowed name and a disallowed one (cdn-good.test):
#   - a bare ACK, with no TCP options or with the timestamps Linux sends,
#     IPv4 and IPv6, does not reach the queue (old ruleset: it did);
#   - every segment one field away from that shape still does, and is
#     judged as before: one byte of data, PSH, ECE, a reserved bit, IPv4
#     options, an IPv6 destination options header, and an urgent pointer
#     without URG (refused: H2a, tcp_urgent);
#   - what the exact shape can still carry reaches no application: bytes
#     in the frame past the IP length are cut by the kernel (the server
#     acknowledges no byte, the upstream capture holds none of them), and
#     an unknown TCP option's bytes are the TCP stack's, as they were under
#     H7 (the server acknowledges no byte).
# Each connection is crafted from sandbox 1 (tests/escape/craft.py held
# --scenario ack-VARIANT) and compared with a connection that sends no
# extra segment: the difference in packets queued is the verdict.
# And the held table: a promoted entry no longer keeps its place among the
# flows waiting for a ClientHello through its grace. TLS flows opened
# faster than a sandbox's share (2,048 with one queue thread and two
# sandboxes) per grace were refused "(engine quota)": at 2 s a grace, any
# rate above 1,024 flows/s (bench/scale's host entry, once it sent
# ClientHellos). bench/flows' client sends a real ClientHello and resets at
# the server's ServerHello record, for 3 s, to a server of its own on the
# shared address (port 9443).
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init held_ack "Bare ACKs of held flows past the queue"
GUARD_QUEUE_COUNT=1 # one held table: the share is 2,048 whatever the flow hash does
export GUARD_QUEUE_COUNT
ESC_ALLOW1='  - host: cdn-good.test
    ports: [9443, 9444]'
esc_up 2

esc_crafted_ports 1 47200-47299

t_match "sandbox 1 resolves cdn-good.test (A)" "$LAB_CDN4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test A)"
t_match "sandbox 1 resolves cdn-good.test (AAAA)" "$LAB_CDN6" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test AAAA)"

queued() { guard_status_field 'sum(q["queued"] for q in s["queues"])'; }
sport=47200
OUT=
# run DST VARIANT: one crafted connection; sets N (packets queued for it),
# OUT (the crafter's line) and SP (its source port)
run() {
	local q0 q1
	sport=$((sport + 1))
	SP=$sport
	esc_settle
	q0=$(queued)
	OUT=$(esc_craft 1 held --dst "$1" --sport "$SP" --scenario "ack-$2" 2>&1)
	esc_settle
	q1=$(queued)
	N=$((q1 - q0))
}

for fam in 4 6; do
	if [ $fam = 4 ]; then dst=$LAB_CDN4; else dst=$LAB_CDN6; fi
	# the baseline: handshake and RST, nothing between (median of three:
	# a retransmitted SYN-ACK on a loaded machine adds one)
	base=()
	for i in 1 2 3; do
		run "$dst" none
		base+=("$N")
	done
	b=$(printf '%s\n' "${base[@]}" | sort -n | sed -n 2p)
	t_diag "IPv$fam: a held connection without an extra segment queues $b packets (${base[*]}); $OUT"

	for v in plain ts opts trail; do
		[ $fam = 6 ] && [ $v = trail ] && continue
		esc_begin "IPv$fam: a bare ACK ($v) on a held flow"
		run "$dst" "$v"
		t_diag "craft: $OUT; queued $N (baseline $b)"
		t_eq "IPv$fam bare ACK ($v): not queued" "$b" "$N"
		t_match "IPv$fam bare ACK ($v): the server took no byte of the flow" \
			"server acknowledged 0 bytes" "$OUT"
		t_eq "IPv$fam bare ACK ($v): no trailing or option byte reached the upstream as data" 0 \
			"$(tcpdump -n -A -r "$LAB_DIR/upstream.pcap" "tcp and src port $SP" 2>/dev/null |
				grep -c 'TRAILING' | tr -d ' ')"
		esc_end "passed without the queue, no byte in the server's stream" "queued $N (baseline $b); $OUT"
	done

	vs="data psh ece res urp"
	[ $fam = 4 ] && vs="$vs ipopt" || vs="$vs dstopts"
	for v in $vs; do
		esc_begin "IPv$fam: a segment one field away from a bare ACK ($v) on a held flow"
		run "$dst" "$v"
		t_diag "craft: $OUT; queued $N (baseline $b)"
		t_ok "IPv$fam $v: queued and judged ($N > $b)" [ "$N" -gt "$b" ]
		if [ $v = urp ]; then
			t_eq "IPv$fam urp: refused as urgent data (H2a)" tcp_urgent "$(esc_flow_code "$SP")"
		fi
		esc_end "queued and judged" "queued $N (baseline $b); $OUT"
	done
done

# The rule's own counter: the bare ACKs above, and every handshake's ACK.
n=$(esc_counter inet prerouting 'meta mark set')
t_diag "prerouting's bare-ACK rules counted $n packets"

# The server's bare ACKs (issue 34, point 4): once the ClientHello was
# judged allowed, the engine's verdict puts the TLS bit on the flow's ct
# mark and the forward chain lets the server's bare ACKs past the queue
# (the same exact shape as the sandbox's). A TLS flow is never promoted on
# one (H13a), so what the engine no longer sees changes nothing: the
# server acknowledges the ClientHello and 4 bytes past it, and other bytes
# where the ClientHello was are still refused (bytes-differ, before any
# promotion). A flow judged "not TLS" carries no TLS bit: its server's bare
# ACK is still queued, and promotes it. The server reads and never answers
# (port 9444), so its ACKs are bare.
cat >"$LAB_DIR/quiet.py" <<'PY'
import socket, sys, threading
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 9444))
s.listen(64)
def drain(c):
    while c.recv(65536):
        pass
while True:
    threading.Thread(target=drain, args=(s.accept()[0],), daemon=True).start()
PY
lab_upstream python3 "$LAB_DIR/quiet.py" "$LAB_CDN4" &
lab_upstream python3 "$LAB_DIR/quiet.py" "$LAB_CDN6" &
lab_wait_tcp "$LAB_UP" "$LAB_CDN4" 9444
lab_wait_tcp "$LAB_UP" "$LAB_CDN6" 9444
srvack() { esc_counter inet forward '0xa2000000'; }
for fam in 4 6; do
	if [ $fam = 4 ]; then dst=$LAB_CDN4; else dst=$LAB_CDN6; fi
	esc_begin "IPv$fam: the server's bare ACK of a judged ClientHello, then other bytes there"
	sport=$((sport + 1))
	SP=$sport
	esc_settle
	c0=$(srvack)
	q0=$(queued)
	OUT=$(esc_craft 1 held --dst "$dst" --dport 9444 --sport "$SP" --scenario srv-ack 2>&1)
	esc_settle
	c1=$(srvack)
	q1=$(queued)
	t_diag "craft: $OUT; queued $((q1 - q0)); forward's server-ACK rules counted $((c1 - c0))"
	t_match "IPv$fam: the server's bare ACK of the ClientHello and 4 bytes more reached the sandbox" \
		"server bare ACK of the judged bytes and 4 more: yes" "$OUT"
	t_lt "IPv$fam: it passed without the queue (forward's server-ACK rule counted it)" 0 \
		"$((c1 - c0))"
	t_eq "IPv$fam: other bytes where the ClientHello was are still refused (held_inconsistent)" \
		held_inconsistent "$(esc_flow_code "$SP")"
	t_match "IPv$fam: ... as bytes that differ from the judged ones" \
		"bytes sent again differ" "$(esc_flow_reason "$SP")"
	t_match "IPv$fam: the sandbox got the refusal's RST" "resets after the other bytes: [1-9]" "$OUT"
	esc_end "bare ACK past the queue; the flow still refused on other bytes" \
		"$OUT; counted $((c1 - c0))"

	esc_begin "IPv$fam: the server's bare ACK of a flow judged not TLS"
	sport=$((sport + 1))
	SP=$sport
	esc_settle
	c0=$(srvack)
	OUT=$(esc_craft 1 held --dst "$dst" --dport 9444 --sport "$SP" --scenario srv-ack-plain 2>&1)
	esc_settle
	c1=$(srvack)
	t_diag "craft: $OUT; forward's server-ACK rules counted $((c1 - c0))"
	t_match "IPv$fam not TLS: the server's bare ACK reached the sandbox" \
		"server bare ACK of the judged bytes and 4 more: yes" "$OUT"
	t_eq "IPv$fam not TLS: it was queued (no TLS bit on the flow), not passed by the rule" 0 \
		"$((c1 - c0))"
	t_match "IPv$fam not TLS: ... and promoted the flow: later segments take the fast path (no RST)" \
		"resets after the other bytes: 0" "$OUT"
	esc_end "queued and promoting, as before" "$OUT"
done

# A real client still works, and queues fewer packets than before (5.7
# per connection with every bare ACK queued: docs/engine.md).
esc_begin "curl https://cdn-good.test: a real TLS client on the shared address"
esc_settle
q0=$(queued)
for i in $(seq 1 10); do
	r=$(lab_sb 1 curl -sS --max-time 5 --cacert "$LAB_CA" \
		--resolve "cdn-good.test:443:$LAB_CDN4" https://cdn-good.test/ 2>&1)
	t_match "curl $i works" "^cdn-good.test ok" "$r"
done
esc_settle
q1=$(queued)
t_diag "queued packets per TLS connection to a held host: $(((q1 - q0) / 10)).$(((q1 - q0) % 10)) (10 connections: $((q1 - q0)))"
esc_end "works" "queued $((q1 - q0)) for 10 connections"

# A promoted entry goes at the first drained read 50 ms after its verdict
# (docs/engine.md, "Held flows"): the connection must go on by its ct mark
# alone. One TLS connection sends its request at once after the handshake,
# then again 0.3 s and 0.8 s later (after the entry went, and past
# HELD_GRACE_MS), each answered on the same connection.
esc_begin "one TLS connection over a held host, used at once and after its entry went"
r=$(lab_sb 1 python3 - "$LAB_CA" "$LAB_CDN4" <<'PY' 2>&1
import socket, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[1])
s = ctx.wrap_socket(socket.create_connection((sys.argv[2], 443), timeout=5),
                    server_hostname="cdn-good.test")
for wait in (0, 0.3, 0.8):
    time.sleep(wait)
    s.sendall(b"GET / HTTP/1.1\r\nHost: cdn-good.test\r\n\r\n")
    got = b""
    while b"cdn-good.test ok" not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
    print("answered" if b"cdn-good.test ok" in got else "not answered", wait)
PY
)
t_eq "three requests on one connection answered (at once, 0.3 s, 0.8 s later)" \
	"answered 0 answered 0.3 answered 0.8" "$(echo $r)"
esc_end "works" "$r"

esc_begin "TLS flows to a held host faster than the sandbox's share per grace period"
cc -O2 -std=gnu11 -o "$LAB_DIR/flows" "$PC_TOP/bench/flows.c" || t_fail "bench/flows.c builds" true
python3 - "$LAB_DIR/hello.bin" <<'PY'
import ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
t = ctx.wrap_bio(i, o, server_hostname="cdn-good.test")
try:
    t.do_handshake()
except ssl.SSLWantReadError:
    pass
open(sys.argv[1], "wb").write(o.read())
PY
lab_upstream "$LAB_DIR/flows" serve-hello "$LAB_CDN4" 9443 &
lab_wait_tcp "$LAB_UP" "$LAB_CDN4" 9443
ESC_REC0=$(guard_records | wc -l)
out=$(lab_sb 1 "$LAB_DIR/flows" conn "$LAB_CDN4" 9443 3 16 "$LAB_DIR/hello.bin" 2>&1)
t_diag "client: $out"
n=$(echo "$out" | sed -n 's/.*conns \([0-9]*\).*/\1/p')
t_lt "TLS flows judged and promoted" 0 "${n:-0}"
q=$(guard_records | tail -n +$((ESC_REC0 + 1)) | grep -c 'waiting for a ClientHello (engine quota)')
t_eq "none refused for the sandbox's share of held flows" 0 "$q"
esc_end "no refusal" "client: $out; quota refusals: $q"

t_done
