#!/usr/bin/env bash
# `make demo` is the README's main job: run it non-interactively and hold it
# to its summary — the agent's steps ended as the policy says, the counts of
# allowed and refused flows, DNS queries, injections and exfiltration
# attempts, the log verifying (and a one-byte edit caught), the check proven,
# the certificate valid, nothing left behind — so it cannot silently break;
# then the same with VM=1, the agent in a real QEMU VM.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$PC_TOP/tests/lib/tap.sh"
PC_BUILD=${PC_BUILD:-build}
for b in portcullis portcullisd portcullis-logd portcullis-vault; do
	[ -x "$PC_TOP/$PC_BUILD/$b" ] || { echo "1..0 # SKIP $PC_BUILD/$b not built"; exit 0; }
done

OUT=$(mktemp /tmp/portcullis-demo-test.XXXXXX)
trap 'rm -f "$OUT"' EXIT

# demo VM: `make demo` (VM empty) or `make demo VM=1` (the agent in a QEMU
# VM, make vm-image's guest), then the same summary held to account
demo() {
	local vm=$1 p= start=$SECONDS rc took text summary lab
	[ -z "$vm" ] || p="VM: "
	if [ "$PC_BUILD" = build ]; then
		# exactly what the README says (deps are installed and the tree is
		# built: both steps are quick no-ops here)
		make -C "$PC_TOP" --no-print-directory -s demo ${vm:+VM=1} </dev/null >"$OUT" 2>&1
	else
		env PC_BUILD="$PC_BUILD" ${vm:+PC_DEMO_VM=1} "$PC_TOP/tests/demo/demo.sh" </dev/null >"$OUT" 2>&1
	fi
	rc=$?
	took=$((SECONDS - start))
	text=$(cat "$OUT")
	summary=$(sed -n '/== Summary ==/,$p' "$OUT")
	field() { printf '%s\n' "$summary" | sed -n "s/^  $1  *//p" | head -1; }

	t_eq "${p}make demo exits 0" 0 "$rc"
	t_match "${p}it ends with the summary" "== Summary ==" "$summary"
	if [ -n "$vm" ]; then
		t_match "${p}the agent ran in a QEMU VM" "^a QEMU VM \((KVM|software emulation, TCG)\)" \
			"$(field "the sandbox")"
	fi
	t_eq "${p}every step of the agent ended as the policy says (1 allowed, 7 refused)" "8 of 8" \
		"$(field "agent steps as the policy says")"
	t_eq "${p}flows: 3 allowed (to the API's address, each through the vault), 2 refused (direct IP, QUIC)" \
		"3 allowed, 2 refused" "$(field flows)"
	dns=$(field "DNS queries")
	t_match "${p}DNS: the allowed names answered" '^([4-9]|[1-9][0-9]+) allowed' "$dns"
	t_match "${p}DNS: pypi.test, paste.evil.test and the tunnel name refused (A and AAAA each)" \
		', ([6-9]|[1-9][0-9]+) refused$' "$dns"
	t_eq "${p}one secret injected" "1 (GITHUB_TOKEN)" "$(field "secrets injected")"
	t_match "${p}the upstream received the real token" "^yes" "$(field "real token received by api.github.test")"
	t_eq "${p}nothing reached the paste site" 0 "$(field "requests reaching paste.evil.test")"
	t_eq "${p}both exfiltration attempts refused" "2 refused" "$(field "exfiltration attempts")"
	t_eq "${p}log verify: intact" intact "$(field "log verify")"
	t_match "${p}a one-byte edit is caught, naming the line" '^tampered: line [0-9]+ named$' \
		"$(field "log verify, one byte changed")"
	t_eq "${p}the containment check: proven" proven "$(field "containment check")"
	t_eq "${p}the certificate verifies" valid "$(field "certificate verify")"
	t_eq "${p}the agent exited 0" 0 "$(field "agent exit status")"
	t_eq "${p}nothing left behind" nothing "$(field "left behind")"
	t_lt "${p}under two minutes" "$took" 120
	t_nomatch "${p}no colour codes when not on a terminal" $'\e\\[' "$text"
	t_match "${p}the upstream's log line with the real token is shown" \
		'api.github.test "GET /echo HTTP/1.1" 200 auth="Bearer ghp_demo[0-9a-f]+"' "$text"
	t_match "${p}the short log is shown, with the exfiltration records" \
		'refused EXFILTRATION GET www.github.test/ -> 403' "$text"
	t_match "${p}the certificate's Markdown is shown" '# Containment certificate: sandbox agent-1' "$text"
	lab=$(sed -n 's/^lab \(pcl[0-9]*\): .*/\1/p' "$OUT" | head -1)
	t_match "${p}the demo named its lab" '^pcl[0-9]+$' "$lab"
	t_eq "${p}no namespace of the demo's lab remains" "" "$(ip netns list | grep "^$lab-" || true)"
	t_eq "${p}no /etc/netns entry of it remains" "" "$(ls -d /etc/netns/"$lab"-* 2>/dev/null || true)"
	t_eq "${p}no process of it remains" "" "$(pgrep -f "portcullis-$lab" || true)"
	[ -z "$vm" ] || t_eq "${p}no QEMU of it remains" "" "$(pgrep -f "qemu-system.*$lab" || true)"
	[ "$T_FAILED" = 0 ] || sed 's/^/# /' "$OUT" | tail -60
}

demo ""
# the README's VM=1 variant, where QEMU is there (make deps installs it)
if command -v qemu-system-x86_64 >/dev/null; then
	demo 1
else
	t_skip "make demo VM=1" "qemu-system-x86_64 is not installed (make deps installs qemu-system-x86)"
fi
t_done
