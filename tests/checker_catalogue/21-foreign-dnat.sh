# Already handled: a foreign dnat after our decision takes an allowed flow
# elsewhere.
desc="ip nat prerouting: tcp dport 22 dnat to $X4"
expect=hole
names='table ip ckdnat chain pre rule.*dnat'
apply() {
	gw nft -f - <<-EOF2
	table ip ckdnat {
		chain pre { type nat hook prerouting priority -100; tcp dport 22 dnat to $X4; }
	}
	EOF2
}
traffic() {
	sb 1 timeout 1.5 bash -c "exec 3<>/dev/tcp/$LAB_SSH4/22" 2>/dev/null || true
	probe 1
}
