#!/usr/bin/python3
r"""The vault's differential harness (tests/escape/vault_diff.sh): generated
HTTP/1.1 byte streams go from a sandbox through the real vault to an
upstream that records the raw bytes it received; a second HTTP/1.1 parser,
h11 (Debian's python3-h11), none of the vault's code, reads what the
upstream got and says whether the vault kept its promises.

  vault_diff.py serve ADDR PORT CERT KEY CONFIG DIR
      the upstream: records each connection's bytes (DIR/conn-N.bin, then
      DIR/conn-N.done once it ended), answers every request h11 reads with
      the request's header values and every secret value the request held,
      each in every encoding of FORMS (a hostile reflecting server), and a
      WebSocket upgrade with 101 and the same reflection in a message.
  vault_diff.py run CONFIG DIR SEED COUNT
      in a sandbox: COUNT cases from SEED, each on its own connection to
      the vault, then the checks below; shrinks a failing case to a minimal
      reproducer and prints it. Prints "kind CHECK: N" and "open CHECK: N"
      (violations of a hole known open, PC_DIFF_OPEN: "CHECK" or
      "leak=FORM,FORM", ";"-separated) for each check, then
      "cases: N, violations: N". PC_DIFF_CASES=N,N: only those cases of
      the seed, every violation of each shrunk.

CONFIG (JSON, written by vault_diff.sh): the vault's address, the CA file,
the log command, and every secret of the store (name, value, placeholder,
header, format, whether it is bound to this upstream's host:port).

What a case is: 1-3 pipelined requests (methods in odd case, overrides,
targets, Host spellings, headers duplicated and oddly spaced, every
Content-Length/Transfer-Encoding combination, chunks with extensions and
trailers, bodies), or a WebSocket upgrade and messages; placeholders put
anywhere (the bound header, other headers, target, body, chunk
extensions, trailers, messages), in any form (exact, upper case, the
prefix in another case, percent-encoded in either hex case), whole or
split across chunks and messages; the stream cut into TLS records
anywhere.

The checks (the oracle: h11 on what the upstream received, the vault's log
through the portcullis CLI, the bytes the sandbox received):
  secret-place   a secret value appears only in its bound header, exactly
                 as its format says, in a request whose method is a
                 standard one as spelled, whose target is origin-form and
                 whose Host is the bound host (and port), with no method
                 override header; nowhere else in the bytes
  placeholder    no placeholder of the store reached the upstream: not in
                 the bytes, nor percent-decoded, nor case-folded, nor in a
                 chunked body put together, nor across WebSocket messages
  refused        nothing of a request the vault refused reached the upstream
  h11            h11 read the upstream's bytes without an error, and every
                 request in them is one the sandbox sent (its X-Case tag)
  recorded       every refusal the sandbox got is in the log (its source
                 port, status and reason)
  leak           the sandbox received no form of any secret value
Secrets are never printed: a violation names the secret, not its value.
Needs /usr/bin/python3 (with python3-h11), not a python3 without h11."""
import base64
import hashlib
import html
import json
import os
import random
import re
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.parse

import h11

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vault_client import find_leak  # noqa: E402

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
STANDARD = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"}
KINDS = ("h11", "placeholder", "refused", "secret-place", "format", "recorded", "leak")
OVERRIDES = {"x-http-method-override", "x-http-method", "x-method-override"}


# ---- encodings: how a reflecting server writes a value -------------------------
def _each(v, f):
    return "".join(c if c.isalnum() else f(c) for c in v)


def _b64(v, url=False, pad=True, wrap=0):
    e = (base64.urlsafe_b64encode if url else base64.b64encode)(v.encode()).decode()
    e = e if pad else e.rstrip("=")
    if wrap:
        e = ("\n" if url else "\r\n").join(e[i:i + wrap] for i in range(0, len(e), wrap))
    return e


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
    # a document that holds the value, base64 in MIME's 76-column lines
    # (and base64url in PEM's 64, unpadded): the value crosses a line break
    "base64_mime": lambda v: _b64("-" * 40 + v + "-" * 20, wrap=76),
    "base64url_pem_nopad": lambda v: _b64("-" * 30 + v + "-" * 20, url=True, pad=False, wrap=64),
    "base64_php_json": lambda v: json.dumps(_b64(v)).replace("/", "\\/"),
    "base64_percent": lambda v: urllib.parse.quote(_b64(v), safe=""),
    "html_named": lambda v: html.escape(v),
    "html_decimal": lambda v: _each(v, lambda c: "&#%d;" % ord(c)),
    "html_hex": lambda v: _each(v, lambda c: "&#x%X;" % ord(c)),
    "html_hex_lower": lambda v: _each(v, lambda c: "&#x%x;" % ord(c)),
}


def basic_decoded(value):
    """The credentials of a Basic header value, or None."""
    m = re.match(r"(?i)basic[ \t]+([A-Za-z0-9+/=]+)\s*$", value)
    if not m:
        return None
    try:
        return base64.b64decode(m.group(1), validate=True).decode("latin-1")
    except ValueError:
        return None


def reflection(values, headers):
    """The body of the hostile upstream's answer."""
    out = []
    for n, v in headers:
        out.append("%s: %s %s" % (n, v, json.dumps(v)))
    for v in values:
        for name, f in FORMS.items():
            out.append("%s=<%s>" % (name, f(v)))
    return ("\n".join(out) + "\n").encode("latin-1", "replace")


