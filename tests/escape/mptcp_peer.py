#!/usr/bin/env python3
# Multipath TCP peers of tests/escape/mptcp.sh (standard library only).
# A SYN carrying the MP_CAPABLE option (TCP option kind 30, RFC 8684)
# makes an MPTCP-capable server run MPTCP: its application then reads the
# data stream assembled by the DSS data-sequence mappings, not the subflow
# stream a guard judges by its bytes.
#
#   mptcp_peer.py probe           exit 0 if this namespace makes MPTCP sockets
#   mptcp_peer.py server --listen A[,A...] --port P --cert F --key F --log F [--idle S]
#            (upstream: an MPTCP TLS server; one line per event in --log:
#             "accept PORT mptcp 0|1" at accept (TCP_IS_MPTCP: 1 when the
#             connection runs MPTCP, 0 when it fell back to TCP), "sni PORT
#             NAME" for each ClientHello its TLS library read, "end PORT
#             mptcp 0|1 sni NAME|- HOW first HEX" when it ends, HEX being the
#             first bytes its application read)
#   mptcp_peer.py tls --dst A --port P --name N [--mptcp]
#            (sandbox: a TLS client for N, then a GET; prints "sport P; mptcp
#             0|1; served: BODY" or "sport P; not served: ERROR")
#   mptcp_peer.py dns --server A --name N [--mptcp]
#            (sandbox: one framed DNS query over TCP; prints "sport P; mptcp
#             0|1; answered RCODE" or "sport P; not answered: ERROR")
#   mptcp_peer.py resyn --dst A --dport P --sport P
#            (sandbox, crafted on layer 2: a plain SYN (IPv4: 52 bytes, the
#             test has the upstream drop it), then the same SYN sent again
#             (same sequence number) carrying MP_CAPABLE; prints what came
#             back: "SYN-ACK, MP_CAPABLE yes|no", "reset" or "no answer")
#   mptcp_peer.py swap --dst A --dport P --sport P --good N --evil N
#            (sandbox, crafted: an MPTCP v1 handshake, then segment 1 = a
#             ClientHello for --good mapped by its DSS AFTER segment 2's
#             bytes in the data sequence space, segment 2 = a ClientHello
#             for --evil mapped to the data stream's start, IDSN + 1)
# The crafted commands need ESC_GW_MAC (or --gw-mac), and the sandbox's own
# RSTs from --sport dropped (escape_lib's esc_crafted_ports).
import argparse
import hashlib
import os
import random
import select
import socket
import ssl
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import craft  # noqa: E402  (the escape suite's packet builders)

IPPROTO_MPTCP = 262
TCP_IS_MPTCP = 43
LOG_LOCK = threading.Lock()


def is_mptcp(s):
    try:
        return s.getsockopt(socket.SOL_TCP, TCP_IS_MPTCP)
    except OSError:
        return -1


def family(a):
    return socket.AF_INET6 if craft.is6(a) else socket.AF_INET


def log_line(path, line):
    with LOG_LOCK:
        with open(path, "a") as f:
            print(line, file=f, flush=True)


def cmd_probe(a):
    for fam in (socket.AF_INET, socket.AF_INET6):
        socket.socket(fam, socket.SOCK_STREAM, IPPROTO_MPTCP).close()
    print("mptcp sockets: ok")


# ---- the upstream server --------------------------------------------------

def serve_conn(c, peer, a):
    """One connection: TLS through memory BIOs, so that every byte the
    application read is known (and logged) whatever the handshake does."""
    port = peer[1]
    mp = is_mptcp(c)
    log_line(a.log, "accept %d mptcp %d" % (port, mp))
    names = []

    def on_sni(obj, name, ctx_):
        names.append(name or "-")
        log_line(a.log, "sni %d %s" % (port, name or "-"))

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.sni_callback = on_sni
    inb, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx.wrap_bio(inb, outb, server_side=True)
    c.settimeout(a.idle)
    got, how, done = b"", "closed", False
    try:
        while True:
            try:
                b = c.recv(16384)
            except socket.timeout:
                how = "idle"
                break
            if not b:
                break
            got += b
            inb.write(b)
            try:
                if not done:
                    t.do_handshake()
                    done = True
                req = t.read(16384)
                if req:
                    t.write(("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
                             "mptcp-server %s ok\n" % (names[0] if names else "-")).encode())
                    how = "served"
                    c.sendall(outb.read())
                    break
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as e:
                how = "tls-error %s" % (e.reason or type(e).__name__)
                c.sendall(outb.read())
                break
            out = outb.read()
            if out:
                c.sendall(out)
    except OSError as e:
        how = type(e).__name__
    try:
        c.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    c.close()
    log_line(a.log, "end %d mptcp %d sni %s %s first %s" % (
        port, mp, ",".join(names) or "-", how.replace(" ", "-"), got[:64].hex() or "-"))


