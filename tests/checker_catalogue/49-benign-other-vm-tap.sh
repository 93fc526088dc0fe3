# Benign twin of 16: two VMs, each with one tap — the sandbox's on pcbr0,
# an unrelated VM's on bridge ckbr1 with the gateway's address.
desc="sandbox VM's tap ckt0 on pcbr0; another VM's tap ckt1 on bridge ckbr1 (10.98.1.1/24)"
expect=benign
need() { gw test -c /dev/net/tun || { echo "no /dev/net/tun"; return 1; }; }
apply() {
	local t
	lab_ns_check "$LAB_GW"
	for t in ckt0 ckt1; do
		ip netns exec "$LAB_GW" python3 "$CAT/vm_taps.py" $t >"$LAB_DIR/vm_$t.out" 2>&1 &
		echo $! >"$LAB_DIR/vm_$t.pid"
		lab_wait_until grep -q open "$LAB_DIR/vm_$t.out"
	done
	gw ip link set ckt0 master $LAB_BR
	gw ip link set ckt0 type bridge_slave isolated on
	gw ip link set ckt0 up
	gw ip link add ckbr1 type bridge
	gw ip addr add 10.98.1.1/24 dev ckbr1
	gw ip link set ckbr1 up
	gw ip link set ckt1 master ckbr1 up
}
revert() {
	local t
	for t in ckt0 ckt1; do
		kill "$(cat "$LAB_DIR/vm_$t.pid")" 2>/dev/null
		wait "$(cat "$LAB_DIR/vm_$t.pid")" 2>/dev/null
	done
}
