# Issue 23 item 2 (confirmed in the lab): a sandbox port taken off the
# bridge and given an address; the sandbox routes through it. Sandbox 1 is
# matched by source only, so the policy never names pcv1.
desc="sandbox port pcv1 off the bridge, with address 10.99.0.1/30 and a route in the sandbox"
expect=hole
names='pcv1'
apply() {
	gw ip link set pcv1 nomaster
	gw ip addr add 10.99.0.1/30 dev pcv1
	sb 1 ip addr add 10.99.0.2/30 dev eth0
	sb 1 ip route add $X4/32 via 10.99.0.1
}
