# Issue 23 item 3, through tc: skbedit ptype host on the port's ingress.
desc="tc on pcv1 ingress: skbedit ptype host"
expect=hole
names='ptype'
need() { # (builds it when it can: apply has nothing left to do)
	tc_ingress_all pcv1 "this kernel has no tc skbedit action (act_skbedit)" skbedit ptype host
}
traffic() {
	esc_craft 1 --gw-mac 01:80:c2:00:00:0e udp --dst $X6 --dport 9 >/dev/null || true
	probe 1
}
