# Benign look-alike of 34: table local holding the kernel's own local and
# broadcast routes and an AnyIP range (what a transparent proxy adds):
# local delivery, the input chain's business, never forwarded.
desc="ip route add local 198.51.100.0/24 dev lo table local (and 2001:db8:5::/64)"
expect=benign
apply() {
	gw ip route add local 198.51.100.0/24 dev lo table local
	gw ip -6 route add local 2001:db8:5::/64 dev lo table local
}
revert() {
	gw ip route del local 198.51.100.0/24 dev lo table local 2>/dev/null || true
	gw ip -6 route del local 2001:db8:5::/64 dev lo table local 2>/dev/null || true
}
