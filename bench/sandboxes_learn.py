#!/usr/bin/env python3
"""bench/sandboxes' learner: DNS queries from many parked bridge ports at
once, so that the engine learns names for each of bench/sandboxes' idle
sandboxes the way it learns them for a real one (the query judged and
passed by the guard, the resolver's answer queued, judged and learned).

Runs in the namespace holding the sandbox ends of the parked veth pairs
(they have no address: the frames are built here, IPv6/UDP with its
checksum, and sent with a packet socket on each port; the answers, which
the gateway cannot deliver to an address nobody holds, are not needed: the
engine learns them before they leave).

    sandboxes_learn.py GW_MAC RESOLVER6 PER_SANDBOX SPEC...
        SPEC = IFNAME,SOURCE6,INDEX: the port's end here, the sandbox's
        address, and its index k (it asks nI.learn.test AAAA for
        I = k*PER_SANDBOX .. k*PER_SANDBOX+PER_SANDBOX-1)
"""
import errno
import socket
import struct
import sys
import time


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def query(qid, name):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack("!HH", 28, 1)  # AAAA IN


def frame(dst_mac, src_mac, src6, dst6, sport, payload):
    udp_len = 8 + len(payload)
    pseudo = src6 + dst6 + struct.pack("!I3xB", udp_len, 17)
    udp = struct.pack("!HHHH", sport, 53, udp_len, 0) + payload
    c = csum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    ip6 = struct.pack("!IHBB", 6 << 28, udp_len, 17, 64) + src6 + dst6
    return dst_mac + src_mac + b"\x86\xdd" + ip6 + udp


def main(argv):
    gw_mac = bytes.fromhex(argv[1].replace(":", ""))
    dst6 = socket.inet_pton(socket.AF_INET6, argv[2])
    per = int(argv[3])
    sent = 0
    for spec in argv[4:]:
        ifname, src, k = spec.split(",")
        k = int(k)
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((ifname, 0))
        src_mac = s.getsockname()[4][:6]
        src6 = socket.inet_pton(socket.AF_INET6, src)
        for j in range(per):
            i = k * per + j
            f = frame(gw_mac, src_mac, src6, dst6, 20000 + j,
                      query((k * 131 + j) & 0xFFFF, "n%d.learn.test" % i))
            for _ in range(200):
                try:
                    s.send(f)
                    break
                except OSError as e:  # the gateway's backlog is full: let it drain
                    if e.errno != errno.ENOBUFS:
                        raise
                    time.sleep(0.01)
            sent += 1
        s.close()
        if sent % 256 < per:
            time.sleep(0.02)  # well under the engine's queue length per pause
    print("sent %d queries" % sent)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
