# The verdict engine on real traffic: allowed flows pass (and bulk data
# never crosses to userspace), refusals are fast and clear, UDP/ICMP/IPv6
# are refused unless allowed, spoofed sources, sandbox-to-sandbox and
# sandbox-to-gateway traffic drop. Real portcullis-logd and portcullisd in
# the lab's gateway; curl, socat, ping, dig in the sandboxes; nginx and
# socat upstream.
set -u
. "$PC_TOP/tests/lib/guard.sh"

guard_lab 2
SB1_4=$(lab_sb_ip4 1) SB1_6=$(lab_sb_ip6 1) SB2_4=$(lab_sb_ip4 2)
guard_agent1 dual <<EOF
  - cidr: $LAB_SSH4/32
    ports: [22]
  - cidr: "$LAB_SSH6/128"
    ports: [22]
  - cidr: $LAB_SSH4/32
    ports: [5000]
    proto: udp
  - cidr: $LAB_DIRECT4/32
    ports: [80]
  - host: api.github.test
    ports: [443]
  - host: cdn-good.test
    ports: [443]
---
sandbox: agent-2
match: { source: $SB2_4/32 }
allow:
  - cidr: $LAB_SSH4/32
    ports: [22]
  - cidr: $LAB_DIRECT4/32
    ports: [80]
---
sandbox: agent-3
match: { source: $(lab_sb_ip4 3)/32 }
allow:
  - cidr: $LAB_DIRECT4/32
    ports: [80]
EOF
guard_start || { t_fail "guard started" true; t_done; }

queued() { guard_status_field 'sum(q["queued"] for q in s["queues"])'; }
nginx_lines() { grep -c "$1" "$LAB_DIR/nginx-access.log" 2>/dev/null || true; }
curl_rc() { # sandbox, curl args...: curl's exit code
	local i=$1 rc
	shift
	lab_sb "$i" curl -s -o /dev/null --max-time 4 "$@" && rc=0 || rc=$?
	echo "$rc"
}

# ---- allowed and refused flows -------------------------------------------
t_eq "allowed cidr:port: TCP echo through the guard" "hello" \
	"$(echo hello | lab_sb 1 socat -T 3 - TCP:$LAB_SSH4:22)"
t_match "allowed cidr:port over HTTP reaches nginx" "^http 203.0.113.99 ok" \
	"$(lab_sb 1 curl -sS --max-time 4 http://$LAB_DIRECT4/)"
t_eq "same address, another port: refused at once (curl 7, not a timeout 28)" 7 \
	"$(curl_rc 1 http://$LAB_SSH4:80/)"
t_eq "an address no rule allows: refused (curl 7)" 7 "$(curl_rc 1 --insecure https://$LAB_DIRECT4/)"
echo secret-data | lab_sb 1 socat -T 2 - TCP:$LAB_DIRECT4:7 2>/dev/null
t_eq "upstream saw nothing of a refused flow (TCP 7 logger empty)" 0 \
	"$(cat "$LAB_DIR/direct-7.log" 2>/dev/null | wc -c)"
t_match "the refusal is in the log with its reason" \
	'"event.action":"connect","event.outcome":"failure".*"not on the allow list|no allowed name' \
	"$(guard_records | grep "\"destination.port\":80," | grep "$LAB_SSH4")"
t_match "the allowed flow is in the log with its rule" \
	'"event.outcome":"success".*"rule.name":"agent-1/allow\[0\]"' \
	"$(guard_records | grep '"destination.port":22,' | grep -v '"network.transport":"udp"')"

# ---- UDP, ICMP --------------------------------------------------------------
t_eq "allowed UDP (cidr, proto udp) echoes" "ping-udp" \
	"$(echo ping-udp | lab_sb 1 socat -T 2 - UDP:$LAB_SSH4:5000)"
out=$(echo x | lab_sb 2 socat -T 2 - UDP:$LAB_SSH4:5000 2>&1)
t_match "UDP not allowed: refused with an ICMP error (not silence)" \
	"No route to host|Connection refused|prohibited" "$out"
out=$(lab_sb 1 ping -c 1 -W 2 $LAB_API4 2>&1)
t_match "ICMP echo: refused (administratively prohibited)" "Packet filtered|prohibited" "$out"
t_fail "ICMP echo does not get an answer" lab_sb 1 ping -c 1 -W 2 $LAB_API4

# ---- IPv6 ----------------------------------------------------------------------
t_eq "IPv6 allowed when allowed: TCP echo over IPv6" "hello6" \
	"$(echo hello6 | lab_sb 1 socat -T 3 - "TCP6:[$LAB_SSH6]:22")"
