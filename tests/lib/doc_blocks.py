#!/usr/bin/env python3
"""Extract the code blocks a documentation page marks for the lab: each
<!-- lab: KIND --> line followed by a fenced block, for the KINDs asked,
written to OUTDIR/NN-KIND.sh in page order, so a test runs the page's own
text, never a retyped copy (tests/integration/install_walkthrough.sh,
sandbox_qemu_doc.sh, sandbox_libvirt_doc.sh). Usage: doc_blocks.py PAGE OUTDIR KIND..."""
import os
import re
import sys

page, out, kinds = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = open(page).read().split("\n")
marker = re.compile(r"^<!-- lab: (%s) -->$" % "|".join(map(re.escape, kinds)))
n, i, want = 0, 0, None
while i < len(lines):
    m = marker.match(lines[i])
    if m:
        want = m.group(1)
    elif want and lines[i].startswith("```"):
        body = []
        i += 1
        while not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        n += 1
        open(f"{out}/{n:02d}-{want}.sh", "w").write("\n".join(body) + "\n")
        want = None
    elif want and lines[i].strip():
        sys.exit(f"{os.path.basename(page)} line {i + 1}: a <!-- lab: {want} --> marker "
                 "must precede a code block")
    i += 1
