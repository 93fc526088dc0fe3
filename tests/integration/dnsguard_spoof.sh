# Forged DNS answers teach the guard nothing: not from a sandbox (toward
# another sandbox, the gateway or the resolver), not from upstream with the
# resolver's address but the wrong id or port, not before the query, not
# after its answer. Each forgery claims api.github.test is paste.evil.test's
# address; had one been learned, TLS to that address with the allowed name
# would pass. Forgeries are sent on raw sockets (dnsguard_tool.py answer);
# the sandboxes' real queries are kept outstanding by dropping them in the
# upstream namespace (a table of this test's own namespace), so that a
# forgery would have something to match.
PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$PC_TOP/tests/integration/dnsguard_setup.bash"

guard_need_bins
lab_up 2
guard_config
SB1=$(lab_sb_ip4 1) SB2=$(lab_sb_ip4 2)
guard_rules agents <<EOF
sandbox: agent-1
match: { source: $SB1/32, port: $(lab_sb_port 1) }
allow:
  - host: api.github.test
    ports: [443]
---
sandbox: agent-2
match: { source: $SB2/32, port: $(lab_sb_port 2) }
allow:
  - host: api.github.test
    ports: [443]
EOF
guard_start || { t_fail "guard started" true; t_done; }

# Queries from these sandbox ports never reach dnsmasq.
lab_upstream nft -f - <<EOF
table inet dgblock {
	chain in {
		type filter hook input priority 0;
		udp sport 40050-40059 udp dport 53 counter drop
	}
}
EOF

FORGED=$LAB_PASTE4
ask_bg() { # sandbox sport id outfile: an outstanding query, answered by nothing real
	# Judged = allowed and outstanding: its record waits for its answer
	# (one record per query, docs/dnsguard.md), so the guard's counter
	# says it, or the record when it was written at once.
	local i q0
	q0=$(dg_stat queries_allowed)
	lab_sb "$1" python3 "$DG_TOOL" query --timeout 4 --sport "$2" --id "$3" \
		--server $LAB_RESOLVER4 api.github.test:A >"$4" 2>&1 &
	ASK_PID=$!
	for i in $(seq 1 100); do
		[ "$(dg_stat queries_allowed)" -gt "$q0" ] && return 0
		guard_records | grep -q "\"event.outcome\":\"success\".*\"source.port\":$2," && return 0
		sleep 0.02
	done
	echo "# the query from port $2 was not judged" >&2
}
forge() { # runner args...: a forged answer for api.github.test (or $FNAME) -> FORGED
	local run=$1
	shift
	$run python3 "$DG_TOOL" answer "$@" "${FNAME:-api.github.test}" $FORGED >/dev/null
}
counter() { # family table chain rule-regex: packets counted by the matching rule
	lab_gw nft list chain "$1" portcullis "$2" 2>/dev/null | grep -E -- "$3" | grep -o 'counter packets [0-9]*' |
		awk '{s += $3} END {print s + 0}'
}
fwd_drops() { counter inet forward '^\s*counter packets'; }
forged_refused() { # sandbox: TLS with the allowed name to the forged address is refused
	dg_curl_rc "$1" -k --resolve "api.github.test:443:$FORGED" https://api.github.test/
}
nginx_paste() { grep -c "^$LAB_PASTE4 " "$LAB_DIR/nginx-access.log" 2>/dev/null || true; }
learned0=$(dg_stat learned_entries)
paste0=$(nginx_paste)

# ---- from the sandbox side ------------------------------------------------------------
ask_bg 2 40050 4242 "$LAB_DIR/q2.out"
lab_sb 1 ip route add $SB2/32 via $LAB_GW4 # toward sandbox 2 through the gateway
br0=$(counter bridge ipv4 '^\s*@nh,96,32 != @src4 ')
local0=$(counter inet prerouting 'fib daddr type local')
forge "lab_sb 1" --src $LAB_RESOLVER4 --dst $SB2 --dport 40050 --id 4242
forge "lab_sb 1" --src $SB1 --dst $SB2 --dport 40050 --id 4242
forge "lab_sb 1" --src $SB1 --dst $LAB_GW4 --dport 40050 --id 4242
forge "lab_sb 1" --src $SB1 --dst $LAB_GW4 --dport 53 --id 4242
forge "lab_sb 1" --src $SB1 --dst $LAB_RESOLVER4 --dport 53 --id 4242
wait "$ASK_PID"
lab_sb 1 ip route del $SB2/32 via $LAB_GW4
t_eq "sandbox 2's outstanding query got none of sandbox 1's forgeries" timeout \
	"$(cat "$LAB_DIR/q2.out")"
t_lt "forged with the resolver's source address: dropped by the bridge table (anti-spoofing)" \
	"$br0" "$(counter bridge ipv4 '^\s*@nh,96,32 != @src4 ')"
t_match "forged from sandbox 1's own address toward sandbox 2: refused" \
	"\"event.reason\":\"sandboxes may not reach each other\".*\"source.port\":53,\"destination.ip\":\"$SB2\"" \
	"$(guard_records | grep "\"destination.ip\":\"$SB2\"")"
t_lt "toward the gateway on another port: dropped (the gateway is not reachable)" \
	"$local0" "$(counter inet prerouting 'fib daddr type local')"
