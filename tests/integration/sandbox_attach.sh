#!/usr/bin/env bash
# `portcullis sandbox attach` for a VM's existing interface: a veth whose far
# end is in a namespace of its own stands in for a QEMU/Firecracker tap (a tap
# needs its VM to carry frames). The port is put on the bridge isolated, the
# rule binds it by port, MAC and address, the command (the VM's monitor, on
# the gateway) gets the guest's configuration, the VM reaches only what is
# allowed with the secret injected, and afterwards the port is released and
# the rules are gone. Refusals: an interface with addresses (the uplink), a
# missing one, a bridge, a guest namespace holding a second link. What the
# launcher cannot read (a tap's VM) it names.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$PC_TOP/tests/integration/sandbox_setup.bash"

sb_guard_up 0 ghp_ATTACHTEST

# The "VM": its own namespace, configured as a guest would be (static
# address, the guard's resolver), its interface's far end vmtap1 on the gateway.
VM=$LAB_ID-vm
VMMAC=52:54:00:12:34:56
VMIP=10.203.0.50
_lab_ns_add "$VM"
ip -n "$LAB_GW" link add vmtap1 type veth peer name eth0 netns "$VM"
lab_in "$VM" ip link set eth0 address $VMMAC
lab_in "$VM" ip addr add $VMIP/24 dev eth0
lab_in "$VM" ip link set eth0 up
lab_in "$VM" ip route add default via $LAB_GW4
mkdir -p "/etc/netns/$VM"
printf 'nameserver %s\n' "$LAB_RESOLVER4" >"/etc/netns/$VM/resolv.conf"

# The monitor's script: what it was given, then the guest's traffic.
cat >"$LAB_DIR/monitor.sh" <<EOF
env | grep '^PORTCULLIS_' | sort
echo "rule: \$(tr '\n' ' ' <$GUARD_DIR/rules.d/sandbox-vm1.yaml)"
bridge -d link show dev vmtap1 | tr '\n' ' '; echo
. "\$PORTCULLIS_ENV_FILE"
ip netns exec $VM curl -sS --max-time 8 --cacert "\$PORTCULLIS_CA_BUNDLE" \\
	-H "Authorization: Bearer \$GITHUB_TOKEN" https://api.github.test/echo | sed 's/^/api /'
ip netns exec $VM curl -sS --max-time 5 --cacert "\$PORTCULLIS_CA_BUNDLE" https://pypi.test/ \\
	>/dev/null 2>&1; echo "pypi rc=\$?"
exit 5
EOF
before=$(grep -c "Bearer $VALUE" "$LAB_DIR/nginx-access.log")
OUT=$(gw_pc sandbox attach --port vmtap1 --name vm1 --mac $VMMAC --address $VMIP \
	--allow api.github.test --secret GITHUB_TOKEN -- bash "$LAB_DIR/monitor.sh" 2>&1) &&
	RC=0 || RC=$?
t_eq "the monitor's exit status passes through" 5 "$RC"
t_match "the launcher read the guest's namespace: its links and routes" \
	"/run/netns/$VM holds links lo, eth0; routes: default via $LAB_GW4 dev eth0" "$OUT"
t_match "the monitor learns the guest's address" "PORTCULLIS_ADDRESS4=$VMIP/24" "$OUT"
t_match "... its gateway" "PORTCULLIS_GATEWAY4=$LAB_GW4" "$OUT"
t_match "... its resolver" "PORTCULLIS_DNS=$LAB_RESOLVER4" "$OUT"
t_match "... where the trust bundle is" "PORTCULLIS_CA_BUNDLE=$GUARD_DIR/run/sandbox/vm1/ca-bundle.pem" "$OUT"
t_match "... and the placeholders (env file)" "PORTCULLIS_ENV_FILE=$GUARD_DIR/run/sandbox/vm1/env" "$OUT"
t_match "the rule binds port, MAC and address" \
	"source: \[\"$VMIP/32\"\] +port: \"vmtap1\" +mac: \"$VMMAC\"" "$OUT"
t_match "the tap is on the bridge, isolated" "master $LAB_BR .*isolated on" "$OUT"
t_match "the guest reaches the allowed API; the vault injects the real token" \
	"api host=api.github.test auth=Bearer $PH" "$OUT"
t_eq "the upstream got the real token" "$((before + 1))" \
	"$(grep -c "Bearer $VALUE" "$LAB_DIR/nginx-access.log")"
