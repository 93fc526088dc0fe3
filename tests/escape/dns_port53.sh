# Escape attempts, class "port 53 to anywhere" (issue 16, hole 1): TCP
# segments that carry no DNS message — ACK, FIN+ACK, RST, SYN+ACK, PSH+ACK,
# each with 36 bytes of TCP option data — to an address on port 53 that is
# not a configured resolver, the same over IPv6 with about 1 KiB of
# destination options per packet, and the same toward the real resolver
# from sources no sandbox has. Before the fix the engine passed every such
# segment (no payload: nothing to judge) and the forward chain accepted its
# PASS mark toward any address, unrecorded. Evidence: the upstream capture
# (nothing reached), the verdict log (a refusal record per segment), the
# bridge table's counter for spoofed sources (they never reach the engine),
# and the forward chain's counter of released packets it did not let out.
# Controls: DNS to the real resolver over UDP and TCP still works.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init dns_port53 "Port 53 to other addresses"
esc_up 2

OTHER4=198.51.100.5     # on the upstream's network, not a resolver
OTHER6=2001:db8:53::5   # next to the IPv6 resolver, not one
NOT_OURS="DNS over TCP to a resolver that is not the guard's"
FLAGS="A FA R SA PA"

# The refusal record of the segment from source port $1 to $2 (its reason).
refusal() { # sport dst
	esc_reason "\"event.action\":\"connect\",\"event.outcome\":\"failure\".*\"source.port\":$1,\"destination.ip\":\"$2\",\"destination.port\":53,"
}

t_match "control: sandbox 1 resolves over UDP through the guard" "^$LAB_API4\$" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 @$LAB_RESOLVER4 api.github.test A)"
t_match "control: and over TCP (dig +tcp)" "^$LAB_API4\$" \
	"$(lab_sb 1 dig +tcp +short +time=2 +tries=1 @$LAB_RESOLVER4 api.github.test A)"
t_match "control: and over TCP to the IPv6 resolver" "^$LAB_API4\$" \
	"$(lab_sb 1 dig +tcp +short +time=2 +tries=1 @$LAB_RESOLVER6 api.github.test A)"

# ---- to an address that is not a resolver ------------------------------------------------
sport=41000
for fl in $FLAGS; do
	sport=$((sport + 1))
	esc_begin "TCP $fl with 36 bytes of TCP options to $OTHER4:53 (not a resolver)"
	esc_craft 1 tcp --dst $OTHER4 --dport 53 --sport $sport --flags $fl --opt-len 36 \
		--count 3 >/dev/null
	esc_expect_nothing "$fl to $OTHER4:53" "dst host $OTHER4"
	r=$(refusal $sport $OTHER4)
	t_eq "$fl to $OTHER4:53: refused and recorded" "$NOT_OURS" "$r"
	esc_end "refused (RST)" "upstream capture: $ESC_N packets to $OTHER4; log: \"$r\""
done

for fl in $FLAGS; do
	sport=$((sport + 1))
	esc_begin "IPv6: TCP $fl with 1 KiB of destination options and 36 bytes of TCP options to [$OTHER6]:53"
	esc_craft 1 tcp --dst $OTHER6 --dport 53 --sport $sport --flags $fl --opt-len 36 \
		--dstopts 1024 --count 3 >/dev/null
	esc_expect_nothing "$fl to [$OTHER6]:53" "ip6 and dst host $OTHER6"
	r=$(refusal $sport $OTHER6)
	t_eq "$fl to [$OTHER6]:53: refused and recorded" "$NOT_OURS" "$r"
	esc_end "refused (RST)" "upstream capture: $ESC_N packets to $OTHER6; log: \"$r\""
done

esc_begin "PSH+ACK with a DNS-looking payload to $OTHER4:53 (a stream is never put together for it)"
sport=$((sport + 1))
esc_craft 1 tcp --dst $OTHER4 --dport 53 --sport $sport --flags PA --opt-len 36 \
	--data "$(printf '\001\000covert')" --count 3 >/dev/null
esc_expect_nothing "payload to $OTHER4:53" "dst host $OTHER4"
r=$(refusal $sport $OTHER4)
t_eq "refused and recorded" "$NOT_OURS" "$r"
esc_end "refused (RST)" "upstream capture: $ESC_N packets; log: \"$r\""

# ---- to the real resolver from sources no sandbox has ----------------------------------------
# The bridge table drops a source that is not its port's before anything
# is queued (docs/engine.md, table bridge): no verdict, so no record; its
# counter is the evidence.
src_drops() { esc_counter bridge ipv4 '@nh,96,32'; }
for src in 10.203.0.77 $SB2_4; do
	for fl in $FLAGS; do
		sport=$((sport + 1))
		esc_begin "TCP $fl with 36 bytes of options to the resolver $LAB_RESOLVER4:53 from $src (not sandbox 1's)"
		c0=$(src_drops)
		esc_craft 1 --src $src tcp --dst $LAB_RESOLVER4 --dport 53 --sport $sport --flags $fl \
			--opt-len 36 --count 3 >/dev/null
		esc_expect_nothing "$fl from $src" "src host $src and dst host $LAB_RESOLVER4"
		c1=$(src_drops)
		t_lt "$fl from $src: dropped by the bridge table" "$c0" "$c1"
		t_eq "$fl from $src: the engine never saw it (no record)" 0 \
			"$(guard_records | tail -n +$((ESC_REC0 + 1)) | grep -c "\"source.port\":$sport," | tr -d ' ')"
		esc_end "dropped at layer 2" "upstream capture: $ESC_N packets; bridge source rules +$((c1 - c0))"
	done
done

# ---- the defence in depth: the forward chain's counter of PASS it drops -----------------------
esc_begin "the forward chain lets released packets out only to the resolvers' port 53 or on held flows"
rules=$(lab_gw nft list chain inet portcullis forward 2>/dev/null | tr -s ' \t' ' ')
# (nft shows "meta mark & 0xff000000 == 0x10000000" as "meta mark 0x10000000/8")
pass='iifname "pcbr0" meta mark 0x10000000/8'
t_match "released DNS goes only to the resolvers' port 53" "$pass ip daddr @resolvers4 udp dport 53 accept" "$rules"
t_match "and over IPv6 TCP" "$pass ip6 daddr @resolvers6 tcp dport 53 accept" "$rules"
t_match "a held flow's segments go on" "$pass ct mark & 0xa0000000 == 0x20000000 accept" "$rules"
t_match "the rest of what is released is counted and dropped" \
	"$pass counter packets [0-9]+ bytes [0-9]+ drop" "$rules"
t_eq "no unconditional accept of a released packet from the bridge is left" "" \
	"$(printf '%s\n' "$rules" | grep -E "$pass accept\$" || true)"
esc_end "held" "$(printf '%s' "$rules" | grep -c 'accept') accept rules in chain forward"

# ---- and the control once more, after all that ----------------------------------------------
t_match "control: DNS over TCP to the resolver still works" "^$LAB_API4\$" \
	"$(lab_sb 1 dig +tcp +short +time=2 +tries=1 @$LAB_RESOLVER4 api.github.test A)"
t_match "control: and over UDP" "^$LAB_API4\$" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 @$LAB_RESOLVER4 api.github.test A)"
t_match "control: a held flow (TLS to an allowed name, released segment by segment) still connects" \
	"^api.github.test ok" "$(lab_sb 1 curl -sS --max-time 4 --cacert "$LAB_CA" https://api.github.test/)"
t_ok "the verdict log verifies" guard_cli log verify
t_done
