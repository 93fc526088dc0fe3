# Issue 23 item 10: the engine's allow bit set on the uplink's ingress by tc
# skbedit (and saved to conntrack): inbound connections pass as allowed.
desc="tc on up0 ingress: skbedit mark 0x80000000"
expect=hole
names='up0'
need() { # (builds it when it can: apply has nothing left to do)
	tc_ingress_all up0 "this kernel has no tc skbedit action (act_skbedit)" skbedit mark 0x80000000
}
