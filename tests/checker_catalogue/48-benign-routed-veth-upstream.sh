# Benign: a routed veth (an address, no bridge, no gateway route) toward the
# upstream's namespace, the same namespace as the uplink's peer.
desc="veth ckr0 (10.96.0.1/30) on no bridge, peer in the upstream namespace"
expect=benign
apply() {
	ip -n "$LAB_GW" link add ckr0 type veth peer name ckr1 netns "$LAB_UP"
	gw ip addr add 10.96.0.1/30 dev ckr0
	gw ip link set ckr0 up
}
revert() { lab_upstream ip link del ckr1 2>/dev/null || true; }
