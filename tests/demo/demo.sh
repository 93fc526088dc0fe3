#!/usr/bin/env bash
# `make demo`: the whole portcullis story from one command, in network
# namespaces on this machine — a gateway running the guard, a simulated
# internet with a real resolver and real HTTPS servers, and an "AI agent"
# launched with `portcullis sandbox run`. Each act prints a heading, a short
# explanation and what happened; the last screen is a summary (which
# tests/integration/demo.sh checks). Leaves nothing behind.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
T0=$SECONDS

bold=$'\e[1m' dim=$'\e[2m' red=$'\e[31m' off=$'\e[0m'
[ -t 1 ] || bold='' dim='' red='' off=''
act() { printf '\n%s== %s ==%s\n' "$bold" "$*" "$off"; }
say() { printf '%s%s%s\n' "$dim" "$*" "$off"; }
cmd() { printf '%s$ %s%s\n' "$bold" "$*" "$off"; }
die() { printf '%sdemo: %s%s\n' "$red" "$*" "$off" >&2; exit 1; }
SUMMARY=()
result() { SUMMARY+=("$(printf '  %-42s %s' "$1" "$2")"); }

[ "$(id -u)" = 0 ] || die "run as root (make demo): the demo creates network namespaces"
if [ ! -x "$PC_TOP/${PC_BUILD:-build}/portcullis" ]; then
	make -C "$PC_TOP" --no-print-directory -s all >/dev/null || die "the build failed"
fi
. "$PC_TOP/tests/lab/lab.sh"
. "$PC_TOP/tests/lib/guard.sh"
. "$PC_TOP/tests/demo/gateway.bash"
for b in portcullis portcullisd portcullis-logd portcullis-vault; do
	[ -x "$GUARD_BIN/$b" ] || die "$GUARD_BIN/$b is not built (make)"
done
pc() { guard_cli "$@"; }

printf '%sportcullis: an egress guard for sandboxes that run AI agents%s\n' "$bold" "$off"
say "A gateway judges every flow and DNS query its sandboxes send, puts real credentials"
say "into requests only toward the host they are bound to, signs a log of every verdict,"
say "and proves before launch that the guarded path is the only way out."

act "1. The lab"
say "Network namespaces on this machine: a gateway with the sandbox bridge pcbr0, and an"
say "upstream 'internet' on TEST-NET addresses with a real resolver (dnsmasq) and real HTTPS"
say "servers (nginx): api.github.test, www.github.test, pypi.test, paste.evil.test, ..."
lab_up 0 2>/dev/null || die "the lab did not come up"
say "lab $LAB_ID: gateway $LAB_GW, upstream $LAB_UP, resolver $LAB_RESOLVER4"

act "2. The guard on the gateway"
say "portcullis-logd owns the signed log; portcullisd (the engine) installs its nftables"
say "tables and judges queued packets; portcullis-vault holds the secrets and the CA."
gw_config
gw_start || die "the daemons did not start (see $GUARD_DIR/*.log)"
pc status --json | python3 -c 'import json,sys; s=json.load(sys.stdin)
print("  engine pid %d, queue path %s, %d queues, policy %s" % (s["pid"], s["queue_path"],
      len(s["queues"]), s["policy"][:23] + "..."))'
say "  logd and vault: serving (pids $(cat "$LAB_DIR/guard-logd.pid") and $(cat "$LAB_DIR/guard-vault.pid"))"

act "3. A secret for the agent"
say "The real token goes into the vault's sealed store. The sandbox will only ever hold a"
say "placeholder, worthless anywhere but on requests to the host the token is bound to."
DEMO_TOKEN="ghp_demo$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
cmd "printf '%s' \"\$TOKEN\" | portcullis secrets set GITHUB_TOKEN"
PH=$(gw_secret GITHUB_TOKEN "$DEMO_TOKEN") || die "secrets set failed"
[ -n "$PH" ] || die "no placeholder"
say "  real value (this demo's, made up): $DEMO_TOKEN"
say "  placeholder:                       $PH"