t_eq "IPv6 to an address no rule allows: refused (curl 7)" 7 \
	"$(curl_rc 1 -6 --insecure "https://[$LAB_API6]/")"
before=$(nginx_lines "$LAB_API6")
t_fail "IPv6 from a sandbox without IPv6 in its rule: dropped" \
	lab_sb 2 curl -s -6 --max-time 2 --insecure "https://[$LAB_API6]/"
t_eq "... and upstream saw nothing" "$before" "$(nginx_lines "$LAB_API6")"

# ---- names: DNS, TLS server name ------------------------------------------------
t_match "allowed host: HTTPS by name works (DNS learned, SNI checked)" "^api.github.test ok" \
	"$(lab_sb 1 curl -sS --max-time 5 --cacert "$LAB_CA" https://api.github.test/)"
out=$(lab_sb 1 dig +time=2 +tries=1 paste.evil.test A)
t_match "refused name: the sandbox gets a REFUSED answer at once" "status: REFUSED" "$out"
t_match "refused name: never reached the resolver" "^0$" \
	"$(grep -c 'paste.evil.test' "$LAB_DIR/dnsmasq.log" || true)"
out=$(lab_sb 1 dig +time=2 +tries=1 @$LAB_ROGUE_RESOLVER4 api.github.test A)
t_match "a resolver that is not the guard's: REFUSED" "status: REFUSED" "$out"
t_eq "the rogue resolver saw nothing" 0 "$(cat "$LAB_DIR/dnsmasq-rogue.log" 2>/dev/null | grep -c 'query\[')"
t_match "DNS over TCP to the guard's resolver works" "$LAB_API4" \
	"$(lab_sb 1 dig +tcp +short +time=2 +tries=1 api.github.test A)"
t_match "cdn-good.test (allowed) on the shared address works" "^cdn-good.test ok" \
	"$(lab_sb 1 curl -sS --max-time 5 --cacert "$LAB_CA" https://cdn-good.test/)"
before=$(nginx_lines "cdn-evil.test")
t_fail "cdn-evil.test on the same address: refused on its TLS server name" \
	lab_sb 1 curl -sS --max-time 4 --cacert "$LAB_CA" --resolve "cdn-evil.test:443:$LAB_CDN4" \
	https://cdn-evil.test/
t_eq "... nginx never saw the request for cdn-evil.test" "$before" "$(nginx_lines "cdn-evil.test")"
t_match "... and the log says why" "TLS server name cdn-evil.test" "$(guard_records | grep cdn-evil)"

# ---- bulk data never crosses to userspace ------------------------------------------
q0=$(queued)
size=$(lab_sb 1 curl -s --max-time 60 --cacert "$LAB_CA" -o /dev/null -w '%{size_download}' \
	https://api.github.test/big)
q1=$(queued)
t_eq "100 MB over an allowed flow arrive whole" 104857600 "$size"
t_diag "queued packets during the 100 MB transfer: $((q1 - q0))"
t_lt "the engine saw a handful of its packets, not thousands" "$((q1 - q0))" 40

# ---- sandbox to sandbox, sandbox to gateway ---------------------------------------
lab_sb 2 socat TCP-LISTEN:8080,fork,reuseaddr SYSTEM:"cat >>$LAB_DIR/sb2-8080.log" &
lab_gw socat TCP-LISTEN:2222,bind=$LAB_GW4,fork,reuseaddr SYSTEM:"cat >>$LAB_DIR/gw-2222.log" &
lab_wait_tcp "$(lab_sb_ns 2)" 127.0.0.1 8080
lab_wait_tcp "$LAB_GW" $LAB_GW4 2222
lab_sb 1 ip route add $SB2_4/32 via $LAB_GW4 # (on-link, the isolated bridge would stop it first)
echo to-b | lab_sb 1 socat -T 2 - TCP:$SB2_4:8080,connect-timeout=2 2>/dev/null
lab_sb 1 ip route del $SB2_4/32 via $LAB_GW4
t_eq "sandbox A to sandbox B through the gateway: nothing arrives" 0 \
	"$(cat "$LAB_DIR/sb2-8080.log" 2>/dev/null | wc -c)"
t_match "... refused by the engine, and logged" "sandboxes may not reach each other" \
	"$(guard_records | grep "\"destination.ip\":\"$SB2_4\"")"
# Layer 2 straight to B's MAC, with the lab's port isolation switched off:
# only the bridge table's forward chain stands in the way.
lab_gw ip link set "$(lab_sb_port 1)" type bridge_slave isolated off
lab_gw ip link set "$(lab_sb_port 2)" type bridge_slave isolated off
lab_sb 1 ip neigh replace $SB2_4 lladdr "$(lab_sb_mac 2)" dev eth0 nud permanent
lab_sb 1 ip route add $SB2_4/32 dev eth0
echo to-b-l2 | lab_sb 1 socat -T 2 - TCP:$SB2_4:8080,connect-timeout=2 2>/dev/null
t_eq "sandbox A to B on layer 2 (isolation off): the bridge table drops it" 0 \
	"$(cat "$LAB_DIR/sb2-8080.log" 2>/dev/null | wc -c)"
