#!/bin/bash
# portcullis(8) against the command table of cli/cmds.c (the one list the
# dispatcher and --help follow): every entry of the table has a paragraph
# in COMMANDS, every paragraph there is an entry, every long option an
# entry accepts is in its synopsis line, every short form in its paragraph,
# and the synopsis names no option the entry refuses. The page once said
# `reload` and `log verify` had no --json after both had it.
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
. tests/lib/tap.sh

# check TABLE_FILE MAN_PAGE: one line per mismatch
check() {
	python3 - "$@" <<'PY'
import re, sys
table = open(sys.argv[1]).read()
body = table[table.index("cli_cmds[] = {"):]
entries = {}
for m in re.finditer(r'\{"([a-z-]+)",\s*(NULL|"[a-z-]+"),\s*((?:"(?:[^"\\]|\\.)*"\s*)+),\s*((?:"(?:[^"\\]|\\.)*"\s*)+),', body):
    name = m.group(1) + ("" if m.group(2) == "NULL" else " " + m.group(2).strip('"'))
    opts = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(4)))
    entries[name] = {o.rstrip("=") for o in opts.lstrip("+").split()}
subs = {}
for e in entries:
    w = e.split()
    if len(w) == 2:
        subs.setdefault(w[0], set()).add(w[1])

man = open(sys.argv[2]).read()
sec = man[man.index("\n.SH COMMANDS\n"):man.index("\n.SH EXIT STATUS\n")]

def text(line):
    """A roff line as the reader sees it (fonts, macros and quotes gone)."""
    line = re.sub(r'\\f[BIRP]', '', line).replace('\\-', '-').replace('\\(em', '-')
    m = re.match(r'\.(B|I|BR|RB|BI|IB|IR|RI)\s+(.*)', line)
    if m:
        parts = re.findall(r'"([^"]*)"|(\S+)', m.group(2))
        line = "".join(a or b for a, b in parts) if len(m.group(1)) == 2 else " ".join(a or b for a, b in parts)
    return line.strip()

# paragraphs: .TP/.TQ, the next line its synopsis, then the body up to the next one
paras = []
lines = sec.split("\n")
i = 0
while i < len(lines):
    if lines[i] in (".TP", ".TQ") and i + 1 < len(lines):
        syn = text(lines[i + 1])
        j = i + 2
        bodyl = []
        while j < len(lines) and lines[j] not in (".TP", ".TQ") and not lines[j].startswith(".SS"):
            bodyl.append(text(lines[j]))
            j += 1
        paras.append((syn, " ".join(bodyl)))
        i = j
    else:
        i += 1

def entry_of(syn):
    w = syn.split()
    if not w:
        return None
    if len(w) > 1 and w[1] in subs.get(w[0], ()):
        return w[0] + " " + w[1]
    return w[0] if w[0] in entries else None

bad = []
found = {}
for syn, b in paras:
    e = entry_of(syn)
    if not e:
        bad.append(f"portcullis(8): '{syn[:50]}' is no command of cli/cmds.c")
        continue
    f = found.setdefault(e, ["", ""])
    f[0] += " " + syn
    f[1] += " " + b
for e, opts in sorted(entries.items()):
    if e not in found:
        bad.append(f"portcullis(8): no paragraph for '{e}'")
        continue
    syn, b = found[e]
    named = set(re.findall(r'(?<![\w-])(--?[a-zA-Z][a-z-]*)', syn))
    for o in sorted(opts):
        if o.startswith("--") and o not in named:
            bad.append(f"portcullis(8): '{e}' takes {o}, its synopsis does not say so")
        elif not o.startswith("--") and o not in named and not re.search(r'(?<![\w-])' + re.escape(o) + r'(?![\w-])', b):
            bad.append(f"portcullis(8): '{e}' takes {o}, its paragraph does not say so")
    for o in sorted(named - opts - {"--help", "--version", "--"}):
        bad.append(f"portcullis(8): '{e}' synopsis names {o}, which cli/cmds.c does not accept")
print("\n".join(bad))
PY
}

t_eq "portcullis(8) and cli/cmds.c name the same commands and options" "" \
	"$(check cli/cmds.c docs/man/portcullis.8)"

# The check must find what it is for.
tmp=$(mktemp)
sed 's/"--engine --vault --json"/"--engine --vault --json --dry-run"/' cli/cmds.c >"$tmp"
t_match "an option of the table missing from the page is found" "'reload' takes --dry-run" \
	"$(check "$tmp" docs/man/portcullis.8)"
sed 's/^\\fBreload\\fR \[\\fB\\-\\-engine\\fR\]/\\fBreload\\fR [\\fB\\-\\-all\\fR] [\\fB\\-\\-engine\\fR]/' docs/man/portcullis.8 >"$tmp"
t_match "an option of the page the table refuses is found" "'reload' synopsis names --all" \
	"$(check cli/cmds.c "$tmp")"
grep -v '{"log", "status"' cli/cmds.c >"$tmp"
t_match "a paragraph of no command is found" "'log status.*' is no command" \
	"$(check "$tmp" docs/man/portcullis.8)"
sed 's/^\\fBlog status\\fR/\\fBlog state\\fR/' docs/man/portcullis.8 >"$tmp"
t_match "a command without a paragraph is found" "no paragraph for 'log status'" \
	"$(check cli/cmds.c "$tmp")"
rm -f "$tmp"
t_done
