#!/usr/bin/env python3
# DNS messages dig cannot send, for the dnsguard_* integration tests: queries
# with two questions or an over-long name, several queries on one TCP
# connection, and forged answers from a chosen source address and port (raw
# socket). Standard library only; prints one line per result for the shell.
#
#   query  --server A [--tcp] [--sport P] [--id N] [--class C] [--opcode O] [--tsig N]
#          [--timeout S] NAME[:TYPE]...
#          one message with these questions; prints "rcode=NAME an=N A=addr..."
#          (or "timeout", "reset", "closed")
#   burst  --server A --sport P --id0 N --count C NAME[:TYPE]
#          C queries for NAME with ids N, N+1, ... from one UDP port, sent
#          without waiting for answers
#   stream --server A NAME[:TYPE]... [--together | --split B]
#          one TCP connection, one query per message (or all in one segment
#          with --together, or each in two segments, split after B bytes,
#          with --split B); one line per query as above
#   tls    --addr A --host NAME --cafile F [--delay S]
#          one TLS connection (SNI NAME; the ClientHello S seconds after the
#          TCP handshake) held open; for every line read on
#          stdin, one GET / on it, printing "<status> <body>" (or "reset",
#          "closed", "refused", "timeout")
#   answer --src A --dst B --dport P --id N NAME ADDR [--sport 53] [--type A]
#          a forged answer (QR, AA, one A record) sent from A:sport on a raw
#          socket (IP_HDRINCL: any source address)
import argparse
import ipaddress
import random
import socket
import ssl
import struct
import sys
import time

TYPES = {"A": 1, "NS": 2, "CNAME": 5, "TXT": 16, "AAAA": 28, "SVCB": 64, "HTTPS": 65}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def qname(name):
    """Wire form of a name, labels as given: no length checks, so that
    over-long labels and names can be sent on purpose."""
    out = b""
    for label in name.rstrip(".").split("."):
        raw = label.encode("latin-1")
        out += bytes([len(raw) & 0xFF]) + raw
    return out + b"\0"


def question(spec, qclass):
    name, _, t = spec.partition(":")
    t = t or "A"
    return qname(name) + struct.pack("!HH", int(t) if t.isdigit() else TYPES[t], qclass)


def query_msg(qid, specs, qclass, opcode=0, tsig=0):
    hdr = struct.pack("!HHHHHH", qid, 0x0100 | opcode << 11, len(specs), 0, 0, tsig)  # RD
    # TSIG records with no RDATA: only their number matters here
    return (hdr + b"".join(question(s, qclass) for s in specs) +
            tsig * (b"\0" + struct.pack("!HHIH", 250, 255, 0, 0)))


def skip_name(msg, off):
    while True:
        n = msg[off]
        if n == 0:
            return off + 1
        if n & 0xC0 == 0xC0:
            return off + 2
        off += 1 + n


def describe(msg):
    qid, flags, qd, an, _, _ = struct.unpack("!HHHHHH", msg[:12])
    words = ["rcode=%s" % RCODES.get(flags & 0xF, str(flags & 0xF)), "id=%d" % qid,
             "an=%d" % an]
    off = 12
    for _ in range(qd):
        off = skip_name(msg, off) + 4
    for _ in range(an):
        off = skip_name(msg, off)
        rtype, _, _, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
        off += 10
        if rtype == 1 and rdlen == 4:
            words.append("A=" + socket.inet_ntop(socket.AF_INET, msg[off:off + 4]))
        elif rtype == 28 and rdlen == 16:
            words.append("AAAA=" + socket.inet_ntop(socket.AF_INET6, msg[off:off + 16]))
        off += rdlen
    return " ".join(words)


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def tcp_read_msg(s):
    (n,) = struct.unpack("!H", recv_exact(s, 2))
    return recv_exact(s, n)


def run_query(a):
    msg = query_msg(a.id if a.id is not None else random.randrange(65536), a.names, a.qclass,
                    a.opcode, a.tsig)
    try:
        if a.tcp:
            s = socket.socket(family(a.server), socket.SOCK_STREAM)
            s.settimeout(a.timeout)
            s.connect((a.server, 53))
            s.sendall(struct.pack("!H", len(msg)) + msg)
            print(describe(tcp_read_msg(s)))
        else:
            s = socket.socket(family(a.server), socket.SOCK_DGRAM)
            s.settimeout(a.timeout)
            if a.sport:
                s.bind(("", a.sport))
            s.sendto(msg, (a.server, 53))
            print(describe(s.recvfrom(65535)[0]))
    except socket.timeout:
        print("timeout")
    except ConnectionResetError:
        print("reset")
    except (EOFError, BrokenPipeError):
        print("closed")


def run_burst(a):
    s = socket.socket(family(a.server), socket.SOCK_DGRAM)
    s.bind(("", a.sport))
    for i in range(a.count):
        s.sendto(query_msg((a.id0 + i) & 0xFFFF, [a.name], 1), (a.server, 53))
    print("sent %d" % a.count)