def cmd_server(a):
    socks = []
    for addr in a.listen.split(","):
        ls = socket.socket(family(addr), socket.SOCK_STREAM, IPPROTO_MPTCP)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, a.port))
        ls.listen(64)
        socks.append(ls)
    log_line(a.log, "listening %d" % a.port)
    while True:
        r, _, _ = select.select(socks, [], [])
        for ls in r:
            c, peer = ls.accept()
            threading.Thread(target=serve_conn, args=(c, peer, a), daemon=True).start()


# ---- the sandbox's clients (its own TCP or MPTCP) --------------------------

def client_socket(a, dst):
    """A socket bound to a port of its own first: the port is known even
    when the connection is refused."""
    s = socket.socket(family(dst), socket.SOCK_STREAM, IPPROTO_MPTCP if a.mptcp else 0)
    s.bind(("::" if family(dst) == socket.AF_INET6 else "0.0.0.0", 0))
    print("sport %d" % s.getsockname()[1], end="; ", flush=True)
    s.settimeout(a.timeout)
    return s


def cmd_tls(a):
    s = client_socket(a, a.dst)
    try:
        s.connect((a.dst, a.port))
        print("mptcp %d" % is_mptcp(s), end="; ")
        print("served: %s" % (craft.tls_get(s, a.name) or "(nothing)"))
    except (OSError, ssl.SSLError) as e:
        print("not served: %s" % type(e).__name__)


def cmd_dns(a):
    s = client_socket(a, a.server)
    try:
        s.connect((a.server, 53))
        print("mptcp %d" % is_mptcp(s), end="; ")
        s.sendall(craft.framed(craft.dns_msg(a.name, random.randrange(65536))))
        resp = b""
        while len(resp) < 2 or len(resp) < 2 + struct.unpack("!H", resp[:2])[0]:
            b = s.recv(4096)
            if not b:
                break
            resp += b
        if len(resp) < 14:
            print("not answered: closed after %d bytes" % len(resp))
        else:
            print("answered %s" % craft.rcode_of(resp[2:]))
    except OSError as e:
        print("not answered: %s" % type(e).__name__)


# ---- crafted (layer 2, a TCP of its own) ----------------------------------

def mpc(payload=b""):
    """MP_CAPABLE, version 1, HMAC-SHA256 (flag H), no checksums."""
    return bytes([30, 4 + len(payload), 0x01, 0x01]) + payload


def dss(dsn, ssn, length):
    """DSS with a mapping only: 64-bit data sequence number (flags M, m)."""
    return bytes([30, 18, 0x20, 0x0C]) + struct.pack("!QIH", dsn, ssn, length) + b"\x01\x01"


def idsn(key):
    """RFC 8684: the initial data sequence number is the least significant
    64 bits of the SHA-256 of the key."""
    return struct.unpack("!Q", hashlib.sha256(struct.pack("!Q", key)).digest()[24:])[0]


def tcp_options(opts):
    """(kind, bytes) of each TCP option."""
    out, i = [], 0
    while i < len(opts):
        k = opts[i]
        if k == 0:
            break
        if k == 1:
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2:
            break
        out.append((k, opts[i:i + opts[i + 1]]))
        i += opts[i + 1]
    return out


class Peer(craft.TcpPeer):
    """craft.TcpPeer whose segments come with their TCP options and
    payloads: (flags, seq, ack, options, payload)."""

    def recv(self, timeout, until=None):
        n = len(self.segs)
        super().recv(timeout, until)
        return self.segs[n:]

    def summary(self):
        data = sum(len(p) for fl, _, _, _, p in self.segs if not fl & 0x02)
        rst = sum(1 for s in self.segs if s[0] & 0x04)
        return "server segments %d, data bytes %d, resets %d" % (len(self.segs), data, rst)


def mp_capable_of(opts):
    for k, o in tcp_options(opts):
        if k == 30 and len(o) >= 3 and o[2] >> 4 == 0:
            return o
    return None


