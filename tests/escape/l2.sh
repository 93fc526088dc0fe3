# Escape attempts, class "layer 2": ARP and neighbour-discovery spoofing of
# the gateway and of the other sandbox, MAC and source-address spoofing,
# VLAN-tagged frames, and frames addressed to the other sandbox (with the
# lab's port isolation switched off, so that the bridge table alone stands
# in the way). Sandbox 1 is bound to its bridge port, sandbox 2 to its MAC.
# Most of these are dropped by the bridge table before any verdict, by
# design: the evidence is then the counter of the rule that dropped them,
# the gateway's neighbour table, and a capture in the victim sandbox.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init l2 "Layer 2"
MAC1=$(lab_sb_mac 1) MAC2=$(lab_sb_mac 2)
ESC_NO_POLICY=1
guard_need_bins
lab_up 3
trap 'esc_finish' EXIT
guard_config
guard_rules agents <<EOF
sandbox: agent-1
match: { source: [$SB1_4/32, "$SB1_6/128"], port: $(lab_sb_port 1) }
allow:
  - cidr: $LAB_DIRECT4/32
    ports: [80]
  - cidr: "$LAB_SSH6/128"
    ports: [22]
---
sandbox: agent-2
match: { source: [$SB2_4/32, "$SB2_6/128"], mac: "$MAC2" }
allow:
  - cidr: $LAB_DIRECT4/32
    ports: [80]
---
sandbox: agent-3
match: { source: $(lab_sb_ip4 3)/32, port: $(lab_sb_port 3) }
allow:
  - cidr: $LAB_DIRECT4/32
    ports: [80]
EOF
guard_start || { t_fail "the guard started" true; t_done; }
ESC_GW_MAC=$(lab_gw cat /sys/class/net/$LAB_BR/address)
export ESC_GW_MAC
esc_capture_start

bcount() { esc_counter bridge "$1" "$2"; }
gw_neigh() { lab_gw ip "${2:--4}" neigh show "$1" dev $LAB_BR | awk '{for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1)}'; }
# A capture in sandbox 2 (the victim of sandbox 1's frames) and in sandbox 1.
for i in 1 2 3; do
	ip netns exec "$(lab_sb_ns $i)" tcpdump -i eth0 -n -U --immediate-mode -Z root \
		-w "$LAB_DIR/sb$i.pcap" 2>"$LAB_DIR/sb$i-tcpdump.err" &
	echo $! >"$LAB_DIR/sb$i-tcpdump.pid"
done
for i in $(seq 1 100); do
	grep -q listening "$LAB_DIR/sb1-tcpdump.err" && grep -q listening "$LAB_DIR/sb2-tcpdump.err" &&
		grep -q listening "$LAB_DIR/sb3-tcpdump.err" && break
	sleep 0.05
done
sb_saw() { # sandbox filter: packets in that sandbox's capture since the attempt began
	sleep 0.3
	tcpdump -tt -n -r "$LAB_DIR/sb$1.pcap" "$2" 2>/dev/null | awk -v t="$ESC_T0" '$1 + 0 >= t + 0' | wc -l | tr -d ' '
}

t_match "baseline: sandbox 1 reaches its allowed address" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
t_match "baseline: sandbox 2 reaches its allowed address" "^http 203.0.113.99 ok" \
	"$(lab_sb 2 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
t_match "baseline: sandbox 1 over IPv6" "^hello6$" \
	"$(echo hello6 | lab_sb 1 socat -T 3 - "TCP6:[$LAB_SSH6]:22")"
t_eq "the gateway knows sandbox 1's MAC (IPv4)" "$MAC1" "$(gw_neigh $SB1_4)"
t_eq "the gateway knows sandbox 1's MAC (IPv6)" "$MAC1" "$(gw_neigh $SB1_6 -6)"

# ---- ARP ----------------------------------------------------------------------------------
esc_begin "ARP: sandbox 2 claims the gateway's address 10.203.0.1 (gratuitous reply, broadcast)"
c0=$(bcount arp '@nh,112,32 != @src4')
esc_craft 2 arp --sender-ip $LAB_GW4 --op 2 >/dev/null
c1=$(bcount arp '@nh,112,32 != @src4')
t_lt "dropped by the bridge arp chain (sender IP of no sandbox)" "$c0" "$c1"
t_eq "sandbox 1 saw none of it" 0 "$(sb_saw 1 "arp and ether src $MAC2")"
esc_end "dropped before any verdict" "bridge arp 'sender IP != @src4' counter +$((c1 - c0)); sandbox 1 capture: nothing"

