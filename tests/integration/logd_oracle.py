#!/usr/bin/python3
"""A second reader of portcullis' log file, written from docs/logd.md ("File
format", "Checkpoints") with Python's own json, base64, hashlib and the
cryptography package's Ed25519, sharing no code with tlog/: what
`portcullis log verify` calls intact must be intact here, and the reverse.

    logd_oracle.py verify LOG PUBKEY     exit 0 and "intact: N records, M
                                         checkpoints", or 1 and "line L: why"
                                         (LOG.checkpoint read too if there)
    logd_oracle.py mutate LOG PUBKEY CLI CONFIG STEP
                                         change bytes of LOG (the case and
                                         high bit of each byte of the
                                         signatures; the low, case or high
                                         bit of every STEP-th other byte),
                                         judge each copy here
                                         and with CLI (`CLI -c CONFIG log
                                         verify LOG`); print each
                                         disagreement, exit 1 if any

The format, as the docs give it: one line per record or checkpoint. A
record line ends with ,"portcullis.prev":"<64 hex>","event.hash":"<64
hex>"} (older logs: ,"prev":...,"hash":...}); its leaf data is the line
without the hash member, its hash the hex of SHA-256(0x00 || leaf data);
prev is the previous record's hash; seqs go up by one (a log-segment
record may skip ahead); the first record is a log-segment record. A
checkpoint line is {"checkpoint":"<note>"} with the note's newlines
written \\n and nothing else escaped; the note is a C2SP signed note of a
tlog checkpoint (origin, tree size, base64 root, "time ..." and optional
"previous ..." lines), signed by the log's key and by nothing else, its
size the records before it, its root RFC 6962's over them, its origin the
key's name or <name>/<first seq>, its time never going back. Beside the
log, LOG.checkpoint (the sidecar), when there, holds the latest checkpoint
as a plain signed note (others' signatures allowed), which the file must
reach: at least its size in records, its root over the first of them.
"""
import base64
import hashlib
import json
import re
import subprocess
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

EMDASH = "\u2014"
HEX64 = re.compile(r"[0-9a-f]{64}\Z")


class Bad(Exception):
    pass


def b64(s):
    """Standard base64, padded, in its one spelling."""
    try:
        raw = base64.b64decode(s, validate=True)
    except ValueError:
        raise Bad("not base64: %r" % s)
    if base64.b64encode(raw).decode("ascii") != s:
        raise Bad("not the one encoding of its bytes: %r" % s)
    return raw


def read_key(text):
    """name+hash+base64(0x01 || key), the note package's public key form."""
    name, hx, k = text.strip("\n").split("+", 2)
    raw = b64(k)
    if len(raw) != 33 or raw[0] != 1:
        raise Bad("not an ed25519 note key")
    kid = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4]
    if kid.hex() != hx:
        raise Bad("key hash %s is not %s" % (hx, kid.hex()))
    return name, kid, Ed25519PublicKey.from_public_bytes(raw[1:])


