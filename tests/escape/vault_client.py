#!/usr/bin/env python3
# The escape suite's TLS client for attempts through the vault: sends bytes
# exactly as given (request smuggling shapes, odd Host headers, HTTP/2
# prefaces, WebSocket frames split to hide a placeholder), which curl will
# not. Standard library only. Prints the response head (and body) it got,
# or what went wrong; the shell test checks it.
#
#   vault_client.py raw  CA CONNECT_HOST PORT SNI REQUEST [--alpn h2]
#   vault_client.py ws   CA CONNECT_HOST PORT SNI AUTH_PLACEHOLDER MODE PAYLOAD
# REQUEST takes \r \n \t escapes. MODE: split (the payload's halves in a
# first frame and a continuation), ping (in a ping frame), text (whole).
import base64
import os
import socket
import ssl
import struct
import sys


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
    else:
        data = frame(1, p)
    try:
        s.sendall(data + frame(1, b"after"))
    except OSError as e:
        print("send failed:", type(e).__name__)
    got = read_all(s)
    print("received %d bytes after the upgrade" % len(got))
    print("echo of after: %s" % (b"after" in got))


if __name__ == "__main__":
    {"raw": raw, "ws": ws}[sys.argv[1]](sys.argv[2:])
