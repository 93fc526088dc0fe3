# MPLS input on the sandbox bridge: a labelled frame (ethertype 0x8847)
# from a sandbox is forwarded by the label table, which no inet hook and
# no policy rule sees — once the ruleset is gone (what the routing half
# of the proof claims to survive) label 100 goes straight to the
# upstream. Debian's kernel routes MPLS (mpls_router); where this one does
# not, the entry is skipped and the unit test check_checker
# (mpls_input_facing_is_an_exit) stands for it.
desc="net.mpls.conf.pcbr0.input=1, label 100 via the upstream"
expect=hole
names='pcbr0 takes MPLS'
need() {
	gw test -e /proc/sys/net/mpls/conf/$LAB_BR/input ||
		{ echo "no MPLS routing in this kernel (net.mpls.conf absent: CONFIG_MPLS_ROUTING)"; return 1; }
}
apply() {
	gw sysctl -qw net.mpls.platform_labels=128 net.mpls.conf.$LAB_BR.input=1
	gw ip -f mpls route add 100 via inet $LAB_UPLINK_UP4 dev up0 2>/dev/null || true
}
revert() {
	gw ip -f mpls route del 100 2>/dev/null || true
	gw sysctl -qw net.mpls.conf.$LAB_BR.input=0 net.mpls.platform_labels=0
}
