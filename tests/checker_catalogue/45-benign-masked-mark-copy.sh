# Benign twin of 10: a mark copy masked to bits the engine does not own.
desc="prerouting -300: meta mark set ct mark and 0x0000ff00"
expect=benign
apply() { nft_chain ip ckmark pre "type filter hook prerouting priority -300" "meta mark set ct mark and 0x0000ff00"; }
