#!/bin/bash
# The command table of cli/cmds.c (the one list the dispatcher, --help and
# the CLI test walk) names exactly the subcommands the modules dispatch:
# every string a module's *_cli dispatcher compares its subcommand with is
# an entry of the table with that function, and every entry's subcommand
# is one its function dispatches. A command added to a module without an
# entry would have no help, no usage and no test: it fails here.
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
. tests/lib/tap.sh

# check.py TABLE_FILE: prints one line per mismatch
check() {
	python3 - "$@" <<'PY'
import re, sys, glob
table = open(sys.argv[1]).read()
body = table[table.index("cli_cmds[] = {"):]
entries = []
for m in re.finditer(r'\{"([a-z-]+)",\s*(NULL|"[a-z-]+")', body):
    name, sub = m.group(1), m.group(2).strip('"')
    rest = body[m.end():]
    # the run function: the first identifier after the two numbers
    f = re.search(r',\s*-?\d+,\s*-?\d+,\s*([a-z_]+)', rest)
    entries.append((name, None if sub == "NULL" else sub, f.group(1)))
srcs = {p: open(p).read() for p in glob.glob("*/*.c") if not p.startswith("tests/")}
def func_body(fn):
    for p, s in srcs.items():
        m = re.search(r'^int ' + fn + r'\(int argc, char \*\*argv, const char \*config\)\n\{', s, re.M)
        if m:
            end = s.index("\n}\n", m.end())
            return p, s[m.end():end]
    return None, None
bad = []
funcs = sorted({e[2] for e in entries})
for fn in funcs:
    p, b = func_body(fn)
    if b is None:
        bad.append(f"{fn}: not found as a dispatcher (int {fn}(int argc, char **argv, const char *config))")
        continue
    # what the command or subcommand name (argv[0], argv[1], sub) is compared with
    lits = set(re.findall(r'strcmp\((?:argv\[[01]\]|sub),\s*"([^"]+)"\)', b))
    lits = {l for l in lits if not l.startswith("-") and l != "help"}
    mine = [e for e in entries if e[2] == fn]
    known = {e[0] for e in mine} | {e[1] for e in mine if e[1]}
    for l in sorted(lits - known):
        bad.append(f"{p}: {fn} dispatches '{l}', which cli/cmds.c has no entry for")
    if lits:  # a dispatcher: each entry's subcommand must be one it knows
        for name, sub, _ in mine:
            if sub and sub not in lits:
                bad.append(f"cli/cmds.c: '{name} {sub}' runs {fn}, which does not dispatch '{sub}'")
# Every long option a module's command-line code takes (its struct option
# tables; not the daemons' main.c; the witness's options are witness/'s,
# a module without a command of portcullis) is accepted by some entry that
# module runs: otherwise the dispatcher would refuse it before the module
# saw it.
opts_of = {}
for m in re.finditer(r'\{"([a-z-]+)",\s*(NULL|"[a-z-]+")', body):
    rest = body[m.end():]
    f = re.search(r'^,\s*"(?:[^"\\]|\\.)*"(?:\s*"(?:[^"\\]|\\.)*")*,\s*((?:"(?:[^"\\]|\\.)*"\s*)+),', rest, re.S)
    run = re.search(r',\s*-?\d+,\s*-?\d+,\s*([a-z_]+)', rest).group(1)
    text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', f.group(1))) if f else ""
    opts_of.setdefault(run, set()).update(o.rstrip("=") for o in text.lstrip("+").split())
dirs = {}
for fn in funcs:
    p, _ = func_body(fn)
    if p:
        dirs.setdefault(p.split("/")[0], set()).update(opts_of.get(fn, set()))
for d, accepted in sorted(dirs.items()):
    for p in sorted(glob.glob(d + "/*.c")):
        if p.endswith("/main.c"):
            continue
        for o in re.findall(r'\{"([a-z-]+)",\s*(?:no|required|optional)_argument', srcs.get(p, "")):
            if o in ("help", "version") or "--" + o in accepted:
                continue
            bad.append(f"{p}: option --{o} is taken by the module but accepted by no entry of cli/cmds.c it runs")
# --json on every command that prints a result: each entry's usage names
# it, but for these (their output is a file or a format of its own, or
# nothing but the exit status; the same list is in
# tests/integration/cli_help.sh, which runs them).
no_json = {"help", "secrets rm", "metrics", "log prove", "log keygen", "cert", "cert render",
           "cert keygen", "cert pubkey", "sandbox run", "sandbox attach"}
for m in re.finditer(r'\{"([a-z-]+)",\s*(NULL|"[a-z-]+"),\s*((?:"(?:[^"\\]|\\.)*"\s*)+),', body):
    name = m.group(1) + ("" if m.group(2) == "NULL" else " " + m.group(2).strip('"'))
    usage = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(3)))
    if name not in no_json and "--json" not in usage:
        bad.append(f"cli/cmds.c: '{name}' prints a result but its usage has no --json")
print("\n".join(bad))
PY
}

t_eq "cli/cmds.c and the modules' dispatchers name the same commands" "" "$(check cli/cmds.c)"

# The check must find what it is for: a table without 'log prove' is caught.
tmp=$(mktemp)
grep -v '{"log", "prove"' cli/cmds.c >"$tmp"
t_match "a dispatched subcommand missing from the table is found" "dispatches 'prove'" "$(check "$tmp")"
sed 's/{"ca", "init"/{"ca", "wipe"/' cli/cmds.c >"$tmp"
t_match "a table entry no dispatcher knows is found" "'ca wipe' runs vault_cli" "$(check "$tmp")"
sed 's/"--checkpoints -a --follow/"-a --follow/' cli/cmds.c >"$tmp"
t_match "an option a module takes but the table does not is found" "option --checkpoints is taken" "$(check "$tmp")"
sed 's/"\[--allow-unsigned\] \[--json\] | --proof PROOF \[--key PUB\] \[--json\]"/"[--allow-unsigned] | --proof PROOF [--key PUB]"/' cli/cmds.c >"$tmp"
t_match "a command without --json in its usage is found" "'log verify' prints a result but its usage has no --json" "$(check "$tmp")"
rm -f "$tmp"
t_done
