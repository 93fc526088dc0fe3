# Cut-off recovery that follows the facts (issue 31, deliverable 3): the
# blackhole that holds without the ruleset is made of routing rules and two
# tables, so another program's routing rule before the engine's (or a
# forwarding route put into table local) cuts the sandboxes off as a
# foreign nftables batch does, and removing it lets them out again by
# itself, without `portcullis reload`: while cut off the engine checks
# again on every route, rule and link event. Real daemons in the lab.
set -u
. "$PC_TOP/tests/lib/guard.sh"

guard_lab 1
guard_agent1 <<-EOF
  - cidr: $LAB_DIRECT4/32
    ports: [80]
EOF
guard_start || {
	t_fail "guard started" true
	t_done
}

cut_exit() { # cut off, and the engine's check after it (or after the ports
	# it took down) found the exit
	guard_cut_is true && guard_check_is '.*' "exit found"
}
resumed() { guard_cut_is false && guard_served; }
records_since() { guard_records | tail -n +$(($1 + 1)); }
# the check that lifted the cut-off came from a routing or link event (a
# check already running at the event is repeated under its own trigger)
lifted_by_events() {
	t_match "... by the engine's own check after the event, not a reload" \
		"^(cutoff|foreignroute|foreign) proven$" \
		"$(guard_status_field 's["check"]["trigger"] + " " + s["check"]["result"]')"
}

lab_wait_until guard_served
t_ok "baseline: the allowed flow is served" guard_served
t_ok "... and the sandboxes are not cut off" guard_cut_is false

# ---- a routing rule before the engine's ---------------------------------------------
rec0=$(guard_records | wc -l)
lab_gw ip -4 rule add pref 500 iif "$LAB_BR" lookup main
t_ok "a foreign routing rule before ours: the engine cuts the sandboxes off and finds the exit" \
	lab_wait_until cut_exit
t_match "... the journal says why" \
	"bridge $LAB_BR: sandboxes cut off \([0-9]+ ports? down\) after another program added IPv4 routing rule 500" \
	"$(cat "$GUARD_DIR/engine.log")"
t_match "... its check names the rule" "IPv4 routing rule 500: iif $LAB_BR .*lookup 254 comes before" \
	"$(guard_status_field 's["check"]["first"]')"
t_match "... the signed log has the cut-off" \
	'"event.action":"check".*"event.reason":"sandboxes cut off until containment is proven again"' \
	"$(records_since "$rec0")"
t_nomatch "... the allowed flow does not get through (curl fails)" "^0$" "$(guard_http_rc 2)"

lab_gw ip -4 rule del pref 500
t_ok "the rule removed: proven again and served again by itself" lab_wait_until resumed
t_match "... the journal says so" "bridge $LAB_BR: service resumed after [0-9]+ ms cut off" \
	"$(cat "$GUARD_DIR/engine.log")"
t_match "... the signed log has the end of the cut-off" \
	"\"event.reason\":\"sandboxes' service resumed: containment proven again\"" \
	"$(records_since "$rec0")"
lifted_by_events

# ---- a forwarding route in table local ----------------------------------------------
lab_gw ip route add 198.51.100.0/24 via "$LAB_UPLINK_UP4" table local
t_ok "a unicast route put into table local: cut off, the exit found" lab_wait_until cut_exit
t_match "... its check names the table and the route" \
	"reaches table 255, which holds a unicast route to 198.51.100.0/24" \
	"$(guard_status_field 's["check"]["first"]')"
lab_gw ip route del 198.51.100.0/24 table local
t_ok "the route removed: served again by itself" lab_wait_until resumed
lifted_by_events

# ---- cut off by nftables, kept by a routing rule ------------------------------------
# The issue's case: a foreign rule is there when an nftables change cuts
# the sandboxes off; the rule goes (a routing event, not an nftables one):
# the engine checks again and lets them out.
lab_gw ip -6 rule add pref 600 iif "$LAB_BR" lookup main
lab_gw nft add table inet ckbenign
t_ok "a foreign IPv6 rule, then an nftables change: cut off, the exit found" lab_wait_until cut_exit
lab_gw ip -6 rule del pref 600
t_ok "the rule removed: served again by itself" lab_wait_until resumed
lifted_by_events
lab_gw nft delete table inet ckbenign
lab_wait_until resumed

# ---- kept by a change no event announces: the admin's check asks ------------------
# A sysctl changes without a netlink event: once it is undone, only a check
# asked for can see it. `portcullis check` as root, proving, asks the engine
# for its own.
carriers() { grep -c "still cut off; link $LAB_BR " "$GUARD_DIR/engine.log" || true; }
carrier0=$(carriers)
lab_gw sysctl -qw net.ipv4.conf.all.accept_source_route=1
lab_gw nft add table inet ckbenign2
t_ok "source routes accepted, then an nftables change: cut off, the exit found" \
	lab_wait_until cut_exit
# The bridge loses its carrier as its one port goes down: a link event
# (linkwatch: up to a second later) that the engine checks again for. Wait
# for that check, so that no event is left to answer for the sysctl.
carrier_checked() { [ "$(carriers)" -gt "$carrier0" ] && cut_exit; }
t_ok "... the bridge's carrier event checked too" lab_wait_until carrier_checked
lab_gw sysctl -qw net.ipv4.conf.all.accept_source_route=0
t_ok "the sysctl undone: still cut off (no event says so)" guard_cut_is true
out=$(guard_cli check 2>&1) && rc=0 || rc=$?
t_eq "portcullis check (root): proven" 0 "$rc"
t_match "... and it says it asked the engine to check" \
	"the engine had the sandboxes cut off: it checks again now" "$out"
t_ok "... whose own check lets the sandboxes out" lab_wait_until resumed
t_match "... a check asked for by the admin" "^admin proven$" \
	"$(guard_status_field 's["check"]["trigger"] + " " + s["check"]["result"]')"
lab_gw nft delete table inet ckbenign2
lab_wait_until resumed

# ---- ours and harmless ones do not cut off ------------------------------------------
cuts=$(guard_status_field 's["cutoff"]["count"]')
runs=$(guard_status_field 's["check"]["runs"]')
settled() { # a check after these events ran and proved
	[ "$(guard_status_field 'str(s["check"]["runs"] > '"$runs"') + s["check"]["result"] + str(s["check"]["running"])')" = "TrueprovenFalse" ]
}
lab_gw ip -4 rule add pref 32000 iif "$LAB_BR" lookup main
lab_gw ip -4 rule del pref 1010
t_ok "our rule deleted: put back" lab_wait_until lab_gw ip -4 rule show pref 1010
lab_gw ip -4 rule del pref 32000
lab_gw ip route add local 198.51.100.0/24 dev lo table local
lab_gw ip route del local 198.51.100.0/24 dev lo table local
t_ok "a rule after ours, our own rule put back, a local route: checked, proven" \
	lab_wait_until settled
t_eq "... and no cut-off" "$cuts" "$(guard_status_field 's["cutoff"]["count"]')"
t_ok "... and the flow is served" guard_served
# what the engine did, for the reader: each cut-off, re-check and resumption
t_diag "$(grep -E 'cut off|resumed|containment check \(' "$GUARD_DIR/engine.log")"

t_done
