# Escape attempts, class "insertion on held flows" (issue 16, hole 2): on
# an address shared by an allowed name (cdn-good.test) and a disallowed one
# (cdn-evil.test), the sandbox makes the guard judge bytes the server never
# gets — a segment with TTL / hop limit 1 passes prerouting, where the
# engine judges, and dies in the gateway's forwarding — then sends the
# disallowed name's ClientHello at the same sequence number; or it starts
# the connection over with another ISN. Each is crafted from sandbox 1 by a
# TCP client of its own (tests/escape/craft.py held). Evidence: the
# upstream capture holds no byte of a ClientHello naming cdn-evil.test, the
# crafted client got no byte from the server after it, and the log says
# why. Real clients on held flows still work (promotion on the server's
# acknowledgement): curl over TLS on the shared address, IPv4 and IPv6,
# and plain HTTP on a host entry.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init held_insertion "Insertion on held flows"
ESC_ALLOW1='  - host: api.github.test
    ports: [80]'
esc_up 2

esc_crafted_ports 1 47000-47999


t_match "sandbox 1 resolves cdn-good.test (A)" "$LAB_CDN4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test A)"
t_match "sandbox 1 resolves cdn-good.test (AAAA)" "$LAB_CDN6" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test AAAA)"

held_attempt() { # title dst sport scenario reason-ERE outcome
	local out n r
	esc_begin "$1"
	out=$(esc_craft 1 held --dst "$2" --sport "$3" --scenario "$4" 2>&1)
	t_diag "craft: $out"
	n=$(esc_evil_upstream "$3")
	t_eq "$4 $2: no byte naming cdn-evil.test reached the upstream" 0 "$n"
	t_match "$4 $2: the crafted client got no byte from the server" "data bytes 0," "$out"
	r=$(esc_flow_reason "$3")
	t_match "$4 $2: the refusal is in the log" "$5" "$r"
	esc_end "$6" "upstream capture: $n packets naming cdn-evil.test from port $3; client: $out; log: \"$r\""
}

held_attempt "(a) a 1-byte non-TLS segment with TTL 1, then cdn-evil.test's ClientHello at the same sequence number" \
	"$LAB_CDN4" 47001 ttl1-plain '^held flow: bytes sent again differ from the ones judged$' \
	"RST at the second ClientHello"
held_attempt "(b) cdn-good.test's ClientHello with TTL 1, then cdn-evil.test's at the same sequence number" \
	"$LAB_CDN4" 47002 ttl1-hello '^held flow: bytes sent again differ from the ones judged$' \
	"RST at the second ClientHello"
held_attempt "(c) IPv6: a 1-byte non-TLS segment with hop limit 1, then cdn-evil.test's ClientHello at the same sequence number" \
	"$LAB_CDN6" 47003 ttl1-plain '^held flow: bytes sent again differ from the ones judged$' \
	"RST at the second ClientHello"
held_attempt "(c) IPv6: cdn-good.test's ClientHello with hop limit 1, then cdn-evil.test's" \
	"$LAB_CDN6" 47004 ttl1-hello '^held flow: bytes sent again differ from the ones judged$' \
	"RST at the second ClientHello"
# (On this kernel conntrack answers the second SYN with a new entry, which
# the old engine's PASS left without the held mark: the server's SYN-ACK
# then died in the forward chain. The engine no longer relies on that.)
held_attempt "(d) a first SYN with TTL 1, a second with another ISN, bytes 'let through' at the first, then cdn-evil.test's ClientHello at the second" \
	"$LAB_CDN4" 47005 syn2 '^held flow: a SYN with another sequence number than the first$' \
	"RST at the second SYN"
t_eq "syn2: the SYN with another ISN never reached the upstream" 0 \
	"$(esc_upstream "tcp src port 47005 and tcp[tcpflags] & tcp-syn != 0")"

# A TLS record that is not a handshake was judged "not TLS" and allowed on
# a host entry; a server may skip it (Go's crypto/tls drops warning alerts
# before the ClientHello) and take the ClientHello after it. (The lab's
# nginx answers it with 400 and closes, but the bytes reach it.)
held_attempt "(e) a TLS warning alert record first (not a handshake, so once judged 'not TLS'), then cdn-evil.test's ClientHello after it" \
	"$LAB_CDN4" 47006 alert '^malformed TLS ClientHello$' \
	"RST at the alert record"