def secrets_in(cfg, data):
    """The secret values data holds, raw or in a Basic credential."""
    text = data.decode("latin-1")
    found = []
    for s in cfg["secrets"]:
        v = s["value"]
        if v in text:
            found.append(v)
            continue
        for m in re.finditer(r"(?i)basic[ \t]+([A-Za-z0-9+/=]+)", text):
            d = basic_decoded(m.group(0))
            if d and v in d:
                found.append(v)
                break
    return found


# ---- the upstream ---------------------------------------------------------------
def ws_frame(op, payload, mask=None):
    n = len(payload)
    h = bytes([0x80 | op])
    mbit = 0x80 if mask else 0
    if n < 126:
        h += bytes([mbit | n])
    elif n < 65536:
        h += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        h += bytes([mbit | 127]) + struct.pack("!Q", n)
    if mask:
        return h + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return h + payload


def serve(argv):
    addr, port, cert, key, cfgpath, outdir = argv[:6]
    with open(cfgpath) as f:
        cfg = json.load(f)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, int(port)))
    ls.listen(64)
    ls.settimeout(600)  # stops by itself if the test forgot it
    n = 0
    while True:
        try:
            c, _ = ls.accept()
        except socket.timeout:
            return
        n += 1
        base = os.path.join(outdir, "conn-%06d" % n)
        open(base + ".bin", "wb").close()
        threading.Thread(target=serve_conn, args=(ctx, cfg, c, base), daemon=True).start()


def serve_conn(ctx, cfg, raw, base):
    rec = open(base + ".bin", "ab")
    try:
        raw.settimeout(20)
        c = ctx.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):
        rec.close()
        open(base + ".done", "w").close()
        return
    h = h11.Connection(h11.SERVER)
    req, body = None, b""
    try:
        while True:
            ev = h.next_event()
            if ev is h11.NEED_DATA:
                d = c.recv(65536)
                rec.write(d)
                rec.flush()
                h.receive_data(d)
                continue
            if isinstance(ev, h11.Request):
                req, body = ev, b""
            elif isinstance(ev, h11.Data):
                body += ev.data
            elif ev is h11.PAUSED or isinstance(ev, h11.EndOfMessage):
                if ev is not h11.PAUSED and h.their_state is h11.MIGHT_SWITCH_PROTOCOL:
                    continue
                hdrs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in req.headers]
                raw_req = b"".join(k + b": " + v + b"\n" for k, v in req.headers) + req.target + body
                vals = secrets_in(cfg, raw_req)
                wskey = dict(hdrs).get("sec-websocket-key")
                if h.their_state is h11.MIGHT_SWITCH_PROTOCOL and wskey:
                    acc = base64.b64encode(hashlib.sha1((wskey + GUID).encode()).digest())
                    c.sendall(h.send(h11.InformationalResponse(status_code=101, headers=[
                        ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                        ("Sec-WebSocket-Accept", acc)])))
                    c.sendall(ws_frame(1, reflection(vals, hdrs)))
                    while True:  # the messages: recorded, checked by the oracle
                        d = c.recv(65536)
                        if not d:
                            break
                        rec.write(d)
                        rec.flush()
                    break
                out = reflection(vals, hdrs)
                c.sendall(h.send(h11.Response(status_code=200, headers=[
                    ("Content-Length", str(len(out)))])))
                if req.method != b"HEAD":
                    c.sendall(h.send(h11.Data(data=out)))
                c.sendall(h.send(h11.EndOfMessage()))
                if h.our_state is h11.MUST_CLOSE:
                    break
                h.start_next_cycle()
            elif isinstance(ev, h11.ConnectionClosed):
                break
    except h11.RemoteProtocolError:
        try:
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        except OSError:
            pass
    except (OSError, ssl.SSLError, h11.LocalProtocolError):
        pass
    finally:
        rec.close()
        try:
            c.close()
        except OSError:
            pass
        open(base + ".done", "w").close()


