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
# One builder at a time (the tests that boot a guest run side by side and
# each asks for the image): the others wait, then find it up to date.
exec 9>"$out/.lock"
flock 9

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
if [ -f "$out/vmlinuz" ] && [ -f "$out/vmlinux" ] && [ -f "$out/initrd.img" ] && [ -f "$out/tools.img" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; then
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
# curl and the libraries it loads (the guest's HTTPS client); in the
# guest it is /usr/bin/curl, on the tools disk
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
	# an extension module (_ssl, ...) and the libraries it loads
	case "$f" in
	*.so)
		for l in $(ldd "$f" | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p' | sort -u); do
			mkdir -p "$r$(dirname "$l")"
			cp -L "$l" "$r$l"
		done
		;;
	esac
done
mkdir -p "$r/lib64" "$r/lib/x86_64-linux-gnu"
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover \
	net_failover virtio_net qemu_fw_cfg virtio-rng virtio_blk; do
	f=$(find "$out/x/lib/modules/$kver" -name "$m.ko" | head -1)
	[ -n "$f" ] || { echo "vm-image: module $m not in $deb" >&2; exit 1; }
	cp "$f" "$r/lib/modules/$m.ko"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$r/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$r/etc/hosts"
cp "$here/init" "$r/init"
chmod 0755 "$r/init"
# The tools (curl, python3 and the libraries they load: 28 of the 30 MiB)
# go on a read-only disk, tools.img, that the guest mounts on /usr and
# reads only what it runs from: an initramfs is unpacked whole before init
# starts, which cost about 2 s of the boot under TCG (docs/sandbox.md,
# "Boot time"). The initramfs keeps busybox, the modules and init.
t=$out/tools
rm -rf "$t"
mkdir -p "$t/bin" "$t/lib/x86_64-linux-gnu" "$t/lib64"
cp -a "$r/usr/." "$t/"
cp -a "$r/lib/x86_64-linux-gnu/." "$t/lib/x86_64-linux-gnu/"
cp -a "$r/lib64/." "$t/lib64/"
mv "$r/bin/curl" "$t/bin/curl"
rm -rf "$r/usr" "$r/lib/x86_64-linux-gnu" "$r/lib64"
mkdir "$r/usr"
ln -s ../usr/lib/x86_64-linux-gnu "$r/lib/x86_64-linux-gnu"
ln -s usr/lib64 "$r/lib64"
# reproducible: fixed times, UUID, hash seed and creation time
find "$t" -exec touch -h -d @0 {} +
size=$(( $(du -sk "$t" | cut -f1) * 5 / 4 + 2048 ))
rm -f "$out/tools.img"
E2FSPROGS_FAKE_TIME=1 mke2fs -q -F -t ext4 -O ^has_journal -b 4096 -L pctools \
	-U 7f1e0c52-6b4a-4d2e-9c1f-70c7e5a1b0de -E root_owner=0:0,hash_seed=3b8d5a0e-2c61-4f7e-8a90-1d2c3b4a5f60 \
	-d "$t" "$out/tools.img" "${size}k" ||
	{ echo "vm-image: mke2fs failed (e2fsprogs)" >&2; exit 1; }
# mke2fs -d copies each file's ctime (no one can set it) and atime (reading
# a file sets it): zero both after
(cd "$t" && find . | sed 's|^\.$|/|; s|^\./|/|; s|.*|sif "&" ctime 0\nsif "&" atime 0|') >"$out/tools.fix"
E2FSPROGS_FAKE_TIME=1 debugfs -w -f "$out/tools.fix" "$out/tools.img" >/dev/null 2>&1 ||
	{ echo "vm-image: debugfs failed (e2fsprogs)" >&2; exit 1; }
rm -f "$out/tools.fix"
python3 "$here/mkcpio.py" "$r" "$out/initrd.cpio"
# LZ4 (the kernel's fastest decompressor): half the bytes for QEMU to load
# and the guest to copy, for no measurable decompression time under TCG
# (docs/sandbox.md, "Boot time"); lz4 output depends only on its input
command -v lz4 >/dev/null || { echo "vm-image: lz4 is not installed (make deps)" >&2; exit 1; }
lz4 -l -9 -q -f "$out/initrd.cpio" "$out/initrd.img"
rm -f "$out/initrd.cpio"
cp "$out/x/boot/vmlinuz-$kver" "$out/vmlinuz"
# The same kernel uncompressed (an ELF with its PVH entry point, which the
# cloud kernel has: CONFIG_PVH): QEMU loads it and starts it directly, with
# no decompressor to run under software emulation (docs/sandbox.md, "Boot
# time"). Cut from the bzImage's payload (setup header fields payload_offset
# and payload_length; the kernel is LZ4: CONFIG_KERNEL_LZ4) less the 4-byte
# size the kernel's build appends; vmlinuz stays for what wants a bzImage.
python3 - "$out/vmlinuz" "$out/vmlinux.lz4" <<'EOF'
import struct, sys
d = open(sys.argv[1], "rb").read()
setup = (d[0x1f1] or 4) + 1
off, length = struct.unpack_from("<II", d, 0x248)
start = setup * 512 + off
if d[start:start + 4] != bytes.fromhex("02214c18"):
    sys.exit("vm-image: the kernel's payload is not LZ4 (legacy frame)")
open(sys.argv[2], "wb").write(d[start:start + length - 4])
EOF
lz4 -d -q -f "$out/vmlinux.lz4" "$out/vmlinux" || { echo "vm-image: could not uncompress the kernel" >&2; exit 1; }
rm -f "$out/vmlinux.lz4"
rm -rf "$out/x" "$out/root" "$t"
echo "$stamp" >"$out/stamp"
echo "vm-image: $out/vmlinuz and vmlinux ($kver), $out/initrd.img ($(du -k "$out/initrd.img" | cut -f1) KiB) and $out/tools.img ($(du -k "$out/tools.img" | cut -f1) KiB)"
