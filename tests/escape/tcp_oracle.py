#!/usr/bin/env python3
# The differential test of issue 30 (item 2): the receiving application is
# the oracle, not the engine's model of TCP. Seeded, generated segment
# sequences go from sandbox 1 (layer 2, craft.py's way; the sandbox's own
# RSTs are dropped by tcp_oracle.sh) through the real gateway to
#   (a) record-server (craft.py) on the address cdn-good.test and
#       cdn-evil.test share, port 8443 with SO_OOBINLINE and 8444 without:
#       it logs every byte its application read and the name OpenSSL
#       selected;
#   (b) dnsmasq, the guard's resolver, whose query log says which names it
#       was asked.
# Then, per case, from the engine's records alone (verdicts.jsonl):
#   - every byte the server's application read is a byte of the stream the
#     engine judged, at the same offset: the judged stream is the one whose
#     ClientHello names the server name the record allowed (or, for an
#     allowed "not TLS" record, one whose first byte is not TLS); a flow
#     with no allowed record may have read a proper prefix of its
#     ClientHello, never all of it;
#   - the name the server selected is the name the record allowed;
#   - every name dnsmasq was asked from the case's port is a name the
#     engine recorded as allowed for sandbox agent-1 on that port.
# A disagreement is shrunk (operations dropped, then simplified, while it
# still disagrees) and printed as a minimal sequence.
#
#   tcp_oracle.py --seed S --count N --lab-dir D --gw-mac M ...  (see main)
import argparse
import json
import os
import random
import re
import select
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import craft  # noqa: E402

TLS_GOOD, TLS_EVIL = "cdn-good.test", "cdn-evil.test"
DNS_OK = ("api.github.test", "cdn-good.test")


# ---- one crafted connection ------------------------------------------------

class Peer:
    """A TCP client of its own on layer 2: options as the case says
    (timestamps, SACK, window scale, MSS), the server's segments read back
    for its sequence number, acknowledgements, window and timestamps."""

    def __init__(self, o, dst, dport, sport):
        self.l2 = craft.L2(o.gw_mac)
        self.rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        self.rx.bind((craft.IFACE, 0))
        self.dst, self.dport, self.sport = dst, dport, sport
        self.src = o.sb6 if craft.is6(dst) else o.sb4
        self.v6 = craft.is6(dst)
        self.irs = None  # the server's ISN
        self.win = 0  # the server's window (as in its SYN-ACK: unscaled)
        self.ts_recent = 0  # the server's last TSval
        self.ack_max = 0  # highest acknowledgement the server sent
        self.data = 0  # data bytes the server sent
        self.rst = False

    def close(self):
        self.rx.close()
        self.l2.s.close()

    def send(self, flags, seq, data=b"", urp=0, opts=b""):
        ack = ((self.irs + 1 + self.data) & 0xFFFFFFFF) if self.irs is not None else 0
        if "A" not in flags:
            ack = 0
        seg = craft.tcp(self.src, self.dst, self.sport, self.dport, flags, data,
                        seq=seq & 0xFFFFFFFF, ack=ack, options=opts, urp=urp & 0xFFFF)
        self.l2.ip(craft.ipv6(self.src, self.dst, 6, seg) if self.v6
                   else craft.ipv4(self.src, self.dst, 6, seg))

    def recv(self, timeout):
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                return
            r, _, _ = select.select([self.rx], [], [], left)
            if not r:
                return
            frame, addr = self.rx.recvfrom(65535)
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            et = struct.unpack("!H", frame[12:14])[0]
            ip = frame[14:]
            if et == 0x0800 and not self.v6 and len(ip) >= 20 and ip[9] == 6:
                src = ip[12:16] == socket.inet_aton(self.dst)
                l4 = ip[(ip[0] & 15) * 4:struct.unpack("!H", ip[2:4])[0]]
            elif et == 0x86DD and self.v6 and len(ip) >= 40 and ip[6] == 6:
                src = ip[8:24] == socket.inet_pton(socket.AF_INET6, self.dst)
                l4 = ip[40:40 + struct.unpack("!H", ip[4:6])[0]]
            else:
                continue
            if not src or len(l4) < 20:
                continue
            sp, dp, seq, ack, off, fl, win = struct.unpack("!HHIIBBH", l4[:16])
            if sp != self.dport or dp != self.sport:
                continue
            hl = (off >> 4) * 4
            self.tsopt(l4[20:hl])
            if fl & 0x04:
                self.rst = True
                continue
            if fl & 0x12 == 0x12:
                if self.irs is None:
                    self.irs, self.win = seq, win
                continue
            if self.irs is None:
                continue
            self.ack_max = max(self.ack_max, (ack - self.isn - 1) & 0xFFFFFFFF)
            n = len(l4) - hl
            if n:
                self.data = max(self.data, (seq - self.irs - 1 + n) & 0xFFFFFFFF)

    def tsopt(self, o):
        i = 0
        while i < len(o):
            k = o[i]
            if k == 0:
                return
            if k == 1:
                i += 1
                continue
            if i + 1 >= len(o) or o[i + 1] < 2:
                return
            if k == 8 and o[i + 1] == 10:
                self.ts_recent = struct.unpack("!I", o[i + 2:i + 6])[0]
            i += o[i + 1]