# ---- the generator -----------------------------------------------------------------
class Gen:
    """One case from a seed: a structure (so that it can be shrunk) that
    renders to the bytes sent."""

    def __init__(self, cfg, rng):
        self.cfg, self.r = cfg, rng
        self.bound = [s for s in cfg["secrets"] if s["bound_here"]]
        self.phs = [s["placeholder"] for s in cfg["secrets"]]
        # a clean case (only what the vault must let through, a credential
        # in its place) gets reflections back: the scrubbing's cases
        self.clean = rng.random() < 0.4

    def ph_form(self, ph):
        r = self.r
        k = r.random()
        if k < 0.5:
            return ph
        if k < 0.6:
            return ph.upper()
        if k < 0.7:
            return "".join(c.upper() if r.random() < 0.5 else c for c in ph[:5]) + ph[5:]
        step = r.choice([1, 2, 3, 7, len(ph)])
        fmt = r.choice(["%%%02x", "%%%02X"])
        start = r.randrange(len(ph))
        return "".join(fmt % ord(c) if (i - start) % step == 0 else c for i, c in enumerate(ph))

    def any_ph(self):
        return self.ph_form(self.r.choice(self.phs))

    def text(self, ph_p=0.2):
        r = self.r
        ph_p = 0 if self.clean else ph_p
        words = ["a", "x=1", "q", "hello", "pcph_", "pcph_X", "%70", "/", "+", "==", " ", "&b=2"]
        s = "".join(r.choice(words) for _ in range(r.randrange(0, 6)))
        if r.random() < ph_p:
            i = r.randrange(len(s) + 1)
            s = s[:i] + self.any_ph() + s[i:]
        return s

    def cred(self):
        """A credential header: usually right, sometimes in another header,
        format, case or wrapper."""
        r = self.r
        s = r.choice(self.bound) if r.random() < 0.85 else r.choice(self.cfg["secrets"])
        ph = s["placeholder"]
        k = r.random()
        name = s["header"]
        if self.clean:
            s = r.choice(self.bound)
            return [s["header"], r.choice([": ", ":", ": "]), s["format"].replace("{secret}", s["placeholder"])]
        if r.random() < 0.15:
            name = name.lower() if r.random() < 0.5 else name.upper()
        if r.random() < 0.1:
            name = r.choice([h["header"] for h in self.bound] + ["X-Other", "Cookie"])
        if k < 0.55:
            val = s["format"].replace("{secret}", ph)
        elif k < 0.65:
            val = ph
        elif k < 0.75:
            val = "Basic " + base64.b64encode(("u:" + ph).encode()).decode()
        elif k < 0.82:
            val = "Bearer " + ph
        elif k < 0.88:
            val = s["format"].replace("{secret}", ph) + " " + self.any_ph()
        elif k < 0.94:
            val = s["format"].replace("{secret}", self.ph_form(ph))
        else:
            val = "x " + ph + " y"
        return [name, r.choice([": ", ":", ":  ", ":\t", ": "]), val + r.choice(["", "", " ", "\t"])]

    def method(self):
        r = self.r
        k = r.random()
        if k < 0.7 or self.clean:
            return r.choice(["GET", "GET", "POST", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
        return r.choice(["get", "Get", "post", "TRACE", "trace", "TRACK", "CONNECT", "connect",
                         "PROPFIND", "head", "PURGE", "G ET"])

    def target(self):
        r = self.r
        k = r.random()
        path = r.choice(["/", "/r", "/a/b", "/r;x", "/%2e%2e/r"])
        if k < 0.6 or self.clean:
            return path
        if k < 0.75:
            return path + "?q=" + self.text(0.6).replace(" ", "+")
        if k < 0.85:
            return path + "/" + self.any_ph()
        return r.choice(["*", "https://api.github.test:8444/r", "//paste.evil.test/r",
                         "api.github.test:8444", "/r#f", "/r?" + self.any_ph()])

    def host(self):
        r = self.r
        k = r.random()
        if k < 0.6:
            return [["Host", ": ", "api.github.test:8444"]]
        if k < 0.85 or self.clean:
            return [["Host", r.choice([": ", ":", ":\t"]), r.choice([
                "api.github.test", "API.github.test:8444", "api.github.test.:08444",
                "Api.GitHub.Test.:8444", "api.github.test:008444 "])]]
        return r.choice([[], [["Host", ": ", "paste.evil.test"]], [["Host", ": ", "api.github.test:443"]],
                         [["Host", ": ", "api.github.test:8444"], ["Host", ": ", "api.github.test:8444"]],
                         [["host", ": ", "api.github.test:8444"]],
                         [["Host", ": ", "api.github.test:8444, paste.evil.test"]]])

    def chunks(self, data):
        """data cut into chunks (sizes written oddly, extensions)."""
        r = self.r
        out = []
        i = 0
        while i < len(data):
            n = 1 if r.random() < 0.25 else r.randrange(1, max(2, len(data) - i + 1))
            out.append([r.choice(["", "", "", "0", "00"]), r.random() < 0.3,
                        "" if self.clean else r.choice(["", "", "", ";a=b", ";x", " ;y=\"z\"", ";" + self.any_ph()]),
                        data[i:i + n]])
            i += n
        return out

    def body(self):
        """(headers, body structure)"""
        r = self.r
        k = r.random()
        data = self.text(0.4)
        if r.random() < 0.3 and not self.clean:  # a placeholder at the very end (finding 1)
            data += self.any_ph()
        if k < 0.45:
            return [], {"kind": "none"}
        if k < 0.7:
            return [["Content-Length", ": ", "\0CL"]], {"kind": "cl", "data": data}
        if k < 0.92 or self.clean:
            trailers = []
            if r.random() < 0.15 and not self.clean:
                trailers = [["X-T", ": ", self.text(0.5)]]
            return ([["Transfer-Encoding", r.choice([": ", ":"]), r.choice(["chunked"] * 6 + ["Chunked", "chunked ", " chunked"])]],
                    {"kind": "chunked", "chunks": self.chunks(data), "trailers": trailers})
        odd = r.choice([
            [["Content-Length", ": ", "\0CL"], ["Transfer-Encoding", ": ", "chunked"]],
            [["Content-Length", ": ", "\0CL"], ["Content-Length", ": ", "\0CL"]],
            [["Content-Length", ": ", "\0CL, \0CL"]],
            [["Transfer-Encoding", ": ", "chunked, identity"]],
            [["Transfer-Encoding", ": ", "chunked"], ["Transfer-Encoding", ": ", "chunked"]],
            [["Transfer-Encoding", ": ", "identity"]],
            [["Content-Length", ": ", "+\0CL"]],
        ])
        kind = "chunked" if any(h[0] == "Transfer-Encoding" and h[2].startswith("chunked") for h in odd) else "cl"
        if kind == "chunked":
            return odd, {"kind": "chunked", "chunks": self.chunks(data), "trailers": []}
        return odd, {"kind": "cl", "data": data}

    def request(self, case_id, idx):
        r = self.r
        hdrs = self.host()
        hdrs.append(["X-Case", ": ", "%s.%d" % (case_id, idx)])
        if r.random() < 0.75:
            hdrs.append(self.cred())
        if r.random() < 0.1:
            hdrs.append(self.cred())
        for _ in range(r.randrange(0, 3)):
            hdrs.append([r.choice(["X-Note", "Accept", "User-Agent", "X-Note", "Cookie"]),
                         r.choice([": ", ":", ":   "]), self.text(0.25)])
        if r.random() < 0.06 and not self.clean:
            hdrs.append([r.choice(["X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"]),
                         ": ", r.choice(["TRACE", "DELETE", "trace"])])
        if r.random() < 0.05 and not self.clean:
            hdrs.append(["X-" + self.any_ph(), ": ", "1"])
        if r.random() < 0.05 and not self.clean:
            hdrs.append(["X-Fold", ": ", "a\r\n b"])
        bh, body = self.body()
        hdrs += bh
        r.shuffle(hdrs)
        if r.random() < 0.2:
            hdrs.append(["Connection", ": ", r.choice(["close", "keep-alive"])])
        version = "HTTP/1.1" if r.random() < 0.95 or self.clean else r.choice(["HTTP/1.0", "HTTP/1.2", "HTTP/2.0"])
        return {"method": self.method(), "target": self.target(), "version": version,
                "headers": hdrs, "body": body}

    def ws_request(self, case_id):
        key = base64.b64encode(bytes(self.r.randrange(256) for _ in range(16))).decode()
        hdrs = [["Host", ": ", "api.github.test:8444"], ["X-Case", ": ", "%s.0" % case_id],
                ["Upgrade", ": ", "websocket"], ["Connection", ": ", "Upgrade"],
                ["Sec-WebSocket-Key", ": ", key], ["Sec-WebSocket-Version", ": ", "13"]]
        if self.r.random() < 0.7:
            hdrs.append(self.cred())
        return {"method": "GET", "target": "/ws", "version": "HTTP/1.1", "headers": hdrs,
                "body": {"kind": "none"}}

    def ws_messages(self):
        """Messages, each a list of [opcode, payload] fragments; a
        placeholder sometimes cut between two messages (finding 5)."""
        r = self.r
        texts = [self.text(0.3) or "m" for _ in range(r.randrange(1, 4))]
        if r.random() < 0.35 and not self.clean:
            ph = self.any_ph()
            cut = r.randrange(1, len(ph))
            texts[-1] += ph[:cut]
            texts.append(ph[cut:] + "z")
        msgs = []
        for t in texts:
            if r.random() < 0.3 and len(t) > 1:
                c = r.randrange(1, len(t))
                msgs.append([[1, t[:c]], [0, t[c:]]])
            else:
                msgs.append([[1, t]])
            if r.random() < 0.1:
                msgs.append([[9, "p"]])
        msgs.append([[1, "after"]])
        return msgs

    def case(self, case_id):
        r = self.r
        if r.random() < 0.12:
            c = {"id": case_id, "ws": True, "requests": [self.ws_request(case_id)],
                 "messages": self.ws_messages()}
        else:
            n = 1 if r.random() < 0.7 else r.randrange(2, 4)
            c = {"id": case_id, "ws": False, "requests": [self.request(case_id, i) for i in range(n)]}
        total = len(render(c))
        cuts = set()
        for _ in range(r.randrange(0, 5)):
            cuts.add(r.randrange(1, max(2, total)))
        if r.random() < 0.15:  # a run of 1-byte records
            a = r.randrange(0, total)
            cuts.update(range(a, min(total, a + r.randrange(2, 60))))
        c["cuts"] = sorted(x for x in cuts if 0 < x < total)
        return c


def render_body(b):
    if b["kind"] == "none":
        return b""
    if b["kind"] == "cl":
        return b["data"].encode("latin-1")
    out = b""
    for zeros, upper, ext, data in b["chunks"]:
        d = data.encode("latin-1")
        size = zeros + ("%X" if upper else "%x") % len(d)
        out += size.encode() + ext.encode("latin-1") + b"\r\n" + d + b"\r\n"
    out += b"0\r\n"
    for n, sep, v in b.get("trailers", []):
        out += (n + sep + v + "\r\n").encode("latin-1")
    return out + b"\r\n"


def body_len(b):
    return len(b["data"].encode("latin-1")) if b["kind"] == "cl" else 0


def render_request(q):
    body = render_body(q["body"])
    n = str(body_len(q["body"]))
    head = "%s %s %s\r\n" % (q["method"], q["target"], q["version"])
    for name, sep, v in q["headers"]:
        head += name + sep + v.replace("\0CL", n) + "\r\n"
    return head.encode("latin-1") + b"\r\n" + body


def render(c):
    return b"".join(render_request(q) for q in c["requests"])


def render_messages(c, rng):
    out = b""
    for msg in c["messages"]:
        for i, (op, p) in enumerate(msg):
            fin = i == len(msg) - 1
            f = ws_frame(op, p.encode("latin-1"), mask=bytes(rng.randrange(256) for _ in range(4)))
            if not fin:
                f = bytes([f[0] & 0x7F]) + f[1:]
            out += f
    return out


def pieces(data, cuts):
    prev = 0
    for x in cuts + [len(data)]:
        if prev < x <= len(data):
            yield data[prev:x]
            prev = x


# ---- the client ---------------------------------------------------------------------
def read_responses(s, expect, heads):
    """Responses read from s: (list of (status, headers dict, body), all
    bytes received). Stops at EOF, after `expect` final responses, or when
    nothing came for a while."""
    buf, got, allb = b"", [], b""

    def more():
        nonlocal buf, allb
        d = s.recv(65536)
        if not d:
            raise EOFError
        buf += d
        allb += d

    try:
        while len(got) < expect:
            while b"\r\n\r\n" not in buf:
                more()
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            st = int(lines[0].split(" ")[1])
            hd = {}
            for l in lines[1:]:
                k, _, v = l.partition(":")
                hd[k.strip().lower()] = v.strip()
            if 100 <= st < 200 and st != 101:
                continue
            body = b""
            if st == 101 or heads[len(got)] or st in (204, 304):
                pass
            elif "content-length" in hd:
                n = int(hd["content-length"])
                while len(buf) < n:
                    more()
                body, buf = buf[:n], buf[n:]
            elif hd.get("transfer-encoding", "").lower() == "chunked":
                while True:
                    while b"\r\n" not in buf:
                        more()
                    line, buf = buf.split(b"\r\n", 1)
                    n = int(line.split(b";")[0], 16)
                    while len(buf) < n + 2:
                        more()
                    body, buf = body + buf[:n], buf[n + 2:]
                    if n == 0:
                        break
            else:
                try:
                    while True:
                        more()
                except EOFError:
                    pass
                body, buf = buf, b""
            got.append((st, hd, body))
            if st == 101 or hd.get("connection", "").lower() == "close":
                break
    except (EOFError, socket.timeout, ssl.SSLError, OSError, ValueError, IndexError):
        pass
    return got, allb


def send_case(cfg, c):
    """One case through the vault: what the sandbox saw."""
    res = {"sport": None, "responses": [], "received": b"", "error": None}
    ctx = ssl.create_default_context(cafile=cfg["ca"])
    try:
        raw = socket.create_connection((cfg["addr"], cfg["port"]), timeout=5)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        res["sport"] = raw.getsockname()[1]
        s = ctx.wrap_socket(raw, server_hostname=cfg["sni"])
    except (ssl.SSLError, OSError) as e:
        res["error"] = "connect: %s" % type(e).__name__
        return res
    s.settimeout(1.2)
    data = render(c)
    try:
        for p in pieces(data, c["cuts"]):
            s.sendall(p)  # one TLS record each
    except OSError:
        pass
    heads = [q["method"] == "HEAD" for q in c["requests"]] + [False] * 4
    got, allb = read_responses(s, len(c["requests"]), heads)
    res["responses"], res["received"] = got, allb
    if c["ws"] and got and got[0][0] == 101:
        rng = random.Random(c["id"])
        try:
            s.sendall(render_messages(c, rng))
            while True:
                d = s.recv(65536)
                if not d:
                    break
                res["received"] += d
        except (OSError, socket.timeout, ssl.SSLError):
            pass
    try:
        s.close()
    except OSError:
        pass
    return res


def upstream_files(d):
    return sorted(f[:-4] for f in os.listdir(d) if f.endswith(".bin"))


def wait_upstream_done(d, deadline=5.0):
    t = time.monotonic() + deadline
    while time.monotonic() < t:
        if all(os.path.exists(os.path.join(d, b + ".done")) for b in upstream_files(d)):
            return True
        time.sleep(0.02)
    return False


# ---- the oracle ----------------------------------------------------------------------------
def h11_read(data):
    """What h11 makes of the bytes an upstream received: (requests, ws
    payloads, error). A request: method, target, headers, body, complete."""
    h = h11.Connection(h11.SERVER)
    reqs, ws, err = [], [], None
    h.receive_data(data)
    h.receive_data(b"")
    cur = None
    try:
        while True:
            ev = h.next_event()
            if ev is h11.NEED_DATA or isinstance(ev, h11.ConnectionClosed):
                break
            if isinstance(ev, h11.Request):
                cur = {"method": ev.method.decode("latin-1"), "target": ev.target.decode("latin-1"),
                       "headers": [(k.decode("latin-1"), v.decode("latin-1")) for k, v in ev.headers],
                       "body": b"", "trailers": [], "complete": False}
                reqs.append(cur)
            elif isinstance(ev, h11.Data):
                cur["body"] += ev.data
            elif ev is h11.PAUSED or isinstance(ev, h11.EndOfMessage):
                if isinstance(ev, h11.EndOfMessage):
                    cur["complete"] = True
                    cur["trailers"] = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in ev.headers]
                    if h.their_state is h11.MIGHT_SWITCH_PROTOCOL:
                        continue
                if h.their_state is h11.MIGHT_SWITCH_PROTOCOL:
                    h.send(h11.InformationalResponse(status_code=101, headers=[("Upgrade", "websocket")]))
                    ws = ws_messages(h.trailing_data[0])
                    break
                h.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
                h.send(h11.EndOfMessage())
                if h.our_state is h11.MUST_CLOSE:
                    break
                h.start_next_cycle()
    except h11.RemoteProtocolError as e:
        err = str(e)
    except h11.LocalProtocolError as e:
        err = "h11 local: %s" % e
    return reqs, ws, err


def ws_messages(data):
    """Client-to-server messages (unmasked, fragments put together)."""
    msgs, cur, i = [], b"", 0
    while i + 2 <= len(data):
        b0, b1 = data[i], data[i + 1]
        n, i = b1 & 0x7F, i + 2
        if n == 126:
            n, i = struct.unpack("!H", data[i:i + 2])[0], i + 2
        elif n == 127:
            n, i = struct.unpack("!Q", data[i:i + 8])[0], i + 8
        m = data[i:i + 4] if b1 & 0x80 else b"\0\0\0\0"
        i += 4 if b1 & 0x80 else 0
        p = bytes(x ^ m[j % 4] for j, x in enumerate(data[i:i + n]))
        i += n
        if (b0 & 0x0F) >= 8:
            continue
        cur += p
        if b0 & 0x80:
            msgs.append(cur)
            cur = b""
    if cur:
        msgs.append(cur)
    return msgs


def decoded_forms(data):
    """The forms of data an upstream or its application may read: as is,
    percent-decoded once, each case-folded."""
    t = data.decode("latin-1")
    d = urllib.parse.unquote(t, encoding="latin-1")
    return [t, d, t.lower(), d.lower()]


def check_case(cfg, c, res, conns, sandbox=True):
    """Violations of one case (a list of (check, text)); conns: the raw
    bytes of each upstream connection of the case."""
    v = []
    values = [s["value"] for s in cfg["secrets"] if s.get("random", True)]
    refused = [i for i, (st, hd, _) in enumerate(res["responses"]) if "x-portcullis-error" in hd]
    before_upstream = [i for i in refused if res["responses"][i][0] not in (502,)]
    for raw in conns:
        reqs, ws, err = h11_read(raw)
        first = [val for k, val in (reqs[0]["headers"] if reqs else []) if k == "x-case"]
        if first and not first[0].startswith(c["id"] + "."):
            continue  # another case's, late (a loaded machine): judged by none
        if err:
            v.append(("h11", "h11 refused what the vault forwarded: %s" % err))
        # placeholders, in every decoded form, in the bytes, bodies, messages
        # where: the most precise place first; the bytes as a whole last
        # (what is left there is chunk framing: h11 drops extensions)
        blobs = [("the request line", (q["method"] + " " + q["target"]).encode("latin-1")) for q in reqs] + \
            [("a header", ("%s: %s" % kv).encode("latin-1")) for q in reqs for kv in q["headers"]] + \
            [("a trailer", ("%s: %s" % kv).encode("latin-1")) for q in reqs for kv in q["trailers"]] + \
            [("a body put together", q["body"]) for q in reqs] + \
            [("a WebSocket message", m) for m in ws] + \
            [("the WebSocket messages put together", b"".join(ws)),
             ("the bytes h11 could not read" if err else "the chunk framing", raw)]
        hit = set()
        for where, blob in blobs:
            t, d = decoded_forms(blob)[:2]
            for s in cfg["secrets"]:
                ph = s["placeholder"]
                how = next((h for h, ok in (("as is", ph in t), ("case-folded", ph.lower() in t.lower()),
                                             ("percent-decoded", ph in d),
                                             ("percent-decoded, case-folded", ph.lower() in d.lower()))
                            if ok), None)
                if how and s["name"] not in hit:
                    hit.add(s["name"])
                    v.append(("placeholder", "%s's placeholder reached the upstream %s (%s)" % (
                        s["name"], how, where)))
        # every request is one the sandbox sent, and not one it was refused
        for q in reqs:
            tags = [val for k, val in q["headers"] if k == "x-case"]
            if len(tags) != 1 or not tags[0].startswith(c["id"] + "."):
                v.append(("h11", "the upstream read a request the sandbox did not send as one "
                          "(X-Case %r): %s %s" % (tags, q["method"], q["target"][:60])))
                continue
            idx = int(tags[0].rsplit(".", 1)[1])
            if before_upstream and idx >= before_upstream[0]:
                v.append(("refused", "request %d was refused (%d %s) yet reached the upstream" % (
                    idx, res["responses"][before_upstream[0]][0],
                    res["responses"][before_upstream[0]][1].get("x-portcullis-error", ""))))
        # secret values: only in the bound header, in its format, of an allowed request
        text = raw.decode("latin-1")
        for s in cfg["secrets"]:
            total = text.count(s["value"]) + sum(m.decode("latin-1").count(s["value"]) for m in ws)
            placed = 0
            for q in reqs:
                for where, fields in (("header", q["headers"]), ("trailer", q["trailers"])):
                    for k, val in fields:
                        d = basic_decoded(val)
                        inb = bool(d and s["value"] in d)
                        if not inb and s["value"] not in val:
                            continue
                        if where != "header" or k != s["header"].lower() or not s["bound_here"]:
                            v.append(("secret-place", "%s in %s %s%s" % (
                                s["name"], where, k, "" if s["bound_here"] else " (bound elsewhere)")))
                            continue
                        placed += val.count(s["value"])
                        if val != s["format"].replace("{secret}", s["value"]):
                            v.append(("format", "%s in %s as %s, not as its format %r" % (
                                s["name"], k, "a Basic credential" if inb else "another value",
                                s["format"])))
                        why = allowed_request(q, s)
                        if why:
                            v.append(("secret-place", "%s in a request h11 reads as not allowed: %s" % (
                                s["name"], why)))
                n = sum(1 for k, val in q["headers"] if k == s["header"].lower() and s["value"] in val)
                if n > 1:
                    v.append(("secret-place", "%s injected in %d headers of one request" % (s["name"], n)))
            if total > placed:
                v.append(("secret-place", "%s appears %d times in the upstream's bytes, %d of them in its header" % (
                    s["name"], total, placed)))
    # the sandbox: no form of any value
    if sandbox and find_leak(res["received"], values):
        # which of the upstream's reflections got through (each starts "FORM=<")
        parts = re.split(rb"\n(?=[a-z0-9_]+=<)", res["received"])
        forms = sorted({p.split(b"=<")[0].decode() for p in parts if b"=<" in p[:40] and find_leak(p, values)})
        v.append(("leak", "the sandbox received a form of a secret value (%s)" % (
            ", ".join(forms) or "not one reflection alone")))
    return v


def allowed_request(q, s):
    """Why h11's reading of the request does not allow the secret, or None."""
    if q["method"] not in STANDARD:
        return "method %r" % q["method"]
    if not q["target"].startswith("/") and \
            not (q["target"] == "*" and q["method"] == "OPTIONS"):
        return "target %r" % q["target"][:40]
    hosts = [val for k, val in q["headers"] if k == "host"]
    want = [cfg_host(s), cfg_host(s) + ":%d" % s["port"]]
    if len(hosts) != 1 or hosts[0] not in want:
        return "Host %r" % hosts
    if any(k in OVERRIDES for k, _ in q["headers"]):
        return "a method override header"
    return None


def cfg_host(s):
    return s["host"]


def log_records(cfg):
    out = subprocess.run(cfg["log_cmd"], capture_output=True, text=True).stdout
    recs = []
    for line in out.splitlines():
        try:
            recs.append(json.loads(line))
        except ValueError:
            pass
    return recs


def check_recorded(cfg, results, deadline=10.0):
    """Every refusal the sandbox got has its record: (case, text) list."""
    want = []
    for c, res in results:
        for st, hd, _ in res["responses"]:
            if "x-portcullis-error" in hd:
                want.append((c, res["sport"], st, hd["x-portcullis-error"]))
    t = time.monotonic() + deadline
    while True:
        by = {}
        for r in log_records(cfg):
            by.setdefault(r.get("source.port"), []).append(r)
        missing = []
        for c, sport, st, why in want:
            if not any(r.get("event.reason") == why and r.get("http.response.status_code") in (st, None)
                       for r in by.get(sport, [])):
                missing.append((c, "refusal %d %r (source port %s) is not in the log" % (st, why, sport)))
        if not missing or time.monotonic() > t:
            return missing, len(want)
        time.sleep(0.2)


# ---- shrinking ------------------------------------------------------------------------------
def variants(c):
    """Smaller cases: a request, a header, a chunk, a trailer, a message,
    a cut dropped; a body emptied."""
    import copy
    if len(c["cuts"]) > 1:
        for keep in ([], c["cuts"][:len(c["cuts"]) // 2], c["cuts"][len(c["cuts"]) // 2:]):
            d = copy.deepcopy(c)
            d["cuts"] = keep
            yield d
    for i in range(len(c["requests"])):
        if len(c["requests"]) > 1:
            d = copy.deepcopy(c)
            del d["requests"][i]
            yield d
    for i, q in enumerate(c["requests"]):
        for j, h in enumerate(q["headers"]):
            if h[0] in ("X-Case",):
                continue
            d = copy.deepcopy(c)
            del d["requests"][i]["headers"][j]
            yield d
        b = q["body"]
        if b["kind"] != "none":
            d = copy.deepcopy(c)
            d["requests"][i]["body"] = {"kind": "none"}
            yield d
        if b["kind"] == "chunked":
            for j in range(len(b["chunks"])):
                d = copy.deepcopy(c)
                del d["requests"][i]["body"]["chunks"][j]
                yield d
            for j in range(len(b["trailers"])):
                d = copy.deepcopy(c)
                del d["requests"][i]["body"]["trailers"][j]
                yield d
    for i in range(len(c.get("messages", [])) - 1):
        d = copy.deepcopy(c)
        del d["messages"][i]
        yield d
    for i in range(len(c["cuts"])):
        d = copy.deepcopy(c)
        del d["cuts"][i]
        yield d


def run_one(cfg, c, updir):
    before = set(upstream_files(updir))
    res = send_case(cfg, c)
    wait_upstream_done(updir)
    conns = []
    for b in upstream_files(updir):
        if b not in before:
            with open(os.path.join(updir, b + ".bin"), "rb") as f:
                conns.append(f.read())
    return res, conns


def vkey(kind, text):
    """What a violation is, for shrinking: its check and its words without
    numbers (a leak: its check alone, whatever the forms)."""
    return (kind,) if kind == "leak" else (kind, re.sub(r"[0-9]+", "", text))


def shrink(cfg, c, key, updir, budget=60):
    """The smallest variant that still has the violation key."""
    runs = 0
    progress = True
    while progress and runs < budget:
        progress = False
        for d in variants(c):
            runs += 1
            res, conns = run_one(cfg, d, updir)
            v = check_case(cfg, d, res, conns)
            if any(vkey(k, t) == key for k, t in v):
                c, progress = d, True
                break
            if runs >= budget:
                break
    return c, runs


def reproducer(c):
    data = render(c)
    lines = ["# minimal reproducer (case %s), TLS records:" % c["id"]]
    for p in pieces(data, c["cuts"]):
        lines.append("#   %r" % p)
    if c["ws"]:
        lines.append("# then WebSocket messages (fragments):")
        for m in c["messages"]:
            lines.append("#   %r" % [(op, p) for op, p in m])
    return "\n".join(lines)


def is_open(kind, text, spec):
    """Whether a violation is one of the holes known open (PC_DIFF_OPEN:
    "KIND" or "KIND=WHAT,WHAT", separated by ";"): with WHATs, only if
    everything the violation names in its closing parentheses is listed (a
    leak: the forms that got through; a placeholder: where it was)."""
    for e in filter(None, spec.split(";")):
        k, _, forms = e.partition("=")
        if k != kind:
            continue
        if not forms:
            return True
        m = re.search(r"\(([^()]*)\)$", text)
        got = set(m.group(1).split(", ")) if m else {"?"}
        if got <= set(forms.split(",")):
            return True
    return False


def run(argv):
    cfgpath, updir, seed, count = argv[0], argv[1], argv[2], int(argv[3])
    with open(cfgpath) as f:
        cfg = json.load(f)
    results, bad = [], []
    t0 = time.monotonic()
    # PC_DIFF_CASES=N,N...: only those cases of the seed, each violation
    # shrunk (a reproducer of each)
    only = [int(x) for x in os.environ.get("PC_DIFF_CASES", "").split(",") if x]
    for i in only or range(count):
        cid = "%s-%d" % (seed, i)
        c = Gen(cfg, random.Random(cid)).case(cid)
        res, conns = run_one(cfg, c, updir)
        results.append((c, res))
        v = check_case(cfg, c, res, conns)
        # a connection of an earlier case the vault opened late (a loaded
        # machine): judged with the case it carries the tag of
        late = {}
        for raw in conns:
            m = re.search(rb"\r\nx-case:[ \t]*([^\r\n]+-[0-9]+)\.[0-9]", raw, re.I)
            if m and m.group(1).decode() != cid:
                late.setdefault(m.group(1).decode(), []).append(raw)
        for oid, group in late.items():
            for oc, ores in results:
                if oc["id"] == oid:
                    ov = check_case(cfg, oc, ores, group, sandbox=False)
                    if ov:
                        bad.append((oc, ov))
        if v:
            bad.append((c, v))
    count = len(results)
    missing, nref = check_recorded(cfg, results)
    for c, why in missing:
        bad.append((c, [("recorded", why)]))
    print("# cases: %d (seed %s), refusals: %d, upstream connections: %d, %.1f s" % (
        count, seed, nref, len(upstream_files(updir)), time.monotonic() - t0))
    seen_kinds, shown = {}, set()
    for c, v in bad:
        kinds = sorted({k for k, _ in v})
        seen_kinds.setdefault(tuple(kinds), []).append(c["id"])
        # a reproducer of each violation not shown yet: the first of a case,
        # 8 in all (bounded time); with PC_DIFF_CASES every one
        for k, t in v:
            key = vkey(k, t)
            if key in shown or (len(shown) >= 8 and not only):
                continue
            shown.add(key)
            print("# VIOLATION in case %s: %s" % (c["id"], "; ".join(t for _, t in v)))
            if k != "recorded":
                small, runs = shrink(cfg, c, key, updir)
                v2 = check_case(cfg, small, *run_one(cfg, small, updir))
                print("# shrunk in %d runs to a case with: %s" % (
                    runs, "; ".join(t for k2, t in v2 if vkey(k2, t) == key) or "(no longer fails)"))
                print(reproducer(small))
            else:
                print(reproducer(c))
            if not only:
                break
    for key, ids in seen_kinds.items():
        print("# violations of %s: %d cases (%s)" % ("+".join(key), len(ids), " ".join(ids[:8])))
    spec = os.environ.get("PC_DIFF_OPEN", "")
    for kind in KINDS:
        mine = [v for _, v in bad if any(k == kind for k, _ in v)]
        known = [v for v in mine if all(is_open(k, t, spec) for k, t in v if k == kind)]
        rest = [v for v in mine if v not in known]
        if rest:
            print("# %s, not known open: %s" % (kind, " | ".join(
                "; ".join(t for k, t in v if k == kind) for v in rest[:4])))
        print("kind %s: %d" % (kind, len(mine) - len(known)))
        print("open %s: %d" % (kind, len(known)))
    print("cases: %d, violations: %d" % (count, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit({"serve": serve, "run": run}[sys.argv[1]](sys.argv[2:]) or 0)