def mth(leaves):
    """RFC 6962 section 2.1: the Merkle tree hash of the leaf hashes."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def record(line, state):
    for prev_key, hash_key in (("portcullis.prev", "event.hash"), ("prev", "hash")):
        tail = ',"%s":"' % hash_key
        end = len(tail) + 64 + 2
        if len(line) > end and line[-end:].startswith(tail) and line.endswith('"}'):
            break
    else:
        raise Bad("not a record or checkpoint")
    claimed = line[-66:-2]
    leaf_data = line[:-end] + "}"
    try:
        obj = json.loads(line)
    except ValueError:
        raise Bad("record is not JSON")
    if not isinstance(obj, dict):
        raise Bad("record is not an object")
    leaf = hashlib.sha256(b"\x00" + leaf_data.encode("utf-8", "surrogateescape")).digest()
    if not HEX64.match(claimed) or claimed != leaf.hex():
        raise Bad("hash is not the leaf hash")
    seq = obj.get("event.sequence", obj.get("seq"))
    prev = obj.get(prev_key)
    if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= 2**63:
        raise Bad("seq out of range")
    if not isinstance(prev, str) or not HEX64.match(prev):
        raise Bad("prev is not a hash")
    segment = obj.get("event.action", obj.get("action")) == "log-segment"
    if not state["leaves"]:
        if not segment:
            raise Bad("the first record is not a log-segment record")
        state["first"] = seq
    else:
        if seq != state["seq"] + 1 and not (segment and seq > state["seq"] + 1):
            raise Bad("seq %d follows %d" % (seq, state["seq"]))
        if prev != state["hash"]:
            raise Bad("prev is not the previous record's hash")
    state["seq"], state["hash"] = seq, claimed
    state["leaves"].append(leaf)


def open_note(note, key, one_line):
    """The body of a signed checkpoint note, its origin, size, root and time."""
    name, kid, pk = key
    body, sep, sigs = note.rpartition("\n\n")
    if not sep or not sigs.endswith("\n"):
        raise Bad("note has no signature block")
    body += "\n"
    ours = 0
    sig_lines = sigs[:-1].split("\n")
    if one_line and len(sig_lines) != 1:
        raise Bad("%d signature lines, not the log's one" % len(sig_lines))
    for sl in sig_lines:
        m = re.fullmatch(EMDASH + r" (\S+) (\S+)", sl)
        if not m:
            raise Bad("malformed signature line")
        if m.group(1) != name:
            continue  # a plain note may carry others' signatures
        sig = b64(m.group(2))
        if len(sig) < 4 or sig[:4] != kid:
            continue
        try:
            pk.verify(sig[4:], body.encode("utf-8", "surrogateescape"))
        except InvalidSignature:
            raise Bad("signature does not verify")
        ours += 1
    if not ours:
        raise Bad("not signed by the log's key")
    lines = body[:-1].split("\n")
    if len(lines) < 4 or not lines[3].startswith("time "):
        raise Bad("not a checkpoint body")
    origin, size, root, t = lines[0], lines[1], b64(lines[2]), lines[3][5:]
    if not re.fullmatch(r"0|[1-9][0-9]*", size) or len(root) != 32:
        raise Bad("not a checkpoint body")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", t):
        raise Bad("bad time %r" % t)
    for extra in lines[4:]:
        if not re.fullmatch(r"previous (0|[1-9][0-9]*) (0|[1-9][0-9]*) \S{44}", extra):
            raise Bad("unknown body line %r" % extra)
        b64(extra.split(" ")[3])
    return origin, int(size), root, t


def checkpoint(line, state, key):
    head, tail = '{"checkpoint":"', '"}'
    if not line.startswith(head) or not line.endswith(tail):
        raise Bad("not a record or checkpoint")
    esc = line[len(head):-len(tail)]
    if re.search(r'\\(?!n)|"|[\x00-\x1f]', esc):
        raise Bad("checkpoint line escapes more than newlines")
    origin, size, root, t = open_note(esc.replace("\\n", "\n"), key, True)
    name = key[0]
    if origin not in (name, "%s/%d" % (name, state.get("first", -1))):
        raise Bad("origin %s is not this segment's" % origin)
    if state.get("origin", origin) != origin:
        raise Bad("two origins in one file")
    if size != len(state["leaves"]):
        raise Bad("size %d, but %d records precede it" % (size, len(state["leaves"])))
    if root != mth(state["leaves"]):
        raise Bad("root is not the records' root")
    if t < state.get("time", ""):
        raise Bad("time %s goes back" % t)
    state["origin"], state["time"], state["checkpoints"] = origin, t, state["checkpoints"] + 1
    state["sealed"] = len(state["leaves"])


def verify(data, key, sidecar=None):
    """(True, summary) or (False, "line L: why"). sidecar: the text of the
    log's .checkpoint file, the latest checkpoint as a plain note, which
    the file must reach (its first records, its root)."""
    state = {"leaves": [], "checkpoints": 0, "sealed": 0}
    if not data.endswith(b"\n"):
        return False, "the last line is incomplete"
    text = data.decode("utf-8", "surrogateescape")
    for n, line in enumerate(text[:-1].split("\n"), 1):
        try:
            if line.startswith('{"checkpoint":'):
                checkpoint(line, state, key)
            else:
                record(line, state)
        except Bad as e:
            return False, "line %d: %s" % (n, e)
    if not state["checkpoints"]:
        return False, "no checkpoint signs the records"
    if sidecar is not None:
        try:
            origin, size, root, _ = open_note(sidecar, key, False)
        except Bad as e:
            return False, "the sidecar: %s" % e
        if origin != state["origin"]:
            return False, "the sidecar's origin %s is not the file's" % origin
        if size > len(state["leaves"]):
            return False, "the file ends at %d records, the sidecar covers %d" % (
                len(state["leaves"]), size)
        if root != mth(state["leaves"][:size]):
            return False, "the sidecar's root is not the file's first %d records'" % size
    return True, "intact: %d records, %d checkpoints, %d unsealed" % (
        len(state["leaves"]), state["checkpoints"], len(state["leaves"]) - state["sealed"])


def main():
    cmd, log, pub = sys.argv[1:4]
    key = read_key(open(pub).read())
    data = open(log, "rb").read()
    try:
        sidecar = open(log + ".checkpoint", "rb").read().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        sidecar = None
    if cmd == "verify":
        ok, why = verify(data, key, sidecar)
        print(why)
        sys.exit(0 if ok else 1)
    cli, config, step = sys.argv[4], sys.argv[5], int(sys.argv[6])
    ok, why = verify(data, key, sidecar)
    if not ok:
        sys.exit("the untouched log does not verify here: " + why)
    # the signatures' base64, where one spelling matters most: its case and
    # high bits; every STEP-th other byte, each one flip in turn
    sig_bytes = set()
    at = 0
    for line in data.split(b"\n"):
        if line.startswith(b'{"checkpoint":'):
            sig_bytes.update(range(at + line.rindex(b" ") + 1, at + len(line)))
        at += len(line) + 1
    disagree = judged = 0
    for i in range(len(data)):
        if i in sig_bytes:
            flips = (0x20, 0x80)
        elif i % step == 0:
            flips = ((0x01, 0x20, 0x80)[i // step % 3],)
        else:
            continue
        for flip in flips:
            copy = bytearray(data)
            copy[i] ^= flip
            ours, why = verify(bytes(copy), key, sidecar)
            with open(log, "wb") as f:
                f.write(copy)
            theirs = subprocess.run([cli, "-c", config, "log", "verify", log],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            judged += 1
            if ours != (theirs.returncode == 0):
                disagree += 1
                print("byte %d xor 0x%02x: here %s (%s), log verify exit %d: %s" % (
                    i, flip, "intact" if ours else "not intact", why, theirs.returncode,
                    theirs.stdout.decode(errors="replace").strip()[:200]))
    with open(log, "wb") as f:
        f.write(data)
    print("%d copies judged, %d disagreements" % (judged, disagree))
    sys.exit(1 if disagree else 0)


if __name__ == "__main__":
    main()
