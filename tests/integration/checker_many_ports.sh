#!/usr/bin/env bash
# A sandbox port is known as sandbox-facing however many sandboxes the
# policy has. The checker knows a port two ways: by the policy's
# match.port names and by the engine's port set. It once kept only the
# first 64 of the policy's names (the engine's set still named the later
# ones, so this lab was found either way: the test pins the behaviour on a
# gateway of many sandboxes, with both ways in place). Here 70 sandboxes
# matched by port come first in the policy (names and rule file sorting
# before agent-2's), so agent-2's port is the 71st; moving it to a second
# bridge must be found exactly as with two sandboxes (checker_exits.sh).
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/checker_setup.bash"

ck_setup 2
P2=$(lab_sb_port 2)

# a policy the engine could not build: check says so in words (the error's
# parts once ran together: "building the engine's rulesetpolicysandbox ...")
printf 'sandbox: aaa-x\nmatch: { source: %s/32 }\nallow:\n  - host: pypi.test\n    ports: [443]\n' \
	"$(lab_sb_ip4 1)" >"$GUARD_DIR/rules.d/aaa-x.yaml"
out=$(ck_pc check 2>&1) && rc=0 || rc=$?
t_eq "overlapping sandboxes: check exits 3 (could not run)" 3 "$rc"
t_match "... and says which step, then why" \
	"building the engine's ruleset: policy: sandbox '(agent-1|aaa-x)' can claim the same packets" "$out"
rm -f "$GUARD_DIR/rules.d/aaa-x.yaml"
{
	for i in $(seq -w 0 69); do
		printf -- '---\nsandbox: aaa-%s\nmatch: { source: 10.204.0.%d/32, port: pcf%s }\nallow:\n  - host: pypi.test\n    ports: [443]\n' "$i" "$((10#$i + 1))" "$i"
	done
} >"$GUARD_DIR/rules.d/aaa-many.yaml"
t_ok "a policy of 72 sandboxes is taken by reload" guard_cli reload
# the policy in force, in its order (what the checker walks)
guard_cli policy hash --canonical >"$GUARD_DIR/canon.json" 2>&1
names() { python3 -c 'import json,sys; print(" ".join(s["name"] for s in json.load(open(sys.argv[1]))["sandboxes"]))' "$GUARD_DIR/canon.json" 2>&1; }
t_eq "the policy has 72 sandboxes" 72 "$(names | wc -w)"
idx=$(names | tr ' ' '\n' | grep -nx agent-2 | cut -d: -f1)
t_lt "agent-2 comes after the first 64 sandboxes of the policy (number $idx)" 64 "${idx:-0}"
ck_wait_proven
t_ok "the lab with 72 sandboxes is proven" ck_pc check

lab_gw ip link add br2 type bridge
lab_gw ip link set "$P2" nomaster
lab_gw ip link set "$P2" master br2
out=$(ck_pc check 2>&1) && rc=0 || rc=$?
t_eq "agent-2's port on a second bridge: check exits 1" 1 "$rc"
t_match "... naming it" "second exit: sandbox port $P2 is enslaved to bridge br2, not to the sandbox bridge pcbr0" "$out"
lab_gw ip link set "$P2" nomaster
lab_gw ip link del br2
lab_gw ip link set "$P2" master pcbr0
lab_gw ip link set "$P2" type bridge_slave isolated on
ck_wait_proven
t_ok "restored, the lab is proven again" ck_pc check
t_done
