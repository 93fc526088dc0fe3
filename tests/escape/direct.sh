# Escape attempts, class "direct addresses": a sandbox connecting by address
# past its policy — other hosts, an allowed host's other ports, IPv6, IPv4
# addresses dressed as IPv6 (mapped, NAT64, 6to4, compatible), broadcast and
# multicast, the gateway's own addresses and services. Each must fail, reach
# nothing upstream (capture on the upstream's uplink), and be in the log
# with its reason — or be counted by the rule that drops it before any
# verdict (the gateway's own addresses).
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init direct "Direct addresses"
esc_up 2
curl_rc() { # sandbox curl-args...: curl's exit code
	local i=$1 rc
	shift
	lab_sb "$i" curl -s -o /dev/null --max-time 3 "$@" && rc=0 || rc=$?
	echo "$rc"
}
rec() { guard_records | grep '"event.action":"connect"' | grep -E -- "$1" | tail -1; }

# ---- other addresses, other ports --------------------------------------------------------
esc_begin "TCP to an address no rule names (paste.evil.test's 203.0.113.12:443)"
t_eq "refused at once with a RST (curl 7)" 7 "$(curl_rc 1 -k https://$LAB_PASTE4/)"
esc_refused "paste" "dst host $LAB_PASTE4" "\"destination.ip\":\"$LAB_PASTE4\""
esc_end "RST (curl exit 7)" "upstream capture: 0 packets to $LAB_PASTE4; log: refused, \"$r\""

esc_begin "TCP to an allowed address on another port (198.51.100.22:80, 22 allowed)"
t_eq "refused (curl 7)" 7 "$(curl_rc 1 http://$LAB_SSH4:80/)"
esc_refused "ssh:80" "dst host $LAB_SSH4 and tcp port 80" "\"destination.ip\":\"$LAB_SSH4\",\"destination.port\":80,"
esc_end "RST (curl exit 7)" "upstream capture: 0 packets to $LAB_SSH4:80; log: \"$r\""

esc_begin "UDP to an allowed address on another port (198.51.100.22:5001, udp 5000 allowed)"
esc_craft 1 udp --dst $LAB_SSH4 --dport 5001 --count 3 >/dev/null
esc_refused "udp 5001" "dst host $LAB_SSH4 and udp port 5001" "\"destination.ip\":\"$LAB_SSH4\",\"destination.port\":5001,"
esc_end "ICMP admin-prohibited" "upstream capture: 0 packets; log: \"$r\""

esc_begin "TCP to an allowed cidr, allowed port, as the other protocol (UDP 198.51.100.22:22)"
esc_craft 1 udp --dst $LAB_SSH4 --dport 22 --count 3 >/dev/null
esc_refused "udp 22" "dst host $LAB_SSH4 and udp port 22" "\"destination.ip\":\"$LAB_SSH4\",\"destination.port\":22,\"network.transport\":\"udp\""
esc_end "ICMP admin-prohibited" "upstream capture: 0 packets; log: \"$r\""

esc_begin "a host entry's address by address without resolving it (203.0.113.10:443)"
t_eq "refused (curl 7)" 7 "$(curl_rc 1 -k https://$LAB_API4/)"
esc_refused "api by address" "dst host $LAB_API4" "\"destination.ip\":\"$LAB_API4\""
esc_end "RST (curl exit 7)" "upstream capture: 0 packets to $LAB_API4; log: \"$r\""

esc_begin "the other sandbox's allowed address is not ours (sandbox 2 to 198.51.100.22:22)"
t_eq "refused (curl 7)" 7 "$(curl_rc 2 telnet://$LAB_SSH4:22)"
r=$(esc_reason "\"portcullis.sandbox\":\"agent-2\".*\"destination.ip\":\"$LAB_SSH4\"")
t_match "logged with its reason" "$ESC_REFUSED_RE" "$r"
esc_expect_nothing "sb2 to ssh" "src host $SB2_4 and dst host $LAB_SSH4"
esc_end "RST (curl exit 7)" "upstream capture: 0 packets from $SB2_4; log: \"$r\""

# ---- IPv6 and IPv4 dressed as IPv6 --------------------------------------------------------
esc_begin "IPv6 to an address no rule names ([2001:db8:10::10]:443)"
t_eq "refused (curl 7)" 7 "$(curl_rc 1 -6 -k "https://[$LAB_API6]/")"
esc_refused "api6" "ip6 and dst host $LAB_API6" "\"destination.ip\":\"$LAB_API6\""
esc_end "RST (curl exit 7)" "upstream capture: 0 IPv6 packets to $LAB_API6; log: \"$r\""

