# Issue 23 item 6 with a VM: one process (qemu) holds two taps, one a port
# of the sandbox bridge, the other on another bridge with the gateway's
# address (libvirt's default network).
desc="a VM's taps: ckt0 on pcbr0, ckt1 on bridge ckbr1 (10.98.1.1/24)"
expect=hole
names='ckt1'
need() { gw test -c /dev/net/tun || { echo "no /dev/net/tun"; return 1; }; }
apply() {
	lab_ns_check "$LAB_GW"
	ip netns exec "$LAB_GW" python3 "$CAT/vm_taps.py" ckt0 ckt1 >"$LAB_DIR/vm_taps.out" 2>&1 &
	echo $! >"$LAB_DIR/vm_taps.pid"
	lab_wait_until grep -q open "$LAB_DIR/vm_taps.out"
	gw ip link set ckt0 master $LAB_BR
	gw ip link set ckt0 type bridge_slave isolated on
	gw ip link set ckt0 up
	gw ip link add ckbr1 type bridge
	gw ip addr add 10.98.1.1/24 dev ckbr1
	gw ip link set ckbr1 up
	gw ip link set ckt1 master ckbr1 up
}
revert() {
	kill "$(cat "$LAB_DIR/vm_taps.pid")" 2>/dev/null
	wait "$(cat "$LAB_DIR/vm_taps.pid")" 2>/dev/null
}
