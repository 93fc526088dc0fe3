# TAP helpers for the shell tests (sourced). Each assertion prints one
# "ok"/"not ok" line that tests/run counts; t_done exits non-zero if any
# assertion failed. A test that asserts nothing fails (t_done checks).
T_N=0
T_FAILED=0

_t_report() { # status desc [detail]
	T_N=$((T_N + 1))
	if [ "$1" = 0 ]; then
		echo "ok $T_N - $2"
	else
		T_FAILED=$((T_FAILED + 1))
		echo "not ok $T_N - $2"
		[ -z "${3:-}" ] || printf '%s\n' "$3" | sed 's/^/#   /' | head -40
	fi
}

# t_ok DESC CMD...: CMD must succeed.
t_ok() {
	local d=$1 out rc
	shift
	out=$("$@" 2>&1) && rc=0 || rc=$?
	_t_report "$rc" "$d" "$([ "$rc" = 0 ] || printf 'command: %s\nexit %s\n%s' "$*" "$rc" "$out")"
}

# t_fail DESC CMD...: CMD must fail (exit non-zero).
t_fail() {
	local d=$1 out rc
	shift
	out=$("$@" 2>&1) && rc=0 || rc=$?
	if [ "$rc" != 0 ]; then _t_report 0 "$d"; else
		_t_report 1 "$d" "$(printf 'command unexpectedly succeeded: %s\n%s' "$*" "$out")"; fi
}

# t_eq DESC EXPECTED ACTUAL
t_eq() {
	if [ "$2" = "$3" ]; then _t_report 0 "$1"; else
		_t_report 1 "$1" "$(printf 'expected: %s\nactual:   %s' "$2" "$3")"; fi
}

# t_match DESC ERE TEXT: TEXT must match the extended regular expression.
t_match() {
	if printf '%s' "$3" | grep -Eq -- "$2"; then _t_report 0 "$1"; else
		_t_report 1 "$1" "$(printf 'pattern: %s\ntext:\n%s' "$2" "$3")"; fi
}

# t_nomatch DESC ERE TEXT: TEXT must not match.
t_nomatch() {
	if printf '%s' "$3" | grep -Eq -- "$2"; then
		_t_report 1 "$1" "$(printf 'pattern %s found in:\n%s' "$2" "$3")"; else _t_report 0 "$1"; fi
}

# t_lt DESC A B: integer A < B
t_lt() {
	if [ "$2" -lt "$3" ] 2>/dev/null; then _t_report 0 "$1"; else
		_t_report 1 "$1" "expected $2 < $3"; fi
}

t_skip() { T_N=$((T_N + 1)); echo "ok $T_N - $1 # SKIP ${2:-}"; }

# Skips the whole test (exit 0) unless each program is built in $B.
t_need_built() { # program...
	local b
	for b in "$@"; do
		[ -x "$B/$b" ] || { echo "1..0 # SKIP $b not built"; exit 0; }
	done
}

# D: a fresh directory /tmp/portcullis-NAME.XXXXXX (mode 0755, for the
# daemons' users), removed when the test exits.
t_tmpdir() { # name
	D=$(mktemp -d "/tmp/portcullis-$1.XXXXXX")
	trap 'rm -rf "$D"' EXIT
	chmod 0755 "$D"
}

# Change the byte at OFFSET of FILE, whatever it was: a fixed byte written
# there is no change one time in 256 (or 64, in base64), and the "tampered"
# file then passes for good.
t_flip_byte() { # file offset
	python3 - "$1" "$2" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)
    if len(b) != 1:
        sys.exit("t_flip_byte: %s has no byte at %s" % (sys.argv[1], sys.argv[2]))
    f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 1]))
EOF
}

t_diag() { printf '%s\n' "$*" | sed 's/^/# /'; }

# Elapsed milliseconds of a command, for "fails fast" checks (not timing
# assertions on speed: a refusal must not be a timeout of seconds).
t_ms() {
	local s e
	s=$(date +%s%N)
	"$@" >/dev/null 2>&1 || true
	e=$(date +%s%N)
	echo $(((e - s) / 1000000))
}

t_done() {
	echo "1..$T_N"
	if [ "$T_N" = 0 ]; then echo "not ok - no assertion ran"; exit 1; fi
	[ "$T_FAILED" = 0 ]
}
