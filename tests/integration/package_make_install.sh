#!/usr/bin/env bash
# `make install DESTDIR=...` lays out what the package ships (binaries, man
# pages, configuration, units, tmpfiles, logrotate, docs), and a second run
# keeps an admin's edits to the configuration. The installed documents link
# only to installed files, and every file the examples write is rotated.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh

dest=$(mktemp -d /var/tmp/pc-install.XXXXXX)
trap 'rm -rf --one-file-system "$dest"' EXIT
build=${PC_BUILD:-build}

out=$(make --no-print-directory install DESTDIR="$dest" BUILD="$build" 2>&1)
rc=$?
t_eq "make install DESTDIR= succeeds" 0 "$rc"
[ "$rc" = 0 ] || t_diag "$(printf '%s\n' "$out" | tail -20)"

for b in portcullis portcullisd portcullis-logd portcullis-vault; do
	if [ -x "$build/$b" ]; then
		t_ok "installs /usr/sbin/$b (mode 755)" test "$(stat -c %a "$dest/usr/sbin/$b" 2>/dev/null)" = 755
	else
		t_skip "installs /usr/sbin/$b" "not built by this tree yet"
	fi
done
for m in man8/portcullis.8 man8/portcullisd.8 man8/portcullis-logd.8 man8/portcullis-vault.8 \
	man5/portcullis.yaml.5 man5/portcullis-rules.5; do
	t_ok "installs man page $m" test -s "$dest/usr/share/man/$m"
done
for f in etc/portcullis/portcullis.yaml etc/portcullis/rules.d/agent-1.yaml.example \
	etc/logrotate.d/portcullis etc/logrotate.d/portcullis-syslog \
	lib/systemd/system/portcullisd.service \
	lib/systemd/system/portcullis-logd.service lib/systemd/system/portcullis-vault.service \
	usr/lib/tmpfiles.d/portcullis.conf usr/share/doc/portcullis/README.md \
	usr/share/doc/portcullis/threat-model.md usr/share/doc/portcullis/examples/portcullis.yaml; do
	t_ok "installs /$f" test -s "$dest/$f"
done
t_ok "the example rule file is not one the engine loads (*.yaml)" \
	test ! -e "$dest/etc/portcullis/rules.d/agent-1.yaml"

# No installed document links to something not installed: README.md and
# docs/*.md are written for the source tree, where "docs/engine.md" and
# "tests/demo/agent.py" exist (packaging/doclinks.pl rewrites them).
dangling() { # DIR: "file: target" for each relative Markdown link to nothing
	python3 - "$1" <<'PY'
import os, re, sys
d = sys.argv[1]
for root, _, files in os.walk(d):
    for f in sorted(files):
        if not f.endswith('.md'):
            continue
        p = os.path.join(root, f)
        s = re.sub(r'^```.*?^```', '', open(p).read(), flags=re.S | re.M)
        s = re.sub(r'`[^`\n]*`', '', s)
        for t in re.findall(r'\[[^\]\n]+\]\(([^)\s]+)\)', s):
            if re.match(r'^([a-z][a-z0-9+.-]*:|#)', t, re.I):
                continue
            if not os.path.exists(os.path.join(os.path.dirname(p), t.split('#')[0])):
                print(f"{os.path.relpath(p, d)}: {t}")
PY
}
doc=$dest/usr/share/doc/portcullis
t_eq "no installed document links to a file that is not installed" "" "$(dangling "$doc")"
t_match "... the checker has teeth: the source README links outside docs/" "tests/demo/agent.py" \
	"$(mkdir -p "$dest/src-readme" && cp README.md "$dest/src-readme/" && dangling "$dest/src-readme")"
t_match "a link to an installed document is kept, made relative to it" '\[docs/sandbox.md\]\(sandbox.md\)' \
	"$(cat "$doc/README.md")"
t_match "a link to the source tree becomes text" 'runs a small agent \(tests/demo/agent.py\)' \
	"$(cat "$doc/README.md")"

# Every file the examples make has its rotation: the paths the syslog
# examples write to, each the head of a stanza the package installs.
written=$(grep -hoE 'file(=|\()"[^"]+"' packaging/siem/* | grep -oE '/[^"]+' | sort -u)
t_match "the syslog examples' files were found" '^/var/log/' "$written"
for f in $written; do
	t_ok "$f is rotated by an installed logrotate file" \
		grep -qxF "$f {" $dest/etc/logrotate.d/*
done
if command -v logrotate >/dev/null; then
	for f in "$dest"/etc/logrotate.d/*; do
		out=$(logrotate -d -s "$dest/lr.state" "$f" 2>&1)
		t_nomatch "logrotate reads $(basename "$f") without an error" '^error:' "$out"
	done
else
	t_skip "logrotate reads the installed files" "no logrotate (make deps)"
fi

echo "# edited by the admin" >>"$dest/etc/portcullis/portcullis.yaml"
out=$(make --no-print-directory install DESTDIR="$dest" BUILD="$build" 2>&1)
t_match "a second make install says it keeps the existing configuration" \
	"keeping existing .*/etc/portcullis/portcullis.yaml" "$out"
t_match "the admin's edit survives a second make install" "edited by the admin" \
	"$(cat "$dest/etc/portcullis/portcullis.yaml")"

t_done
