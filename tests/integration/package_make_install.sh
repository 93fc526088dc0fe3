#!/usr/bin/env bash
# `make install DESTDIR=...` lays out what the package ships (binaries, man
# pages, configuration, units, tmpfiles, logrotate, docs), and a second run
# keeps an admin's edits to the configuration.
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
	etc/logrotate.d/portcullis lib/systemd/system/portcullisd.service \
	lib/systemd/system/portcullis-logd.service lib/systemd/system/portcullis-vault.service \
	usr/lib/tmpfiles.d/portcullis.conf usr/share/doc/portcullis/README.md \
	usr/share/doc/portcullis/threat-model.md usr/share/doc/portcullis/examples/portcullis.yaml; do
	t_ok "installs /$f" test -s "$dest/$f"
done
t_ok "the example rule file is not one the engine loads (*.yaml)" \
	test ! -e "$dest/etc/portcullis/rules.d/agent-1.yaml"

echo "# edited by the admin" >>"$dest/etc/portcullis/portcullis.yaml"
out=$(make --no-print-directory install DESTDIR="$dest" BUILD="$build" 2>&1)
t_match "a second make install says it keeps the existing configuration" \
	"keeping existing .*/etc/portcullis/portcullis.yaml" "$out"
t_match "the admin's edit survives a second make install" "edited by the admin" \
	"$(cat "$dest/etc/portcullis/portcullis.yaml")"

t_done
