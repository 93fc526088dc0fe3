#!/usr/bin/env bash
# Every command, subcommand and daemon answers --help and --version with
# exit 0, and a command line it does not accept with exit 2 and its own
# usage. The commands are walked from the one table the dispatcher uses
# (`portcullis --commands`, cli/cmds.c); tests/static/cli_commands.sh
# checks that table against the modules' own dispatchers, so a command
# added without an entry (and so without help) fails there. No daemon
# runs: the configuration named does not even exist, and help must not
# need it.
set -u
. "$PC_TOP/tests/lib/tap.sh"

B=$PC_TOP/$PC_BUILD
case $PC_BUILD in /*) B=$PC_BUILD ;; esac
PC=$B/portcullis
T=$(mktemp -d /tmp/pc-clihelp-XXXXXX)
trap 'rm -rf "$T"' EXIT
NOCONF=$T/absent.yaml
VERSION=$("$PC" --version | awk '{print $2}')

# run ARGS...: rc, out, err (stdin closed: nothing may wait for input)
run() {
	timeout 10 "$@" </dev/null >"$T/out" 2>"$T/err" && rc=0 || rc=$?
	out=$(cat "$T/out")
	err=$(cat "$T/err")
}

t_match "the version is a version" '^[0-9]+\.[0-9]+' "$VERSION"
for a in --help -h; do
	run "$PC" $a
	t_eq "portcullis $a exits 0" 0 "$rc"
	t_match "portcullis $a prints the usage on stdout" '^usage: portcullis ' "$out"
done
run "$PC" --version
t_eq "portcullis --version exits 0" 0 "$rc"
t_eq "portcullis --version prints the version" "portcullis $VERSION" "$out"
run "$PC"
t_eq "portcullis without a command exits 2" 2 "$rc"
t_match "... with the usage on stderr" '^usage: portcullis ' "$err"
run "$PC" no-such-command
t_eq "an unknown command exits 2" 2 "$rc"

mapfile -t cmds < <("$PC" --commands)
t_lt "the command table lists at least 20 entries" 19 "${#cmds[@]}"
declare -A seen_cmd=()
for entry in "${cmds[@]}"; do
	read -r -a words <<<"$entry"
	seen_cmd[${words[0]}]=1
	for a in --help -h; do
		run "$PC" -c "$NOCONF" "${words[@]}" $a
		t_eq "portcullis $entry $a exits 0" 0 "$rc"
		t_match "portcullis $entry $a prints its usage" "^usage: portcullis \[-c FILE\] $entry( |\$)" "$out"
	done
	run "$PC" -c "$NOCONF" "${words[@]}" --version
	t_eq "portcullis $entry --version exits 0" 0 "$rc"
	t_eq "portcullis $entry --version prints the version" "portcullis $VERSION" "$out"
	run "$PC" -c "$NOCONF" "${words[@]}" --no-such-option
	t_eq "portcullis $entry --no-such-option exits 2" 2 "$rc"
	t_match "... naming the option" "portcullis: $entry: unknown option '--no-such-option'" "$err"
	t_match "... with the usage of $entry" "^usage: portcullis \[-c FILE\] $entry( |\$)" \
		"$(printf '%s\n' "$err" | sed -n 2p)"
	# too many arguments (but for those whose usage says "...")
	"$PC" "${words[@]}" --help | grep -q '\.\.\.' && continue
	run "$PC" -c "$NOCONF" "${words[@]}" a1 a2 a3 a4 a5 a6
	t_eq "portcullis $entry with six extra arguments exits 2" 2 "$rc"
	t_match "... with its usage" "usage: portcullis \[-c FILE\] $entry( |\$)" "$err"
done
# --json on every command that prints a result. Not on these, and why:
# their output is a file or a format of its own (the Prometheus text, a
# proof, a certificate), or nothing but the exit status. The same list is
# in tests/static/cli_commands.sh, which checks the table's usages.
no_json="help|secrets rm|metrics|log prove|log keygen|cert|cert render|cert keygen|cert pubkey|sandbox run|sandbox attach"
for entry in "${cmds[@]}"; do
	read -r -a words <<<"$entry"
	if printf '%s\n' "$entry" | grep -qxE "$no_json"; then
		continue
	fi
	t_match "portcullis $entry takes --json" '\[--json\]' "$("$PC" "${words[@]}" --help | head -1)"
done

# A command of subcommands: help lists them all; without one, or with an
# unknown one, exit 2 with them all.
for c in "${!seen_cmd[@]}"; do
	n=$(printf '%s\n' "${cmds[@]}" | grep -c "^$c\( \|\$\)")
	run "$PC" -c "$NOCONF" "$c" --help
	t_eq "portcullis $c --help exits 0" 0 "$rc"
	t_eq "portcullis $c --help lists its $n entr(ies)" "$n" "$(printf '%s\n' "$out" | grep -c "^usage: portcullis \[-c FILE\] $c")"
	if printf '%s\n' "${cmds[@]}" | grep -qx "$c"; then
		continue # the command itself takes arguments (check, cert SANDBOX, status ...)
	fi
	run "$PC" -c "$NOCONF" "$c"
	t_eq "portcullis $c without a subcommand exits 2" 2 "$rc"
	t_match "... with its usage" "^usage: portcullis \[-c FILE\] $c " "$(printf '%s\n' "$err" | sed -n 2p)"
	run "$PC" -c "$NOCONF" "$c" no-such-sub
	t_eq "portcullis $c no-such-sub exits 2" 2 "$rc"
done

# `portcullis help [COMMAND [SUBCOMMAND]]` says what COMMAND --help says.
run "$PC" help
t_eq "portcullis help exits 0" 0 "$rc"
t_match "... with the list of commands" '^usage: portcullis .*commands:' "$(printf '%s' "$out" | tr '\n' ' ')"
for entry in "${cmds[@]}"; do
	read -r -a words <<<"$entry"
	t_eq "portcullis help $entry says what portcullis $entry --help says" \
		"$("$PC" "${words[@]}" --help 2>&1)" "$("$PC" help "${words[@]}" 2>&1)"
done
run "$PC" help no-such-command
t_eq "portcullis help of an unknown command exits 2" 2 "$rc"
t_match "... naming it" "portcullis: help: unknown command 'no-such-command'" "$err"

# The global options are accepted anywhere on the line, in each form.
for form in "-c $T/c1.yaml config show" "config show -c $T/c1.yaml" "config -c $T/c1.yaml show" \
	"config show --config $T/c1.yaml" "config show --config=$T/c1.yaml" "--config=$T/c1.yaml config show" \
	"config show -c$T/c1.yaml" "-c $T/c0.yaml config show -c $T/c1.yaml"; do
	# shellcheck disable=SC2086 # the form is words
	run "$PC" $form
	t_eq "portcullis $form: the configuration given (unreadable: exit 3)" 3 "$rc"
	t_match "... is the one read" "c1\.yaml: No such file" "$err"
done
run "$PC" status --json -c
t_eq "-c without its value exits 2" 2 "$rc"
t_match "... saying so" "portcullis: command line: option '-c' needs a value" "$err"

# A usage error a command finds in a value: exit 2 with its usage too.
run "$PC" -c "$NOCONF" policy test agent-1 api.example.com https
t_eq "policy test with a port that is no number exits 2" 2 "$rc"
t_match "... saying so, then its usage" \
	"PORT: expected a port from 1 to 65535.*usage: portcullis \[-c FILE\] policy test " "$(printf '%s' "$err" | tr '\n' ' ')"
run "$PC" log show /dev/null --outcome maybe
t_eq "log show --outcome maybe exits 2" 2 "$rc"
t_match "... with its usage" "usage: portcullis \[-c FILE\] log show " "$err"

# The daemons.
for d in portcullisd portcullis-logd portcullis-vault; do
	for a in --help -h; do
		run "$B/$d" $a
		t_eq "$d $a exits 0" 0 "$rc"
		t_match "$d $a prints its usage on stdout" "^usage: $d " "$out"
	done
	for a in --version -V; do
		run "$B/$d" $a
		t_eq "$d $a exits 0" 0 "$rc"
		t_eq "$d $a prints the version" "$d $VERSION" "$out"
	done
	run "$B/$d" --no-such-option
	t_eq "$d --no-such-option exits 2" 2 "$rc"
	t_match "... with its usage" "usage: $d " "$err"
	run "$B/$d" -c "$NOCONF" stray-argument
	t_eq "$d with a stray argument exits 2" 2 "$rc"
done

# Daemon logging, one convention for the three daemons (common/log.c):
# "<N>" priority prefixes only when stderr is the journal (systemd's
# $JOURNAL_STREAM names stderr's device and inode), plain text on a pipe,
# a file or a terminal.
for d in portcullisd portcullis-logd portcullis-vault; do
	"$B/$d" -c "$NOCONF" -t 2>"$T/pipe" >/dev/null </dev/null
	t_match "$d: an error on a redirected stderr is plain text" "^$d: " "$(cat "$T/pipe")"
	: >"$T/journal"
	JOURNAL_STREAM=$(stat -c '%d:%i' "$T/journal") "$B/$d" -c "$NOCONF" -t 2>"$T/journal" >/dev/null </dev/null
	t_match "$d: with stderr the journal's stream, the <N> prefix" "^<[0-7]>$d: " "$(cat "$T/journal")"
	JOURNAL_STREAM=1:1 "$B/$d" -c "$NOCONF" -t 2>"$T/pipe" >/dev/null </dev/null
	t_match "$d: JOURNAL_STREAM naming another stream (inherited): plain text" "^$d: " "$(cat "$T/pipe")"
done
if command -v script >/dev/null; then
	script -qec "$B/portcullis-logd -c $NOCONF -t" /dev/null >"$T/tty" 2>&1 </dev/null
	t_nomatch "on a terminal, no <N> prefix" '<[0-7]>' "$(cat "$T/tty")"
	t_match "... but the daemon's name" 'portcullis-logd: ' "$(cat "$T/tty")"
else
	t_skip "on a terminal, no <N> prefix" "script(1) not installed"
fi
t_done