act "4. The agent runs in a sandbox"
cp "$PC_TOP/tests/demo/agent.py" "$LAB_DIR/agent.py" && chmod 0644 "$LAB_DIR/agent.py"
RUN_OUT=$LAB_DIR/run.out
if [ -n "${PC_DEMO_VM:-}" ]; then
	# make demo VM=1: the sandbox is a real QEMU VM (make vm-image) on a tap
	IMG=$PC_TOP/build/vm
	[ -r "$IMG/vmlinuz" ] && [ -r "$IMG/initrd.img" ] || die "no guest image in $IMG (make vm-image)"
	say "One command: a real VM (QEMU, Debian's cloud kernel, its own TCP/IP stack) on a tap of"
	say "the bridge, its rule file, the engine and vault reloaded, the containment check, a"
	say "signed certificate, then the agent in the VM with GITHUB_TOKEN=<placeholder> and the"
	say "vault's CA trusted. The agent (tests/demo/agent.py) does its job, then tries what a"
	say "prompt-injected one would."
	cmd "portcullis sandbox run --vm --name agent-1 --allow api.github.test --allow www.github.test \\"
	printf '%s      --secret GITHUB_TOKEN -- python3 -S -c "$(cat agent.py)"%s\n' "$bold" "$off"
	(cd "$LAB_DIR" && pc sandbox run --vm --kernel "$IMG/vmlinuz" --initrd "$IMG/initrd.img" \
		--name agent-1 --allow api.github.test --allow www.github.test \
		--secret GITHUB_TOKEN -- python3 -S -c "$(cat agent.py)") >"$RUN_OUT" 2>&1
	RUN_RC=$?
	VM_HOW=$(sed -n 's/.*booting the VM (\(software emulation, TCG\|KVM\).*/\1/p' "$RUN_OUT" | head -1)
else
	say "One command: a sandbox (a network namespace standing in for a VM) on the bridge, its"
	say "rule file, the engine and vault reloaded, the containment check, a signed certificate,"
	say "then the agent as user nobody with GITHUB_TOKEN=<placeholder> and the vault's CA trusted."
	say "The agent (tests/demo/agent.py) does its job, then tries what a prompt-injected one would."
	cmd "portcullis sandbox run --name agent-1 --allow api.github.test --allow www.github.test \\"
	printf '%s      --secret GITHUB_TOKEN -- python3 agent.py%s\n' "$bold" "$off"
	(cd "$LAB_DIR" && pc sandbox run --name agent-1 --allow api.github.test --allow www.github.test \
		--secret GITHUB_TOKEN -- python3 agent.py) >"$RUN_OUT" 2>&1
	RUN_RC=$?
fi
sed -e "s|$LAB_DIR|\$LAB|g" "$RUN_OUT"
field() { sed -n "s/^  $1 *//p" "$RUN_OUT" | head -1; }
FLOWS=$(field flows)
DNSQ=$(field "DNS queries")
INJ=$(field "secrets injected")
EXF=$(field exfiltration)
CERT=$(field certificate)
STEPS_OK=$(grep -c '(as expected)$' "$RUN_OUT")
STEPS_ALL=$(grep -cE '^  \[(allowed|refused)\]' "$RUN_OUT")

act "5. What the internet saw"
say "The API received the real token (nginx's access log upstream); the sandbox never held it:"
grep -F '"GET /echo' "$LAB_DIR/nginx-access.log" | grep -F api.github.test | sed 's/^/  /'
grep -qF "Bearer $DEMO_TOKEN" "$LAB_DIR/nginx-access.log" && API_REAL=yes || API_REAL=no
PASTE_HITS=$(grep -c 'paste.evil.test\|203.0.113.12' "$LAB_DIR/nginx-access.log")
TUNNEL_HITS=$(grep -c x7f3a9c2e "$LAB_DIR/dnsmasq.log")
LEAKS=$(grep -c pcph_ "$LAB_DIR/nginx-access.log")
say "  requests that reached paste.evil.test:            $PASTE_HITS"
say "  tunnel lookups (x7f3a9c2e...) that reached DNS:   $TUNNEL_HITS"
say "  requests upstream carrying a placeholder:         $LEAKS"

