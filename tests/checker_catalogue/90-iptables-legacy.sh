# Already handled: iptables-legacy tables (not modelled). Last: a legacy
# table stays registered in the namespace once created.
desc="iptables-legacy -t nat -A PREROUTING -p tcp --dport 22 -j DNAT --to $X4"
expect=hole
final=1
names='iptables-legacy'
need() {
	need_cmd iptables-legacy || return 1
	gw test -e /proc/net/ip_tables_names || { echo "no legacy ip_tables in this kernel"; return 1; }
}
apply() { gw iptables-legacy -t nat -A PREROUTING -p tcp --dport 22 -j DNAT --to-destination $X4; }
traffic() { probe_ssh; }
revert() { gw iptables-legacy -t nat -F 2>/dev/null || true; }
