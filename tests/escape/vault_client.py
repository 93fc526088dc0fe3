#!/usr/bin/env python3
# The escape suite's TLS client for attempts through the vault: sends bytes
# exactly as given (request smuggling shapes, odd Host headers, HTTP/2
# prefaces, WebSocket frames split to hide a placeholder), which curl will
# not. Standard library only. Prints the response head (and body) it got,
# or what went wrong; the shell test checks it.
#
#   vault_client.py raw  CA CONNECT_HOST PORT SNI REQUEST [--alpn h2]
#   vault_client.py ws   CA CONNECT_HOST PORT SNI AUTH_PLACEHOLDER MODE PAYLOAD
#   vault_client.py seq  CA CONNECT_HOST PORT SNI REQUEST...
#   vault_client.py pieces CA CONNECT_HOST PORT SNI AUTH STEP COUNT
#   vault_client.py leak VALUE...   < text
# REQUEST takes \r \n \t escapes; @FILE: the bytes of FILE as they are. MODE: split (the payload's halves in a
# first frame and a continuation), ping (in a ping frame), text (whole).
# seq: the requests one after the other on one connection, each response
# read whole (printed in turn). pieces: GET /range with Range for STEP
# bytes at a time, COUNT times, on one connection, with the header AUTH;
# prints the bodies put together. leak: does the text hold 8 bytes of a
# VALUE in any form a reflecting server could have hidden it in (JSON,
# percent or HTML escapes undone, base64 and base64url decoded at every
# offset, gzip inflated)?
# Prints "LEAK ..." or "no leak".
import base64
import gzip
import html
import json
import re
import urllib.parse
import zlib
import os
import socket
import ssl
import struct
import sys
import time


def connect(ca, host, port, sni, alpn=None):
    ctx = ssl.create_default_context(cafile=ca)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    raw = socket.create_connection((host, int(port)), timeout=8)
    try:
        return ctx.wrap_socket(raw, server_hostname=sni)
    except (ssl.SSLError, OSError) as e:
        print("handshake refused:", getattr(e, "reason", None) or type(e).__name__)
        sys.exit(0)


def read_all(s, limit=1 << 20):
    out = b""
    try:
        while len(out) < limit:
            c = s.recv(65536)
            if not c:
                break
            out += c
    except (socket.timeout, ssl.SSLError, ConnectionResetError):
        pass
    return out


def raw(argv):
    ca, host, port, sni, req = argv[:5]
    alpn = ["h2"] if "--alpn" in argv else None
    s = connect(ca, host, port, sni, alpn)
    if alpn:
        print("alpn:", s.selected_alpn_protocol())
    if req.startswith("@"):
        with open(req[1:], "rb") as f:
            data = f.read()
    else:
        data = req.encode().decode("unicode_escape").encode("latin-1")
    try:
        s.sendall(data)
    except OSError as e:
        print("send failed:", type(e).__name__)
    sys.stdout.write(read_all(s).decode("latin-1"))


def ws(argv):
    ca, host, port, sni, ph, mode, payload = argv[:7]
    s = connect(ca, host, port, sni)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET /ws HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n"
               "\r\n" % (sni, port, key, ph)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c:
            print("no upgrade response")
            return
        head += c
    print(head.split(b"\r\n")[0].decode())

    def frame(op, p, fin=True):
        m = os.urandom(4)
        h = bytes([(0x80 if fin else 0) | op])
        n = len(p)
        h += bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack("!H", n)
        return h + m + bytes(b ^ m[i % 4] for i, b in enumerate(p))

    p = payload.encode()
    if mode == "split":
        half = len(p) // 2
        data = frame(1, p[:half], fin=False) + frame(0, p[half:])
    elif mode == "ping":
        data = frame(9, p[:125])
    elif mode == "twomsgs":  # two whole messages, the payload cut between them
        half = len(p) // 2
        data = frame(1, p[:half]) + frame(1, p[half:])
    elif mode == "twomsgs-ping":  # the same with a ping between them
        half = len(p) // 2
        data = frame(1, p[:half]) + frame(9, b"p") + frame(1, p[half:])
    else:
        data = frame(1, p)
    try:
        s.sendall(data + frame(1, b"after"))
    except OSError as e:
        print("send failed:", type(e).__name__)
    got = read_all(s)
    print("received %d bytes after the upgrade" % len(got))
    print("echo of after: %s" % (b"after" in got))


