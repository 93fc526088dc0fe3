#!/bin/bash
# The module order on the built archives: every symbol build/lib<module>.a
# leaves undefined is its own, a lower archive's or a system library's
# (docs/layout.md). layering.sh sees #includes, not calls: a call into a
# higher module or into a main file needs no #include of its header. Runs
# after the build (make test builds first); without the archives it fails.
# The self-test runs first, on made-up and on freshly compiled archives that
# break each rule, so that a check that cannot fail is caught.
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
python3 tests/static/symbols.py --self-test || exit 1
python3 tests/static/symbols.py . "${PC_BUILD:-build}"
