# Issue 23 item 11: IPv4 source routing accepted (an LSRR option re-routes
# a vault-redirected flow after its SYN).
desc="net.ipv4.conf.all.accept_source_route=1 (pcbr0's own is 1 by default)"
expect=hole
names='accept_source_route|source routes'
apply() { gw sysctl -qw net.ipv4.conf.all.accept_source_route=1; }
