# Benign: a foreign table whose chains only accept (a default-allow
# firewall): accept ends only its own base chain.
desc="foreign inet table: prerouting -300 and forward 0, accept only"
expect=benign
apply() {
	gw nft -f - <<-EOF2
	table inet ckfw {
		chain pre { type filter hook prerouting priority -300; accept; }
		chain fwd { type filter hook forward priority 0; ct state established accept; accept; }
	}
	EOF2
}
