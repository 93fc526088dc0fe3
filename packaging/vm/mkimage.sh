#!/bin/sh
# make vm-image: the sandbox VM's kernel and initramfs from Debian packages
# only (docs/sandbox.md): the cloud kernel from its .deb (fetched with
# apt-get download into OUT/deb, extracted there: nothing installed
# system-wide), busybox-static, curl with its libraries, and our init.
# Reproducible (sorted cpio, fixed mtimes, owner root); rebuilt only when
# an input changed. Usage: mkimage.sh OUT (build/vm).
set -eu
out=${1:-build/vm}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/deb"
out=$(cd "$out" && pwd)

deb=$(ls "$out"/deb/linux-image-*-cloud-amd64_*.deb 2>/dev/null | tail -1 || true)
if [ -z "$deb" ]; then
	pkg=$(apt-cache depends linux-image-cloud-amd64 | sed -n 's/^ *Depends: \(linux-image-.*\)/\1/p' | head -1)
	[ -n "$pkg" ] || { echo "vm-image: no linux-image-cloud-amd64 in apt's lists (apt-get update?)" >&2; exit 1; }
	(cd "$out/deb" && apt-get download "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) || true
	deb=$(ls "$out"/deb/linux-image-*-cloud-amd64_*.deb 2>/dev/null | tail -1 || true)
	[ -n "$deb" ] || { echo "vm-image: apt-get download $pkg failed" >&2; exit 1; }
fi
busybox=/bin/busybox
[ -x "$busybox" ] && "$busybox" --list >/dev/null 2>&1 ||
	{ echo "vm-image: busybox-static is not installed (make deps)" >&2; exit 1; }
file "$busybox" 2>/dev/null | grep -q dynamically && { echo "vm-image: $busybox is not the static one (busybox-static)" >&2; exit 1; }

# up to date? (the inputs' names and contents)
stamp=$( (echo "$deb"; cat "$here/init" "$here/mkimage.sh" "$here/mkcpio.py" "$here/pymods.py" "$busybox" /usr/bin/curl /usr/bin/python3.11) | sha256sum | cut -c1-16)
if [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.img" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
rm -rf "$out/x" "$out/root"
dpkg-deb -x "$deb" "$out/x"
kver=$(ls "$out/x/lib/modules")
r=$out/root
mkdir -p "$r/bin" "$r/etc" "$r/lib/modules" "$r/proc" "$r/sys" "$r/dev" "$r/root" "$r/tmp" "$r/run"
cp "$busybox" "$r/bin/busybox"
for a in $("$busybox" --list); do
	[ "$a" = busybox ] || ln -s busybox "$r/bin/$a"
done
# curl and the libraries it loads (the guest's HTTPS client); /usr/bin
# in the guest is /bin (merged /usr, as in Debian 12)
rm -f "$r/bin/wget.real"
cp /usr/bin/curl "$r/bin/curl"
for l in $(ldd /usr/bin/curl | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p' | sort -u); do
	mkdir -p "$r$(dirname "$l")"
	cp -L "$l" "$r$l"
done
# Debian's python3 (not whatever python3 is first in PATH) with the part of
# its library the escape suite's crafter uses (packaging/vm/pymods.py)
py=/usr/bin/python3.11
[ -x "$py" ] || { echo "vm-image: $py missing (python3 is in make deps)" >&2; exit 1; }
cp "$py" "$r/usr/bin/python3.11" 2>/dev/null || { mkdir -p "$r/usr/bin"; cp "$py" "$r/usr/bin/python3.11"; }
ln -s python3.11 "$r/usr/bin/python3"
for l in $(ldd "$py" | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p' | sort -u); do
	mkdir -p "$r$(dirname "$l")"
	cp -L "$l" "$r$l"
done
for f in $("$py" -S "$here/pymods.py" "$here/../../tests/escape/craft.py"); do
	mkdir -p "$r$(dirname "$f")"
	cp "$f" "$r$f"
done
ln -s lib "$r/lib64" 2>/dev/null || true
[ -e "$r/lib64/ld-linux-x86-64.so.2" ] || { mkdir -p "$r/lib/x86_64-linux-gnu"; }
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover \
	net_failover virtio_net qemu_fw_cfg virtio-rng; do
	f=$(find "$out/x/lib/modules/$kver" -name "$m.ko" | head -1)
	[ -n "$f" ] || { echo "vm-image: module $m not in $deb" >&2; exit 1; }
	cp "$f" "$r/lib/modules/$m.ko"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$r/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$r/etc/hosts"
cp "$here/init" "$r/init"
chmod 0755 "$r/init"
python3 "$here/mkcpio.py" "$r" "$out/initrd.cpio"
# LZ4 (the kernel's fastest decompressor): half the bytes for QEMU to load
# and the guest to copy, for no measurable decompression time under TCG
# (docs/sandbox.md, "Boot time"); lz4 output depends only on its input
command -v lz4 >/dev/null || { echo "vm-image: lz4 is not installed (make deps)" >&2; exit 1; }
lz4 -l -9 -q -f "$out/initrd.cpio" "$out/initrd.img"
rm -f "$out/initrd.cpio"
cp "$out/x/boot/vmlinuz-$kver" "$out/vmlinuz"
rm -rf "$out/x" "$out/root"
echo "$stamp" >"$out/stamp"
echo "vm-image: $out/vmlinuz ($kver) and $out/initrd.img ($(du -k "$out/initrd.img" | cut -f1) KiB)"
