"""The files of the standard library the guest's python3 loads to run the
escape suite's packet crafter (tests/escape/craft.py) and the demo's agent
(tests/demo/agent.py) load, and little else: run
by mkimage.sh with Debian's python3 -S; prints one path a line."""
import contextlib
import io
import runpy
import sys

CRAFT = sys.argv[1]
sys.argv = ["craft.py", "--help"]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        runpy.run_path(CRAFT, run_name="__main__")
    except SystemExit:
        pass
import encodings.ascii  # noqa: E402,F401  (codecs a guest may ask for)
import encodings.idna  # noqa: E402,F401
import encodings.latin_1  # noqa: E402,F401
import json  # noqa: E402,F401

# what the demo's agent imports (tests/demo/agent.py; make demo VM=1)
import http.client  # noqa: E402,F401
import socket  # noqa: E402,F401
import ssl  # noqa: E402,F401
import urllib.error  # noqa: E402,F401
import urllib.request  # noqa: E402,F401

for f in sorted({str(getattr(m, "__file__", None)) for m in list(sys.modules.values())}):
    if f != "None" and not f.endswith("craft.py"):
        print(f)
