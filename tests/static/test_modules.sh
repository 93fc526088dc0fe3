#!/bin/bash
# Every test belongs to a module, so that `make test-MODULE` finds it: unit
# tests are named check_<module>[_<topic>] (tests/run's module_of places
# the rest), and the tiers the README and docs/layout.md promise exist.
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
. tests/lib/tap.sh
mods=" $(sed -n 's/^MODULES *:= *//p' Makefile) "
bad=""
for f in tests/unit/check_*.c; do
	n=$(basename "$f" .c)
	n=${n#check_}
	[[ $mods == *" ${n%%_*} "* ]] || bad="$bad $n"
done
t_eq "every unit test is named check_<module>[_<topic>]" "" "${bad# }"
# (tests/run --list places every test it would run; "?" is a test it cannot)
list=$(tests/run --list)
t_ok "tests/run lists the tests" test -n "$list"
t_eq "every test has a module" "" "$(awk '$3 == "?"' <<<"$list")"
for m in $mods packaging; do
	n=$(tests/run --list --module "$m" | awk -v m="$m" '$3 == m' | wc -l)
	t_lt "make test-$m finds tests of its own" 0 "$n"
done
for g in check test soak "test-engine"; do
	t_ok "make $g is a target" make -n --no-print-directory "$g"
done
t_done
