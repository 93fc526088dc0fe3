# A resolver on the gateway itself (dns.resolvers: the bridge address): the
# sandbox's queries to it are judged and let into the gateway (input chain),
# its answers are judged and learned before they leave (output chain), and
# the upstream resolver is no longer the guard's. Real dnsmasq on the
# gateway forwarding to the lab's resolver.
set -u
. "$PC_TOP/tests/lib/guard.sh"

guard_need_bins
lab_up 1
lab_gw dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-poll --bind-interfaces \
	--listen-address=$LAB_GW4 --port=53 --server=$LAB_RESOLVER4 --user=root --group=root \
	--pid-file="$LAB_DIR/dnsmasq-gw.pid" --log-queries --log-facility="$LAB_DIR/dnsmasq-gw.log" ||
	lab_die "gateway dnsmasq"
GUARD_RESOLVERS=$LAB_GW4 guard_config
guard_agent1 <<EOF
  - host: api.github.test
    ports: [443]
EOF
guard_start || { t_fail "guard started" true; t_done; }

t_eq "the gateway's resolver answers an allowed name (UDP)" "$LAB_API4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 @$LAB_GW4 api.github.test A)"
t_eq "... and over TCP" "$LAB_API4" \
	"$(lab_sb 1 dig +short +tcp +time=2 +tries=1 @$LAB_GW4 api.github.test A)"
t_match "the answer was learned: HTTPS to the name works" "^api.github.test ok" \
	"$(lab_sb 1 curl -sS --max-time 5 --cacert "$LAB_CA" \
		--resolve "api.github.test:443:$LAB_API4" https://api.github.test/)"
t_match "a refused name gets REFUSED from the guard" "status: REFUSED" \
	"$(lab_sb 1 dig +time=2 +tries=1 @$LAB_GW4 paste.evil.test A)"
t_eq "... and never reached the gateway's resolver" 0 \
	"$(grep -c 'paste.evil.test' "$LAB_DIR/dnsmasq-gw.log" || true)"
t_match "the upstream resolver is not the guard's any more: REFUSED" "status: REFUSED" \
	"$(lab_sb 1 dig +time=2 +tries=1 @$LAB_RESOLVER4 api.github.test A)"
lab_gw socat -u UDP-RECV:5353,bind=$LAB_GW4 OPEN:"$LAB_DIR/gw-5353.log",creat,append &
sleep 0.3
echo probe | lab_sb 1 socat -u - UDP:$LAB_GW4:5353
sleep 0.5
t_eq "other ports of the gateway stay closed (nothing reached UDP 5353)" 0 \
	"$(cat "$LAB_DIR/gw-5353.log" 2>/dev/null | wc -c)"
guard_stop
t_done
