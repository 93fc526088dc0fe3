# Already handled: a host veth (both ends in the gateway) on the sandbox
# bridge.
desc="veth ckh0 (peer ckh1 in the gateway) enslaved to pcbr0"
expect=hole
names='ckh0'
apply() {
	gw ip link add ckh0 type veth peer name ckh1
	gw ip link set ckh0 master $LAB_BR up
	gw ip link set ckh1 up
}
