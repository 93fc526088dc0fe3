# Already handled: a foreign rule writes the engine's allow bit.
desc="prerouting -300: meta mark set 0x80000000"
expect=hole
names='table ip ckmw chain pre rule'
apply() {
	gw nft -f - <<-EOF2
	table ip ckmw {
		chain pre { type filter hook prerouting priority -300; meta mark set 0x80000000; }
	}
	EOF2
}
