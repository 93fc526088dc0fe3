# Benign: a foreign table for the uplink (a host firewall and masquerade).
desc="foreign inet table: input from up0 (ssh, established), masquerade out of up0"
expect=benign
apply() {
	gw nft -f - <<-EOF2
	table inet ckhost {
		chain in { type filter hook input priority 0; iifname "up0" tcp dport 22 accept; iifname "up0" ct state established,related accept; }
	}
	table ip cknat {
		chain post { type nat hook postrouting priority 100; oifname "up0" masquerade; }
	}
	EOF2
}