def opts_of(peer, case, op, syn=False):
    """TCP options of a segment: what the SYN offered, and on later
    segments the timestamp (fresh, stale for PAWS, or left out) and a SACK
    block, as the operation says."""
    s = case["syn"]
    o = b""
    if syn:
        if s["mss"]:
            o += struct.pack("!BBH", 2, 4, 1400)
        if s["ws"] is not None:
            o += struct.pack("!BBB", 3, 3, s["ws"]) + b"\x01"
        if s["sack"]:
            o += b"\x04\x02\x01\x01"
    if s["ts"] and (syn or op.get("ts", "ok") != "none"):
        peer.tsval += 1
        v = peer.tsval if syn or op.get("ts", "ok") == "ok" else peer.tsval - 0x40000000
        o += b"\x01\x01" + struct.pack("!BBII", 8, 10, v & 0xFFFFFFFF, peer.ts_recent)
    if not syn and s["sack"] and op.get("sack") and peer.irs is not None:
        left = peer.irs + 1 + peer.data + 100
        o += b"\x01\x01" + struct.pack("!BBII", 5, 10, left & 0xFFFFFFFF, (left + 50) & 0xFFFFFFFF)
    while len(o) % 4:
        o += b"\x01"
    return o[:40]


def run_case(o, case, sport):
    """Sends the case's segments on a new connection from sport. Returns
    False if the server never answered the SYN (nothing to compare)."""
    dst = case["dst"]
    p = Peer(o, dst, case["port"], sport)
    try:
        p.isn = case["isn"]
        p.tsval = case["tsval"]
        p.send("S", p.isn, opts=opts_of(p, case, {}, syn=True))
        p.recv(0.0)
        deadline = time.time() + 2
        while p.irs is None and time.time() < deadline and not p.rst:
            p.recv(0.05)
        if p.irs is None:
            return False
        p.send("A", p.isn + 1, opts=opts_of(p, case, {}))
        streams = case["streams"]
        for op in case["ops"]:
            if op["t"] == "ack":
                p.send(op["fl"], p.isn + 1 + op["a"], urp=op["urp"], opts=opts_of(p, case, op))
            elif op["t"] == "win":
                at = p.win + op["rel"]
                p.send("PA", p.isn + 1 + at, streams[op["s"]][:op["n"]], opts=opts_of(p, case, op))
            else:
                data = streams[op["s"]][op["a"]:op["b"]]
                p.send(op["fl"], p.isn + 1 + op["a"], data, urp=op.get("urp", 0),
                       opts=opts_of(p, case, op))
            p.recv(o.step)
        # the end: a RST where the server expects the next byte (it reaches
        # the server unless the engine refused the flow)
        p.recv(0.02)
        p.send("R", p.isn + 1 + p.ack_max)
        return True
    finally:
        p.close()


# ---- generation ---------------------------------------------------------------

def dns_q(name, ident, cookie=b""):
    opt = struct.pack("!HH", 10, len(cookie)) + cookie if cookie else b""
    return craft.framed(craft.dns_msg(name, ident, opt))