esc_begin "IPv6 to an allowed IPv6 address on another port ([2001:db8:22::22]:80)"
t_eq "refused (curl 7)" 7 "$(curl_rc 1 -6 "http://[$LAB_SSH6]:80/")"
esc_refused "ssh6:80" "ip6 and dst host $LAB_SSH6 and tcp port 80" "\"destination.ip\":\"$LAB_SSH6\",\"destination.port\":80,"
esc_end "RST (curl exit 7)" "upstream capture: 0 packets; log: \"$r\""

# (the kernel's count of IPv6 packets with a destination it will not take)
kernel_v6_in() { lab_gw nstat -az Ip6InReceives | awk '/Ip6InReceives/ {print $2}'; }
n_mapped=0
for form in "::ffff:$LAB_DIRECT4" "::ffff:$LAB_PASTE4" "64:ff9b::$LAB_DIRECT4" "64:ff9b::$LAB_PASTE4" \
	"2002:cb00:7163::1" "::$LAB_DIRECT4"; do
	esc_begin "IPv4 inside an IPv6 address: SYN to [$form]:80 (203.0.113.99:80 is allowed over IPv4)"
	k0=$(kernel_v6_in) d0=$(esc_counter inet prerouting 'counter')
	esc_craft 1 tcp --dst "$form" --dport 80 --count 2 >/dev/null
	esc_expect_nothing "[$form]" "ip6 and tcp port 80"
	n=$(esc_upstream "ip and dst host $LAB_DIRECT4 and tcp port 80 and src host $SB1_4")
	t_eq "[$form]: nothing reached the IPv4 host either" 0 "$n"
	full=$(python3 -c 'import ipaddress,sys; print(ipaddress.ip_address(sys.argv[1]))' "$form")
	r=$(esc_reason "\"destination.ip\":\"$full\"")
	if [ "$r" = "(no record)" ]; then
		# the kernel may drop such destinations before the hook (e.g.
		# v4-mapped): then prerouting never ran and nothing is judged
		k1=$(kernel_v6_in) d1=$(esc_counter inet prerouting 'counter')
		ev="no verdict: the gateway received them (Ip6InReceives +$((k1 - k0))) and its IPv6 input dropped them before netfilter (no rule counted them)"
		t_lt "[$form]: the gateway did receive them" 1 $((k1 - k0))
		t_eq "[$form]: no rule of our prerouting chain saw them (kernel drop before the hooks)" \
			"$d0" "$d1"
		t_ok "[$form]: no allowed record for it either" \
			test -z "$(guard_records | grep '"event.outcome":"success"' | grep -F "$full")"
	else
		t_match "[$form]: logged as refused" "$ESC_REFUSED_RE|never allowed" "$r"
		ev="log: \"$r\""
	fi
	esc_end "dropped/refused" "upstream capture: 0 packets; $ev"
	n_mapped=$((n_mapped + 1))
done

# ---- broadcast and multicast ------------------------------------------------------------------
for dst in 255.255.255.255 10.203.0.255 224.0.0.251 239.1.2.3 ff02::1 ff0e::1:3; do
	esc_begin "UDP to broadcast/multicast $dst:5000"
	esc_craft 1 udp --dst $dst --dport 5000 --count 3 >/dev/null
	esc_expect_nothing "$dst" "udp port 5000 and not src host $LAB_SSH4"
	r=$(esc_reason "\"destination.ip\":\"$dst\"")
	if [ "$r" = "(no record)" ]; then
		ev="no verdict: not forwarded by the gateway (no route for broadcast/multicast), no listener"
	else
		t_match "$dst: logged as refused" "$ESC_REFUSED_RE|never allowed|may not" "$r"
		ev="log: \"$r\""
	fi
	t_ok "$dst: no allowed record" \
		test -z "$(guard_records | grep '"event.outcome":"success"' | grep -F "\"destination.ip\":\"$dst\"")"
	esc_end "dropped" "upstream capture: 0 packets; $ev"
done

