# Benign (issue 31): a packet socket on the uplink (a DHCP client, a capture
# of the upstream side) sees the sandboxes' flows only after the guard.
desc="packet socket on the uplink up0 (a capture)"
expect=benign
need() { need_cmd python3; }
apply() { bg_start pkt_up bound pkt_relay.py up0; }
revert() { bg_stop pkt_up; }
