# Benign twin of 16: two VMs, each with one tap — the sandbox's on pcbr0,
# an unrelated VM's on bridge ckbr1 with the gateway's address.
desc="sandbox VM's tap ckt0 on pcbr0; another VM's tap ckt1 on bridge ckbr1 (10.98.1.1/24)"
expect=benign
need() { gw test -c /dev/net/tun || { echo "no /dev/net/tun"; return 1; }; }
apply() {
	bg_start vm_ckt0 open vm_taps.py ckt0
	bg_start vm_ckt1 open vm_taps.py ckt1
	vm_taps_bridged
}
revert() {
	bg_stop vm_ckt0
	bg_stop vm_ckt1
}