esc_begin "ARP: sandbox 2 claims sandbox 1's address (reply to the gateway's MAC)"
c0=$(bcount arp '@p_src4')
esc_craft 2 arp --sender-ip $SB1_4 --target-ip $LAB_GW4 --dst-mac "$ESC_GW_MAC" --op 2 >/dev/null
esc_craft 2 arp --sender-ip $SB1_4 --target-ip $LAB_GW4 --op 1 >/dev/null
c1=$(bcount arp '@p_src4')
t_lt "dropped: sandbox 1's addresses come only from its port" "$c0" "$c1"
t_eq "the gateway still maps sandbox 1's address to sandbox 1's MAC" "$MAC1" "$(gw_neigh $SB1_4)"
esc_end "dropped before any verdict" "bridge arp port-binding counter +$((c1 - c0)); gateway neighbour entry unchanged ($MAC1)"

esc_begin "ARP: sandbox 1 claims sandbox 2's (MAC-bound) address with its own MAC"
lab_sb 2 curl -s -o /dev/null --max-time 3 http://$LAB_DIRECT4/
c0=$(bcount arp 'drop')
esc_craft 1 arp --sender-ip $SB2_4 --target-ip $LAB_GW4 --dst-mac "$ESC_GW_MAC" --op 2 >/dev/null
c1=$(bcount arp 'drop')
t_lt "dropped by the arp chain" "$c0" "$c1"
n=$(gw_neigh $SB2_4)
t_ok "the gateway's entry for sandbox 2 is not sandbox 1's MAC" test "$n" != "$MAC1"
esc_end "dropped before any verdict" "bridge arp counters +$((c1 - c0)); gateway entry for $SB2_4: ${n:-none}"

esc_begin "ARP of another hardware/protocol type (htype 6, ptype IPv6)"
c0=$(bcount arp '0x108000604')
lab_sb 1 python3 -c 'import socket,struct
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(("eth0", 0))
mac = bytes(int(x, 16) for x in open("/sys/class/net/eth0/address").read().strip().split(":"))
body = struct.pack("!HHBBH", 6, 0x86dd, 6, 16, 2) + mac + b"\x20\x01" + b"\0" * 14 + b"\xff" * 6 + b"\0" * 16
s.send(b"\xff" * 6 + mac + b"\x08\x06" + body)'
c1=$(bcount arp '0x108000604')
t_lt "dropped: only Ethernet/IPv4 ARP passes" "$c0" "$c1"
esc_end "dropped before any verdict" "bridge arp 'htype/ptype/hlen/plen' counter +$((c1 - c0))"

# ---- neighbour discovery ------------------------------------------------------------------
esc_begin "ND: sandbox 2 advertises sandbox 1's IPv6 address with its own MAC (override, to the gateway)"
esc_craft 2 na --target $SB1_6 --dst $LAB_GW6 --solicited >/dev/null
esc_craft 2 na --target $SB1_6 >/dev/null
sleep 0.3
n=$(gw_neigh $SB1_6 -6)
t_eq "the gateway still maps sandbox 1's IPv6 address to sandbox 1's MAC" "$MAC1" "$n"
t_match "sandbox 1's IPv6 flow still works" "^again6$" \
	"$(echo again6 | lab_sb 1 socat -T 3 - "TCP6:[$LAB_SSH6]:22")"
t_eq "sandbox 2 received none of sandbox 1's IPv6 traffic" 0 "$(sb_saw 2 "ip6 and dst host $SB1_6")"
esc_end "ignored" "gateway neighbour entry for $SB1_6: $n; sandbox 2 capture: nothing for $SB1_6"

esc_begin "ND: sandbox 2 advertises the gateway's IPv6 address to all nodes"
esc_craft 2 na --target $LAB_GW6 >/dev/null
sleep 0.3
t_eq "sandbox 1 saw none of it" 0 "$(sb_saw 1 "ether src $MAC2")"
n=$(lab_sb 1 ip -6 neigh show $LAB_GW6 | awk '{for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1)}')
t_ok "sandbox 1's entry for the gateway is not sandbox 2's MAC" test "$n" != "$MAC2"
esc_end "not delivered" "sandbox 1 capture: nothing from $MAC2; its gateway entry: ${n:-none}"

esc_begin "RA: sandbox 2 advertises itself as the default router, with a prefix to autoconfigure from"
r0=$(esc_gw_snmp6 Icmp6InRouterAdvertisements)
esc_craft 2 ra --prefix 2001:db8:bad:: >/dev/null
sleep 0.3
t_eq "sandbox 1 received none" 0 "$(sb_saw 1 "ether src $MAC2 and icmp6 and ip6[40] == 134")"
t_eq "sandbox 1 has no route from it" "" "$(lab_sb 1 ip -6 route show proto ra)"
t_eq "none reached the gateway's IPv6 stack (Icmp6InRouterAdvertisements)" "$r0" \
	"$(esc_gw_snmp6 Icmp6InRouterAdvertisements)"
