# Escape attempts, class "overlapping DNS over TCP" (issue 30): segment A
# holds one whole allowed query; segment B, also one whole allowed query,
# is sent at a sequence number inside A. Judged alone, each passed; Linux
# keeps A's bytes where they overlap, so the resolver framed B's tail (40
# bytes the guard allowed as an EDNS cookie) as the next message: a query
# for a refused name reached the resolver, with no record. The guard now
# places every segment of the sandbox's connection to the resolver in its
# stream from the SYN on: bytes overlapping kept ones must be the same,
# else the connection is reset and recorded (event.code dns_tcp_overlap).
# Evidence: dnsmasq's query log (what reached the resolver), the crafted
# client's segments (a reset), the guard's log. A plain retransmission (the
# same bytes again) still works.
. "$PC_TOP/tests/escape/escape_lib.bash"
esc_init dns_overlap "Overlapping whole messages in DNS over TCP"
esc_up 1
esc_crafted_ports 1 47300-47399
resolver_saw() { grep -ciE -- "query\[[A-Z0-9]+\] $1 " "$LAB_DIR/dnsmasq.log" 2>/dev/null | tr -d ' '; }
t_match "sandbox 1 resolves api.github.test over TCP" "^NOERROR" \
	"$(esc_craft 1 dns --server "$LAB_RESOLVER4" --tcp --name api.github.test --timeout 2)"

esc_begin "two whole allowed queries over TCP, the second at a sequence number inside the first: its tail frames a query for ov.evil.test"
out=$(esc_craft 1 dns-overlap --dst "$LAB_RESOLVER4" --sport 47301 --scenario overlap \
	--evil ov.evil.test 2>&1)
t_diag "craft: $out"
esc_settle
n=$(resolver_saw 'ov\.evil\.test')
t_eq "the resolver never saw ov.evil.test" 0 "$n"
t_match "the connection was reset" "resets [1-9]" "$out"
r=$(esc_flow_reason 47301)
t_match "the refusal is in the log" "^DNS over TCP: bytes overlap" "$r"
c=$(esc_flow_code 47301)
t_eq "its event.code" dns_tcp_overlap "$c"
esc_end "RST at the overlapping segment" "craft: $out; dnsmasq: $n queries for ov.evil.test; log: \"$r\" ($c)"

esc_begin "a query sent again with the same bytes (a retransmission), then the next query in order"
out=$(esc_craft 1 dns-overlap --dst "$LAB_RESOLVER4" --sport 47302 --scenario same 2>&1)
t_diag "craft: $out"
t_match "both queries answered, once each" "^answers 2;" "$out"
t_match "no reset" "resets 0" "$out"
esc_end "allowed" "craft: $out"
t_done
