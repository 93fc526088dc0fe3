# Already handled: a second address on the bridge (local delivery beyond
# our listeners).
desc="10.203.0.254/24 on pcbr0"
expect=hole
names='10\.203\.0\.254'
apply() { gw ip addr add 10.203.0.254/24 dev $LAB_BR; }
