# Escape attempts, class "ways in": sandbox frames that reach an IP stack
# of the gateway other than the sandbox bridge's. A sandbox port taken off
# the bridge and given an address (`ip link set pcv1 nomaster; ip addr add
# 10.99.0.1/30 dev pcv1`, a route in the sandbox) is an interface the
# engine's inet chains used to let through untouched; the forward chain now
# drops what arrives on any interface that is neither the bridge, a
# declared uplink (uplinks: in portcullis.yaml) nor lo. Evidence: the
# upstream capture and the counter of that rule.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init waysin "Ways in other than the sandbox bridge"
esc_up 1

OFF4=10.99.0.2 # the sandbox's address on the off-bridge link
esc_begin "sandbox port taken off the bridge and given an address (nomaster)"
lab_gw ip link set "$(lab_sb_port 1)" nomaster
lab_gw ip addr add 10.99.0.1/30 dev "$(lab_sb_port 1)"
lab_sb 1 ip addr add $OFF4/30 dev eth0
lab_sb 1 ip route replace default via 10.99.0.1
# (the simulated internet routes the answers back, as a real one would)
lab_upstream ip route add 10.99.0.0/30 via $LAB_UPLINK_GW4
out=$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/ 2>&1) && rc=0 || rc=$?
t_nomatch "no TCP handshake with a TEST-NET upstream through the off-bridge port (curl $rc)" \
	"^http 203.0.113.99 ok" "$out"
lab_sb 1 ping -c 2 -W 1 -i 0.2 "$LAB_UPLINK_UP4" >/dev/null 2>&1 && p=0 || p=$?
t_nomatch "no ping answer from the upstream either" "^0$" "$p"
lab_sb 1 python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3): s.sendto(b"x", (sys.argv[1], 5000))' "$LAB_SSH4"
esc_expect_nothing "TCP, UDP and ICMP from the off-bridge address" "src host $OFF4"
n=$ESC_N
# the gateway's own address on that port: its services do not answer either
lab_sb 1 ping -c 2 -W 1 -i 0.2 10.99.0.1 >/dev/null 2>&1 && p=0 || p=$?
t_nomatch "no ping answer from the gateway's address on the off-bridge port" "^0$" "$p"
in_drops=$(esc_counter inet input 'iifname != "lo"')
t_lt "the input chain's not-an-uplink rule counted them" 0 "$in_drops"
drops=$(esc_counter inet forward 'iifname != "lo"')
t_lt "the forward chain's not-an-uplink rule counted them" 0 "$drops"
esc_end "dropped by the forward chain (${drops} packets counted)" \
	"upstream: $n packets from $OFF4; curl exit $rc"

# The control: the same port put back on the bridge serves again (the
# drop is about the interface, not about the sandbox).
lab_sb 1 ip route replace default via $LAB_GW4
lab_gw ip addr flush dev "$(lab_sb_port 1)"
lab_gw ip link set "$(lab_sb_port 1)" master $LAB_BR
lab_gw bridge link set dev "$(lab_sb_port 1)" isolated on 2>/dev/null || true
t_match "back on the bridge: the allowed flow works" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/ 2>&1)"

t_done
