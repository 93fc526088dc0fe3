# Already handled: bridge netfilter on (bridged frames through the inet
# hooks, which the ruleset does not expect).
desc="net.bridge.bridge-nf-call-iptables=1"
expect=hole
names='bridge netfilter'
need() {
	gw test -e /proc/sys/net/bridge/bridge-nf-call-iptables ||
		{ echo "no br_netfilter in this kernel"; return 1; }
}
apply() { gw sysctl -qw net.bridge.bridge-nf-call-iptables=1; }
