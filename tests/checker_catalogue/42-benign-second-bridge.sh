# Benign: a second, unrelated bridge with an address and a port toward
# another namespace (not a sandbox's).
desc="bridge ckbr2 (10.97.0.1/24) with a port to the upstream namespace"
expect=benign
apply() {
	gw ip link add ckbr2 type bridge
	gw ip addr add 10.97.0.1/24 dev ckbr2
	gw ip link set ckbr2 up
	ip -n "$LAB_GW" link add ckw0 type veth peer name ckw1 netns "$LAB_UP"
	gw ip link set ckw0 master ckbr2 up
}
revert() { lab_upstream ip link del ckw1 2>/dev/null || true; }
