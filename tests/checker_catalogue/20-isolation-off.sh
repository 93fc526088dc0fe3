# Already handled (tests/integration/checker_lab.sh): a port not isolated.
desc="pcv2: isolated off"
expect=hole
names='pcv2 is not isolated'
apply() { gw ip link set pcv2 type bridge_slave isolated off; }
