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
	t_lt "make test-$m finds tests of its own" 0 "$(awk -v m="$m" '$3 == m' <<<"$list" | wc -l)"
done
t_match "--module keeps a module's tests and those of the whole stack" \
	"^static +static/test_modules +all" "$(tests/run --list --static --module nft)"
targets=$(make -pn --no-print-directory -f Makefile 2>/dev/null | sed -n 's/^\([a-z-]*\):.*/\1/p' | sort -u)
for g in check test soak $(for m in $mods packaging; do echo "test-$m"; done); do
	t_match "make $g is a target" "^$g\$" "$targets"
done
t_done