def run_stream(a):
    s = socket.socket(family(a.server), socket.SOCK_STREAM)
    s.settimeout(a.timeout)
    s.connect((a.server, 53))
    msgs = [query_msg(random.randrange(65536), [n], 1) for n in a.names]
    framed = [struct.pack("!H", len(m)) + m for m in msgs]
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        if a.together:
            s.sendall(b"".join(framed))
        for f in framed:
            if a.split:  # the message in two segments, the second 0.2 s later
                s.sendall(f[:a.split])
                time.sleep(0.2)
                s.sendall(f[a.split:])
            elif not a.together:
                s.sendall(f)
            print(describe(tcp_read_msg(s)), flush=True)
    except socket.timeout:
        print("timeout")
    except (ConnectionResetError, BrokenPipeError):
        print("reset")
    except EOFError:
        print("closed")


def run_tls(a):
    ctx = ssl.create_default_context(cafile=a.cafile)
    try:
        raw = socket.create_connection((a.addr, 443), timeout=a.timeout)
        time.sleep(a.delay)  # the connection is open; its ClientHello comes later
        s = ctx.wrap_socket(raw, server_hostname=a.host)
        f = s.makefile("rb")
    except ConnectionRefusedError:
        print("refused", flush=True)
        return
    except socket.timeout:
        print("timeout", flush=True)
        return
    except (ConnectionResetError, ssl.SSLError, OSError):
        print("reset", flush=True)
        return
    print("connected", flush=True)
    for _ in sys.stdin:
        try:
            s.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % a.host.encode())
            status = f.readline().split()
            length = 0
            while True:
                h = f.readline()
                if not h:
                    raise EOFError
                if h in (b"\r\n", b"\n"):
                    break
                k, _, v = h.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            if not status:
                raise EOFError
            print(status[1].decode(), f.read(length).decode().strip(), flush=True)
        except socket.timeout:
            print("timeout", flush=True)
        except (ConnectionResetError, BrokenPipeError):
            print("reset", flush=True)
        except (EOFError, ssl.SSLError):
            print("closed", flush=True)


def csum(data):
    if len(data) % 2:
        data += b"\0"
    t = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while t >> 16:
        t = (t & 0xFFFF) + (t >> 16)
    return ~t & 0xFFFF


def run_answer(a):
    rr_type = TYPES[a.type]
    rdata = ipaddress.ip_address(a.addr).packed
    dns = struct.pack("!HHHHHH", a.id, 0x8580, 1, 1, 0, 0)  # QR AA RD RA, NOERROR
    dns += qname(a.name) + struct.pack("!HH", rr_type, 1)
    dns += b"\xc0\x0c" + struct.pack("!HHIH", rr_type, 1, 300, len(rdata)) + rdata
    src, dst = ipaddress.ip_address(a.src), ipaddress.ip_address(a.dst)
    ulen = 8 + len(dns)
    if src.version == 4:
        pseudo = src.packed + dst.packed + struct.pack("!BBH", 0, 17, ulen)
    else:
        pseudo = src.packed + dst.packed + struct.pack("!IxxxB", ulen, 17)
    udp = struct.pack("!HHHH", a.sport, a.dport, ulen, 0) + dns
    c = csum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    if src.version == 4:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, random.randrange(65536), 0, 64,
                         17, 0, src.packed, dst.packed)
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    else:
        ip = struct.pack("!IHBB16s16s", 6 << 28, ulen, 17, 64, src.packed, dst.packed)
        s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for _ in range(a.count):
        s.sendto(ip + udp, (a.dst, 0))
    print("sent %d" % a.count)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("query")
    q.add_argument("--server", required=True)
    q.add_argument("--tcp", action="store_true")
    q.add_argument("--sport", type=int, default=0)
    q.add_argument("--id", type=int)
    q.add_argument("--class", dest="qclass", type=int, default=1)
    q.add_argument("--opcode", type=int, default=0)
    q.add_argument("--tsig", type=int, default=0)
    q.add_argument("--timeout", type=float, default=3)
    q.add_argument("names", nargs="+")
    bu = sub.add_parser("burst")
    bu.add_argument("--server", required=True)
    bu.add_argument("--sport", type=int, required=True)
    bu.add_argument("--id0", type=int, default=0)
    bu.add_argument("--count", type=int, required=True)
    bu.add_argument("name")
    st = sub.add_parser("stream")
    st.add_argument("--server", required=True)
    st.add_argument("--timeout", type=float, default=3)
    st.add_argument("--together", action="store_true")
    st.add_argument("--split", type=int, default=0)
    st.add_argument("names", nargs="+")
    tl = sub.add_parser("tls")
    tl.add_argument("--addr", required=True)
    tl.add_argument("--host", required=True)
    tl.add_argument("--cafile", required=True)
    tl.add_argument("--timeout", type=float, default=4)
    tl.add_argument("--delay", type=float, default=0)
    an = sub.add_parser("answer")
    an.add_argument("--src", required=True)
    an.add_argument("--sport", type=int, default=53)
    an.add_argument("--dst", required=True)
    an.add_argument("--dport", type=int, required=True)
    an.add_argument("--id", type=int, required=True)
    an.add_argument("--type", default="A")
    an.add_argument("--count", type=int, default=1)
    an.add_argument("name")
    an.add_argument("addr")
    a = p.parse_args()
    {"query": run_query, "burst": run_burst, "stream": run_stream, "tls": run_tls, "answer": run_answer}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