# ---- the gateway itself -------------------------------------------------------------------
lab_gw socat TCP-LISTEN:2222,fork,reuseaddr SYSTEM:"cat >>$LAB_DIR/gw-2222.log" &
lab_gw socat TCP6-LISTEN:2223,fork,reuseaddr SYSTEM:"cat >>$LAB_DIR/gw-2223.log" &
lab_gw socat UDP-RECVFROM:2224,fork SYSTEM:"cat >>$LAB_DIR/gw-2224.log" &
lab_wait_tcp "$LAB_GW" 127.0.0.1 2222
local_drops() { esc_counter inet prerouting 'fib daddr type local'; }
for dst in $LAB_GW4 $LAB_UPLINK_GW4 "[$LAB_GW6]" "[$LAB_UPLINK_GW6]"; do
	esc_begin "TCP to a service of the gateway at $dst:2222"
	c0=$(local_drops)
	echo probe | lab_sb 1 socat -T 1 - "TCP:$dst:2222,connect-timeout=1" 2>/dev/null
	port=2222
	case $dst in "["*) echo probe | lab_sb 1 socat -T 1 - "TCP6:$dst:2223,connect-timeout=1" 2>/dev/null ;; esac
	esc_settle
	t_eq "$dst: the gateway's listener got nothing" 0 "$(cat "$LAB_DIR"/gw-222[23].log 2>/dev/null | wc -c)"
	c1=$(local_drops)
	t_lt "$dst: dropped by 'fib daddr type local counter drop' (before any verdict)" "$c0" "$c1"
	esc_end "dropped (no answer)" "listener log empty; inet prerouting 'fib daddr type local' counter +$((c1 - c0))"
done

esc_begin "UDP to the gateway (10.203.0.1:2224) and ICMP echo to it"
c0=$(local_drops)
esc_craft 1 udp --dst $LAB_GW4 --dport 2224 --count 3 >/dev/null
t_fail "ping the gateway: no answer" lab_sb 1 ping -c 1 -W 1 $LAB_GW4
esc_settle
t_eq "the UDP listener got nothing" 0 "$(cat "$LAB_DIR/gw-2224.log" 2>/dev/null | wc -c)"
c1=$(local_drops)
t_lt "dropped by the local-destination rule" "$((c0 + 3))" "$c1"
esc_end "dropped" "listener log empty; 'fib daddr type local' counter +$((c1 - c0))"

esc_begin "the vault's port on the gateway, asked directly (10.203.0.1:8443)"
lab_gw socat TCP-LISTEN:8443,fork,reuseaddr SYSTEM:"cat >>$LAB_DIR/gw-8443.log" &
lab_wait_tcp "$LAB_GW" 127.0.0.1 8443
c0=$(local_drops)
echo probe | lab_sb 1 socat -T 1 - "TCP:$LAB_GW4:8443,connect-timeout=1" 2>/dev/null
esc_settle
t_eq "the listener on 8443 got nothing" 0 "$(cat "$LAB_DIR/gw-8443.log" 2>/dev/null | wc -c)"
c1=$(local_drops)
t_lt "dropped by the local-destination rule" "$c0" "$c1"
esc_end "dropped" "listener log empty; counter +$((c1 - c0)) (only flows the engine marked VAULT are redirected there)"

esc_begin "DNS to the gateway's own address (10.203.0.1:53, not a configured resolver)"
out=$(esc_craft 1 dns --server $LAB_GW4 --name api.github.test)
t_match "answered REFUSED by the guard" "^REFUSED" "$out"
r=$(esc_reason "\"event.action\":\"dns-query\".*\"destination.ip\":\"$LAB_GW4\"")
t_eq "logged with its reason" "not to a configured resolver" "$r"
esc_end "REFUSED answer" "log: \"$r\"; nothing listens there"

esc_begin "loopback and martian destinations through the gateway (127.0.0.1:22, 0.0.0.0:22)"
esc_craft 1 tcp --dst 127.0.0.1 --dport 22 --count 2 >/dev/null
esc_craft 1 tcp --dst 0.0.0.0 --dport 22 --count 2 >/dev/null
esc_expect_nothing "martians" "tcp port 22 and not host $LAB_SSH4 and not host $LAB_SSH6"
t_ok "no allowed record for them" \
	test -z "$(guard_records | grep '"event.outcome":"success"' | grep -E '"destination.ip":"(127\.0\.0\.1|0\.0\.0\.0)"')"
esc_end "dropped" "upstream capture: 0 packets; no allowed record (the kernel drops martians)"

esc_begin "the upstream side of the uplink (192.0.2.2:22) as a destination"
t_eq "refused (curl 7)" 7 "$(curl_rc 1 telnet://$LAB_UPLINK_UP4:22)"
esc_refused "uplink peer" "dst host $LAB_UPLINK_UP4 and tcp port 22" "\"destination.ip\":\"$LAB_UPLINK_UP4\""
esc_end "RST (curl exit 7)" "upstream capture: 0 packets; log: \"$r\""

t_match "after all this, the allowed address still works" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
t_ok "the verdict log verifies" guard_cli log verify
t_done
