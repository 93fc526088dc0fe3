# Escape attempts, class "MPTCP": a SYN carrying the MP_CAPABLE option
# (TCP option kind 30, RFC 8684) makes an MPTCP-capable server run
# Multipath TCP, and its application then reads the data stream the DSS
# data-sequence mappings assemble, not the TCP subflow stream the guard
# judged. On a held flow to the address cdn-good.test shares with the
# disallowed cdn-evil.test, the guard judged segment 1 (cdn-good.test's
# ClientHello) and let segment 2 pass as "bytes after the approved ones"
# (H12: "the server cannot deliver them before the approved ones"); with
# segment 2 (cdn-evil.test's ClientHello) mapped to the start of the data
# stream, the server's TLS library read cdn-evil.test's first and served it.
# The same holds for DNS over TCP to the resolver, whose messages the guard
# frames from the TCP stream. The guard refuses (RST) a SYN carrying MPTCP
# where the flow is judged by its bytes: to a named host, sent again on a
# held flow, to a resolver ("MPTCP in a SYN ...", event.code tcp_mptcp);
# a cidr entry's flow keeps MPTCP (nothing in its bytes is judged).
# Evidence: an MPTCP server of our own (tests/escape/mptcp_peer.py) on the
# shared address logs each connection (TCP_IS_MPTCP) and the name its TLS
# library read first; the upstream capture; the log's refusals.
. "$PC_TOP/tests/escape/escape_lib.bash"

ESC_PEER=$PC_TOP/tests/escape/mptcp_peer.py
# MPTCP sockets need the kernel's MPTCP (CONFIG_MPTCP, net.mptcp.enabled,
# whose default every new namespace gets): probed in a namespace of its own.
if ! probe=$(unshare -n python3 "$ESC_PEER" probe 2>&1); then
	echo "1..0 # SKIP no MPTCP sockets here: ${probe//$'\n'/ }"
	exit 0
fi

esc_init mptcp "MPTCP (Multipath TCP) on streams judged by their bytes"
# cdn-good.test on 8443 (held, judged by its ClientHello) and a cidr entry
# on 8443 (judged at its SYN): the MPTCP server of our own listens on both.
ESC_ALLOW1="  - host: cdn-good.test
    ports: [8443]
  - cidr: $LAB_SSH4/32
    ports: [8443]"
esc_up 2
SRV_LOG=$LAB_DIR/mptcp-server.log
ip netns exec "$LAB_UP" python3 "$ESC_PEER" server --listen "$LAB_CDN4,$LAB_CDN6,$LAB_SSH4" \
	--port 8443 --cert "$LAB_DIR/pki/cdn.test.pem" --key "$LAB_DIR/pki/cdn.test.key" \
	--log "$SRV_LOG" >"$LAB_DIR/mptcp-server.err" 2>&1 &
echo $! >"$LAB_DIR/mptcp-server.pid"
for i in $(seq 1 100); do
	grep -q listening "$SRV_LOG" 2>/dev/null && break
	sleep 0.05
done
t_match "the MPTCP server listens" listening \
	"$(cat "$SRV_LOG" "$LAB_DIR/mptcp-server.err" 2>&1)"

esc_crafted_ports 1 47450-47499

MPTCP_HOST_RE='^MPTCP in a SYN to a named host'
MPTCP_HELD_RE='^MPTCP in a SYN of a held flow'
MPTCP_DNS_RE='^MPTCP in a SYN to a resolver'

t_match "sandbox 1 resolves cdn-good.test (A)" "$LAB_CDN4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test A)"
t_match "sandbox 1 resolves cdn-good.test (AAAA)" "$LAB_CDN6" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test AAAA)"

peer() { # sandbox args...: mptcp_peer.py in sandbox N
	local i=$1
	shift
	lab_sb "$i" env ESC_GW_MAC="$ESC_GW_MAC" python3 "$ESC_PEER" "$@" 2>&1
}
sport_of() { printf '%s\n' "$1" | sed -n 's/^sport \([0-9]*\);.*/\1/p'; }
# What the server logged of the connection from sandbox port SPORT (after a
# bounded wait for its "end" line when it accepted one).
srv_lines() { # sport
	local i
	grep -q "^accept $1 " "$SRV_LOG" &&
		for i in $(seq 1 50); do
			grep -q "^end $1 " "$SRV_LOG" && break
			sleep 0.1
		done
	grep -E "^(accept|sni|end) $1 " "$SRV_LOG" | tr '\n' ' '
}
# The SYNs from sandbox port SPORT that reached the upstream carrying MPTCP.
mptcp_syns_upstream() { # sport
	esc_settle
	esc_upstream_show "tcp and src port $1" | grep 'Flags \[S\]' | grep -c 'mptcp' |
		tr -d ' '
}
refusal_logged() { # sport reason-ERE: $r, $c (for esc_end)
	r=$(esc_flow_reason "$1")
	t_match "the refusal is in the log" "$2" "$r"
	c=$(esc_flow_code "$1")
	t_eq "its event.code" tcp_mptcp "$c"
}

