# Issue 32, an attacker who can write the log's directory (not the key),
# a hostile witness (or anyone on its plain-HTTP path) and a hostile
# witness client:
# - a .witnessed without the witness's cosignature, or with a bogus one,
#   fails log verify when the witness's key is known; without the key
#   verify says the witnessed checkpoint is unchecked, never "consistent";
# - junk after the cosignature in a witness's reply is not kept: logd
#   still starts;
# - one source address holds at most 8 of the witness's connections;
# - a forged line claiming seq 2^64-107 does not carry logd's seq past
#   the end (seqs wrapped to 0), and verify refuses such seqs;
# - a quarantine file given to a multi-file verify is named and skipped;
#   a chain whose oldest segments are missing says so.
# The witness runs in a network namespace of its own, logd in another.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "logd witness hostile" "$B/portcullis-logd" "$B/portcullis" "$B/tests/helpers/logd_client"
if [ "$(id -u)" != 0 ]; then
	t_skip "logd witness hostile" "needs root (network namespaces)"
	t_done
	exit
fi

lg_init logd-whostile
GWNS=$LAB_ID-gw
WNS=$LAB_ID-wit
WADDR=192.0.2.2:7380
PADDR=192.0.2.2:7381 # the hostile proxy in front of the witness
WPID=
PPID_=
W6PID=
wl_cleanup() {
	[ -z "$W6PID" ] || kill "$W6PID" 2>/dev/null
	[ -z "$PPID_" ] || kill "$PPID_" 2>/dev/null
	[ -z "$WPID" ] || kill "$WPID" 2>/dev/null
	[ -z "$LOGD_PID" ] || kill "$LOGD_PID" 2>/dev/null
	wait 2>/dev/null
	_lab_ns_del "$GWNS"
	_lab_ns_del "$WNS"
	LOGD_PID=
	lg_cleanup
}
trap wl_cleanup EXIT
lab_clean_stale
_lab_ns_add "$GWNS"
_lab_ns_add "$WNS"
ip -n "$GWNS" link add wv0 type veth peer name wv1 netns "$WNS"
lab_in "$GWNS" ip addr add 192.0.2.1/24 dev wv0
lab_in "$GWNS" ip addr add 192.0.2.3/24 dev wv0
lab_in "$GWNS" ip link set wv0 up
lab_in "$WNS" ip addr add 192.0.2.2/24 dev wv1
lab_in "$WNS" ip link set wv1 up