def gen_streams_tls():
    g, g2, e = (craft.tls_client_hello(n) for n in (TLS_GOOD, TLS_GOOD, TLS_EVIL))
    # name, bytes, the end of what the engine judges in it (its whole
    # ClientHello; the first byte of a stream that is not TLS), the cuts
    # a generator likes (its message boundaries)
    # and its whole messages (what a segment holding one message holds)
    return [("G", g, len(g), [0, 5, len(g)], [(0, len(g))]),
            ("G2", g2, len(g2), [0, 5, len(g2)], [(0, len(g2))]),
            ("E", e, len(e), [0, 5, len(e)], [(0, len(e))]),
            ("XE", b"X" + e, 1, [0, 1, 6, len(e) + 1], [(0, 1), (1, len(e) + 1)])]


def gen_streams_dns(rng, evil):
    """A: an allowed query padded long. B: an allowed query whose 40-byte
    EDNS cookie ends with a whole framed query for the refused name, placed
    so that this tail starts where A ends (issue 30's second exit). C: A,
    then a query for the refused name. D: other allowed queries."""
    a = craft.framed(craft.dns_msg(DNS_OK[0], rng.randrange(65536),
                                   struct.pack("!HH", 12, 64) + b"\0" * 64))
    tail = dns_q(evil, rng.randrange(65536))
    b = dns_q(DNS_OK[0], rng.randrange(65536), b"c" * (40 - len(tail)) + tail)
    at = len(a) - (len(b) - len(tail))
    ok2 = dns_q(DNS_OK[1], rng.randrange(65536))
    ok1 = dns_q(DNS_OK[0], rng.randrange(65536))
    ev = dns_q(evil, rng.randrange(65536))
    return [("A", a + ok2, len(a + ok2), [0, 2, len(a), len(a) + 2, len(a + ok2)],
             [(0, len(a)), (len(a), len(a + ok2))]),
            ("B", a[:at] + b, len(a[:at] + b), [0, at, at + 2, at + len(b)], [(at, at + len(b))]),
            ("C", a + ev, len(a + ev), [0, len(a), len(a + ev)], [(0, len(a)), (len(a), len(a + ev))]),
            ("D", ok1 + ok2, len(ok1 + ok2), [0, len(ok1), len(ok1 + ok2)],
             [(0, len(ok1)), (len(ok1), len(ok1 + ok2))])]


def gen_case(rng, kind, n, o):
    v6 = rng.random() < 0.5
    if kind == "tls":
        streams = gen_streams_tls()
        port = rng.choice((o.port_inline, o.port_plain))
        dst = o.cdn6 if v6 else o.cdn4
    else:
        streams = gen_streams_dns(rng, "c%d-%d.evil.test" % (o.seed % 100000, n))
        port, dst = 53, (o.res6 if v6 else o.res4)
    syn = {"ts": rng.random() < 0.5, "sack": rng.random() < 0.4,
           "ws": rng.choice((None, None, 0, 7, 14)), "mss": rng.random() < 0.5}
    # B is no stream's start: its one message sits inside A's
    k = rng.choice([i for i, x in enumerate(streams) if x[0] != "B"])
    name, pbytes, _, bounds, _ = streams[k]
    L = len(pbytes)
    # the primary stream cut in order at its boundaries and a few random places
    cuts = set([0, L])
    for c in bounds:
        if rng.random() < 0.7:
            cuts.add(c)
    for _ in range(rng.randrange(3)):
        cuts.add(rng.randrange(1, L))
    cuts = sorted(cuts)
    ops = [{"t": "data", "s": k, "a": a, "b": b, "fl": "PA"} for a, b in zip(cuts, cuts[1:])]
    for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
        mutate(rng, ops, streams, syn, kind)
    return {"kind": kind, "dst": dst, "port": port, "syn": syn, "streams": [s[1] for s in streams],
            "names": [s[0] for s in streams], "judged": [s[2] for s in streams],
            "isn": rng.randrange(1 << 20, 1 << 31), "tsval": rng.randrange(1 << 20, 1 << 30),
            "ops": ops}


