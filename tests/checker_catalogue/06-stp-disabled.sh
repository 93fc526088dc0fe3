# Issue 23 item 5: a port's STP state set to disabled.
desc="bridge link set dev pcv1 state 0 (disabled)"
expect=hole
names='pcv1.*forwarding state'
apply() { gw bridge link set dev pcv1 state 0; }