mkdir -p "$D/wit"
witness_start() {
	lab_ns_check "$WNS"
	ip netns exec "$WNS" "$B/portcullis-logd" --witness --listen "$WADDR" --key "$D/wit/w.key" \
		--state "$D/wit/state" --log "$D/state/log.key.pub" 2>>"$D/witness.err" &
	WPID=$!
	lab_wait_until lab_in "$GWNS" bash -c "exec 3<>/dev/tcp/${WADDR%:*}/${WADDR#*:}" 2>/dev/null
}
logd_ns_start() {
	rm -f "$D/run/logd.sock"
	lab_ns_check "$GWNS"
	ip netns exec "$GWNS" "$B/portcullis-logd" -c "$D/p.yaml" 2>>"$D/logd.err" &
	LOGD_PID=$!
	for _ in $(seq 100); do
		lab_unix_ready "$D/run/logd.sock" && kill -0 "$LOGD_PID" 2>/dev/null && return 0
		kill -0 "$LOGD_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
witnessed_size() { sed -n 2p "$L.witnessed" 2>/dev/null; }
wsize_is() { [ "$(witnessed_size)" = "$1" ]; }
wconfig() { # address
	lg_config "checkpoint:" "  interval_ms: 100" "witness:" "  address: \"$1\"" \
		"  key: $D/wit/w.key.pub"
}

lg_config
mkdir -p "$D/state"
PC log keygen --name gw1/portcullis-log >/dev/null
witness_start
wconfig "$WADDR"
logd_ns_start
t_eq "logd starts with a witness" 0 $?
lg_client -n 100 -b 50 -q >/dev/null
lab_wait_until wsize_is 101
t_eq "the witness cosigned 101 records" 101 "$(witnessed_size)"
logd_stop
cp "$L.witnessed" "$D/good.witnessed"
# a config without the witness, for verify without a witness key
sed '/witness:/,$d' "$D/p.yaml" >"$D/nowit.yaml"
printf '  syslog:\n    local: false\n' >>"$D/nowit.yaml"

# --- 5: the witnessed checkpoint must carry the witness's cosignature
sed '$d' "$D/good.witnessed" >"$L.witnessed" # the log's checkpoint, no cosignature
out=$(PC log verify 2>&1)
t_eq "a .witnessed without a cosignature fails verify (log.witness.key configured)" 1 $?
t_match "... naming it" 'witnessed checkpoint .*\.witnessed carries no cosignature by the witness' "$out"
out=$(PC log verify --witness-key "$D/wit/w.key.pub" "$L" 2>&1)
t_eq "... and with --witness-key" 1 $?
# a cosignature line of the right name and key id whose signature is wrong
python3 - "$D/good.witnessed" "$L.witnessed" <<'EOF'
import base64, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
head, b64 = lines[-2].rsplit(" ", 1)
raw = bytearray(base64.b64decode(b64))
raw[-1] ^= 1
lines[-2] = head + " " + base64.b64encode(bytes(raw)).decode()
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(lines))
EOF
out=$(PC log verify 2>&1)
t_eq "a .witnessed with a bogus cosignature fails verify" 1 $?
t_match "... saying it does not verify" 'carries no cosignature by the witness .*does not verify' "$out"
sed '$d' "$D/good.witnessed" >"$L.witnessed"
out=$("$B/portcullis" -c "$D/nowit.yaml" log verify 2>&1)
t_eq "without a witness key, verify does not fail on it (documented)" 0 $?
t_nomatch "... and never claims consistency with the witness" 'consistent with the witnessed' "$out"
t_match "... but says the witnessed checkpoint is unchecked" 'witnessed checkpoint .* unchecked: no witness key' "$out"
cp "$D/good.witnessed" "$L.witnessed"
out=$(PC log verify 2>&1)
t_eq "the genuine .witnessed verifies" 0 $?
t_match "... its cosignature verified" 'consistent with the witnessed checkpoint .*cosignature verified' "$out"

# --- 6: a hostile witness (a proxy on the plain-HTTP path) adds junk lines
# after the cosignature; logd keeps only the cosignature and still starts
lab_ns_check "$WNS"
ip netns exec "$WNS" python3 - "$PADDR" "$WADDR" >"$D/proxy.out" 2>&1 <<'EOF' &
import socket, sys
lh, lp = sys.argv[1].split(":"); uh, up = sys.argv[2].split(":")
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((lh, int(lp))); s.listen(8); print("ready", flush=True)
while True:
    c, _ = s.accept(); c.settimeout(5); req = b""
    try:
        while b"\r\n\r\n" not in req:
            d = c.recv(65536)
            if not d: break
            req += d
        head, _, body = req.partition(b"\r\n\r\n")
        cl = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
        while cl and len(body) < cl[0]:
            d = c.recv(65536)
            if not d: break
            body += d
        u = socket.create_connection((uh, int(up)), timeout=5)
        u.sendall(head + b"\r\n\r\n" + body); resp = b""
        while True:
            d = u.recv(65536)
            if not d: break
            resp += d
        u.close()
        rh, _, rb = resp.partition(b"\r\n\r\n")
        if rh.startswith(b"HTTP/1.1 200"):
            rb += b"junk from the path\n"
            rh = b"\r\n".join(l if not l.lower().startswith(b"content-length:") else b"Content-Length: %d" % len(rb) for l in rh.split(b"\r\n"))
        c.sendall(rh + b"\r\n\r\n" + rb)
    except Exception as e:
        print("error", e, flush=True)
    c.close()
EOF
PPID_=$!
lab_wait_until grep -q ready "$D/proxy.out"
wconfig "$PADDR"
logd_ns_start
t_eq "logd starts with the hostile path to the witness" 0 $?
lg_client -n 50 -b 50 -q >/dev/null
lab_wait_until wsize_is 151
t_eq "the witness cosigned 151 records through the hostile path" 151 "$(witnessed_size)"
t_nomatch "the junk is not in .witnessed" 'junk' "$(cat "$L.witnessed")"
logd_stop
logd_ns_start
t_eq "logd starts again over that .witnessed" 0 $?
logd_stop
kill "$PPID_" 2>/dev/null
wait "$PPID_" 2>/dev/null
PPID_=

