# Already handled: iptables-legacy tables (not modelled). Last: a legacy
# table stays registered in the namespace once created.
desc="iptables-legacy -t nat -A PREROUTING -p tcp --dport 22 -j DNAT --to $X4"
expect=hole
final=1
names='iptables-legacy'
need() {
	command -v iptables-legacy >/dev/null || { echo "no iptables-legacy"; return 1; }
	gw test -e /proc/net/ip_tables_names || { echo "no legacy ip_tables in this kernel"; return 1; }
}
apply() { gw iptables-legacy -t nat -A PREROUTING -p tcp --dport 22 -j DNAT --to-destination $X4; }
traffic() {
	sb 1 timeout 1.5 bash -c "exec 3<>/dev/tcp/$LAB_SSH4/22" 2>/dev/null || true
	probe 1
}
revert() { gw iptables-legacy -t nat -F 2>/dev/null || true; }
