#!/usr/bin/env python3
# A VM's NICs as the gateway sees them (issue 23, item 6 with taps): one
# process holding tap devices open, as qemu does, until killed.
#   vm_taps.py TAP...
import fcntl
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000

fds = []
for name in sys.argv[1:]:
    f = open("/dev/net/tun", "r+b", buffering=0)
    fcntl.ioctl(f, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    fds.append(f)
print("open", " ".join(sys.argv[1:]), flush=True)
while True:
    time.sleep(3600)
