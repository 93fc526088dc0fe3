#!/bin/bash
# The module order (docs/layout.md): no #include goes up the order or into
# another module's internal header. The self-test runs first, on made-up
# trees that break each rule, so that a check that cannot fail is caught.
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
python3 tests/static/layering.py --self-test || exit 1
python3 tests/static/layering.py .
