# Benign: a second, unrelated bridge with an address and a port toward
# another namespace (not a sandbox's).
desc="bridge ckbr2 (10.97.0.1/24) with a port to the upstream namespace"
expect=benign
apply() {
	gw_bridge ckbr2 10.97.0.1/24
	gw_veth_to ckw0 ckw1 "$LAB_UP"
	gw ip link set ckw0 master ckbr2 up
}
revert() { lab_upstream ip link del ckw1 2>/dev/null || true; }