def cmd_resyn(a):
    p = Peer(a)
    isn = random.randrange(1 << 20, 1 << 31)
    # MSS, SACK permitted, window scale: what a real SYN carries
    base = b"\x02\x04\x05\xb4\x04\x02\x01\x03\x03\x07\x01\x01"
    p.send("S", isn, options=base)  # plain: the guard holds the flow
    first = p.recv(0.5)
    print("first SYN answered: %s" % ("yes" if first else "no"), end="; ")
    p.send("S", isn, options=base + mpc())  # sent again, with MP_CAPABLE
    got = p.recv(1.5, until=lambda s: s[0] & 0x06)
    synack = [s for s in got if s[0] & 0x12 == 0x12 and s[2] == (isn + 1) & 0xFFFFFFFF]
    if synack:
        p.send("R", isn + 1)
        print("SYN-ACK, MP_CAPABLE %s; %s" % (
            "yes" if mp_capable_of(synack[0][3]) else "no", p.summary()))
    elif any(s[0] & 0x04 for s in got):
        print("reset; %s" % p.summary())
    else:
        print("no answer; %s" % p.summary())


def cmd_swap(a):
    p = Peer(a)
    good, evil = craft.tls_client_hello(a.good), craft.tls_client_hello(a.evil)
    isn = random.randrange(1 << 20, 1 << 31)
    key = random.randrange(1 << 64)
    p.send("S", isn, options=b"\x02\x04\x05\xb4" + mpc())  # MSS, MP_CAPABLE
    synack = None
    for s in p.recv(2, until=lambda s: s[0] & 0x12 == 0x12 or s[0] & 0x04):
        if s[0] & 0x12 == 0x12 and s[2] == (isn + 1) & 0xFFFFFFFF:
            synack = s
    if not synack:
        print("no SYN-ACK; %s" % p.summary())
        return
    m = mp_capable_of(synack[3])
    if not m or len(m) < 12:
        p.send("R", isn + 1)
        print("SYN-ACK without MP_CAPABLE and key: the server runs plain TCP; %s" % p.summary())
        return
    skey = struct.unpack("!Q", m[4:12])[0]
    rcv = (synack[1] + 1) & 0xFFFFFFFF
    # the third ACK: both keys (the server's subflow is then established)
    p.send("A", isn + 1, rcv, options=mpc(struct.pack("!QQ", key, skey)))
    p.recv(0.2)
    d0 = (idsn(key) + 1) & 0xFFFFFFFFFFFFFFFF
    # segment 1, judged by the guard: the good ClientHello at subflow bytes
    # 1..len(good), mapped AFTER the evil one in the data stream
    p.send("PA", isn + 1, rcv, good, options=dss(d0 + len(evil), 1, len(good)))
    p.recv(0.5)
    # segment 2, past the judged bytes (passes unjudged): the evil
    # ClientHello, mapped to the data stream's start
    p.send("PA", isn + 1 + len(good), rcv, evil, options=dss(d0, 1 + len(good), len(evil)))
    p.recv(2.0)
    data = b"".join(pl for fl, _, _, _, pl in p.segs if not fl & 0x02)
    p.send("R", isn + 1 + len(good) + len(evil))
    print("handshake MPTCP; server bytes %d%s; %s" % (
        len(data), ", a TLS handshake record first" if data[:1] == b"\x16" else "",
        p.summary()))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("probe")
    t = sub.add_parser("server")
    t.add_argument("--listen", required=True)
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--cert", required=True)
    t.add_argument("--key", required=True)
    t.add_argument("--log", required=True)
    t.add_argument("--idle", type=float, default=3)
    t = sub.add_parser("tls")
    t.add_argument("--dst", required=True)
    t.add_argument("--port", type=int, default=443)
    t.add_argument("--name", required=True)
    t.add_argument("--mptcp", action="store_true")
    t.add_argument("--timeout", type=float, default=4)
    t = sub.add_parser("dns")
    t.add_argument("--server", required=True)
    t.add_argument("--name", required=True)
    t.add_argument("--mptcp", action="store_true")
    t.add_argument("--timeout", type=float, default=3)
    for n in ("resyn", "swap"):
        t = sub.add_parser(n)
        t.add_argument("--dst", required=True)
        t.add_argument("--dport", type=int, required=True)
        t.add_argument("--sport", type=int, required=True)
        t.add_argument("--gw-mac")
        t.add_argument("--src")
        if n == "swap":
            t.add_argument("--good", default="cdn-good.test")
            t.add_argument("--evil", default="cdn-evil.test")
    a = ap.parse_args()
    {"probe": cmd_probe, "server": cmd_server, "tls": cmd_tls, "dns": cmd_dns,
     "resyn": cmd_resyn, "swap": cmd_swap}[a.cmd](a)


if __name__ == "__main__":
    main()