act "6. The signed log"
say "Every verdict is a record in logd's Merkle-tree log, sealed by ed25519-signed"
say "checkpoints. The short form (repeated DNS retries folded):"
cmd "portcullis log show"
pc log show | awk '
	function fold() {
		if (n) printf "      (and %d more like it%s)\n", n,
			last ~ / DNS / ? ": A and AAAA, to each resolver, retried" : ""
		n = 0
	}
	{ key = $0; sub(/^#[0-9]+ [0-9-]+ [0-9:]+Z /, "", key); gsub(/ (A|AAAA) \(/, " A/AAAA (", key) }
	key == last { n++; next }
	{ fold(); last = key; print "  " $0 }
	END { fold() }'
# logd seals the log with a signed checkpoint within log.checkpoint.interval_ms
# of the last record: wait for it, so that verify shows every record sealed
for i in $(seq 1 40); do
	pc log verify 2>&1 | grep -q "unsealed tail" || break
	sleep 0.1
done
cmd "portcullis log verify"
pc log verify >"$LAB_DIR/verify.out" 2>&1
VERIFY_RC=$?
sed -e "s|$GUARD_DIR|\$GUARD|g; s/^/  /" "$LAB_DIR/verify.out"
say "Now a copy of the log with one byte changed: the direct-IP attempt's address"
say "203.0.113.12 becomes 203.0.113.13, as if to hide where the agent tried to go."
cp "$GUARD_DIR/log/verdicts.jsonl" "$LAB_DIR/tampered.jsonl"
TLINE=$(python3 - "$LAB_DIR/tampered.jsonl" <<-'EOF'
	import sys
	p = sys.argv[1]
	lines = open(p, "rb").read().split(b"\n")
	for i, l in enumerate(lines):
	    if b'"destination.ip":"203.0.113.12"' in l:
	        lines[i] = l.replace(b'"203.0.113.12"', b'"203.0.113.13"', 1)
	        open(p, "wb").write(b"\n".join(lines))
	        print(i + 1)
	        break
	EOF
)
cmd "portcullis log verify tampered.jsonl"
pc log verify "$LAB_DIR/tampered.jsonl" >"$LAB_DIR/tamper.out" 2>&1
TAMPER_RC=$?
sed -e "s|$LAB_DIR|\$LAB|g; s/^/  /" "$LAB_DIR/tamper.out"
if [ "$TAMPER_RC" = 1 ] && [ -n "$TLINE" ] && grep -q "line $TLINE:" "$LAB_DIR/tamper.out"; then
	TAMPERED="tampered: line $TLINE named"
else
	TAMPERED="NOT DETECTED as expected (exit $TAMPER_RC)"
fi

act "7. The proof: check and certificate"
say "Before the agent started, the launcher ran the containment check on the live kernel"
say "state and had the appliance sign a certificate. The check, run again now:"
cmd "portcullis check"
pc check >"$LAB_DIR/check.out" 2>&1
CHECK_RC=$?
sed 's/^/  /' "$LAB_DIR/check.out"
say "The certificate issued at launch (Markdown rendering; evidence after the first line of"
say "each obligation left out here):"
awk '
	/^## / { ob = 0; print ""; print "  " $0; next }
	/^### / { ob = ($0 ~ /\([a-z-]+\)$/); nb = 0; print ""; print "  " $0; next }
	/^- / && ob { if (nb++ == 0) print "  " $0; next }
	/^[ \t]*$/ { next }
	{ print "  " $0 }' "$CERT.md" 2>/dev/null
cmd "portcullis cert verify agent-1.json --key appliance.pub"
pc cert verify "$CERT" --key "$GUARD_DIR/state/appliance.pub" >"$LAB_DIR/cert.out" 2>&1
CERT_RC=$?
sed -e "s|$LAB_DIR|\$LAB|g; s/^/  /" "$LAB_DIR/cert.out"

act "8. Cleaning up"
gw_stop
LAB_ID_WAS=$LAB_ID
LAB_DIR_WAS=$LAB_DIR
lab_down
LEFT=""
ip netns list 2>/dev/null | grep -q "^$LAB_ID_WAS-" && LEFT="$LEFT namespaces"
ls -d /etc/netns/"$LAB_ID_WAS"-* >/dev/null 2>&1 && LEFT="$LEFT /etc/netns"
pgrep -f "$LAB_DIR_WAS" >/dev/null && LEFT="$LEFT processes"
[ -e "$LAB_DIR_WAS" ] && LEFT="$LEFT files"
say "  daemons stopped, namespaces and files removed: ${LEFT:-nothing left behind}"

act "Summary"
[ -z "${PC_DEMO_VM:-}" ] || result "the sandbox" "a QEMU VM ($VM_HOW)"
result "agent steps as the policy says" "$STEPS_OK of $STEPS_ALL"
result "flows" "$FLOWS"
result "DNS queries" "$DNSQ"
result "secrets injected" "$INJ"
result "real token received by api.github.test" "$API_REAL (the sandbox held only the placeholder)"
result "requests reaching paste.evil.test" "$PASTE_HITS"
result "exfiltration attempts" "$EXF"
if [ "$VERIFY_RC" = 0 ]; then V="intact"; else V="FAILED (exit $VERIFY_RC)"; fi
result "log verify" "$V"
result "log verify, one byte changed" "$TAMPERED"
result "containment check" "$([ "$CHECK_RC" = 0 ] && echo proven || echo "NOT proven (exit $CHECK_RC)")"
result "certificate verify" "$([ "$CERT_RC" = 0 ] && echo valid || echo "INVALID (exit $CERT_RC)")"
result "agent exit status" "$RUN_RC"
result "time" "$((SECONDS - T0)) s"
result "left behind" "${LEFT:-nothing}"
printf '%s\n' "${SUMMARY[@]}"
[ "$RUN_RC" = 0 ] && [ "$STEPS_OK" = "$STEPS_ALL" ] && [ "$STEPS_ALL" -gt 0 ] &&
	[ "$API_REAL" = yes ] && [ "$PASTE_HITS" = 0 ] && [ "$VERIFY_RC" = 0 ] &&
	[ "${TAMPERED#tampered: line}" != "$TAMPERED" ] && [ "$CHECK_RC" = 0 ] && [ "$CERT_RC" = 0 ] && [ -z "$LEFT" ]
