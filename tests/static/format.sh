#!/bin/bash
# Every C file as clang-format (the root's .clang-format) writes it, so a
# change shows only what it changes (make format rewrites the tree).
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
. tests/lib/tap.sh
if ! command -v clang-format >/dev/null; then
	echo "ok 1 # SKIP clang-format is not installed (make deps installs it)"
	exit 0
fi
out=$(git ls-files -z '*.c' '*.h' | xargs -0 clang-format --dry-run 2>&1 | grep -E '^[^ ]+:[0-9]+:[0-9]+: ' | head -20)
t_eq "every tracked C file is clang-format clean" "" "$out"
t_fail "the check finds a badly formatted file" \
	sh -c 'printf "int  x ;\n" | clang-format --dry-run --Werror --assume-filename=x.c'
t_done