MUTATIONS = ("urg", "urg", "urg", "urg-ack", "urg-ack", "other", "other", "other", "swap", "drop",
             "fin", "rst", "ts", "sack", "win", "probe", "urp-only")


def mutate(rng, ops, streams, syn, kind):
    m = rng.choice(MUTATIONS + ("other",) * (8 if kind == "dns" else 0))
    data = [i for i, op in enumerate(ops) if op["t"] == "data"]
    if not data:
        return
    i = rng.choice(data if rng.random() < 0.5 else data[:1])
    op = ops[i]
    seglen = op["b"] - op["a"]
    if m in ("urg", "urp-only"):
        op["fl"] = op["fl"] + "U" if m == "urg" and "U" not in op["fl"] else op["fl"]
        op["urp"] = rng.choice((seglen, seglen, 1, rng.randrange(0, seglen + 4), 0xFFFF))
        if m == "urp-only" and op["urp"] == 0:
            op["urp"] = 1
    elif m == "urg-ack":
        ops.insert(i, {"t": "ack", "fl": rng.choice(("AU", "AU", "A")), "a": op["a"],
                       "urp": rng.choice((1, 1, 2, rng.randrange(1, 600), 0xFFFF))})
    elif m == "other":
        # the same range, or one straddling it, from another stream: a
        # retransmission with other bytes (or the same), before or after
        s = rng.randrange(len(streams))
        if kind == "dns" and rng.random() < 0.5:
            s = [x[0] for x in streams].index("B")
        sb = streams[s][3]
        if rng.random() < 0.6:
            a, b = rng.choice(streams[s][4])
        else:
            a, b = rng.choice([(op["a"], op["b"])] + [(x, y) for x in sb for y in sb if x < y] +
                              [(max(0, op["a"] - 3), op["b"] + 3)])
        b = min(b, len(streams[s][1]))
        if a < b:
            ops.insert(i + rng.randrange(2), {"t": "data", "s": s, "a": a, "b": b, "fl": "PA"})
    elif m == "swap" and i + 1 < len(ops):
        ops[i], ops[i + 1] = ops[i + 1], ops[i]
    elif m == "drop" and len(ops) > 1:
        del ops[i]
    elif m == "fin":
        op["fl"] = "FPA"
    elif m == "rst":
        op["fl"] = rng.choice(("RA", "R"))
    elif m == "ts" and syn["ts"]:
        op["ts"] = rng.choice(("stale", "stale", "none"))
    elif m == "sack" and syn["sack"]:
        op["sack"] = True
    elif m == "win":
        ops.insert(i, {"t": "win", "s": op["s"], "n": rng.randrange(1, 40),
                       "rel": rng.choice((-20, -1, 0, 1, 20))})
    elif m == "probe":
        # a zero-window probe's shape: one byte at the next offset, sent again later
        one = {"t": "data", "s": op["s"], "a": op["a"], "b": op["a"] + 1, "fl": "A"}
        ops.insert(i, one)
        ops.insert(i + 1, dict(one))


def replay_case(o, spec, rng):
    """A case from a printed sequence: "tls|dns 4|6 PORT; OP; OP...", each
    OP as show() prints it ("PAU XE[0,1) urp 1", "bare AU +0 urp 1")."""
    parts = [x.strip() for x in spec.split(";") if x.strip()]
    kind, fam, port = parts[0].split()
    c = gen_case(rng, kind, 0, o)
    c["dst"] = {("tls", "4"): o.cdn4, ("tls", "6"): o.cdn6, ("dns", "4"): o.res4,
                ("dns", "6"): o.res6}[(kind, fam)]
    c["port"] = int(port)
    c["syn"] = {"ts": False, "sack": False, "ws": None, "mss": False}
    c["ops"] = []
    for x in parts[1:]:
        w = x.replace("seq ", "").split()
        if w[0] == "bare":
            c["ops"].append({"t": "ack", "fl": w[1], "a": int(w[2].lstrip("+")), "urp": int(w[4])})
            continue
        m = re.match(r"(\w+)\[(\d+),(\d+)\)", w[1])
        op = {"t": "data", "fl": w[0], "s": c["names"].index(m.group(1)),
              "a": int(m.group(2)), "b": int(m.group(3))}
        if len(w) >= 4 and w[2] == "urp":
            op["urp"] = int(w[3])
        c["ops"].append(op)
    return c


