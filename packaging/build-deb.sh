#!/bin/sh
# `make deb`: build portcullis_<version>_<arch>.deb with debhelper in a clean
# copy of the tree (never in the working tree), offline, and copy the result
# to build/. Version and distribution come from packaging/debian/changelog.
#
# usage: packaging/build-deb.sh [--worktree] [--version V] [--out DIR]
#   --worktree   package the working tree's tracked and untracked (not
#                ignored) files instead of the committed HEAD
#   --version V  add a changelog entry for V in the copy (upgrade tests)
#   --out DIR    where to put the .deb (default: build/)
#   --workdir D  where the clean copy is built (default: a temporary
#                directory, removed after a successful build). Never under
#                build/: the top Makefile scans build/ for *.d files.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
src="head"
version=""
out="$top/build"
work=""
while [ $# -gt 0 ]; do
	case $1 in
	--worktree) src="worktree" ;;
	--version) version=$2; shift ;;
	--out) out=$2; shift ;;
	--workdir) work=$2; shift ;;
	*) echo "usage: $0 [--worktree] [--version V] [--out DIR] [--workdir DIR]" >&2; exit 2 ;;
	esac
	shift
done

die() { echo "build-deb: $*" >&2; exit 1; }

for tool in dpkg-buildpackage dh dpkg-parsechangelog; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool missing (make deps installs debhelper)"
done

keep_work=1
if [ -z "$work" ]; then
	work=$(mktemp -d "${TMPDIR:-/tmp}/portcullis-deb.XXXXXX")
	keep_work=0
fi
# Only what earlier builds left in the work dir is removed.
tree="$work/portcullis"
rm -rf "$tree" "$work"/portcullis_* "$work"/portcullis-dbgsym_* "$work/build.log"
mkdir -p "$tree" "$out"
out=$(cd "$out" && pwd)

# The clean copy: committed files (default), or what git would commit.
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
	if [ "$src" = head ]; then
		git -C "$top" archive --format=tar HEAD | tar -C "$tree" -xf -
	else
		(cd "$top" && git ls-files -z --cached --others --exclude-standard |
			xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
			xargs -0 -r cp --parents -P -t "$tree")
	fi
else
	(cd "$top" && tar --exclude=./build --exclude='./*.deb' -cf - .) | tar -C "$tree" -xf -
fi
[ -d "$tree/packaging/debian" ] || die "packaging/debian is not in the $src tree (commit it or use --worktree)"
cp -a "$tree/packaging/debian" "$tree/debian"

if [ -n "$version" ]; then
	# A new top entry, as dch would write it (devscripts is not needed).
	{
		printf 'portcullis (%s) unstable; urgency=medium\n\n' "$version"
		printf '  * Rebuild for testing.\n\n'
		printf ' -- %s  %s\n\n' \
			"$(dpkg-parsechangelog -l "$tree/debian/changelog" -S Maintainer)" \
			"$(date -R)"
		cat "$tree/debian/changelog"
	} >"$tree/debian/changelog.new"
	mv "$tree/debian/changelog.new" "$tree/debian/changelog"
	cp "$tree/debian/changelog" "$tree/packaging/debian/changelog"
fi

v=$(dpkg-parsechangelog -l "$tree/debian/changelog" -S Version)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb="portcullis_${v}_${arch}.deb"

# -b: binary only; -us -uc: unsigned. As root the build runs in a fresh
# network namespace (loopback only), which proves it needs no network.
offline=""
if [ "$(id -u)" -eq 0 ] && unshare --net true 2>/dev/null; then
	offline="unshare --net"
fi
# every core (dh passes -jN to make), unless the caller chose
case " ${DEB_BUILD_OPTIONS:-} " in *" parallel="*) ;; *)
	DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }parallel=$(nproc)"
	export DEB_BUILD_OPTIONS ;;
esac
(cd "$tree" && $offline dpkg-buildpackage -b -us -uc >"$work/build.log" 2>&1) || {
	tail -40 "$work/build.log" >&2
	die "dpkg-buildpackage failed (full log: $work/build.log)"
}
[ -f "$work/$deb" ] || die "$deb was not produced (log: $work/build.log)"
cp "$work/$deb" "$out/$deb"
[ "$keep_work" = 1 ] || rm -rf "$work"
echo "$out/$deb"