# --- 7: one source address holds at most 8 of the 64 connection slots;
# another source is still served at once
out=$(lab_in "$GWNS" python3 - "$WADDR" <<'EOF'
import socket, sys, time
h, p = sys.argv[1].split(":")
def conn(src):
    s = socket.socket(); s.bind((src, 0)); s.connect((h, int(p))); return s
held = [conn("192.0.2.1") for _ in range(8)]
ninth = conn("192.0.2.1"); ninth.settimeout(2)
try:
    r = "closed" if ninth.recv(1) == b"" else "data"
except socket.timeout:
    r = "open"
except ConnectionResetError:
    r = "closed"
other = conn("192.0.2.3"); other.settimeout(2)
other.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
try:
    a = other.recv(64)
    r += " served" if a.startswith(b"HTTP/1.1 404") else " not-served"
except socket.timeout:
    r += " not-served"
print(r)
EOF
)
t_eq "a 9th connection from one source is closed at once; another source is served" "closed served" "$out"

# ... and over IPv6 a /64 is one source (a host picks any address in its
# /64), while IPv4 clients of the same dual-stack listener, which arrive as
# ::ffff:a.b.c.d and share those first 64 bits, are still one address each
lab_in "$GWNS" ip addr add 2001:db8::1/48 dev wv0 nodad
lab_in "$GWNS" ip addr add 2001:db8::5/48 dev wv0 nodad
lab_in "$GWNS" ip addr add 2001:db8:0:1::1/48 dev wv0 nodad
lab_in "$WNS" ip addr add 2001:db8::2/48 dev wv1 nodad
mkdir -p "$D/wit6"
ip netns exec "$WNS" "$B/portcullis-logd" --witness --listen "[::]:7382" --key "$D/wit6/w.key" \
	--state "$D/wit6/state" --log "$D/state/log.key.pub" 2>>"$D/witness6.err" &
W6PID=$!
wl_w6_up() { lab_in "$GWNS" bash -c "exec 3<>/dev/tcp/2001:db8::2/7382" 2>/dev/null; }
lab_wait_until wl_w6_up
out=$(lab_in "$GWNS" python3 - <<'EOF'
import socket
def conn(src, dst):
    fam = socket.AF_INET6 if ":" in src else socket.AF_INET
    s = socket.socket(fam); s.bind((src, 0)); s.connect((dst, 7382)); s.settimeout(2); return s
def fate(s, ask):
    try:
        if ask:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            return "served" if s.recv(64).startswith(b"HTTP/1.1 404") else "not-served"
        return "closed" if s.recv(1) == b"" else "data"
    except socket.timeout:
        return "not-served" if ask else "open"
    except ConnectionResetError:
        return "closed"
held = [conn("2001:db8::1", "2001:db8::2") for _ in range(8)]
r = [fate(conn("2001:db8::5", "2001:db8::2"), False),
     fate(conn("2001:db8:0:1::1", "2001:db8::2"), True)]
held += [conn("192.0.2.1", "192.0.2.2") for _ in range(7)]
r.append(fate(conn("192.0.2.3", "192.0.2.2"), True))
print(" ".join(r))
EOF
)
kill "$W6PID" 2>/dev/null
wait "$W6PID" 2>/dev/null
W6PID=
t_eq "IPv6: a 9th connection from one /64 is closed, another /64 is served; two IPv4 clients of a dual-stack listener are two sources" "closed served served" "$out"