t_match "a name not allowed does not resolve for the guest" "pypi rc=6" "$OUT"
t_match "the summary counts the guest's flows" "flows +[1-9][0-9]* allowed" "$OUT"
t_match "... and the injection" "secrets injected +1 \(GITHUB_TOKEN\)" "$OUT"
t_ok "the tap is still there afterwards (it is the VM's)" lab_gw ip link show dev vmtap1
t_eq "... released from the bridge" "" "$(lab_gw ip -o link show dev vmtap1 | grep -o "master $LAB_BR" || true)"
t_eq "the rule file is gone" "" "$(ls "$GUARD_DIR/rules.d")"
t_eq "the engine runs the policy from before" "$POLICY0" "$(guard_status_field 's["policy"]')"
t_eq "the guest has no way out any more (its port is no sandbox's)" 28 \
	"$(lab_in "$VM" curl -s --max-time 3 -o /dev/null https://$LAB_API4/ >/dev/null 2>&1; echo $?)"

# ---- attached until a signal, without a command ------------------------------------------
lab_ns_check "$LAB_GW"
ip netns exec "$LAB_GW" "$GUARD_BIN/portcullis" -c "$GUARD_CONF" sandbox attach --port vmtap1 \
	--name vm2 --mac $VMMAC --address $VMIP --allow api.github.test >"$LAB_DIR/vm2.out" 2>&1 &
apid=$!
for i in $(seq 1 100); do grep -q "attached; stop with" "$LAB_DIR/vm2.out" && break; sleep 0.05; done
t_match "without a command it says how to stop it, and what the guest needs" \
	"guest: address $VMIP/24, gateway $LAB_GW4.*attached; stop with Ctrl-C" \
	"$(tr '\n' ' ' <"$LAB_DIR/vm2.out")"
t_eq "while attached the guest reaches the allowed host" "api.github.test ok" \
	"$(lab_in "$VM" curl -sS --max-time 8 --cacert "$LAB_CA" https://api.github.test/ 2>&1)"
kill -TERM "$apid"
wait "$apid" && RC=0 || RC=$?
t_eq "SIGTERM detaches cleanly (exit 0)" 0 "$RC"
t_match "... with the summary" "command +none \(detached by a signal\)" "$(cat "$LAB_DIR/vm2.out")"
t_eq "... the rule file is gone" "" "$(ls "$GUARD_DIR/rules.d")"
t_eq "... the tap released" "" "$(lab_gw ip -o link show dev vmtap1 | grep -o "master $LAB_BR" || true)"

# ---- what attach refuses ---------------------------------------------------------------
OUT=$(gw_pc sandbox attach --port up0 --name up --allow api.github.test -- true 2>&1) && RC=0 || RC=$?
t_eq "the uplink (an interface with addresses): refused (exit 3)" 3 "$RC"
t_match "... saying why" "up0 has an address of the gateway's \(192\.0\.2\.1\)" "$OUT"
t_eq "... and it was never put on the bridge" "" "$(lab_gw ip -o link show dev up0 | grep -o master || true)"
OUT=$(gw_pc sandbox attach --port nosuch0 --name ns --allow api.github.test -- true 2>&1) && RC=0 || RC=$?
t_eq "a missing interface: exit 3" 3 "$RC"
t_match "... named" "nosuch0 does not exist" "$OUT"
OUT=$(gw_pc sandbox attach --port "$LAB_BR" --name br --allow api.github.test -- true 2>&1) && RC=0 || RC=$?
t_eq "the bridge itself: exit 3" 3 "$RC"
t_match "... is not a tap" "is a bridge link, not a VM's tap" "$OUT"
# the guest's namespace with a second link, a veth to the upstream's
# namespace: a path around the gateway no check of the gateway sees (issue 31)
lab_in "$VM" ip link add ckx0 type veth peer name ckx1 netns "$LAB_UP"
OUT=$(gw_pc sandbox attach --port vmtap1 --name vmx --mac $VMMAC --address $VMIP \
	--allow api.github.test -- sh -c 'exit 9' 2>&1) && RC=0 || RC=$?
t_eq "a second link in the guest's namespace: refused (exit 1)" 1 "$RC"
t_match "... named" "/run/netns/$VM holds ckx0 \(veth\) besides its interface and lo" "$OUT"
t_eq "... the tap released" "" "$(lab_gw ip -o link show dev vmtap1 | grep -o "master $LAB_BR" || true)"
lab_in "$VM" ip link del ckx0
# a tap: the VM's inside cannot be read from the gateway, and attach says so
lab_gw ip tuntap add mode tap cktap0
OUT=$(gw_pc sandbox attach --port cktap0 --name tp --allow api.github.test -- true 2>&1) && RC=0 || RC=$?
t_match "a tap: attach names what it cannot read (the VM's inside)" \
	"not read: cktap0 is a tap: a VM's inside is not visible from the gateway" "$OUT"
lab_gw ip link del cktap0
OUT=$(gw_pc sandbox attach --name x --allow api.github.test -- true 2>&1) && RC=0 || RC=$?
t_eq "attach without --port: usage (exit 2)" 2 "$RC"
t_eq "nothing left in the rules directory" "" "$(ls "$GUARD_DIR/rules.d")"

gw_stop
t_done
