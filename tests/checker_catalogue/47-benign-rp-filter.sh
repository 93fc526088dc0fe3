# Benign: stricter per-interface sysctls than the defaults.
desc="rp_filter=1 and accept_ra=0 on pcbr0, source routes still refused"
expect=benign
apply() {
	gw sysctl -qw net.ipv4.conf.all.rp_filter=1 net.ipv4.conf.$LAB_BR.rp_filter=1 \
		net.ipv6.conf.$LAB_BR.accept_ra=0
}
revert() {
	gw sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.$LAB_BR.rp_filter=0
}