def trickle(argv):
    """Send a request head, then its body a byte every INTERVAL seconds
    (the attack: each read just under the idle timeout); stop at the first
    byte of an answer or after LIMIT seconds. Prints the answer's first
    line (or "no answer") and the seconds it took."""
    ca, host, port, sni, head, interval, limit = argv[:7]
    interval, limit = float(interval), float(limit)
    s = connect(ca, host, port, sni)
    head = head.encode().decode("unicode_escape").encode("latin-1")
    t0 = time.monotonic()
    s.sendall(head)
    s.settimeout(interval)
    got = b""
    while time.monotonic() - t0 < limit:
        try:
            c = s.recv(4096)
            if not c:
                break
            got += c
            if b"\r\n\r\n" in got:
                break
        except socket.timeout:
            try:
                s.sendall(b"a")
            except OSError:
                break
    line = got.split(b"\r\n")[0].decode("latin-1") if got else "no answer"
    print(line)
    print("error: %s" % next((l for l in got.decode("latin-1").split("\r\n")
                              if l.startswith("X-Portcullis-Error:")), ""))
    print("after %.1f s" % (time.monotonic() - t0))


def read_response(s, buf):
    """One response from s (buf: bytes read ahead); (response, rest)."""
    def more():
        c = s.recv(65536)
        if not c:
            raise EOFError
        return c
    try:
        while b"\r\n\r\n" not in buf:
            buf += more()
        head, buf = buf.split(b"\r\n\r\n", 1)
        hl = head.decode("latin-1").lower()
        m = re.search(r"\r\ncontent-length: *(\d+)", hl)
        if m:
            n = int(m.group(1))
            while len(buf) < n:
                buf += more()
            return head + b"\r\n\r\n" + buf[:n], buf[n:]
        if "transfer-encoding: chunked" in hl:
            body = b""
            while True:
                while b"\r\n" not in buf:
                    buf += more()
                line, buf = buf.split(b"\r\n", 1)
                n = int(line.split(b";")[0], 16)
                while len(buf) < n + 2:
                    buf += more()
                body, buf = body + buf[:n], buf[n + 2:]
                if n == 0:
                    return head + b"\r\n\r\n" + body, buf
        return head + b"\r\n\r\n" + buf + read_all(s), b""
    except (EOFError, socket.timeout, ssl.SSLError, ConnectionResetError):
        return buf, None


def seq(argv):
    ca, host, port, sni = argv[:4]
    s = connect(ca, host, port, sni)
    rest = b""
    for req in argv[4:]:
        s.sendall(req.encode().decode("unicode_escape").encode("latin-1"))
        resp, rest = read_response(s, rest)
        sys.stdout.write(resp.decode("latin-1") + "\n")
        if rest is None:
            print("connection closed")
            return


def pieces(argv):
    ca, host, port, sni, auth, step, count = argv[:7]
    s = connect(ca, host, port, sni)
    rest, got = b"", b""
    for i in range(int(count)):
        a = i * int(step)
        s.sendall(("GET /range HTTP/1.1\r\nHost: %s:%s\r\n%s\r\nRange: bytes=%d-%d\r\n\r\n"
                   % (sni, port, auth, a, a + int(step) - 1)).encode())
        resp, rest = read_response(s, rest)
        if rest is None:
            print("connection closed")
            break
        head, _, body = resp.partition(b"\r\n\r\n")
        print(head.split(b"\r\n")[0].decode())
        got += body
    print("together: " + got.decode("latin-1"))


def find_leak(text, values):
    """Where text holds 8 bytes of one of values in a form a reflecting
    server could have hidden it in (a description), or None. Also used by
    tests/escape/vault_diff.py."""
    # base64 wrapped in lines (MIME, PEM) is read with the breaks taken out
    forms = [text, re.sub(rb"[\r\n]+", b"", text)]
    for m in re.finditer(rb"\x1f\x8b", text):
        try:
            forms.append(zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(text[m.start():]))
        except zlib.error:
            pass
    more = []
    for f in forms:
        t = f.decode("latin-1")
        t = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), t)
        t = t.replace("\\/", "/").replace('\\"', '"').replace("\\\\", "\\")
        t = urllib.parse.unquote(t)
        t = html.unescape(t)
        more.append(t.encode("latin-1", "replace"))
    for f in list(more):
        for run in re.findall(rb"[A-Za-z0-9+/_-]{8,}", f):
            for shift in range(4):
                r = run[shift:].replace(b"-", b"+").replace(b"_", b"/")
                r = r[:len(r) // 4 * 4]
                try:
                    more.append(base64.b64decode(r))
                except ValueError:
                    pass
    for v in values:
        vb = v.encode()
        for i in range(len(vb) - 7):
            for f in forms + more:
                if vb[i:i + 8] in f:
                    return "%d bytes at %d of a value" % (8, i)
    return None


def leak(argv):
    r = find_leak(sys.stdin.buffer.read(), argv)
    print("LEAK of " + r if r else "no leak")


if __name__ == "__main__":
    {"raw": raw, "ws": ws, "seq": seq, "pieces": pieces, "leak": leak, "trickle": trickle}[sys.argv[1]](sys.argv[2:])