# (a) A real MPTCP client (the sandbox's own kernel, IPPROTO_MPTCP) on the
# held destination: an MPTCP connection to a server whose bytes the guard
# judges by the TCP stream must not open.
mptcp_host_attempt() { # dst
	local out sport srv n
	esc_begin "(a) an MPTCP client (IPPROTO_MPTCP) to cdn-good.test:8443 at $1, a TLS handshake for cdn-good.test"
	out=$(peer 1 tls --dst "$1" --port 8443 --name cdn-good.test --mptcp)
	t_diag "client: $out"
	sport=$(sport_of "$out")
	t_match "$1: the client's port is known" '^[0-9]+$' "$sport"
	t_match "$1: the MPTCP connect is refused (RST)" "not served: ConnectionRefusedError" "$out"
	srv=$(srv_lines "${sport:-0}")
	t_diag "server: ${srv:-(nothing)}"
	t_eq "$1: the MPTCP server accepted no connection from it" "" "$srv"
	esc_expect_nothing "$1: its SYN (MP_CAPABLE)" "tcp and src port ${sport:-0}"
	n=$ESC_N
	refusal_logged "${sport:-0}" "$MPTCP_HOST_RE"
	esc_end "RST at the SYN" "client: $out; server: ${srv:-nothing}; upstream: $n packets; log: \"$r\" ($c)"
}
mptcp_host_attempt "$LAB_CDN4"
mptcp_host_attempt "$LAB_CDN6"

# Nothing else changed on that destination: plain TCP is judged by its
# ClientHello as before (cdn-good.test served, cdn-evil.test not).
esc_begin "plain TCP to cdn-good.test:8443 (IPv4, IPv6): cdn-good.test served, cdn-evil.test not"
ctl=
for dst in "$LAB_CDN4" "$LAB_CDN6"; do
	out=$(peer 1 tls --dst "$dst" --port 8443 --name cdn-good.test)
	sport=$(sport_of "$out")
	t_match "$dst: a TLS handshake for cdn-good.test is served" \
		"^sport [0-9]+; mptcp 0; served: mptcp-server cdn-good.test ok" "$out"
	srv=$(srv_lines "${sport:-0}")
	t_match "$dst: the server read cdn-good.test's ClientHello over plain TCP" \
		"end ${sport:-0} mptcp 0 sni cdn-good.test served" "$srv"
	out2=$(peer 1 tls --dst "$dst" --port 8443 --name cdn-evil.test)
	t_match "$dst: a TLS handshake for cdn-evil.test is not served" "not served: " "$out2"
	ctl="$ctl $dst: $out / $out2;"
done
esc_end "allowed / refused by its name" "$ctl"

# (a') The first SYN plain (the guard holds the flow; the upstream drops
# it: the server never saw it), then the same SYN sent again with
# MP_CAPABLE, as a crafted client: the server would open an MPTCP
# connection on a flow the guard holds as TCP.
esc_begin "(a') a held flow's SYN sent again (same sequence number) with MP_CAPABLE, the first one lost before the server"
lab_upstream nft -f - <<-EOF
	table inet esc_mptcp {
		chain pre {
			type filter hook prerouting priority -300; policy accept;
			ip saddr $SB1_4 tcp sport 47451 tcp flags syn ip length 52 drop
		}
	}
EOF
out=$(peer 1 resyn --dst "$LAB_CDN4" --dport 8443 --sport 47451)
t_diag "craft: $out"
t_match "the first SYN went unanswered (the upstream dropped it)" "^first SYN answered: no" "$out"
t_match "the SYN sent again with MP_CAPABLE is reset" "; reset; " "$out"
n=$(mptcp_syns_upstream 47451)
if [ "$n" = 0 ]; then t_eq "no SYN carrying MPTCP reached the upstream" 0 "$n"; else
	t_eq "no SYN carrying MPTCP reached the upstream" 0 \
		"$n $(esc_upstream_show "tcp and port 47451" | head -4)"; fi
