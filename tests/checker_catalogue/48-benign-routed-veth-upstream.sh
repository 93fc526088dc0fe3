# Benign: a routed veth (an address, no bridge, no gateway route) toward the
# upstream's namespace, the same namespace as the uplink's peer.
desc="veth ckr0 (10.96.0.1/30) on no bridge, peer in the upstream namespace"
expect=benign
apply() {
	gw_veth_to ckr0 ckr1 "$LAB_UP"
	gw ip addr add 10.96.0.1/30 dev ckr0
	gw ip link set ckr0 up
}
revert() { lab_upstream ip link del ckr1 2>/dev/null || true; }
