#!/usr/bin/env bash
# The Debian package as an admin meets it: built offline, lintian-clean,
# installed with apt into a throw-away Debian 12 root (debootstrap, cached
# under /var/cache/portcullis-test), then upgraded, removed and purged.
# Nothing runs on this host: the root has a policy-rc.d that refuses every
# service start, and only /proc is mounted in it (unmounted on exit).
#
# PC_DEB_WORKTREE=1 packages the working tree instead of the committed HEAD;
# PC_DEB_REF=<commit> packages that commit.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
. packaging/testroot.sh

if [ "$(id -u)" -ne 0 ]; then
	t_skip "package install test" "needs root (debootstrap, chroot)"
	t_done
	exit
fi
for tool in dpkg-buildpackage lintian debootstrap chroot; do
	if ! command -v "$tool" >/dev/null; then
		t_skip "package install test" "$tool missing (make deps)"
		t_done
		exit
	fi
done

work=$(mktemp -d /var/tmp/pc-pkgtest.XXXXXX)
root=$work/root
cleanup() {
	testroot_destroy "$root"
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One snapshot of the tree for both packages (HEAD may move meanwhile).
mkdir -p "$work/src"
if [ "${PC_DEB_WORKTREE:-0}" = 1 ]; then
	git ls-files -z --cached --others --exclude-standard |
		xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		xargs -0 -r cp --parents -P -t "$work/src"
else
	git archive --format=tar "${PC_DEB_REF:-HEAD}" | tar -C "$work/src" -xf -
fi

# ---- build (offline) and lintian ---------------------------------------
v1=$(dpkg-parsechangelog -l "$work/src/packaging/debian/changelog" -S Version)
v2="$v1+upgradetest1"
if ! deb1=$("$work/src/packaging/build-deb.sh" --out "$work/v1" --workdir "$work/b1" \
	2>"$work/build1.err"); then
	t_ok "the package builds" false
	t_diag "$(tail -30 "$work/build1.err")"
	t_done
	exit
fi
t_ok "the package builds offline: $(basename "$deb1")" test -s "$deb1"
t_eq "the package is named from the changelog" "portcullis_${v1}_$(dpkg --print-architecture).deb" \
	"$(basename "$deb1")"

lint=$(lintian --pedantic "$deb1" 2>&1 | grep -v '^running with root privileges')
t_nomatch "lintian: no errors" '^E: ' "$lint"
t_nomatch "lintian: no warnings" '^W: ' "$lint"

contents=$(dpkg-deb -c "$deb1" | awk '{print $NF}')
# Every binary the tree builds is in the package (a daemon whose main file
# has not landed yet is not built, and is skipped here).
for b in portcullis portcullisd portcullis-logd portcullis-vault; do
	if [ -x "$work/b1/portcullis/build/$b" ]; then
		t_match "contents: /usr/sbin/$b" "^\\./usr/sbin/$b\$" "$contents"
	else
		t_skip "contents: /usr/sbin/$b" "not built by this tree yet"
	fi
done
for m in portcullis.8 portcullisd.8 portcullis-logd.8 portcullis-vault.8 portcullis.yaml.5 \
	portcullis-rules.5; do
	t_match "contents: man page $m" "/man[58]/$m\.gz\$" "$contents"
done
t_match "contents: the threat model" '^./usr/share/doc/portcullis/threat-model\.md' "$contents"
t_match "contents: units" '^./lib/systemd/system/portcullisd\.service$' "$contents"
conffiles=$(dpkg-deb -I "$deb1" conffiles)
t_match "conffile: portcullis.yaml" '^/etc/portcullis/portcullis\.yaml$' "$conffiles"
t_match "conffile: example rule file" '^/etc/portcullis/rules\.d/' "$conffiles"
t_match "conffile: logrotate" '^/etc/logrotate\.d/portcullis$' "$conffiles"

# Maintainer scripts: no start on first install, try-restart (not stop) on
# upgrade, stop on removal.
mkdir -p "$work/ctl"
dpkg-deb -e "$deb1" "$work/ctl"
ctl_all=$(cat "$work/ctl/"*inst "$work/ctl/"*rm 2>/dev/null)
t_nomatch "no maintainer script starts a daemon" 'deb-systemd-invoke (start|restart) ' "$ctl_all"
t_match "an upgrade try-restarts the running units" \
	"deb-systemd-invoke try-restart .*portcullisd\.service" "$(cat "$work/ctl/postinst")"
t_nomatch "an upgrade does not stop the units first (preinst)" 'deb-systemd-invoke stop' \
	"$(cat "$work/ctl/preinst" 2>/dev/null)"
t_match "removal stops the units (prerm)" \
	'"\$1" = remove .*deb-systemd-invoke stop .*portcullisd\.service' \
	"$(tr '\n' ' ' <"$work/ctl/prerm" 2>/dev/null)"

# The upgrade target: the same tree, one version later (unit tests already ran).
if ! deb2=$(DEB_BUILD_OPTIONS=nocheck "$work/src/packaging/build-deb.sh" --version "$v2" \
	--out "$work/v2" --workdir "$work/b2" 2>"$work/build2.err"); then
	t_diag "$(tail -30 "$work/build2.err")"
	deb2=""
fi
t_ok "a rebuilt package with a bumped version builds" test -n "$deb2"

# ---- install into a fresh Debian 12 root --------------------------------
if ! testroot_make "$root" 2>"$work/root.err"; then
	t_ok "a Debian 12 root is made (debootstrap or cache)" false
	t_diag "$(tail -20 "$work/root.err")"
	t_done
	exit
fi
testroot_mount "$root"
in_root() { testroot_run "$root" "$@"; }
cp "$deb1" "$root/tmp/"
[ -n "$deb2" ] && cp "$deb2" "$root/tmp/"

in_root apt-get -qq update >"$work/apt-update.log" 2>&1 ||
	t_diag "apt-get update failed in the root (offline?); installing from what the base has"
t_ok "apt-get install ./$(basename "$deb1") in the root" \
	in_root apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb1")"
t_eq "dpkg: installed at $v1" "install ok installed $v1" \
	"$(in_root dpkg-query -W -f='${Status} ${Version}' portcullis 2>&1)"

# No service may have started, in the root or anywhere from it.
running=""
for p in /proc/[0-9]*; do
	[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && running="$running $(cat "$p/comm")"
done
t_eq "no daemon runs inside the root after install" "" "$running"

# Users and directories.
for u in portcullis portcullis-log portcullis-vault portcullis-vworker; do
	pw=$(in_root getent passwd "$u")
	t_match "system user $u exists, no login shell" "^$u:x:[0-9]+:[0-9]+:.*:/usr/sbin/nologin$" "$pw"
	uid=$(printf '%s' "$pw" | cut -d: -f3)
	t_lt "user $u is a system user (uid $uid)" "${uid:-1000}" 1000
done
st() { in_root stat -c '%U:%G %a' "$1" 2>&1; }
t_eq "/var/lib/portcullis: root, 755" "root:root 755" "$(st /var/lib/portcullis)"
t_eq "the policy store: the engine's user, the vault's group, sticky 1775" \
	"portcullis:portcullis-vault 1775" "$(st /var/lib/portcullis/policies)"
t_eq "/var/lib/portcullis/secrets: root writes, the vault's group reads" \
	"root:portcullis-vault 750" "$(st /var/lib/portcullis/secrets)"
t_eq "/var/log/portcullis: logd's alone" "portcullis-log:portcullis-log 750" \
	"$(st /var/log/portcullis)"
t_eq "/run/portcullis from tmpfiles.d" "root:root 755" "$(st /run/portcullis)"
t_eq "/etc/portcullis/portcullis.yaml: root, 644" "root:root 644" \
	"$(st /etc/portcullis/portcullis.yaml)"

# Keys, made by the product's own commands on first install.
# (as the postinst asks: the subcommand's --help exits 0, an unknown one 2;
# `-h` lists a command's subcommands on lines of their own, so a pattern
# over one line of it never matched, and these checks were always skipped)
cli_has() { in_root /usr/sbin/portcullis "$1" "$2" --help >/dev/null 2>&1; }
if cli_has log keygen; then
	t_eq "log signing key generated, root's alone (logd reads it before dropping root)" \
		"root:root 600" "$(st /var/lib/portcullis/log.key)"
	t_match "its public key is there for auditors" '^root:root 6[04]4$' \
		"$(st /var/lib/portcullis/log.key.pub)"
else
	t_skip "log signing key generated" "portcullis log keygen does not exist yet"
fi
if cli_has ca init; then
	t_eq "vault CA key generated, root's alone (the CA process reads it as root)" "root:root 400" \
		"$(st /var/lib/portcullis/ca/ca.key)"
	t_match "vault CA certificate generated, public" '^root:root 644$' \
		"$(st /var/lib/portcullis/ca/ca.pem)"
else
	t_skip "vault CA generated" "portcullis ca init does not exist yet"
fi

if cli_has cert keygen; then
	t_eq "certificate signing key generated, root's alone" "root:root 600" \
		"$(st /var/lib/portcullis/appliance.key)"
	t_match "its public key is there for auditors" '^root:root 644$' \
		"$(st /var/lib/portcullis/appliance.pub)"
else
	t_skip "certificate signing key generated" "portcullis cert keygen does not exist yet"
fi

# The shipped configuration is valid, for each program that reads it.
if cli_has policy lint; then
	# uplinks has no default: lint refuses the shipped file as portcullisd
	# -t does (below), until the admin names the uplink
	out=$(in_root portcullis -c /etc/portcullis/portcullis.yaml policy lint 2>&1) && rc=0 || rc=$?
	t_eq "portcullis policy lint refuses the shipped default until uplinks is set (exit 1)" 1 "$rc"
	t_match "... saying portcullisd would refuse to start" \
		"portcullisd would refuse to start: uplinks is not set" "$out"
	{ cat "$root/etc/portcullis/portcullis.yaml"; echo 'uplinks: [eth0]'; } >"$root/tmp/pc-lint.yaml"
	t_ok "portcullis policy lint passes on it with uplinks set" \
		in_root portcullis -c /tmp/pc-lint.yaml policy lint
	t_ok "the shipped example rule file lints with --strict" \
		in_root portcullis policy lint --strict /etc/portcullis/rules.d/agent-1.yaml.example
else
	t_skip "portcullis policy lint passes on the shipped default" "policy lint does not exist yet"
fi
# uplinks: has no default (docs/engine.md, "Uplinks"): the engine refuses
# the shipped file until the admin names the uplink, and says so.
if [ -x "$root/usr/sbin/portcullisd" ]; then
	out=$(in_root portcullisd -t -c /etc/portcullis/portcullis.yaml 2>&1) && rc=0 || rc=$?
	t_eq "portcullisd -t refuses the shipped configuration until uplinks is set (exit 1)" 1 "$rc"
	t_match "... and names the key" "uplinks is not set" "$out"
	{ cat "$root/etc/portcullis/portcullis.yaml"; echo 'uplinks: [eth0]'; } >"$root/tmp/pc-up.yaml"
	t_ok "portcullisd -t accepts it with uplinks set" \
		in_root portcullisd -t -c /tmp/pc-up.yaml
fi
for d in portcullis-logd portcullis-vault; do
	if [ -x "$root/usr/sbin/$d" ]; then
		t_ok "$d -t accepts the shipped configuration" \
			in_root "$d" -t -c /etc/portcullis/portcullis.yaml
	else
		t_skip "$d -t accepts the shipped configuration" "$d not built yet"
	fi
done

# The units as installed: systemd's own checks, and the hardening score.
units=(/lib/systemd/system/portcullis-logd.service /lib/systemd/system/portcullisd.service
	/lib/systemd/system/portcullis-vault.service)
for u in "${units[@]}"; do
	d=$(basename "$u" .service)
	if [ -x "$root/usr/sbin/$d" ]; then
		t_ok "systemd-analyze verify passes on the installed $d.service" \
			in_root systemd-analyze verify "$u"
	else
		t_skip "systemd-analyze verify passes on the installed $d.service" "$d not built yet"
	fi
done
for u in "${units[@]}"; do
	# --threshold=49: fail when the exposure is above 4.9, i.e. worse than "OK".
	t_ok "systemd-analyze security: $(basename "$u") is OK or better" \
		in_root systemd-analyze security --offline=yes --threshold=49 "$u"
done
t_ok "logrotate accepts /etc/logrotate.d/portcullis" \
	in_root logrotate -d /etc/logrotate.d/portcullis
t_ok "man portcullisd(8) is readable" in_root man -P cat 8 portcullisd

# ---- upgrade: keeps a modified conffile, keys, secrets and logs ----------
echo "# changed by the admin $$" >>"$root/etc/portcullis/portcullis.yaml"
mkdir -p "$work/keep"
echo '{"seq":1,"test":"a log line that must survive"}' >"$root/var/log/portcullis/verdicts.jsonl"
echo "sealed-secret-stand-in" >"$root/var/lib/portcullis/secrets/TEST_SECRET"
[ -e "$root/var/lib/portcullis/log.key" ] || echo "log-key-stand-in" >"$root/var/lib/portcullis/log.key"
keep_sums() {
	(cd "$root" && find var/lib/portcullis var/log/portcullis -type f -print0 | sort -z |
		xargs -0 sha256sum)
}
# a CA key as versions before the vault's process split left it: the vault
# user's; the upgrade makes it root's (only the CA process, as root, reads it)
old_key=""
if [ -f "$root/var/lib/portcullis/ca/ca.key" ]; then
	in_root chown portcullis-vault:portcullis-vault /var/lib/portcullis/ca/ca.key
	old_key=$(st /var/lib/portcullis/ca/ca.key)
fi
before=$(keep_sums)
if [ -n "$deb2" ]; then
	up_out=$(in_root apt-get install -y -q --no-install-recommends \
		"/tmp/$(basename "$deb2")" </dev/null 2>&1) && rc=0 || rc=$?
	t_eq "upgrade to $v2 with apt" 0 "$rc"
	[ "$rc" -eq 0 ] || t_diag "$(tail -20 <<<"$up_out")"
	if [ -n "$old_key" ]; then
		t_eq "control: the CA key was the vault user's before the upgrade" \
			"portcullis-vault:portcullis-vault 400" "$old_key"
		t_eq "the upgrade made it root's, 0400" "root:root 400" \
			"$(st /var/lib/portcullis/ca/ca.key)"
		t_match "... and said so" "ca.key is now root's, mode 0400" "$up_out"
	fi
	t_eq "dpkg: installed at $v2" "install ok installed $v2" \
		"$(in_root dpkg-query -W -f='${Status} ${Version}' portcullis 2>&1)"
	t_match "the modified conffile is kept" "changed by the admin $$" \
		"$(cat "$root/etc/portcullis/portcullis.yaml")"
	t_eq "keys, CA, secrets and logs are untouched by the upgrade" "$before" "$(keep_sums)"
else
	t_skip "upgrade" "the second package did not build"
fi

# ---- remove keeps data; purge deletes it (but the signed log), and only then
t_ok "README.Debian is installed and says the log survives a purge" \
	grep -q "survives a purge" "$root/usr/share/doc/portcullis/README.Debian"
t_ok "dpkg --remove" in_root dpkg --remove portcullis
t_fail "remove: binaries are gone" test -e "$root/usr/sbin/portcullis"
t_eq "remove: keys, CA, secrets and logs stay" "$before" "$(keep_sums)"
t_ok "remove: the configuration stays" test -e "$root/etc/portcullis/portcullis.yaml"
log_sum=$(sha256sum <"$root/var/log/portcullis/verdicts.jsonl")
# a policy as the daemons store it (nothing runs in this root)
pol='{"portcullis_policy":1,"sandboxes":[]}'
pol_name=sha256:$(printf '%s' "$pol" | sha256sum | cut -c1-64)
printf '%s' "$pol" >"$root/var/lib/portcullis/policies/$pol_name"
chmod 0444 "$root/var/lib/portcullis/policies/$pol_name"
purge_out=$(in_root dpkg --purge portcullis 2>&1) && rc=0 || rc=$?
t_eq "dpkg --purge" 0 "$rc"
t_match "purge: says it kept the log, and where to read why" \
	"kept the signed audit log in /var/log/portcullis.*README.Debian" "$purge_out"
t_eq "purge: of /var/lib/portcullis only the policies the log cites stay" "policies" \
	"$(ls -A "$root/var/lib/portcullis" 2>&1)"
t_eq "purge: ... the stored policy unchanged" "$pol" \
	"$(cat "$root/var/lib/portcullis/policies/$pol_name" 2>&1)"
t_match "purge: says it kept them" "kept the policies the log cites in /var/lib/portcullis/policies" \
	"$purge_out"
t_ok "purge: the signed audit log stays" test -s "$root/var/log/portcullis/verdicts.jsonl"
t_eq "purge: ... unchanged, still logd's" "portcullis-log:portcullis-log 750 $log_sum" \
	"$(st /var/log/portcullis) $(sha256sum <"$root/var/log/portcullis/verdicts.jsonl")"
t_fail "purge: /etc/portcullis/portcullis.yaml is gone" test -e "$root/etc/portcullis/portcullis.yaml"
t_nomatch "purge: dpkg keeps neither files nor configuration of it" 'installed|config-files' \
	"$(in_root dpkg-query -W -f='${Status}' portcullis 2>/dev/null)"
t_ok "purge: the system users stay (files restored from backups may name them)" \
	in_root getent passwd portcullis-log

t_done
