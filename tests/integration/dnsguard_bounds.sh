# Bounded memory, end to end: with dns.max_learned_per_sandbox 4 and
# dns.max_learned_total 6, lookups of many allowed names (one wildcard entry,
# a distinct address each) evict the oldest-learned bindings first, per
# sandbox and then across sandboxes; an evicted address is refused again
# until it is looked up again; `portcullis status` counts it all.
PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$PC_TOP/tests/integration/dnsguard_setup.bash"

guard_need_bins
addr() { echo "203.0.113.$((100 + $1))"; }
extra=""
for i in 1 2 3 4 5 6 7; do extra="$extra --host-record=n$i.bulk.test,$(addr $i)"; done
LAB_DNS_EXTRA=$extra
lab_up 2
for i in 1 2 3 4 5 6 7; do lab_upstream ip addr add "$(addr $i)/32" dev lo; done
# A plain TCP listener on every upstream address: a connection that the
# guard lets through is accepted there, a refused one is reset by the guard.
lab_upstream socat TCP-LISTEN:8000,fork,reuseaddr SYSTEM:true &
lab_wait_tcp "$LAB_UP" "$(addr 1)" 8000
guard_config
dg_dns_conf "max_learned_per_sandbox: 4" "max_learned_total: 6"
guard_rules agents <<EOF
sandbox: agent-1
match: { source: $(lab_sb_ip4 1)/32, port: $(lab_sb_port 1) }
allow:
  - host: "*.bulk.test"
    ports: [8000]
---
sandbox: agent-2
match: { source: $(lab_sb_ip4 2)/32, port: $(lab_sb_port 2) }
allow:
  - host: "*.bulk.test"
    ports: [8000]
EOF
guard_start || { t_fail "guard started" true; t_done; }

look() { # sandbox names...: look each up, in order
	local sb=$1 n
	shift
	for n in "$@"; do lab_sb "$sb" dig +short +time=3 +tries=1 "n$n.bulk.test" A >/dev/null; done
}
reach() { # sandbox: which of the 7 addresses it may connect to (1 = yes)
	local i out=""
	for i in 1 2 3 4 5 6 7; do
		if lab_sb "$1" socat -u /dev/null "TCP:$(addr "$i"):8000,connect-timeout=3" 2>/dev/null; then
			out="$out$i"
		else out="$out-"; fi
	done
	echo "$out"
}
st() { guard_status_field "'%d learned, %d evicted' % (s['dnsguard']['learned_entries'], s['dnsguard']['learned_evicted'])"; }

t_eq "nothing learned at start" "0 learned, 0 evicted" "$(st)"
look 1 1 2 3 4 5 6
t_eq "six lookups in agent-1 (cap 4): four kept, the two oldest evicted" "4 learned, 2 evicted" "$(st)"
t_eq "... the evicted addresses are refused again, the newest four reachable" "--3456-" "$(reach 1)"
t_match "... the refusal is recorded" \
	"\"event.reason\":\"no allowed name resolved to this address\".*\"destination.ip\":\"$(addr 1)\"" \
	"$(guard_records | grep "\"destination.ip\":\"$(addr 1)\"")"
t_match "portcullis status (the human summary) shows the counts" \
	'^dns .* 4 addresses learned, 2 evicted$' "$(guard_cli status | grep '^dns ')"
look 1 1
t_eq "looking n1 up again brings it back, evicting the oldest (n3)" "1--456-" "$(reach 1)"
t_eq "... counted" "4 learned, 3 evicted" "$(st)"
look 1 4
t_eq "learning a name again makes it the newest: n4 survives the next eviction" \
	"1--4-67" "$(look 1 7; reach 1)"
t_eq "... counted" "4 learned, 4 evicted" "$(st)"

# ---- the total cap, across sandboxes ----------------------------------------------------
look 2 1 2
t_eq "agent-2 learns two: the total (6) is reached, nothing evicted" "6 learned, 4 evicted" "$(st)"
t_eq "... agent-2 reaches its two" "12-----" "$(reach 2)"
look 2 3
t_eq "a third in agent-2: over the total, the oldest binding anywhere goes" "6 learned, 5 evicted" \
	"$(st)"
t_eq "... that was agent-1's n6 (then came n1, n4 and n7, and agent-2's)" "1--4--7" "$(reach 1)"
t_eq "... agent-2 keeps all three" "123----" "$(reach 2)"
# ---- outstanding queries: 1024 per sandbox, the oldest forgotten -------------------------
# Queries from port 40050 never reach dnsmasq (a table in the upstream
# namespace drops them): each stays outstanding until an answer matches it.
lab_upstream nft -f - <<EOF
table inet dgblock {
	chain in {
		type filter hook input priority 0;
		udp sport 40050 udp dport 53 counter drop
	}
}
EOF
pend() { guard_status_field "'%d pending, %d evicted' % (s['dnsguard']['pending_queries'], s['dnsguard']['pending_evicted'])"; }
t_eq "no query outstanding" "0 pending, 0 evicted" "$(pend)"
allowed0=$(dg_stat queries_allowed)
lab_sb 1 python3 "$DG_TOOL" burst --server $LAB_RESOLVER4 --sport 40050 --id0 1000 --count 1100 \
	n1.bulk.test >/dev/null
for i in $(seq 1 200); do
	[ "$(dg_stat queries_allowed)" -ge $((allowed0 + 1100)) ] && break
	sleep 0.05
done
t_eq "1100 allowed queries left unanswered: 1024 remembered, the 76 oldest forgotten" \
	"1024 pending, 76 evicted" "$(pend)"
dropped0=$(dg_stat answers_dropped)
lab_upstream python3 "$DG_TOOL" answer --src $LAB_RESOLVER4 --dst "$(lab_sb_ip4 1)" --dport 40050 \
	--id 1000 n1.bulk.test "$(addr 1)" >/dev/null
t_eq "an answer to the oldest (forgotten) query is dropped" "$((dropped0 + 1))" \
	"$(dg_stat answers_dropped)"
released0=$(dg_stat answers_released)
lab_upstream python3 "$DG_TOOL" answer --src $LAB_RESOLVER4 --dst "$(lab_sb_ip4 1)" --dport 40050 \
	--id 2099 n1.bulk.test "$(addr 1)" >/dev/null
t_eq "an answer to the newest is released" "$((released0 + 1))" "$(dg_stat answers_released)"
t_eq "... and consumes it" "1023 pending, 76 evicted" "$(pend)"
lab_upstream nft delete table inet dgblock

guard_stop
t_nomatch "nothing of ours in the root namespace" "portcullis|dgblock" "$(nft list tables 2>&1)"
t_done
