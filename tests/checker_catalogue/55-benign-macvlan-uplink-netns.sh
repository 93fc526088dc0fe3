# Benign (issue 31): a macvlan on the uplink up0 moved into another
# namespace (a Docker macvlan network on the host's uplink): it sees the
# upstream side only, after the guard.
desc="macvlan ckm0 on the uplink up0 moved into another namespace"
expect=benign
need() {
	gw ip link add ckm0 link up0 type macvlan mode bridge 2>/dev/null ||
		{ echo "no macvlan in this kernel"; return 1; }
	gw ip link del ckm0
}
apply() {
	_lab_ns_add "$LAB_ID-ckm"
	gw ip link add ckm0 link up0 type macvlan mode bridge
	gw ip link set ckm0 netns "$LAB_ID-ckm"
	lab_in "$LAB_ID-ckm" ip link set ckm0 up
}
revert() { _lab_ns_del "$LAB_ID-ckm"; }