t_eq "the gateway took no address from the prefix" "" \
	"$(lab_gw ip -6 addr show dev "$LAB_BR" | grep -i '2001:db8:bad' || true)"
esc_end "dropped" "sandbox 1 capture: none; the gateway's ICMPv6 counter unchanged"

# ---- MAC and source address spoofing ----------------------------------------------------------
esc_begin "MAC spoofing: sandbox 1 sends from sandbox 2's (bound) MAC with its own address"
c0=$(bcount ipv4 drop)
esc_craft 1 --src-mac "$MAC2" udp --dst $LAB_DIRECT4 --dport 80 --data spoof >/dev/null
c1=$(bcount ipv4 drop)
t_lt "dropped: that MAC sends only sandbox 2's addresses" "$c0" "$c1"
esc_expect_nothing "mac2 spoof" "ether src $MAC2 and udp"
t_ok "the bridge did not learn sandbox 2's MAC on port 1" \
	test -z "$(lab_gw bridge fdb show br $LAB_BR | grep -i "$MAC2" | grep "dev $(lab_sb_port 1)")"
esc_end "dropped before any verdict" "bridge ipv4 MAC-binding counter +$((c1 - c0)); fdb unchanged"

esc_begin "MAC spoofing: sandbox 2 sends from sandbox 1's MAC (sandbox 1 is bound by port, not MAC) to steal its replies"
esc_craft 2 --src-mac "$MAC1" udp --dst $LAB_DIRECT4 --dport 80 --data spoof >/dev/null
esc_craft 2 --src-mac "$MAC1" arp --sender-ip $SB2_4 --sender-mac "$MAC1" --target-ip $LAB_GW4 --op 1 >/dev/null
fdb=$(lab_gw bridge fdb show br $LAB_BR | grep -i "^$MAC1" | grep -o 'dev [a-z0-9]*' | head -1)
t_diag "fdb entry for $MAC1 after the spoof: $fdb"
ESC_T0=$(date +%s.%N)
out=$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/ 2>&1)
t_eq "sandbox 2 received none of sandbox 1's replies" 0 "$(sb_saw 2 "dst host $SB1_4")"
t_match "sandbox 1's flow still works" "^http 203.0.113.99 ok" "$out"
esc_end "replies still go to sandbox 1" "sandbox 2 capture: nothing for $SB1_4; fdb: $MAC1 on ${fdb#dev }"

esc_begin "MAC spoofing: sandbox 3 (bound by port) keeps sending from sandbox 1's MAC (bound by port) while sandbox 1 talks"
lab_sb 3 python3 - "$MAC1" "$ESC_GW_MAC" "$(lab_sb_ip4 3)" <<'EOF' &
import socket, struct, sys, time
mac1 = bytes(int(x, 16) for x in sys.argv[1].split(":"))
gw = bytes(int(x, 16) for x in sys.argv[2].split(":"))
me = socket.inet_aton(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
# ARP requests from sandbox 3's own address but sandbox 1's MAC, every 5 ms
arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac1, me, b"\0" * 6,
                  socket.inet_aton("10.203.0.1"))
end = time.time() + 3
while time.time() < end:
    s.send(b"\xff" * 6 + mac1 + b"\x08\x06" + arp)
    time.sleep(0.005)
EOF
spoofer=$!
sleep 0.3
fdb=$(lab_gw bridge fdb show br $LAB_BR | grep -i "^$MAC1" | grep -o 'dev [a-z0-9]*' | tr '\n' ' ')
ok=0
for i in 1 2 3 4 5; do
	lab_sb 1 curl -s -o /dev/null --max-time 2 http://$LAB_DIRECT4/ && ok=$((ok + 1))
done
wait $spoofer
stolen=$(sb_saw 3 "dst host $SB1_4")
t_eq "sandbox 3 received none of sandbox 1's traffic" 0 "$stolen"
esc_end "sandbox 1's replies stay on its port ($ok of 5 requests done)" "sandbox 3 capture: $stolen packets for $SB1_4; fdb during the spoof: ${fdb:-none}"

for src in 10.203.0.99 $LAB_GW4 $LAB_DIRECT4 $SB2_4; do
	esc_begin "source address spoofing: sandbox 1 sends from $src"
	c0=$(bcount ipv4 drop)
	esc_craft 1 --src $src tcp --dst $LAB_DIRECT4 --dport 80 --flags S >/dev/null
	esc_craft 1 --src $src udp --dst $LAB_DIRECT4 --dport 80 >/dev/null
	c1=$(bcount ipv4 drop)
	t_lt "dropped by the bridge ipv4 chain" "$c0" "$c1"
	esc_expect_nothing "from $src" "src host $src and dst host $LAB_DIRECT4 and port 80"
	esc_end "dropped before any verdict" "bridge ipv4 counters +$((c1 - c0)); upstream capture: 0 packets"