def show(case):
    """A case as lines a person can replay."""
    s = case["syn"]
    out = ["  %s to [%s]:%d; SYN options: ts %s, sack %s, wscale %s, mss %s" % (
        case["kind"], case["dst"], case["port"], s["ts"], s["sack"], s["ws"], s["mss"])]
    names = case["names"]
    for i, (n, b) in enumerate(zip(names, case["streams"])):
        out.append("  stream %s: %d bytes, judged part [0,%d), starts %s" % (
            n, len(b), case["judged"][i], b[:12].hex()))
    for op in case["ops"]:
        if op["t"] == "ack":
            out.append("  bare %s  seq +%d urp %d" % (op["fl"], op["a"], op["urp"]))
        elif op["t"] == "win":
            out.append("  PA   at the server's window %+d: %d bytes of %s" % (
                op["rel"], op["n"], names[op["s"]]))
        else:
            x = ["%-4s %s[%d,%d)" % (op["fl"], names[op["s"]], op["a"], op["b"])]
            if op.get("urp"):
                x.append("urp %d" % op["urp"])
            if op.get("ts", "ok") != "ok":
                x.append("timestamp %s" % op["ts"])
            if op.get("sack"):
                x.append("SACK block")
            out.append("  " + " ".join(x))
    return "\n".join(out)


# ---- the oracle -----------------------------------------------------------------

def records(o, sport, dport):
    """The engine's records of the case's connection (a UDP query of the
    setup may have used the same source port)."""
    out = []
    try:
        with open(o.records) as f:
            for line in f:
                if '"source.port":%d,' % sport not in line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("network.transport") == "tcp" and r.get("destination.port") == dport:
                    out.append(r)
    except OSError:
        pass
    return out


def server_line(o, sport):
    try:
        with open(o.server_log) as f:
            for line in f:
                w = line.split()
                if len(w) >= 10 and w[0] == "peer" and w[1] == str(sport):
                    return {"sni": w[5], "end": w[7],
                            "read": b"" if w[9] == "-" else bytes.fromhex(w[9])}
    except OSError:
        pass
    return None


QLOG = re.compile(r" (\S+)/(\d+) query\[[A-Za-z0-9]+\] (\S+) from ")


def resolver_names(o, sport):
    """The names dnsmasq was asked from sport since the oracle started. Its
    log does not say UDP or TCP, and the setup's dig queries (before the
    oracle) took ephemeral ports that may be a case's: a case once met a
    setup query for cdn-good.test from its port and "disagreed"."""
    out = []
    try:
        with open(o.dnsmasq_log) as f:
            f.seek(o.dnsmasq_from)
            for line in f:
                m = QLOG.search(line)
                if m and int(m.group(2)) == sport and m.group(1) in (o.sb4, o.sb6):
                    out.append(m.group(3).lower().rstrip("."))
    except OSError:
        pass
    return out


def allowed(r):
    return r.get("event.outcome") in ("success", "allowed") or \
        str(r.get("event.type", "")).find("allowed") >= 0


def judge_tls(case, recs, srv):
    """None when the server read only what the engine judged, else why not."""
    got = srv["read"]
    ok = [r for r in recs if allowed(r)]
    streams, judged = case["streams"], case["judged"]
    if ok:
        sni = ok[0].get("tls.client.server_name")
        if sni:
            cands = [i for i, s in enumerate(streams) if s[0] == 0x16 and
                     craft_sni(s) == sni]
        else:
            cands = [i for i, s in enumerate(streams) if s[0] != 0x16]
        if not cands:
            return "the record allowed %s, which no stream sent" % (sni or "a stream not TLS")
        fits = [i for i in cands if got[:judged[i]] == streams[i][:min(len(got), judged[i])]]
        if not fits:
            return ("the server read %s... (selected: %s) where the engine judged %s (record: %s)" % (
                got[:16].hex() or "nothing", srv["sni"], "/".join(case["names"][i] for i in cands),
                sni or "not TLS"))
        if srv["sni"] != "-" and srv["sni"] != sni:
            return "the server selected %s, the record says %s" % (srv["sni"], sni or "not TLS")
        return None
    if srv["sni"] != "-":
        return "the server selected %s and no record allowed the flow" % srv["sni"]
    if not got:
        return None
    for i, s in enumerate(streams):
        if got == s[:len(got)] and len(got) < judged[i]:
            return None
    return ("the server read %d bytes (%s...) and no record allowed the flow (records: %s)" % (
        len(got), got[:16].hex(), "; ".join(r.get("event.reason", "?") for r in recs) or "none"))