t_match "toward the gateway's and the resolver's port 53: judged as a query and dropped (a response)" \
	"\"event.reason\":\"a response, not a query\".*\"destination.ip\":\"$LAB_GW4\".*\"event.reason\":\"a response, not a query\".*\"destination.ip\":\"$LAB_RESOLVER4\"" \
	"$(echo $(guard_records | grep 'a response, not a query'))"
t_eq "nothing was learned" "$learned0" "$(dg_stat learned_entries)"
t_eq "the forged address stays refused for sandbox 2 (curl 7)" 7 "$(forged_refused 2)"
t_eq "... and for sandbox 1" 7 "$(forged_refused 1)"

# ---- from upstream, with the resolver's address --------------------------------------------
ask_bg 1 40051 4343 "$LAB_DIR/q1.out"
fwd0=$(fwd_drops)
dropped0=$(dg_stat answers_dropped)
forge lab_upstream --src $LAB_RESOLVER4 --dst $SB1 --dport 40051 --id 4344    # wrong id
FNAME=www.github.test forge lab_upstream --src $LAB_RESOLVER4 --dst $SB1 --dport 40051 --id 4343
forge lab_upstream --src $LAB_RESOLVER4 --dst $SB1 --dport 40052 --id 4343    # wrong port
forge lab_upstream --src $LAB_ROGUE_RESOLVER4 --dst $SB1 --dport 40051 --id 4343 # wrong resolver
forge lab_upstream --src $LAB_RESOLVER4 --sport 5353 --dst $SB1 --dport 40051 --id 4343 # not port 53
wait "$ASK_PID"
t_eq "sandbox 1's outstanding query got none of the upstream forgeries" timeout \
	"$(cat "$LAB_DIR/q1.out")"
t_eq "wrong id, or wrong name (right resolver and port): reached the guard and were dropped" \
	"$((dropped0 + 2))" "$(dg_stat answers_dropped)"
t_match "... recorded: matches no outstanding query" \
	"\"event.action\":\"dns-learn\",\"event.outcome\":\"failure\",\"event.reason\":\"matches no outstanding query\".*\"destination.port\":40051.*\"dns.question.name\":\"api.github.test\".*\"event.reason\":\"matches no outstanding query\".*\"destination.port\":40051.*\"dns.question.name\":\"www.github.test\"" \
	"$(echo $(guard_records | grep 'matches no outstanding query'))"
t_eq "wrong port, wrong resolver, not from port 53: no conversation of the sandbox, dropped by the forward chain" \
	"$((fwd0 + 3))" "$(fwd_drops)"
t_eq "nothing was learned" "$learned0" "$(dg_stat learned_entries)"
t_eq "the forged address stays refused" 7 "$(forged_refused 1)"

# ---- an answer racing the query (sent before it) ------------------------------------------------
fwd0=$(fwd_drops)
forge lab_upstream --src $LAB_RESOLVER4 --dst $SB1 --dport 40053 --id 4545
t_eq "a forged answer before its query: dropped by the forward chain" "$((fwd0 + 1))" "$(fwd_drops)"
lab_sb 1 python3 "$DG_TOOL" query --timeout 2 --sport 40053 --id 4545 --server $LAB_RESOLVER4 \
	api.github.test:A >"$LAB_DIR/q3.out" 2>&1
t_eq "... the query sent after it gets nothing (it was not kept for it)" timeout \
	"$(cat "$LAB_DIR/q3.out")"
t_eq "... nothing learned, the address refused" "$learned0 7" \
	"$(dg_stat learned_entries) $(forged_refused 1)"

# ---- an answer after the real one (replayed, late) ----------------------------------------------
t_match "a real query (port 40060, not blocked) gets the real answer" "^rcode=NOERROR .*A=$LAB_API4" \
	"$(lab_sb 1 python3 "$DG_TOOL" query --sport 40060 --id 4646 --server $LAB_RESOLVER4 \
		api.github.test:A)"
learned1=$(dg_stat learned_entries)
dropped0=$(dg_stat answers_dropped)
forge lab_upstream --src $LAB_RESOLVER4 --dst $SB1 --dport 40060 --id 4646
t_eq "the same id and port again from the resolver's address: dropped (its query was answered)" \
	"$((dropped0 + 1))" "$(dg_stat answers_dropped)"
t_eq "... nothing more learned, the forged address refused" "$learned1 7" \
	"$(dg_stat learned_entries) $(forged_refused 1)"
t_eq "nginx at the forged address never saw a request" "$paste0" "$(nginx_paste)"

# ---- positive control: the forgery tool can teach -------------------------------------------------
# An answer matching the outstanding query in every respect (the resolver's
# address and port 53, the sandbox's port, id, name and type) is released
# and learned: the forgeries above failed on what they got wrong, not on
# the tool. (Only an attacker on the path to the resolver, who sees the
# query, can do this: docs/dnsguard.md.)
ask_bg 1 40054 4747 "$LAB_DIR/q4.out"
forge lab_upstream --src $LAB_RESOLVER4 --dst $SB1 --dport 40054 --id 4747
wait "$ASK_PID"
t_match "(control) a forgery matching the outstanding query is released" \
	"^rcode=NOERROR .*A=$FORGED" "$(cat "$LAB_DIR/q4.out")"
t_match "(control) ... and learned" "\"dns.resolved_ip\":\\[\"$FORGED\"\\]" \
	"$(dg_learned api.github.test)"
lab_upstream nft delete table inet dgblock
guard_stop
t_nomatch "nothing of ours in the root namespace" "portcullis|dgblock" "$(nft list tables 2>&1)"
t_done
