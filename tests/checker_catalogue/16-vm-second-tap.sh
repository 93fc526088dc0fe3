# Issue 23 item 6 with a VM: one process (qemu) holds two taps, one a port
# of the sandbox bridge, the other on another bridge with the gateway's
# address (libvirt's default network).
desc="a VM's taps: ckt0 on pcbr0, ckt1 on bridge ckbr1 (10.98.1.1/24)"
expect=hole
names='ckt1'
need() { gw test -c /dev/net/tun || { echo "no /dev/net/tun"; return 1; }; }
apply() {
	bg_start vm_taps open vm_taps.py ckt0 ckt1
	vm_taps_bridged
}
revert() { bg_stop vm_taps; }