def craft_sni(hello):
    """The server name of a ClientHello record (the first one)."""
    try:
        i = 5 + 4 + 2 + 32
        i += 1 + hello[i]
        i += 2 + struct.unpack("!H", hello[i:i + 2])[0]
        i += 1 + hello[i]
        end = i + 2 + struct.unpack("!H", hello[i:i + 2])[0]
        i += 2
        while i + 4 <= end:
            t, n = struct.unpack("!HH", hello[i:i + 4])
            if t == 0:
                ln = struct.unpack("!H", hello[i + 7:i + 9])[0]
                return hello[i + 9:i + 9 + ln].decode()
            i += 4 + n
    except (IndexError, struct.error, UnicodeDecodeError):
        pass
    return None


def judge_dns(o, case, recs, sport):
    asked = resolver_names(o, sport)
    ok = set(str(r.get("dns.question.name", "")).lower().rstrip(".") for r in recs
             if allowed(r) and r.get("portcullis.sandbox") == "agent-1")
    bad = [n for n in asked if n not in ok]
    if bad:
        # an allowed query's record waits for its answer; one with none is
        # written when its entry expires (docs/dnsguard.md, "One record per
        # query"): only a name the policy allows can still be recorded
        final = any(n not in DNS_OK for n in bad)
        return "the resolver was asked %s; the engine recorded as allowed: %s" % (
            ", ".join(sorted(set(bad))), ", ".join(sorted(ok)) or "nothing"), final
    return None, True