done

for src in fe80::1 :: $SB2_6 fd00:203::99; do
	esc_begin "IPv6 source spoofing: TCP from $src to [2001:db8:22::22]:22"
	c0=$(bcount ipv6 drop)
	esc_craft 1 --src $src tcp --dst $LAB_SSH6 --dport 22 --flags S >/dev/null
	c1=$(bcount ipv6 drop)
	t_lt "dropped by the bridge ipv6 chain" "$c0" "$c1"
	esc_expect_nothing "from $src" "ip6 and src host $src and tcp port 22"
	esc_end "dropped before any verdict" "bridge ipv6 counters +$((c1 - c0)); upstream capture: 0 packets"
done

# ---- VLAN tags ------------------------------------------------------------------------------
for tag in "0x8100 5" "0x8100 0" "0x88a8 7" "qinq 9"; do
	set -- $tag
	esc_begin "a tagged frame ($1, VID $2) carrying UDP to 203.0.113.99:80"
	c0=$(bcount prerouting 'counter') j0=$(guard_records | wc -l)
	if [ "$1" = qinq ]; then
		esc_craft 1 vlan --dst $LAB_DIRECT4 --dport 80 --vid $2 --qinq >/dev/null
	else
		esc_craft 1 vlan --dst $LAB_DIRECT4 --dport 80 --vid $2 --tpid $1 >/dev/null
	fi
	c1=$(bcount prerouting 'counter')
	n=$(esc_upstream "udp and dst host $LAB_DIRECT4 and port 80")
	r=$(esc_reason "\"destination.ip\":\"$LAB_DIRECT4\",\"destination.port\":80,\"network.transport\":\"udp\"")
	if [ "$c1" -gt "$c0" ]; then
		t_eq "nothing upstream" 0 "$n"
		esc_end "dropped before any verdict" "bridge prerouting 'other ethertype' counter +$((c1 - c0)); upstream capture: 0 packets"
	else
		# a priority tag (VID 0) is an untagged frame to the kernel: judged like any
		t_eq "not dropped at layer 2, so judged: refused (UDP 80 is not allowed)" \
			"no allowed name resolved to this address" "$r"
		t_eq "nothing upstream" 0 "$n"
		esc_end "judged as untagged: refused" "upstream capture: 0 packets; log: \"$r\""
	fi
done

# ---- frames to the other sandbox (isolation off: the bridge table alone) ------------------------
lab_gw ip link set "$(lab_sb_port 1)" type bridge_slave isolated off
lab_gw ip link set "$(lab_sb_port 2)" type bridge_slave isolated off
for kind in unicast-ip broadcast-ip ethertype-88b5 arp-to-sb2; do
	esc_begin "sandbox 1 to sandbox 2 directly on layer 2 ($kind), port isolation off"
	f0=$(bcount forward 'iif @ports') p0=$(bcount prerouting 'counter')
	case $kind in
	unicast-ip) lab_sb 1 python3 "$ESC_CRAFT" --gw-mac "$MAC2" udp --dst $SB2_4 --dport 9 --data l2 >/dev/null ;;
	broadcast-ip) lab_sb 1 python3 "$ESC_CRAFT" --gw-mac ff:ff:ff:ff:ff:ff udp --dst 10.203.0.255 --dport 9 --data l2 >/dev/null ;;
	ethertype-88b5) esc_craft 1 ether --dst-mac "$MAC2" --ethertype 0x88b5 >/dev/null ;;
	arp-to-sb2) esc_craft 1 arp --sender-ip $SB1_4 --target-ip $SB2_4 --dst-mac "$MAC2" --op 1 >/dev/null ;;
	esac
	f1=$(bcount forward 'iif @ports') p1=$(bcount prerouting 'counter')
	t_eq "sandbox 2 received nothing from sandbox 1" 0 "$(sb_saw 2 "ether src $MAC1")"
	t_lt "dropped by the bridge table (forward 'iif @ports' or prerouting's last rule)" \
		"$((f0 + p0))" "$((f1 + p1))"
	esc_end "dropped before any verdict" "sandbox 2 capture: nothing; bridge forward +$((f1 - f0)), prerouting drop +$((p1 - p0))"
done
lab_gw ip link set "$(lab_sb_port 1)" type bridge_slave isolated on
lab_gw ip link set "$(lab_sb_port 2)" type bridge_slave isolated on

t_match "after all this, sandbox 1 still works" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
t_match "... and sandbox 2" "^http 203.0.113.99 ok" "$(lab_sb 2 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
t_ok "the verdict log verifies" guard_cli log verify
t_done
