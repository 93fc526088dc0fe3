#!/usr/bin/env bash
# The warnings of `portcullis policy lint`, table-driven: each file of
# tests/lint_warnings/ is one case, and its "# expect: LINE:COL: warning:
# TEXT" lines are the warnings lint must print for it (TEXT a prefix of
# the message), no more, no fewer; "# expect-file: PATH" when the warning
# is about another file than the case (a file of its rules directory).
# NAME.conf.yaml is linted as a configuration (-c), anything else as a
# rule file. Warnings leave the exit status 0; --strict makes it 1; --json
# carries the same warnings. 15-clean.yaml, warned about by nothing, is the
# control. Uses Debian's Public Suffix List (publicsuffix, via libpsl).
set -u
. "$PC_TOP/tests/lib/tap.sh"

PC=$PC_TOP/$PC_BUILD/portcullis
case $PC_BUILD in /*) PC=$PC_BUILD/portcullis ;; esac
T=$(mktemp -d /tmp/pc-lintw-XXXXXX)
trap 'rm -rf "$T"' EXIT
D=$PC_TOP/tests/lint_warnings

# lint reads the box it runs on (the uplinks in /sys/class/net, the
# bridge's addresses): it runs in a network namespace of its own, made for
# each call, holding eth0 (a veth) and the bridge pcbr0 with the lab's
# gateway address 10.203.0.1/24, so that what it finds does not depend on
# the machine.
inns() {
	unshare -n sh -c 'ip link add eth0 type veth peer name eth0p &&
		ip link add pcbr0 type bridge &&
		ip addr add 10.203.0.1/24 dev pcbr0 && exec "$@"' sh "$@"
}
# lint ARGS...: rc, err (stderr), out (stdout)
lint() {
	inns "$PC" "$@" >"$T/out" 2>"$T/err" && rc=0 || rc=$?
	out=$(cat "$T/out")
	err=$(cat "$T/err")
}

t_ok "Debian's Public Suffix List is installed" test -s /usr/share/publicsuffix/public_suffix_list.dat
n_cases=0
for f in "$D"/*.yaml; do
	name=$(basename "$f")
	n_cases=$((n_cases + 1))
	case $name in
	*.conf.yaml) args=(-c "$f" policy lint) ;;
	*) args=(policy lint "$f") ;;
	esac
	target=$(sed -n 's/^# expect-file: //p' "$f")
	[ -n "$target" ] && target=$D/$target || target=$f
	mapfile -t expect < <(sed -n 's/^# expect: //p' "$f")

	lint "${args[@]}"
	t_eq "$name: exit 0 (warnings do not fail lint)" 0 "$rc"
	got=$(printf '%s\n' "$err" | grep -c ': warning: ')
	t_eq "$name: ${#expect[@]} warning(s)" "${#expect[@]}" "$got"
	for e in "${expect[@]}"; do
		line="$target:$e"
		if printf '%s\n' "$err" | grep -qF -- "$line"; then
			t_ok "$name: $e" true
		else
			t_fail "$name: $e" "$(printf 'expected a line starting with:\n%s\ngot:\n%s' "$line" "$err")"
		fi
		# a warning is one line that begins with the position
		t_eq "$name: the warning begins its line" 1 \
			"$(printf '%s\n' "$err" | grep -cF -- "$line" | head -1)"
	done

	lint "${args[@]}" --strict
	if [ "${#expect[@]}" -gt 0 ]; then
		t_eq "$name: --strict makes the warnings errors (exit 1)" 1 "$rc"
	else
		t_eq "$name: --strict with no warning: exit 0" 0 "$rc"
	fi

	lint "${args[@]}" --json
	t_eq "$name: --json exit 0" 0 "$rc"
	t_eq "$name: --json carries the same warnings" "${#expect[@]}" \
		"$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(1 for x in d["diagnostics"] if x["severity"]=="warning"))')"
	t_eq "$name: --json prints nothing on stderr" "" "$err"
done
t_lt "the table has a case for each kind of warning" 26 "$n_cases"

# The rule file the package installs as the admin's model lints without a
# warning: an example that lint warns about teaches the habit lint warns of.
lint policy lint --strict "$PC_TOP/packaging/conf/agent-1.yaml"
t_eq "the shipped example rule file: no warning (--strict exit 0)" 0 "$rc"
t_eq "... and nothing on stderr" "" "$err"

# Non-decimal ports are said to be so (they once read as "port 0").
printf 'sandbox: a\nmatch: {source: 10.0.0.1}\nallow:\n  - {host: a.example, ports: [0x1BB]}\n' >"$T/hex.yaml"
lint policy lint "$T/hex.yaml"
t_eq "ports: [0x1BB] is an error" 1 "$rc"
t_match "... saying it is hexadecimal, and its value" \
	"^$T/hex.yaml:4:31: ports: '0x1BB' is a hexadecimal number \(443 in decimal\); expected ports written in decimal" "$err"
printf 'sandbox: a\nmatch: {source: 10.0.0.1}\nallow:\n  - {host: a.example, ports: [0o17]}\n' >"$T/oct.yaml"
lint policy lint "$T/oct.yaml"
t_match "0o17 is said to be octal" "'0o17' is an? octal number \(15 in decimal\)" "$err"
printf 'sandbox: a\nmatch: {source: 10.0.0.1}\nallow:\n  - {host: a.example, ports: [443]}\nsecrets:\n  - {name: A, host: a.example, port: 0x1BB}\n' >"$T/shex.yaml"
lint policy lint "$T/shex.yaml"
t_match "a secret's port in hex is said to be so" "port: '0x1BB' is a hexadecimal number \(443 in decimal\)" "$err"
t_done
