# Entry 32's VXLAN device with forwarding off on it (IPv4 and IPv6): what
# it decapsulates is delivered to the gateway, never routed on, so the
# same tunnelled datagrams, with the engine killed and the ruleset
# flushed, reach nothing upstream, and the checker proves it (naming the
# tunnel in its evidence).
. "$CAT/32-vxlan-decap.sh"
desc="vxlan ckvx1 as entry 32, forwarding off on it, probed with the engine killed"
expect=benign
names=''
apply() {
	vx_add
	gw sysctl -qw net.ipv4.conf.ckvx1.forwarding=0 net.ipv6.conf.ckvx1.forwarding=0
}
