#!/usr/bin/env bash
# The man pages keep up with the code: every configuration key the loader
# accepts is in portcullis.yaml(5), every rule-file key in
# portcullis-rules(5), every CLI command in portcullis(8), every daemon
# option in its page; each page renders without groff warnings and says
# what its exit codes mean.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh

man=docs/man
render() { MANWIDTH=200 man --warnings -E UTF-8 -l "$1" 2>&1; }
# page_has PAGE ERE: the rendered page has a line matching ERE (a failure
# names the pattern, not the whole page).
page_has() { render "$1" | grep -Eq -- "$2"; }

for p in "$man"/*.[58]; do
	warn=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$p" 2>&1 >/dev/null)
	t_eq "$(basename "$p") renders without warnings" "" "$warn"
	t_ok "$(basename "$p") documents the exit codes" page_has "$p" '^(EXIT STATUS|DIAGNOSTICS)$'
done
for p in portcullis.8 portcullisd.8 portcullis-logd.8 portcullis-vault.8 portcullis.yaml.5 \
	portcullis-rules.5; do
	t_ok "man page $p exists" test -s "$man/$p"
done

# Configuration keys: the loader's table is the schema (rules/config.c).
keys=$(grep -oE '^\s*[KN]\("[a-z_.]+"' rules/config.c | grep -oE '"[a-z_.]+"' | tr -d '"')
t_match "the configuration key table was found" 'log\.file' "$keys"
for k in $keys; do
	t_ok "portcullis.yaml(5) documents $k" page_has "$man/portcullis.yaml.5" "(^|[^a-z_.])$k([^a-z_]|\$)"
done

# Rule-file keys (rules/policy_parse.c's key lists).
rkeys=$(grep -E '^static const char \*const [a-z]+_keys\[\]' rules/policy_parse.c |
	grep -oE '"[a-z_]+"' | tr -d '"' | sort -u)
t_match "the rule-file key lists were found" 'refuse_with' "$rkeys"
for k in $rkeys; do
	t_ok "portcullis-rules(5) documents $k" page_has "$man/portcullis-rules.5" "(^|[^a-z_])$k([^a-z_]|\$)"
done

# CLI commands: the command table of cli/cmds.c.
cmds=$(sed -n '/cli_cmds\[\] = {/,/NULL, NULL, NULL/p' cli/cmds.c |
	grep -oE '^\s*\{"[a-z]+"' | grep -oE '[a-z]+')
for c in $cmds; do
	t_ok "portcullis(8) documents the $c command" page_has "$man/portcullis.8" "^ {7}$c( |\$)"
done

# Every subcommand of the command table too (cli/cmds.c: {"log", "show", ...}).
subs=$(grep -oE '^\s*\{"[a-z]+", "[a-z]+"' cli/cmds.c | grep -oE '"[a-z]+", "[a-z]+"' | tr -d '",')
t_match "the subcommands were found" 'policy test' "$subs"
while read -r c s; do
	# (a synopsis longer than the page is justified: "sandbox  run")
	t_ok "portcullis(8) documents $c $s" page_has "$man/portcullis.8" "^ {7}$c +$s( |\$)"
done <<<"$subs"

# Daemon options: each getopt string's letters appear as options in the page.
for d in portcullisd:engine/main.c portcullis-logd:logd/main.c \
	portcullis-vault:vault/main.c; do
	name=${d%%:*} src=${d#*:}
	if [ ! -f "$src" ]; then
		t_skip "$name(8) documents its options" "$src not written yet"
		continue
	fi
	opts=$(grep -oE 'getopt(_long)?\([^"]*"[^"]*"' "$src" | head -1 | sed 's/.*"\(.*\)"/\1/' |
		tr -d ':+')
	for o in $(printf '%s' "$opts" | grep -o .); do
		t_ok "$name(8) documents -$o" page_has "$man/$name.8" "^ {7}-$o( |,|\$)"
	done
done

# The Elastic mapping covers every field logd writes (logd/record.c, and the
# checkpoint, hash and segment fields of logd/writer.c), with
# our own fields under portcullis.* as the ingest pipeline moves them.
siem=packaging/siem
t_ok "the Elastic ingest pipeline is valid JSON" python3 -m json.tool "$siem/elastic-ingest-pipeline.json"
t_ok "the Elastic index template is valid JSON" python3 -m json.tool "$siem/elastic-index-template.json"
unmapped=$(python3 - logd/record.c "$siem/elastic-index-template.json" "$siem/elastic-ingest-pipeline.json" logd/writer.c <<'PY'
import json, re, sys
src = open(sys.argv[1]).read() + open(sys.argv[4]).read()
fields = set(re.findall(r'j_(?:str|list|num)\(&j, "([^"]+)"', src))
fields |= set(re.findall(r'fn\(ctx, "([^"]+)"', src))  # logrec_fields
fields |= set(re.findall(r'#define LOGREC_(?:SEQ|PREV|HASH)_KEY\s+"([^"]+)"', open("logd/logd_int.h").read()))
for a, b in re.findall(r'j_endpoint\(&j, "([^"]+)", "([^"]+)"', src):
    fields |= {a, b}
fields |= set(re.findall(r'\\"([a-z.@_]+)\\":', src))  # literal keys ("seq", "log.key")
moved = {p["rename"]["field"]: p["rename"]["target_field"]
         for p in json.load(open(sys.argv[3]))["processors"] if "rename" in p}
props = json.load(open(sys.argv[2]))["template"]["mappings"]["properties"]
def mapped(path):
    node = {"properties": props}
    for part in path.split("."):
        node = node.get("properties", {}).get(part)
        if node is None:
            return False
    return "type" in node
for f in sorted(fields):
    if not mapped(moved.get(f, f)):
        print(f)
PY
)
t_eq "every field of logd's JSON lines is mapped in the Elastic template" "" "$unmapped"

t_done