t_match "... counted by the bridge forward rule" "iif @ports counter packets [1-9]" \
	"$(lab_gw nft list chain bridge portcullis forward 2>/dev/null)"
lab_sb 1 ip route del $SB2_4/32 dev eth0
lab_sb 1 ip neigh del $SB2_4 dev eth0
lab_gw ip link set "$(lab_sb_port 1)" type bridge_slave isolated on
lab_gw ip link set "$(lab_sb_port 2)" type bridge_slave isolated on
echo to-gw | lab_sb 1 socat -T 2 - TCP:$LAB_GW4:2222,connect-timeout=2 2>/dev/null
t_eq "sandbox to another port of the gateway: nothing arrives" 0 \
	"$(cat "$LAB_DIR/gw-2222.log" 2>/dev/null | wc -c)"
t_fail "sandbox cannot ping the gateway" lab_sb 1 ping -c 1 -W 1 $LAB_GW4

# ---- spoofed sources ---------------------------------------------------------------
before=$(nginx_lines "$LAB_DIRECT4")
lab_sb 1 ip addr add 10.203.0.99/32 dev eth0
t_fail "sandbox 1 sending from an address no sandbox has: dropped" \
	lab_sb 1 curl -s --max-time 2 --interface 10.203.0.99 http://$LAB_DIRECT4/
lab_sb 1 ip addr del 10.203.0.99/32 dev eth0
lab_sb 2 ip addr add $SB1_4/32 dev eth0
t_fail "sandbox 2 sending from sandbox 1's (port-bound) address: dropped" \
	lab_sb 2 curl -s --max-time 2 --interface $SB1_4 http://$LAB_DIRECT4/
lab_sb 2 ip addr del $SB1_4/32 dev eth0
lab_sb 1 ip addr add $SB2_4/32 dev eth0
t_fail "sandbox 1 sending from sandbox 2's address: dropped" \
	lab_sb 1 curl -s --max-time 2 --interface $SB2_4 http://$LAB_DIRECT4/
lab_sb 1 ip addr del $SB2_4/32 dev eth0
t_eq "upstream saw none of the spoofed requests" "$before" "$(nginx_lines "$LAB_DIRECT4")"
t_match "the bridge table's anti-spoofing rules counted them" "counter packets [1-9]" \
	"$(lab_gw nft list chain bridge portcullis ipv4 2>/dev/null | grep -v 'accept')"
t_match "the real sources still work afterwards" "^http 203.0.113.99 ok" \
	"$(lab_sb 2 curl -sS --max-time 4 http://$LAB_DIRECT4/)"

# ---- a sandbox attached while the engine runs ---------------------------------------
lab_sandbox_add 3
for i in $(seq 1 40); do
	lab_gw nft list set bridge portcullis ports 2>/dev/null | grep -q "\"$(lab_sb_port 3)\"" && break
	sleep 0.05
done
t_match "a port attached later joins the port set (link events)" \
	"elements = \\{.*\"$(lab_sb_port 3)\"" "$(lab_gw nft list set bridge portcullis ports)"
t_match "... and its sandbox's allowed flow works" "^http 203.0.113.99 ok" \
	"$(lab_sb 3 curl -sS --max-time 4 http://$LAB_DIRECT4/)"

# ---- status and the table ------------------------------------------------------------
st=$(guard_cli status --json)
t_match "status: queue path, per-queue counters, policy, flows" \
	'"queue_path":"compat".*"queues":\[\{"num":100,"queued":[0-9]+.*"policy"|"policy":"sha256:[0-9a-f]{64}".*"queue_path":"compat".*"queues":\[\{"num":100' "$st"
t_match "the engine logged which queue path it uses" "queue path: compat" \
	"$(cat "$GUARD_DIR/engine.log")"
t_nomatch "no queue rule ever bypasses (fail-open)" "bypass" "$(lab_gw nft list table inet portcullis 2>&1)"
guard_stop
t_match "after a normal stop the tables stay (no engine, no traffic)" "table inet portcullis" \
	"$(lab_gw nft list tables)"
t_fail "... and an allowed flow no longer connects" \
	lab_sb 1 curl -s --max-time 2 http://$LAB_DIRECT4/
t_nomatch "nothing of ours in the root namespace" "portcullis" "$(nft list tables 2>&1)"
t_done
