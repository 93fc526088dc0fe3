#!/usr/bin/env python3
"""Write a directory as a reproducible initramfs (cpio "newc"): entries in
sorted order, owner root, mtime 0, inode numbers by position, so the same
files give the same bytes (make vm-image). Usage: mkcpio.py DIR OUT."""
import os
import stat
import sys


def entry(out, ino, name, mode, data, nlink=1):
    name_b = name.encode() + b"\0"
    hdr = "070701" + "".join(
        "%08X" % v
        for v in (ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name_b), 0))
    out.write(hdr.encode() + name_b)
    out.write(b"\0" * (-(110 + len(name_b)) % 4))
    out.write(data)
    out.write(b"\0" * (-len(data) % 4))


def main():
    top, dst = sys.argv[1], sys.argv[2]
    paths = []
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for n in sorted(dirs + files):
            paths.append(os.path.relpath(os.path.join(d, n), top))
    paths.sort()
    with open(dst + ".tmp", "wb") as out:
        for ino, rel in enumerate(paths, 1):
            p = os.path.join(top, rel)
            st = os.lstat(p)
            perm = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                entry(out, ino, rel, stat.S_IFLNK | 0o777, os.readlink(p).encode())
            elif stat.S_ISDIR(st.st_mode):
                entry(out, ino, rel, stat.S_IFDIR | perm, b"", 2)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    entry(out, ino, rel, stat.S_IFREG | perm, f.read())
            else:
                sys.exit("mkcpio: %s: not a file, directory or link" % rel)
        entry(out, 0, "TRAILER!!!", 0, b"")
    os.replace(dst + ".tmp", dst)


main()
