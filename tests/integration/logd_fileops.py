#!/usr/bin/env python3
"""The file-operations oracle of the log (issue 32, deliverable 6).

Run by tests/integration/logd_fileops.sh inside the gateway's network
namespace (the witness in a namespace of its own). Plays the log user, who
can write the log's directory but not the key: sequences of seeded
operations (truncate, delete, rename, copy back an earlier copy, edit the
sidecar or .witnessed, plant a file, rotate, kill -9 and start logd,
records appended through the real socket) against a real portcullis-logd
with a witness, and after each operation holds what verify and logd say to
its own model:

- protected: an acknowledged record that a checkpoint the witness returned
  a cosignature for covers. Records nothing cosigned yet may vanish: nobody
  but logd's own word vouches for them, and the log user can cut them.
- silent-loss: a protected record is gone or changed in the files verify
  is given, verify (with the witness key) says intact (exit 0) without
  naming it, and logd starts over those files. Either verify or logd must
  object.
- verify-lie: as silent-loss, but verify says "consistent with the
  witnessed checkpoint" over a .witnessed that is not what the witness
  returned (finding 5).
- fork: the witness cosigned two trees of one key: two roots for one size
  of an origin, a larger tree that does not extend a smaller one of its
  origin, or one seq covered by the trees of two origins (a rollback
  followed by growth).

Every cosigned checkpoint is seen on the wire: logd talks to the witness
through a recording proxy of this program. A sequence with a violation is
shrunk (operations dropped while the same kind of violation remains) and
printed as it replays.

usage: logd_fileops.py CONFIG.json SEED COUNT
"""

import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

CFG = json.load(open(sys.argv[1]))
BIN = CFG["bin"]  # portcullis-logd, portcullis, logd_client
WNS = CFG["wns"]
WADDR = CFG["waddr"]  # the witness, in WNS
PADDR = CFG["paddr"]  # the recording proxy, here
TOP = CFG["dir"]
LOGKEY = CFG["logkey_pub"]
WKEY = CFG["wkey"]
OPEN = set(k for k in os.environ.get("PC_FILEOPS_OPEN", "").split(";") if k)
SHRINK_OPEN = os.environ.get("PC_FILEOPS_SHRINK_OPEN") == "1"
LOGUSER = pwd.getpwnam(CFG.get("log_user", "portcullis-log"))
KINDS = ("fork", "silent-loss", "verify-lie")
LOG = "verdicts.jsonl"
SIDE = LOG + ".checkpoint"
WIT = LOG + ".witnessed"
PLANT = LOG + ".planted"
WCOS = "\u2014 " + open(WKEY).read().split("+")[0] + " "  # a line of the witness's cosignature
DEADLINE = float(os.environ.get("PC_FILEOPS_WAIT", "4"))


def say(*a):
    print(*a, flush=True)


# --- the recording proxy ---------------------------------------------------


class Proxy:
    """Forwards logd's add-checkpoint requests to the witness and keeps
    each (checkpoint, status, cosignature lines) it saw."""

    def __init__(self):
        self.lock = threading.Lock()
        self.events = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        h, p = PADDR.split(":")
        self.sock.bind((h, int(p)))
        self.sock.listen(16)
        threading.Thread(target=self.serve, daemon=True).start()

    def take(self):
        with self.lock:
            ev, self.events = self.events, []
        return ev

    def serve(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.one, args=(c,), daemon=True).start()

    def one(self, c):
        c.settimeout(5)
        try:
            req = b""
            while b"\r\n\r\n" not in req:
                d = c.recv(65536)
                if not d:
                    return
                req += d
            head, _, body = req.partition(b"\r\n\r\n")
            cl = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
                  if l.lower().startswith(b"content-length:")]
            while cl and len(body) < cl[0]:
                d = c.recv(65536)
                if not d:
                    return
                body += d
            h, p = WADDR.split(":")
            u = socket.create_connection((h, int(p)), timeout=5)
            u.sendall(head + b"\r\n\r\n" + body)
            resp = b""
            while True:
                d = u.recv(65536)
                if not d:
                    break
                resp += d
            u.close()
            rh, _, rb = resp.partition(b"\r\n\r\n")
            status = int(rh.split(b" ")[1]) if rh.startswith(b"HTTP/") else 0
            note = body.decode("utf-8", "replace").split("\n\n", 1)[1] if b"\n\n" in body else ""
            cps = note.split("\n")
            if len(cps) >= 3:
                cos = [l for l in rb.decode("utf-8", "replace").split("\n") if l.startswith("\u2014 ")]
                with self.lock:
                    self.events.append(((cps[0], int(cps[1]), cps[2]), status, cos, note))
            c.sendall(resp)
        except (OSError, ValueError, IndexError):
            pass
        finally:
            c.close()