# H6a: a promoted connection, reset, then a SYN with another ISN on the
# same ports within the promoted entry's grace (a client reusing its port;
# conntrack opens a new connection): a new flow, judged afresh with its own
# record (the old engine refused it: "a SYN with another sequence number").
# The first connection's sequence space is no way back: another name's
# ClientHello there is refused by the new flow.
esc_begin "(f) a promoted connection reset, then another ISN on its ports: a new flow, judged afresh"
out=$(esc_craft 1 held --dst "$LAB_CDN4" --sport 47007 --scenario resyn 2>&1)
t_diag "craft: $out"
t_match "resyn: the first connection was answered (promoted)" "^first connection: data bytes [1-9]" "$out"
t_match "resyn: the SYN with another ISN was answered by the server" "second SYN answered by the server" "$out"
t_match "resyn: the second connection's ClientHello was answered" "second connection: data bytes [1-9]" "$out"
esc_settle
ok=$(guard_records | tail -n +$((ESC_REC0 + 1)) | grep '"source.port":47007,' |
	grep '"event.outcome":"success"' | grep -c '"tls.client.server_name":"cdn-good.test"' | tr -d ' ')
t_eq "resyn: two allowed records, one per connection" 2 "$ok"
t_eq "resyn: no refusal" 0 "$(guard_records | tail -n +$((ESC_REC0 + 1)) |
	grep '"source.port":47007,' | grep -c '"event.outcome":"failure"' | tr -d ' ')"
esc_end "second connection allowed" "client: $out; allowed records: $ok"
held_attempt "(g) a promoted connection reset, another ISN on its ports, then cdn-evil.test's ClientHello in the first connection's sequence space" \
	"$LAB_CDN4" 47008 resyn-old "^held flow: data before the connection's first byte$" \
	"RST at the ClientHello in the old space"

# ---- real clients on held flows: promoted on the server's acknowledgement ----
esc_begin "curl https://cdn-good.test (IPv4 and IPv6): a real TLS client on the shared address"
t_match "IPv4: works" "^cdn-good.test ok" \
	"$(lab_sb 1 curl -sS -4 --max-time 5 --cacert "$LAB_CA" https://cdn-good.test/ 2>&1)"
t_match "IPv6: works" "^cdn-good.test ok" \
	"$(lab_sb 1 curl -sS -6 --max-time 5 --cacert "$LAB_CA" https://cdn-good.test/ 2>&1)"
ok=$(guard_records | tail -n +$((ESC_REC0 + 1)) | grep '"event.outcome":"success"' |
	grep -c '"tls.client.server_name":"cdn-good.test"' | tr -d ' ')
t_eq "one allowed record per connection" 2 "$ok"
r=$(lab_sb 1 curl -sS --max-time 4 --cacert "$LAB_CA" --resolve "cdn-evil.test:443:$LAB_CDN4" \
	https://cdn-evil.test/ 2>&1)
t_nomatch "cdn-evil.test through a real client is still refused" "cdn-evil.test ok" "$r"
esc_end "allowed; cdn-evil.test refused" "two allowed records for cdn-good.test"

# What promotion on the server's acknowledgement costs: the packets of one
# TLS connection to a held host that cross to userspace (no DNS: the name
# is resolved already), averaged over ten.
queued() { guard_status_field 'sum(q["queued"] for q in s["queues"])'; }
esc_settle
q0=$(queued)
for i in $(seq 1 10); do
	lab_sb 1 curl -s -o /dev/null --max-time 5 --cacert "$LAB_CA" \
		--resolve "cdn-good.test:443:$LAB_CDN4" https://cdn-good.test/
done
esc_settle
q1=$(queued)
t_diag "queued packets per TLS connection to a held host: $(((q1 - q0) / 10)).$(((q1 - q0) % 10)) (10 connections: $((q1 - q0)))"

esc_begin "plain HTTP on a host entry (api.github.test:80): not TLS, promoted on the server's acknowledgement"
t_match "works" "^http api.github.test ok" \
	"$(lab_sb 1 curl -sS --max-time 5 http://api.github.test/ 2>&1)"
r=$(esc_reason '"destination.port":80,.*"event.outcome":"success"|"event.outcome":"success".*"destination.port":80,')
t_match "its record" "not TLS" "$r"
esc_end "allowed" "log: \"$r\""

t_done