refusal_logged 47451 "$MPTCP_HELD_RE"
esc_end "RST at the second SYN" "craft: $out; upstream: $n MPTCP SYNs; log: \"$r\" ($c)"

# (b) DNS over TCP to the guard's resolver from an MPTCP socket: the guard
# frames the messages from the TCP stream, an MPTCP resolver from its data
# stream. (The lab's resolver, dnsmasq, does not run MPTCP: the old guard
# let the SYN through and the client fell back to TCP; the evidence is
# that the SYN carrying MPTCP reached it at all.)
dns_attempt() { # resolver
	local out sport n m
	esc_begin "(b) DNS over TCP from an MPTCP socket to the resolver $1"
	out=$(peer 1 dns --server "$1" --name api.github.test --mptcp)
	t_diag "client: $out"
	sport=$(sport_of "$out")
	t_match "$1: the client's port is known" '^[0-9]+$' "$sport"
	t_match "$1: the MPTCP connect is refused (RST)" "not answered: ConnectionRefusedError" "$out"
	m=$(mptcp_syns_upstream "${sport:-0}")
	esc_expect_nothing "$1: the query's connection" "tcp and src port ${sport:-0}"
	n=$ESC_N
	t_diag "SYNs carrying MPTCP that reached the resolver: $m"
	refusal_logged "${sport:-0}" "$MPTCP_DNS_RE"
	esc_end "RST at the SYN" "client: $out; upstream: $n packets ($m MPTCP SYNs); log: \"$r\" ($c)"
}
dns_attempt "$LAB_RESOLVER4"
dns_attempt "$LAB_RESOLVER6"

esc_begin "DNS over TCP (plain TCP) to the resolver: answered"
out=$(peer 1 dns --server "$LAB_RESOLVER4" --name api.github.test)
t_match "a framed query over plain TCP is answered" "^sport [0-9]+; mptcp 0; answered NOERROR" "$out"
out2=$(lab_sb 1 dig +tcp +short +time=2 +tries=1 api.github.test A 2>&1)
t_match "dig +tcp is answered" "$LAB_API4" "$out2"
esc_end "allowed" "client: $out; dig +tcp: $out2"

# (c) A cidr entry's flow is judged at its SYN, not by its bytes: MPTCP
# stays allowed there.
esc_begin "(c) an MPTCP client to a cidr-allowed destination ($LAB_SSH4:8443)"
out=$(peer 1 tls --dst "$LAB_SSH4" --port 8443 --name cidr.test --mptcp)
t_diag "client: $out"
sport=$(sport_of "$out")
t_match "the MPTCP connection opens and is served" \
	"^sport [0-9]+; mptcp 1; served: mptcp-server cidr.test ok" "$out"
srv=$(srv_lines "${sport:-0}")
t_diag "server: $srv"
t_match "the server ran it as MPTCP" "end ${sport:-0} mptcp 1 sni cidr.test served" "$srv"
c=$(esc_flow_code "${sport:-0}")
t_eq "logged as allowed by its cidr entry" cidr "$c"
esc_end "allowed (MPTCP)" "client: $out; server: $srv; log: $c"

# (d) The evasion itself, crafted: an MPTCP v1 handshake, then segment 1 =
# cdn-good.test's ClientHello (judged) mapped by its DSS after segment 2's
# bytes, segment 2 = cdn-evil.test's ClientHello (past the judged bytes:
# H12) mapped to the data stream's start (IDSN + 1).
esc_begin "(d) MPTCP, crafted: cdn-good.test's ClientHello judged first on the subflow, cdn-evil.test's mapped first in the data stream"
out=$(peer 1 swap --dst "$LAB_CDN4" --dport 8443 --sport 47452 --good cdn-good.test --evil cdn-evil.test)
t_diag "craft: $out"
srv=$(srv_lines 47452)
t_diag "server: ${srv:-(nothing)}"
t_nomatch "the server's TLS library read no ClientHello for cdn-evil.test" \
	"sni 47452 cdn-evil.test" "$srv"
n=$(esc_evil_upstream 47452)
t_eq "no byte naming cdn-evil.test reached the upstream" 0 "$n"
t_match "the crafted client got no byte from the server" "data bytes 0," "$out"
refusal_logged 47452 "$MPTCP_HOST_RE"
esc_end "RST at the SYN" "craft: $out; server: ${srv:-nothing}; upstream: $n packets naming cdn-evil.test; log: \"$r\" ($c)"

t_done
