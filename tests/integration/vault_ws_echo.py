#!/usr/bin/env python3
r"""WebSocket echo server behind TLS for the vault's tests (standard library
only). Logs the Authorization header of each upgrade request to LOG; echoes
every message; answers the message "whoami" with that header (a reflecting
endpoint). Plain HTTP/1.1 requests (keep-alive) get hostile reflecting
endpoints (tests/escape/vault.sh), each answering with the request's
Authorization and X-Api-Auth headers as JSON:
  /reflect[?esc=solidus]  this request's ("solidus": '/' written '\/', as PHP does)
  /last[?esc=solidus]     the previous request's, whatever connection it came on
  /range                  honours Range (206 with the slice asked for)
  /partial                a 206 whatever was asked
  /gzip                   gzip-compressed, whatever Accept-Encoding said
  /badname                a header named after the Bearer token, with a bad value
  /forms?form=NAME        the request's X-Forms-Auth value written in the form NAME
                          (FORMS below: JSON, PHP's \/, \u escapes, percent-encoding,
                          base64/base64url with and without padding, wrapped in lines
                          inside a longer blob, HTML references)
The log line of a plain request names its target, credentials and Host.
Usage: vault_ws_echo.py ADDR PORT CERT KEY LOG"""
import base64, gzip, hashlib, html, json, socket, ssl, struct, sys, threading
import urllib.parse

LAST = {"authorization": "-", "x-api-auth": "-"}

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _each(v, f):
    return "".join(c if c.isalnum() else f(c) for c in v)


def _b64(v, url=False, pad=True):
    e = (base64.urlsafe_b64encode if url else base64.b64encode)(v.encode()).decode()
    return e if pad else e.rstrip("=")


def _lines(e, cols, sep):
    return sep.join(e[i:i + cols] for i in range(0, len(e), cols))


