# Throw-away Debian 12 roots for the package tests (sourced by
# tests/integration/package_*.sh): a debootstrap of bookworm, cached as a
# tarball of the finished root so that later runs unpack it in seconds.
#
# Cache: $PC_TESTROOT_CACHE (default /var/cache/portcullis-test), one file
# bookworm-<variant>-<hash of the package list>.tar.gz; delete it to force a
# fresh debootstrap. Mirror: $PC_TESTROOT_MIRROR, else the first Debian URI
# in this machine's apt sources, else deb.debian.org.

PC_TESTROOT_CACHE=${PC_TESTROOT_CACHE:-/var/cache/portcullis-test}
PC_TESTROOT_SUITE=bookworm
# What the install test needs beyond minbase: systemd (systemd-analyze
# verify on the installed units; man-db for their Documentation= pages),
# adduser (the maintainer scripts), logrotate (its config is checked) and the
# package's runtime libraries (so apt has little to fetch on each run).
PC_TESTROOT_INCLUDE="systemd,man-db,adduser,logrotate,ca-certificates,libnetfilter-queue1,libnftnl11,libmnl0,libldns3,libsodium23,libyaml-0-2,libssl3"

testroot_mirror() {
	local m
	if [ -n "${PC_TESTROOT_MIRROR:-}" ]; then
		echo "$PC_TESTROOT_MIRROR"
		return
	fi
	m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
		2>/dev/null | grep -oE 'https?://[^ ]*/debian/?( |$)' | grep -v security | head -1 | tr -d ' ')
	echo "${m:-http://deb.debian.org/debian}"
}

testroot_tarball() {
	local h
	h=$(printf '%s %s' "$PC_TESTROOT_SUITE" "$PC_TESTROOT_INCLUDE" | sha256sum | cut -c1-12)
	echo "$PC_TESTROOT_CACHE/$PC_TESTROOT_SUITE-minbase-$h.tar.gz"
}

# Make sure the cached base tarball exists (debootstrap once, about a
# minute). Concurrent runs wait for each other on a lock in the cache dir.
testroot_cache() {
	local tb rc=0
	tb=$(testroot_tarball)
	[ -s "$tb" ] && return 0
	mkdir -p "$PC_TESTROOT_CACHE"
	(
		flock 9
		[ -s "$tb" ] && exit 0
		testroot_debootstrap "$tb"
	) 9>"$PC_TESTROOT_CACHE/.lock" || rc=$?
	return "$rc"
}

testroot_debootstrap() { # tarball
	local tb=$1 tmp rc=0 old
	tmp=$(mktemp -d "$PC_TESTROOT_CACHE/.build.XXXXXX")
	echo "# testroot: debootstrap $PC_TESTROOT_SUITE from $(testroot_mirror) (cached as $tb)" >&2
	debootstrap --variant=minbase --include="$PC_TESTROOT_INCLUDE" \
		"$PC_TESTROOT_SUITE" "$tmp/root" "$(testroot_mirror)" >"$tmp/debootstrap.log" 2>&1 || rc=$?
	if [ "$rc" -eq 0 ]; then
		rm -rf "$tmp/root/var/cache/apt/archives/"*.deb
		tar -C "$tmp/root" --numeric-owner -czf "$tmp/root.tar.gz" . &&
			mv "$tmp/root.tar.gz" "$tb" || rc=$?
	else
		tail -20 "$tmp/debootstrap.log" >&2
	fi
	# debootstrap may leave /proc or /sys mounted when it fails.
	testroot_umount "$tmp/root"
	rm -rf --one-file-system "$tmp"
	# Roots made from an older package list are of no further use.
	if [ "$rc" -eq 0 ]; then
		for old in "$PC_TESTROOT_CACHE/$PC_TESTROOT_SUITE"-minbase-*.tar.gz; do
			[ "$old" = "$tb" ] || rm -f "$old"
		done
	fi
	return "$rc"
}

# testroot_make DIR: a fresh root unpacked from the cache into DIR, with
# daemons kept from starting (policy-rc.d) and the host's resolver.
testroot_make() {
	local dir=$1
	testroot_cache || return 1
	mkdir -p "$dir"
	tar -C "$dir" --numeric-owner -xzf "$(testroot_tarball)" || return 1
	printf '#!/bin/sh\n# portcullis tests: start no service in this throw-away root\nexit 101\n' \
		>"$dir/usr/sbin/policy-rc.d"
	chmod 0755 "$dir/usr/sbin/policy-rc.d"
	cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
}

# Mount /proc in the root (apt and adduser want it); undone by testroot_umount.
testroot_mount() {
	mountpoint -q "$1/proc" || mount -t proc proc "$1/proc"
}

# Unmount everything below DIR (deepest first); safe to call repeatedly.
testroot_umount() {
	local dir m
	dir=$(readlink -f "$1" 2>/dev/null) || return 0
	[ -n "$dir" ] && [ "$dir" != / ] || return 0
	awk -v d="$dir" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/mounts | sort -r |
		while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m"
		done
}

# testroot_destroy DIR: unmount and delete (never crossing into a mount).
testroot_destroy() {
	[ -n "${1:-}" ] && [ -d "$1" ] || return 0
	testroot_umount "$1"
	rm -rf --one-file-system "$1"
}

# testroot_run DIR CMD...: run CMD inside the root with a clean environment.
testroot_run() {
	local dir=$1
	shift
	chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive "$@"
}
