# Already handled: a foreign rule writes the engine's allow bit.
desc="prerouting -300: meta mark set 0x80000000"
expect=hole
names='table ip ckmw chain pre rule'
apply() { nft_chain ip ckmw pre "type filter hook prerouting priority -300" "meta mark set 0x80000000"; }