class Runner:
    def __init__(self, o):
        self.o = o
        self.port = o.port_lo

    def sport(self):
        self.port += 1
        if self.port > self.o.port_hi:
            sys.exit("tcp_oracle: out of source ports")
        return self.port

    def verdict(self, case, sport, ended):
        """The disagreement of one case that ran, or None. Records, the
        server's line and dnsmasq's log are polled until they agree or the
        deadline passes (logd writes asynchronously; the server logs a
        connection when it ends, within its idle time; a DNS query with no
        answer is recorded once its entry expired, 10 s, at the next
        housekeeping, 10 s more)."""
        deadline = ended + (self.o.idle + 3 if case["kind"] == "tls" else 22)
        while True:
            recs = records(self.o, sport, case["port"])
            final = False
            if case["kind"] == "tls":
                srv = server_line(self.o, sport)
                why = "the server logged no line for the connection" if srv is None else \
                    judge_tls(case, recs, srv)
            else:
                why, final = judge_dns(self.o, case, recs, sport)
            if why is None or final or time.time() > deadline:
                return why
            time.sleep(0.1)

    def once(self, case):
        sp = self.sport()
        if not run_case(self.o, case, sp):
            return "no-synack", sp
        if case["kind"] == "dns":
            time.sleep(0.3)  # a bounded quiet period: nothing logged has no event
        return self.verdict(case, sp, time.time()), sp

    def shrink(self, case):
        """Drops operations, then simplifies them, while the case still
        disagrees: the minimal sequence that shows it."""
        def fails(c):
            why, _ = self.once(c)
            return why not in (None, "no-synack")
        cur = case
        changed = True
        while changed:
            changed = False
            for i in range(len(cur["ops"])):
                c = dict(cur, ops=cur["ops"][:i] + cur["ops"][i + 1:])
                if c["ops"] and fails(c):
                    cur, changed = c, True
                    break
        for key, val in (("ts", False), ("sack", False), ("ws", None), ("mss", False)):
            if cur["syn"][key] != val:
                c = dict(cur, syn=dict(cur["syn"], **{key: val}))
                if fails(c):
                    cur = c
        for i, op in enumerate(cur["ops"]):
            for key in ("ts", "sack"):
                if key in op:
                    nop = {k: v for k, v in op.items() if k != key}
                    c = dict(cur, ops=cur["ops"][:i] + [nop] + cur["ops"][i + 1:])
                    if fails(c):
                        cur = c
                        op = nop
        return cur


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--count", type=int, required=True, help="cases of each kind")
    p.add_argument("--kinds", default="tls,dns")
    p.add_argument("--gw-mac", required=True)
    p.add_argument("--sb4", required=True)
    p.add_argument("--sb6", required=True)
    p.add_argument("--cdn4", required=True)
    p.add_argument("--cdn6", required=True)
    p.add_argument("--res4", required=True)
    p.add_argument("--res6", required=True)
    p.add_argument("--port-inline", type=int, default=8443)
    p.add_argument("--port-plain", type=int, default=8444)
    p.add_argument("--records", required=True)
    p.add_argument("--server-log", required=True)
    p.add_argument("--dnsmasq-log", required=True)
    p.add_argument("--port-lo", type=int, default=50000)
    p.add_argument("--port-hi", type=int, default=59999)
    p.add_argument("--step", type=float, default=0.08, help="seconds between segments")
    p.add_argument("--idle", type=float, default=1.5, help="the server's idle timeout")
    p.add_argument("--shrink", type=int, default=4, help="disagreements to shrink and print")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--replay", help="one case as printed: 'dns 4 53; PA D[0,68); PA D[0,68)'")
    p.add_argument("--cases", type=lambda x: [int(i) for i in x.split(",")], default=[],
                   help="run only these cases of the seed (a reproduction)")
    o = p.parse_args()
    try:
        o.dnsmasq_from = os.path.getsize(o.dnsmasq_log)
    except OSError:
        o.dnsmasq_from = 0
    rng = random.Random(o.seed)
    run = Runner(o)
    cases = []
    kinds = o.kinds.split(",")
    for n in range(o.count * len(kinds) if not o.replay else 1):
        kind = kinds[n % len(kinds)]
        c = gen_case(rng, kind, n, o) if not o.replay else replay_case(o, o.replay, rng)
        if o.cases and n not in o.cases:
            continue
        sp = run.sport()
        if run_case(o, c, sp):
            cases.append((n, c, sp, time.time()))
        else:
            print("# case %d (%s): no SYN-ACK" % (n, kind))
    # every connection ends at the server within its idle time
    bad = []
    time.sleep(0.3)  # the last DNS case: a bounded quiet period (nothing logged has no event)
    for n, c, sp, ended in cases:
        why = run.verdict(c, sp, ended)
        if o.verbose:
            srv = server_line(o, sp)
            recs = " | ".join("%s %s %s %s" % (
                r.get("event.outcome"), r.get("event.reason"), r.get("tls.client.server_name", ""),
                r.get("dns.question.name", "")) for r in records(o, sp, c["port"]))
            print("# case %d port %d: %s; records: %s; server: %s; resolver: %s" % (
                n, sp, why or "agrees", recs, srv and "%s %d bytes" % (srv["sni"], len(srv["read"])),
                ",".join(resolver_names(o, sp))))
        if why:
            bad.append((n, c, why))
            print("# case %d (%s, port %d): DISAGREES: %s" % (n, c["kind"], sp, why))
    print("cases checked %d (seed %d): %d disagreements" % (len(cases), o.seed, len(bad)))
    shown = {}
    # the exits first: a name the resolver was asked, a record false about
    # what the server read (another name selected, or "not TLS")
    bad.sort(key=lambda x: 0 if x[1]["kind"] == "dns" else 1 if re.search(
        r"selected: [^-]|record: not TLS", x[2]) else 2)
    for n, c, why in bad:
        key = (c["kind"], re.sub(r"[0-9a-f]{6,}|[0-9]+", "", why))
        if len(shown) >= o.shrink or key in shown:
            continue
        shown[key] = 1
        print("# case %d, as generated:\n%s" % (n, show(c)))
        m = run.shrink(c)
        why2, sp = run.once(m)
        print("minimal sequence (case %d; %s):\n%s" % (n, why2 or "did not disagree again", show(m)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
