#!/usr/bin/env bash
# `make demo` is the README's main job: run it non-interactively and hold it
# to its summary — the agent's steps ended as the policy says, the counts of
# allowed and refused flows, DNS queries, injections and exfiltration
# attempts, the log verifying (and a one-byte edit caught), the check proven,
# the certificate valid, nothing left behind — so it cannot silently break.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$PC_TOP/tests/lib/tap.sh"
PC_BUILD=${PC_BUILD:-build}
for b in portcullis portcullisd portcullis-logd portcullis-vault; do
	[ -x "$PC_TOP/$PC_BUILD/$b" ] || { echo "1..0 # SKIP $PC_BUILD/$b not built"; exit 0; }
done

OUT=$(mktemp /tmp/portcullis-demo-test.XXXXXX)
trap 'rm -f "$OUT"' EXIT
start=$SECONDS
if [ "$PC_BUILD" = build ]; then
	# exactly what the README says (deps are installed and the tree is
	# built: both steps are quick no-ops here)
	make -C "$PC_TOP" --no-print-directory -s demo </dev/null >"$OUT" 2>&1
else
	PC_BUILD=$PC_BUILD "$PC_TOP/tests/demo/demo.sh" </dev/null >"$OUT" 2>&1
fi
rc=$?
took=$((SECONDS - start))
text=$(cat "$OUT")
summary=$(sed -n '/== Summary ==/,$p' "$OUT")
field() { printf '%s\n' "$summary" | sed -n "s/^  $1  *//p" | head -1; }

t_eq "make demo exits 0" 0 "$rc"
t_match "it ends with the summary" "== Summary ==" "$summary"
t_eq "every step of the agent ended as the policy says (1 allowed, 7 refused)" "8 of 8" \
	"$(field "agent steps as the policy says")"
t_eq "flows: 3 allowed (to the API's address, each through the vault), 2 refused (direct IP, QUIC)" \
	"3 allowed, 2 refused" "$(field flows)"
dns=$(field "DNS queries")
t_match "DNS: the allowed names answered" '^([4-9]|[1-9][0-9]+) allowed' "$dns"
t_match "DNS: pypi.test, paste.evil.test and the tunnel name refused (A and AAAA each)" \
	', ([6-9]|[1-9][0-9]+) refused$' "$dns"
t_eq "one secret injected" "1 (GITHUB_TOKEN)" "$(field "secrets injected")"
t_match "the upstream received the real token" "^yes" "$(field "real token received by api.github.test")"
t_eq "nothing reached the paste site" 0 "$(field "requests reaching paste.evil.test")"
t_eq "both exfiltration attempts refused" "2 refused" "$(field "exfiltration attempts")"
t_eq "log verify: intact" intact "$(field "log verify")"
t_match "a one-byte edit is caught, naming the line" '^tampered: line [0-9]+ named$' \
	"$(field "log verify, one byte changed")"
t_eq "the containment check: proven" proven "$(field "containment check")"
t_eq "the certificate verifies" valid "$(field "certificate verify")"
t_eq "the agent exited 0" 0 "$(field "agent exit status")"
t_eq "nothing left behind" nothing "$(field "left behind")"
t_lt "under two minutes" "$took" 120
t_nomatch "no colour codes when not on a terminal" $'\e\\[' "$text"
t_match "the upstream's log line with the real token is shown" \
	'api.github.test "GET /echo HTTP/1.1" 200 auth="Bearer ghp_demo[0-9a-f]+"' "$text"
t_match "the short log is shown, with the exfiltration records" \
	'refused EXFILTRATION GET www.github.test/ -> 403' "$text"
t_match "the certificate's Markdown is shown" '# Containment certificate: sandbox agent-1' "$text"
lab=$(sed -n 's/^lab \(pcl[0-9]*\): .*/\1/p' "$OUT" | head -1)
t_match "the demo named its lab" '^pcl[0-9]+$' "$lab"
t_eq "no namespace of the demo's lab remains" "" "$(ip netns list | grep "^$lab-" || true)"
t_eq "no /etc/netns entry of it remains" "" "$(ls -d /etc/netns/"$lab"-* 2>/dev/null || true)"
t_eq "no process of it remains" "" "$(pgrep -f "portcullis-$lab" || true)"
[ "$T_FAILED" = 0 ] || sed 's/^/# /' "$OUT" | tail -60
t_done
