# Escape attempts, class "unannounced": a way out made while the engine
# runs by a change the kernel tells no one of — a sysctl, an
# iptables-legacy table (legacy xtables has no events). Before 2026-12-07
# the engine checked only at the events it hears, and a check that found a
# way out cut nothing off: the sandbox's flows went through until someone
# ran `portcullis check`. The engine now also checks when no check ran for
# engine.recheck_interval_s (2 s here, 60 by default), and containment lost
# between two of its checks cuts the sandboxes off until one proves it
# again (docs/engine.md, "Cut off until proven").
. "$PC_TOP/tests/escape/escape_lib.bash"

# (set empty, the key is left out: an engine from before it runs the test)
GUARD_RECHECK_S=${GUARD_RECHECK_S-2}
GUARD_MS_UNTIL=10000 # an interval, a check and the check that confirms it
esc_init unannounced "Changes no event announces"
esc_up 1

X4=203.0.113.77 # TEST-NET-3: nothing serves it, nothing may reach it
not_served() { ! guard_served; }
cut_after() { # ERE on status' cutoff.after while cut off
	[[ "$(guard_status_field 'str(s["cutoff"]["active"]) + " " + s["cutoff"].get("after", "")' 2>/dev/null)" =~ ^True\ $1 ]]
}

t_nomatch "the engine checks by itself when nothing else asks (periodic, proven)" "^never$" \
	"$(guard_ms_until guard_check_is periodic proven)"
t_ok "... and serves" guard_cut_is false

# ---- a sysctl ----------------------------------------------------------------
# Source routing accepted on the gateway: a sandbox's packet can name its
# own next hops (docs/checker.md). A sysctl write is no rtnetlink event.
esc_begin "net.ipv4.conf.all.accept_source_route=1 while the engine runs"
lab_gw sysctl -qw net.ipv4.conf.all.accept_source_route=1
cms=$(guard_ms_until cut_after "containment lost")
t_nomatch "the engine cut the sandboxes off by itself (within 10 s)" "^never$" "$cms"
t_match "... status: containment lost, the finding named" "accept_source_route" \
	"$(guard_status_field 's["cutoff"]["after"]')"
t_ok "... the allowed flow does not get through" not_served
lab_gw sysctl -qw net.ipv4.conf.all.accept_source_route=0
rms=$(guard_ms_until guard_served)
t_nomatch "put back: a periodic check proves, service resumes by itself" "^never$" "$rms"
t_ok "... and the cut-off is over" guard_cut_is false
esc_end "cut off ${cms} ms after the sysctl; resumed ${rms} ms after it was put back" \
	"no event: found by the periodic check"

# ---- an iptables-legacy table -----------------------------------------------
# A DNAT of the allowed ssh flow to an address no flow may reach, in a
# legacy table: nftables' events do not see it, the checker does not model
# it ("unproven"). On 190f72f's engine the sandbox's SYNs reached it for as
# long as the engine ran. Last: a legacy table stays in the namespace.
if command -v iptables-legacy >/dev/null && lab_gw test -e /proc/net/ip_tables_names; then
	esc_begin "iptables-legacy DNAT of an allowed flow while the engine runs"
	ssh_try() { lab_sb 1 timeout 1.5 bash -c "exec 3<>/dev/tcp/$LAB_SSH4/22" 2>/dev/null || true; }
	ESC_T0=$(date +%s.%N)
	lab_gw iptables-legacy -t nat -A PREROUTING -p tcp --dport 22 -j DNAT --to-destination $X4
	ssh_try
	t_diag "before the engine's next check: $(esc_upstream "dst host $X4") packet(s) reached $X4"
	cms=$(guard_ms_until cut_after "containment lost")
	t_nomatch "the engine cut the sandboxes off by itself (within 10 s)" "^never$" "$cms"
	t_match "... status: containment lost, the legacy table named" "iptables-legacy" \
		"$(guard_status_field 's["cutoff"]["after"]')"
	ESC_T0=$(date +%s.%N)
	for _ in 1 2 3; do ssh_try; done
	esc_expect_nothing "from the cut on, nothing reaches $X4" "dst host $X4"
	esc_end "cut off ${cms} ms after the legacy rule" "upstream: $ESC_N packets to $X4 after the cut"
else
	t_skip "iptables-legacy DNAT of an allowed flow" "no iptables-legacy, or no legacy ip_tables in this kernel"
fi
t_done