# --- 8: a forged line with seq 2^64-107 after the sealed records
wl_stop_witness() { kill "$WPID" 2>/dev/null; wait "$WPID" 2>/dev/null; WPID=; }
wl_stop_witness
mv "$D/log" "$D/log-witnessed"
lg_config "checkpoint:" "  interval_ms: 100"
logd_start
t_eq "a new log starts" 0 $?
lg_client -n 10 -q >/dev/null
logd_stop
sealed=$(grep -o '^{"event.sequence":[0-9]*' "$L" | tail -1 | cut -d: -f2)
python3 - "$L" <<'EOF'
import sys
f = sys.argv[1]
lines = open(f, encoding="utf-8").read().splitlines()
rec = [l for l in lines if l.startswith('{"event.sequence":')][-1]
rest = rec.split(",", 1)[1]
open(f, "a", encoding="utf-8").write('{"event.sequence":18446744073709551509,' + rest + "\n")
EOF
logd_start
t_eq "logd starts, setting the forged line aside" 0 $?
lg_client -n 120 -q >/dev/null
t_eq "120 records are acknowledged after it" 0 $?
logd_stop
last=$(grep -o '^{"event.sequence":[0-9]*' "$L" | tail -1 | cut -d: -f2)
t_eq "seq goes on after the sealed records (no jump, no wrap): the set-aside line's one seq, then the quarantine record and 120 records" $((sealed + 121)) "$last"
t_nomatch "no seq 0 or near 2^64 was given" '^\{"event.sequence":(0|1844674407[0-9]{10}),' "$(grep -v quarantine "$L")"
t_ok "the log verifies" PC log verify
# a forged segment record with seq 2^64-1 and a record with seq 0 after
# it, each with a correct hash: the old verifier took 2^64-1 + 1 = 0
cp "$L" "$D/wrap.jsonl"
python3 - "$D/wrap.jsonl" <<'EOF'
import hashlib, re, sys
f = sys.argv[1]
lines = open(f, encoding="utf-8").read().splitlines()
recs = [l for l in lines if l.startswith('{"event.sequence":')]
seg, last = recs[0], recs[-1]
prev = re.search(r'"event.hash":"([0-9a-f]{64})"', last).group(1)
def make(template, seq, prev):
    body = re.sub(r'^\{"event.sequence":\d+,', '{"event.sequence":%d,' % seq, template)
    body = re.sub(r',"portcullis.prev":"[0-9a-f]{64}","event.hash":"[0-9a-f]{64}"\}$', '', body)
    leaf = body + ',"portcullis.prev":"%s"}' % prev
    h = hashlib.sha256(b"\x00" + leaf.encode()).hexdigest()
    return leaf[:-1] + ',"event.hash":"%s"}' % h, h
a, h = make(seg, 2**64 - 1, prev)
b, _ = make(last, 0, h)
open(f, "a", encoding="utf-8").write(a + "\n" + b + "\n")
EOF
out=$(PC log verify "$D/wrap.jsonl" 2>&1)
t_eq "verify fails a log whose seq passes the largest seq and wraps" 1 $?
t_match "... naming the seq" 'seq 18446744073709551615 is out of range' "$out"

# --- 9: segments, a quarantine file beside them, missing oldest segments
logd_start --new-segment "test: second segment"
t_eq "a second segment begins" 0 $?
lg_client -n 5 -q >/dev/null
logd_stop
logd_start --new-segment "test: third segment"
t_eq "a third segment begins" 0 $?
lg_client -n 5 -q >/dev/null
logd_stop
q=$(ls "$L".*-quarantine | head -1)
cp "$q" "$q.1" # as a second set-aside tail would be named
segs=$(ls "$L".*Z-[0-9]* | sort)
t_eq "the documented glob matches the two older segments only" 2 "$(wc -l <<<"$segs")"
# shellcheck disable=SC2086
out=$(PC log verify $segs "$L" 2>&1)
t_eq "the documented glob verifies as one chain" 0 $?
t_match "... from the start of the log" '^3 files form one unbroken chain, seq 1-[0-9]+$' "$(tail -1 <<<"$out")"
# shellcheck disable=SC2086
out=$(PC log verify "$L".*[0-9] "$L" 2>&1)
t_eq "the old glob (which takes in -quarantine.1) still verifies" 0 $?
t_match "... naming the quarantine file as skipped" "$q.1: skipped: a quarantine file" "$out"
# shellcheck disable=SC2086
out=$(PC log verify $(tail -1 <<<"$segs") "$L" 2>&1)
t_eq "a chain without the oldest segment verifies ..." 0 $?
t_match "... but says the older segments are missing" 'not from the start of the log: .*older segments are missing' "$out"
t_eq "... and --json says so" false "$(PC log verify --json $(tail -1 <<<"$segs") "$L" 2>/dev/null | jq -r .chain.from_start)"
t_done
