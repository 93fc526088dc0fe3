# Issue 31: a packet socket on a sandbox port, held by a userspace relay
# that sends what it reads out of the uplink (a capture, tcpdump -i pcv1,
# is the same socket without the relay).
desc="packet socket on port pcv1, a relay of its frames toward $X4 out of up0"
expect=hole
names='packet socket .* receives on sandbox-facing pcv1'
need() { need_cmd python3; }
apply() {
	bg_start pkt_relay bound pkt_relay.py pcv1 up0 \
		"$(lab_upstream cat /sys/class/net/eth0/address)" $X4
}
revert() { bg_stop pkt_relay; }
