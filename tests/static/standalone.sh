#!/bin/bash
# The repository stands alone: no tracked file points at a document outside
# it (a design or style file that a reader of this tree does not have).
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
. tests/lib/tap.sh
outside='\.\./shared|DESIGN\.md|STYLE\.md'
hits=$(git ls-files -z | grep -zv '^tests/static/standalone.sh$' |
	xargs -0 grep -nE "$outside" 2>/dev/null)
t_eq "no tracked file cites a document outside the repository" "" "$hits"
# the pattern itself must find what it is for (a check that cannot fail is a bug)
t_ok "the pattern finds a citation of an outside file" \
	grep -qE "$outside" <<<"see ../shared/DESIGN.md"
t_done