# --- files -----------------------------------------------------------------


def parse(data):
    """Record lines as (seq, line, prev) and checkpoints as (origin, size,
    root, [record index before it]) of one file's bytes."""
    recs, cps = [], []
    for raw in data.split(b"\n"):
        if raw.startswith(b'{"checkpoint":'):
            try:
                note = json.loads(raw)["checkpoint"].split("\n")
                cps.append(((note[0], int(note[1]), note[2]), len(recs)))
            except (ValueError, KeyError, IndexError):
                pass
        elif raw.startswith(b'{"event.sequence":'):
            try:
                o = json.loads(raw)
                recs.append((o["event.sequence"], raw, o.get("portcullis.prev", "")))
            except ValueError:
                pass
    return recs, cps


def is_segment(name):
    """The files verify is given: the log and every file beside it that
    may be a segment (what logd and logrotate set aside, and the log
    user's copies), not the sidecar, .witnessed, quarantine, broken or
    planted files."""
    if name != LOG and not name.startswith(LOG + "."):
        return False
    for s in (".checkpoint", ".witnessed", ".new", ".tmp", ".planted"):
        if name.endswith(s) or (s + ".") in name:
            return False
    return "-quarantine" not in name and "-broken" not in name


class Run:
    """One operation sequence from a fresh log and a fresh witness."""

    def __init__(self, proxy, idx):
        self.proxy = proxy
        self.d = os.path.join(TOP, "r%d" % idx)
        shutil.rmtree(self.d, ignore_errors=True)
        os.makedirs(self.d)
        os.chmod(self.d, 0o755)
        self.ld = os.path.join(self.d, "log")
        self.cfg = os.path.join(self.d, "p.yaml")
        with open(self.cfg, "w") as f:
            f.write("run_dir: %s/run\nstate_dir: %s\nlog:\n  file: %s/%s\n"
                    "  checkpoint:\n    interval_ms: 100\n"
                    "  witness:\n    address: \"%s\"\n    key: %s\n"
                    "  syslog:\n    local: false\n"
                    % (self.d, CFG["state"], self.ld, LOG, PADDR, WKEY))
        self.logd = None
        self.witness = None
        self.acked = {}  # seq -> line bytes
        self.pending = []  # seqs acknowledged, line not yet read
        self.cpmap = {}  # (origin, size, root) -> ((seq, line), ...) it covers
        self.cosigned = []  # (origin, size, root) the witness returned a cosignature for
        self.genuine = set()  # (note, cosignature line) pairs the witness returned
        self.snaps = []  # {name: bytes} after each step
        self.violations = []  # (kind, step, what)
        self.answered = set()  # checkpoints the witness answered for (any status)
        self.pending_loss = None  # a loss verify passed, logd not started since
        self.proxy.take()
        self.witness_start()

    # daemons

    def witness_start(self):
        wst = os.path.join(self.d, "wstate")
        self.witness = subprocess.Popen(
            ["ip", "netns", "exec", WNS, BIN + "/portcullis-logd", "--witness", "--listen", WADDR,
             "--key", CFG["wkey_priv"], "--state", wst, "--log", LOGKEY],
            stderr=open(os.path.join(self.d, "witness.err"), "ab"))
        h, p = WADDR.split(":")
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                socket.create_connection((h, int(p)), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the witness did not listen")

    def close(self):
        for p in (self.logd, self.witness):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        self.logd = self.witness = None

    def running(self):
        return self.logd is not None and self.logd.poll() is None

    def start(self):
        """True if logd started and serves; False if it refused (exited).
        Serving is logd's "serving ..." line, not its socket: logd binds
        the socket before it asks the witness whether the files extend
        what it cosigned, and may still refuse after that."""
        if self.running():
            return True
        errf = os.path.join(self.d, "logd.err")
        try:
            seen = os.path.getsize(errf)
        except OSError:
            seen = 0
        self.logd = subprocess.Popen([BIN + "/portcullis-logd", "-c", self.cfg], stderr=open(errf, "ab"))
        end = time.monotonic() + 20
        while time.monotonic() < end:
            if self.logd.poll() is not None:
                self.logd = None
                return False
            with open(errf, "rb") as f:
                f.seek(seen)
                if b"portcullis-logd: serving " in f.read():
                    self.settle()
                    return self.running()
            time.sleep(0.03)
        self.kill()
        return False

    def kill(self):
        if self.logd is not None:
            if self.logd.poll() is None:
                self.logd.send_signal(signal.SIGKILL)
            self.logd.wait()
        self.logd = None

    def settle(self):
        """Wait (bounded) until logd is done with what the last operation
        caused: the log's file ends with a checkpoint of all its records,
        the sidecar holds it, the witness answered for it and, if it
        cosigned, .witnessed holds it. Else logd's own writes race the
        next operation and a sequence does not replay alike."""
        end = time.monotonic() + DEADLINE

        def until(cond):
            while time.monotonic() < end and self.running():
                self.absorb()
                if cond():
                    return True
                time.sleep(0.03)
            return False

        last = [None]

        def sealed():
            data = self.read(LOG) or b""
            recs, cps = parse(data)
            if not (cps and cps[-1][1] == len(recs) and cps[-1][0][1] == len(recs)):
                return False
            line = [l for l in data.split(b"\n") if l.startswith(b'{"checkpoint":')][-1]
            last[0] = (cps[-1][0], json.loads(line)["checkpoint"].encode())
            return True

        if not until(sealed):
            return
        cp, note = last[0]
        until(lambda: self.read(SIDE) == note)
        if until(lambda: cp in self.answered) and cp in self.cosigned:
            until(lambda: (self.read(WIT) or b"").startswith(note))

    # the model

    def absorb(self):
        """Take what the proxy saw and what the files now hold."""
        for cp, status, cos, note in self.proxy.take():
            self.answered.add(cp)
            if status == 200 and cos:
                self.cosigned.append(cp)
                for c in cos:
                    self.genuine.add((note, c))
        for name in self.names():
            try:
                data = open(os.path.join(self.ld, name), "rb").read()
            except OSError:
                continue
            recs, cps = parse(data)
            for cp, n in cps:
                if cp not in self.cpmap and cp[1] == n:
                    self.cpmap[cp] = tuple((s, l) for s, l, _ in recs[:n])
            if name == LOG and self.pending:
                bys = {s: l for s, l, _ in recs}
                for s in list(self.pending):
                    if s in bys:
                        self.acked[s] = bys[s]
                        self.pending.remove(s)

    def names(self):
        try:
            return sorted(n for n in os.listdir(self.ld) if os.path.isfile(os.path.join(self.ld, n)))
        except OSError:
            return []

    def snapshot(self):
        s = {}
        for n in self.names():
            try:
                s[n] = open(os.path.join(self.ld, n), "rb").read()
            except OSError:
                pass
        self.snaps.append(s)

    def write(self, name, data):
        if not os.path.isdir(self.ld):  # as logd makes it: the log user's
            os.makedirs(self.ld)
            os.chown(self.ld, LOGUSER.pw_uid, LOGUSER.pw_gid)
            os.chmod(self.ld, 0o750)
        p = os.path.join(self.ld, name)
        with open(p, "wb") as f:
            f.write(data)
        os.chown(p, LOGUSER.pw_uid, LOGUSER.pw_gid)
        os.chmod(p, 0o640)

    def read(self, name):
        try:
            return open(os.path.join(self.ld, name), "rb").read()
        except OSError:
            return None

    # operations: each a tuple; one that finds nothing to act on does nothing

    def op(self, o):
        k = o[0]
        if k == "start":
            self.start()
        elif k == "kill":
            self.kill()
        elif k == "restart":
            self.kill()
            self.start()
        elif k == "append":
            if not self.running():
                return
            r = subprocess.run([BIN + "/tests/helpers/logd_client", os.path.join(self.d, "run", "logd.sock"),
                                "-n", str(o[1]), "-b", str(o[1]), "-q", "-t", "2000"],
                               capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.startswith("acked "):
                last = int(r.stdout.split()[1])
                self.pending += list(range(last - o[1] + 1, last + 1))
            self.settle()
        elif k == "rotate":  # mv + SIGHUP, as logrotate does (docs/logd.md)
            if self.read(LOG) is None:
                return
            os.rename(os.path.join(self.ld, LOG), os.path.join(self.ld, o[1]))
            if self.running():
                self.logd.send_signal(signal.SIGHUP)
                end = time.monotonic() + DEADLINE
                while self.read(LOG) is None and time.monotonic() < end and self.running():
                    time.sleep(0.03)
                self.settle()
        elif k == "delete":
            try:
                os.unlink(os.path.join(self.ld, o[1]))
            except OSError:
                pass
        elif k == "wipe":
            for n in self.names():
                os.unlink(os.path.join(self.ld, n))
        elif k == "rename":
            if self.read(o[1]) is not None:
                os.rename(os.path.join(self.ld, o[1]), os.path.join(self.ld, o[2]))
        elif k == "restore":  # an earlier copy of a file, back under a name
            back, src, dst = o[1], o[2], o[3]
            snap = self.snaps[max(0, len(self.snaps) - back)] if self.snaps else {}
            if src in snap:
                self.write(dst, snap[src])
        elif k == "truncate":
            data = self.read(o[1])
            if not data:
                return
            cut = int(len(data) * o[2])
            if o[3] == "line":
                nl = data.rfind(b"\n", 0, cut)
                cut = nl + 1
            self.write(o[1], data[:cut])
        elif k == "sidecar":  # the sidecar set to an in-file checkpoint, or garbled
            data = self.read(LOG)
            if o[1] == "garble":
                side = self.read(SIDE)
                if side:
                    self.write(SIDE, side[:-8] + b"AAAAAAA\n")
                return
            notes = [l for l in (data or b"").split(b"\n") if l.startswith(b'{"checkpoint":')]
            if notes:
                self.write(SIDE, json.loads(notes[max(0, len(notes) - o[2])])["checkpoint"].encode())
        elif k == "witnessed":
            w = self.read(WIT)
            if o[1] == "strip" and w:  # the log's checkpoint, without the cosignature
                self.write(WIT, b"".join(l + b"\n" for l in w.split(b"\n")[:-1]
                                         if not l.startswith(WCOS.encode())))
            elif o[1] == "bogus" and w:
                lines = w.rstrip(b"\n").split(b"\n")
                head, _, b64 = lines[-1].rpartition(b" ")
                lines[-1] = head + b" " + b64[:-4] + b"AAA="
                self.write(WIT, b"\n".join(lines) + b"\n")
            elif o[1] == "side":
                side = self.read(SIDE)
                if side:
                    self.write(WIT, side)
        elif k == "plant":
            self.write(o[1], b'{"event.sequence":%d,' % o[2])
        else:
            raise ValueError(o)

    # the checks

    def verify(self):
        segs = [os.path.join(self.ld, n) for n in self.names() if is_segment(n)]
        r = subprocess.run([BIN + "/portcullis", "-c", self.cfg, "log", "verify", "--witness-key", WKEY] + segs,
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr, segs

    def protected(self):
        p = {}
        for cp in self.cosigned:
            for s, _ in self.cpmap.get(cp, ()):
                if s in self.acked:
                    p[s] = self.acked[s]
        return p

    def lost(self, segs):
        """Protected records not in the files verify was given, byte for
        byte, and not named lost: set aside at a start (a quarantine
        record names their seqs), or below a chain that visibly does not
        begin at the log's start (older segments missing)."""
        have, named = {}, []
        oldest = None
        for f in segs:
            try:
                recs, _ = parse(open(f, "rb").read())
            except OSError:
                continue
            for s, l, prev in recs:
                have.setdefault(s, set()).add(l)
                try:
                    q = json.loads(l).get("portcullis.quarantine.seq")
                    if q:
                        a, b = q.split("-")
                        named.append((int(a), int(b)))
                except ValueError:
                    pass
            if recs and (oldest is None or recs[0][0] < oldest[0]):
                oldest = (recs[0][0], recs[0][2])
        if oldest and oldest[1].strip("0"):
            named.append((0, oldest[0] - 1))
        gone = []
        for s, l in sorted(self.protected().items()):
            if l in have.get(s, ()):
                continue
            if any(a <= s <= b for a, b in named):
                continue
            gone.append(s)
        return gone

    def forks(self):
        found = []
        by = {}
        for cp in self.cosigned:
            by.setdefault(cp[0], {}).setdefault(cp[1], set()).add(cp[2])
        for origin, sizes in by.items():
            for n, roots in sizes.items():
                if len(roots) > 1:
                    found.append("origin %s: %d records cosigned with %d roots" % (origin, n, len(roots)))
        known = sorted(set(cp for cp in self.cosigned if cp in self.cpmap), key=lambda c: (c[0], c[1]))
        for i, a in enumerate(known):
            for b in known[i + 1:]:
                if a[0] == b[0] and a[1] < b[1] and self.cpmap[b][:a[1]] != self.cpmap[a]:
                    found.append("origin %s: the tree of %d records does not extend the one of %d" %
                                 (a[0], b[1], a[1]))
        cover = {}
        for cp in known:
            for s, _ in self.cpmap[cp]:
                cover.setdefault(s, set()).add(cp[0])
        both = sorted(s for s, o in cover.items() if len(o) > 1)
        if both:
            found.append("seq %d-%d cosigned under origins %s (a rollback that grew: two trees)" %
                         (both[0], both[-1], " and ".join(sorted(cover[both[0]]))))
        return found

    def check(self, step, started):
        """After operation `step`; started: it started logd (and logd
        serves). A loss verify passes in silence is a violation once logd
        starts over it; until then it is pending (the log user may be
        about to start logd: final() tries)."""
        wit = self.read(WIT)  # before verify, and the proxy's replies after: what
        rc, out, segs = self.verify()  # logd wrote there came through the proxy first
        wit_stable = self.read(WIT) == wit
        self.absorb()
        for f in self.forks():
            if not any(v[0] == "fork" and v[2] == f for v in self.violations):
                self.violations.append(("fork", step, f))
        self.pending_loss = None
        if rc != 0:
            return
        gone = self.lost(segs)
        if not gone:
            return
        what = "protected seqs %s gone or changed; verify exit 0: %s" % (
            span(gone), out.strip().split("\n")[-1][:300])
        if "consistent with the witnessed checkpoint" in out and wit is not None and wit_stable:
            text = wit.decode("utf-8", "replace")
            cos = [l for l in text.split("\n") if l.startswith(WCOS)]
            note = "\n".join(l for l in text.split("\n") if l not in cos)
            if not any((note, c) in self.genuine for c in cos):
                self.violations.append(("verify-lie", step, what + " (its .witnessed is not what the witness returned)"))
                return
        if started:
            if not any(v[0] == "silent-loss" for v in self.violations):
                err = open(os.path.join(self.d, "logd.err"), "rb").read().decode("utf-8", "replace")
                said = [l for l in err.strip().split("\n") if "witness" in l][-2:]
                self.violations.append(("silent-loss", step, what + "; and logd started over it" +
                                        ("; logd said: " + " | ".join(l[:300] for l in said) if said else "")))
        else:
            self.pending_loss = what

    def final(self, step):
        """The sequence ends with a loss verify passes: logd must refuse
        to start over it."""
        if self.pending_loss:
            self.kill()
            if self.start():
                self.check(step, True)


def span(seqs):
    out, a = [], None
    for i, s in enumerate(seqs):
        if a is None:
            a = s
        if i + 1 == len(seqs) or seqs[i + 1] != s + 1:
            out.append("%d" % a if a == s else "%d-%d" % (a, s))
            a = None
    return ",".join(out[:6]) + (",..." if len(out) > 6 else "")


# --- the generator ---------------------------------------------------------


def generate(rng, nsteps):
    """An operation sequence: primitives, and the moves an attacker makes
    of them (put an earlier segment back, start over from a planted line,
    cut the log back with its sidecar and .witnessed), each still a list
    of primitives that shrinking can take apart."""
    ops = [("start",), ("append", rng.randint(3, 12))]
    rotated = []
    files = lambda: [LOG, SIDE, WIT] + rotated
    while len(ops) < nsteps:
        m = rng.random()
        if m < 0.16:
            name = "%s.%d" % (LOG, len(rotated) + 1)
            rotated.append(name)
            ops += [("rotate", name), ("append", rng.randint(2, 8))]
        elif m < 0.28:
            ops.append(("append", rng.randint(1, 10)))
        elif m < 0.38:  # an earlier segment (or copy) back in the log's place
            # (logd stopped first: a running logd re-signs the sidecar every
            # checkpoint interval, and the race would make replays differ)
            ops.append(("kill",))
            for f in (LOG, SIDE, WIT):
                if rng.random() < 0.8:
                    ops.append(("delete", f))
            if rotated and rng.random() < 0.7:
                ops.append(("rename", rng.choice(rotated), LOG))
            else:
                ops.append(("restore", rng.randint(1, 6), rng.choice(files()), LOG))
            ops += [("restart",), ("append", rng.randint(1, 6))]
        elif m < 0.45:  # start over: everything deleted, a line planted
            ops += [("kill",), ("wipe",), ("plant", PLANT, rng.choice((1000, 2 ** 63 - 10))), ("restart",),
                    ("append", rng.randint(1, 6))]
        elif m < 0.56:  # cut back, the sidecar and .witnessed made to match
            ops += [("kill",), ("truncate", LOG, rng.choice((0.3, 0.5, 0.7, 0.9)), "line"),
                    ("sidecar", "cp", rng.randint(1, 3)),
                    ("witnessed", rng.choice(("strip", "side", "bogus")))]
            if rng.random() < 0.5:
                ops.append(("start",))
        elif m < 0.62:
            ops.append(("truncate", rng.choice(files()), rng.random(), rng.choice(("byte", "line"))))
        elif m < 0.68:
            ops.append(("delete", rng.choice(files())))
        elif m < 0.72:
            ops.append(("rename", rng.choice(files()), rng.choice(files() + [LOG + ".x"])))
        elif m < 0.78:
            ops.append(("restore", rng.randint(1, 8), rng.choice(files()), rng.choice(files())))
        elif m < 0.83:
            ops.append(("sidecar", rng.choice(("cp", "garble")), rng.randint(1, 4)))
        elif m < 0.87:
            ops.append(("witnessed", rng.choice(("strip", "bogus", "side"))))
        elif m < 0.90:
            ops.append(("plant", rng.choice((PLANT, LOG + ".9")), rng.choice((1000, 2 ** 64 - 107))))
        else:
            ops.append(rng.choice((("kill",), ("restart",), ("start",))))
    return ops


def execute(proxy, ops, idx, trace=False):
    r = Run(proxy, idx)
    try:
        for i, o in enumerate(ops):
            up = r.running()
            r.op(o)
            r.check(i, o[0] in ("start", "restart") and r.running() and not (o[0] == "start" and up))
            if trace:
                say("  step %2d %-46s logd %s" % (i, fmt(o), "up" if r.running() else "down"))
                if o[0] in ("start", "restart") and not r.running():
                    err = open(os.path.join(r.d, "logd.err"), "rb").read().decode("utf-8", "replace")
                    say("    logd refused: %s" % (err.strip().split("\n") or [""])[-1][:400])
                if os.environ.get("PC_FILEOPS_TRACE"):
                    say("    files: %s; protected: %s; cosigned: %s" % (" ".join(r.names()), span(sorted(r.protected())),
                        " ".join("%s:%d" % c[:2] for c in r.cosigned)))
            r.snapshot()
        r.final(len(ops))
    finally:
        r.close()
    return r


def fmt(o):
    return o[0] + ("(" + ", ".join(repr(x) for x in o[1:]) + ")" if len(o) > 1 else "")


def shrink(proxy, ops, kind, idx):
    """Drop operations (then chunks of them) while the sequence still shows
    a violation of the kind; the one-minimal sequence that is left."""
    budget = int(os.environ.get("PC_FILEOPS_SHRINK_RUNS", "60"))
    runs = 0
    chunk = max(1, len(ops) // 2)
    while chunk >= 1 and runs < budget:
        i, changed = 0, False
        while i < len(ops) and runs < budget:
            cand = ops[:i] + ops[i + chunk:]
            runs += 1
            r = execute(proxy, cand, idx)
            if any(v[0] == kind for v in r.violations):
                ops, changed = cand, True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return ops, runs


def main():
    seed, count = int(sys.argv[2]), int(sys.argv[3])
    length = int(os.environ.get("PC_FILEOPS_LEN", "14"))
    only = os.environ.get("PC_FILEOPS_SEQS", "")
    proxy = Proxy()
    counts = {k: 0 for k in KINDS}
    opened = {k: 0 for k in KINDS}
    first = {}
    steps = 0
    for n in [int(x) for x in only.split(",")] if only else range(count):
        rng = random.Random("%d/%d" % (seed, n))
        ops = generate(rng, length)
        r = execute(proxy, ops, n, trace=bool(only))
        steps += len(ops)
        kinds = sorted(set(v[0] for v in r.violations))
        for k in kinds:
            v = next(v for v in r.violations if v[0] == k)
            (opened if k in OPEN else counts)[k] += 1
            say("sequence %d: %s%s at step %d: %s" % (n, "known open: " if k in OPEN else "", k, v[1], v[2]))
            if k not in first:
                first[k] = (n, ops)
    say("sequences: %d, steps: %d" % (len(only.split(",")) if only else count, steps))
    for k, (n, ops) in sorted(first.items()):
        if k in OPEN and not SHRINK_OPEN:
            say("reproducer of %s (sequence %d, not shrunk: PC_FILEOPS_SHRINK_OPEN=1): %s" %
                (k, n, " ; ".join(fmt(o) for o in ops)))
            continue
        small, runs = shrink(proxy, ops, k, 10000 + n)
        say("minimal sequence for %s (sequence %d of seed %d, %d operations, %d shrinking runs):" %
            (k, n, seed, len(small), runs))
        r = execute(proxy, small, 20000 + n, trace=True)
        for v in r.violations:
            if v[0] == k:
                say("  => %s at step %d: %s" % (k, v[1], v[2]))
                break
        else:
            say("  => this replay showed no %s (logd's timing differed)" % k)
    for k in KINDS:
        say("kind %s: %d" % (k, counts[k]))
        say("open %s: %d" % (k, opened[k]))


if __name__ == "__main__":
    main()