# How servers write a value they reflect (tests/escape/vault_edges.sh).
FORMS = {
    "raw": lambda v: v,
    "json": lambda v: json.dumps(v),
    "php_json": lambda v: json.dumps(v).replace("/", "\\/"),
    "json_u_lower": lambda v: _each(v, lambda c: "\\u%04x" % ord(c)),
    "json_u_upper": lambda v: _each(v, lambda c: "\\u%04X" % ord(c)),
    "percent_lower": lambda v: _each(v, lambda c: "%%%02x" % ord(c)),
    "percent_upper": lambda v: urllib.parse.quote(v, safe=""),
    "base64": lambda v: _b64(v),
    "base64_nopad": lambda v: _b64(v, pad=False),
    "base64url": lambda v: _b64(v, url=True),
    "base64url_nopad": lambda v: _b64(v, url=True, pad=False),
    "base64_php_json": lambda v: json.dumps(_b64(v)).replace("/", "\\/"),
    "base64_percent": lambda v: urllib.parse.quote(_b64(v), safe=""),
    # in a longer blob, wrapped so that a line break falls inside the value's
    # part: MIME (76 columns, LF), PEM in PHP's JSON (64, CRLF escaped)
    "base64_mime": lambda v: base64.encodebytes(("x" * 40 + v).encode()).decode(),
    "base64_pem_json": lambda v: json.dumps(_lines(_b64("y" * 21 + v), 64, "\r\n")).replace(
        "/", "\\/"),
    "html_named": lambda v: html.escape(v),
    "html_decimal": lambda v: _each(v, lambda c: "&#%d;" % ord(c)),
    "html_hex": lambda v: _each(v, lambda c: "&#x%X;" % ord(c)),
}


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def read_frame(s):
    h = recv_exact(s, 2)
    fin, op, n = h[0] & 0x80, h[0] & 0x0F, h[1] & 0x7F
    if n == 126:
        n = struct.unpack("!H", recv_exact(s, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", recv_exact(s, 8))[0]
    mask = recv_exact(s, 4) if h[1] & 0x80 else b"\0\0\0\0"
    p = bytearray(recv_exact(s, n))
    for i in range(n):
        p[i] ^= mask[i % 4]
    return fin, op, bytes(p)


def send_frame(s, op, p):
    n = len(p)
    h = bytes([0x80 | op])
    if n < 126:
        h += bytes([n])
    elif n < 65536:
        h += bytes([126]) + struct.pack("!H", n)
    else:
        h += bytes([127]) + struct.pack("!Q", n)
    s.sendall(h + p)


def serve(conn, log):
    try:
        head = b""
        while b"\r\n\r\n" not in head:
            c = conn.recv(4096)
            if not c:
                return
            head += c
        lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")
        hdrs = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        if "sec-websocket-key" not in hdrs:
            return http(conn, head, log)
        auth = hdrs.get("authorization", "-")
        with open(log, "a") as f:
            f.write("upgrade auth=%s ext=%s\n" % (auth, hdrs.get("sec-websocket-extensions", "-")))
        acc = base64.b64encode(hashlib.sha1((hdrs["sec-websocket-key"] + GUID).encode()).digest())
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
        msg, mop = b"", 0
        while True:
            fin, op, p = read_frame(conn)
            if op == 8:
                send_frame(conn, 8, p)
                return
            if op == 9:
                send_frame(conn, 10, p)
                continue
            if op in (1, 2):
                mop, msg = op, p
            else:
                msg += p
            if not fin:
                continue
            with open(log, "a") as f:
                f.write("message %s\n" % msg.decode(errors="replace"))
            if msg == b"whoami":
                # reflect the credential, split over two fragments
                r = ("auth=" + auth).encode()
                conn.sendall(bytes([0x01, len(r[:10])]) + r[:10])
                conn.sendall(bytes([0x80, len(r[10:])]) + r[10:])
            else:
                send_frame(conn, mop, msg)
    except (EOFError, OSError, KeyError, ValueError):
        pass
    finally:
        conn.close()


def http(conn, buf, log):
    """Plain requests, one after the other on the connection (no bodies)."""
    global LAST
    while True:
        while b"\r\n\r\n" not in buf:
            c = conn.recv(4096)
            if not c:
                return
            buf += c
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        target = lines[0].split(" ")[1]
        path, _, query = target.partition("?")
        hdrs = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        mine = {k: hdrs.get(k, "-") for k in ("authorization", "x-api-auth")}
        with open(log, "a") as f:
            f.write("http %s %s auth=%s x-api-auth=%s range=%s host=%s\n" % (
                lines[0].split(" ")[0], target, mine["authorization"], mine["x-api-auth"],
                hdrs.get("range", "-"), hdrs.get("host", "-")))
        shown = LAST if path == "/last" else mine
        LAST = mine
        body = json.dumps(shown).encode()
        if "esc=solidus" in query:
            body = body.replace(b"/", b"\\/")
        status, extra = "200 OK", ""
        if path == "/gzip":
            body = gzip.compress(body)
            extra = "Content-Encoding: gzip\r\n"
        elif path == "/partial":
            status, extra = "206 Partial Content", "Content-Range: bytes 0-%d/%d\r\n" % (
                len(body) - 1, len(body))
        elif path == "/range" and hdrs.get("range", "").startswith("bytes="):
            a, b = (int(x) for x in hdrs["range"][6:].split("-"))
            n = len(body)
            body = body[a:b + 1]
            status = "206 Partial Content"
            extra = "Content-Range: bytes %d-%d/%d\r\n" % (a, a + len(body) - 1, n)
        elif path == "/forms":
            form = urllib.parse.parse_qs(query).get("form", ["raw"])[0]
            body = ("<%s>" % FORMS[form](hdrs.get("x-forms-auth", "-"))).encode()
        elif path == "/badname":
            tok = mine["authorization"].split(" ")[-1]
            extra = "%s: a\x01b\r\n" % tok
        conn.sendall(("HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n" % (
            status, len(body), extra)).encode("latin-1") + body)


def main():
    addr, port, cert, key, log = sys.argv[1:6]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, int(port)))
    ls.listen(16)
    ls.settimeout(120)  # stops by itself if the test forgot it
    while True:
        try:
            c, _ = ls.accept()
        except socket.timeout:
            return
        try:
            c = ctx.wrap_socket(c, server_side=True)
        except (ssl.SSLError, OSError):
            continue
        threading.Thread(target=serve, args=(c, log), daemon=True).start()


main()
