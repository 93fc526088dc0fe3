# The vault's process split (docs/vault.md, "Processes"), on real daemons.
# The CA process (vault/casign.c) alone can read ca.key: the monitor runs as
# the vault user, cannot open the key (a real attempt as its uid), and holds
# no byte of it in memory (its memory read through /proc, the CA process's
# read the same way as the control). Per-sandbox workers (vault/worker.c)
# run as their own user (vault.worker_user, portcullis-vworker), not the
# monitor's nor the CA's: that uid cannot signal the monitor or the CA, nor
# open ca.key, the store key or a sealed secret (real attempts as its uid;
# the vault user, which the workers used to share, can signal the monitor
# and open the store); the monitor keeps CAP_KILL and, permitted only,
# CAP_SETUID/CAP_SETGID (to start workers), the workers none. They also
# run under seccomp: from inside a real worker (the test hook
# PORTCULLIS_VAULT_TEST_OPEN) opening ca.key, the store key or another
# sandbox's sealed secret fails, although the vault user may open the last
# two; a worker's memory holds its sandbox's value and not the other
# sandbox's (the other worker is the control); killing a worker breaks only
# its sandbox's connections, the other sandbox goes on, and the next
# connection gets a new worker; an idle worker ends, its memory is
# reported. A name added on SIGHUP gets a leaf (the CA reloads too) and the
# workers are replaced; when the CA process dies the vault stops (fail
# closed).
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

vault_need_bins
lab_up 2
# idle workers must outlive the memory scans below, several times slower in
# a sanitized build (about 1 s each)
V_IDLE_MS=5000
[[ ${PC_BUILD:-build} != *san* ]] || V_IDLE_MS=20000
vault_config
# www.github.test is not allowed at start: added on SIGHUP below
sed -i '/host: www.github.test/,+1d' "$V/rules.d/agents.yaml"
vault_secrets
# a key as older versions made it (the vault user's): made root's at start
chown portcullis-vault: "$V/ca/ca.key"
vault_logd_start
export PORTCULLIS_VAULT_TEST_OPEN="$V/ca/ca.key:$V/secrets/secret.key:$V/secrets/AGENT2_TOKEN.sealed"
vault_start
unset PORTCULLIS_VAULT_TEST_OPEN
vault_redirect

ca_pid=$(pgrep -P "$V_VAULT_PID" -x vault-ca)
t_ok "the vault has a CA process (vault-ca), its child" test -n "$ca_pid"
[ -n "$ca_pid" ] || { t_done; exit 1; }
t_eq "ca.key is root's alone, an older vault-owned key included" "400 root:root" \
	"$(stat -c '%a %U:%G' "$V/ca/ca.key")"
uid() { awk '/^Uid:/ {print $2}' "/proc/$1/status"; }
vuid=$(id -u portcullis-vault)
t_eq "the monitor runs as the vault user" "$vuid" "$(uid "$V_VAULT_PID")"
caps() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
# CAP_KILL (5) effective; CAP_SETGID (6), CAP_SETUID (7) permitted only
t_eq "the monitor's effective capabilities: CAP_KILL only" 0000000000000020 \
	"$(caps "$V_VAULT_PID" CapEff)"
t_eq "... permitted: CAP_KILL, CAP_SETGID, CAP_SETUID (for starting workers)" \
	00000000000000e0 "$(caps "$V_VAULT_PID" CapPrm)"
t_eq "the CA process too, once the key is read" "$vuid" "$(uid "$ca_pid")"
t_eq "... without any capability" "0000000000000000" \
	"$(awk '/^CapEff:/ {print $2}' "/proc/$ca_pid/status")"
t_fail "the vault user (the monitor's and the CA's uid) cannot open ca.key" \
	setpriv --reuid=portcullis-vault --regid=portcullis-vault --clear-groups \
	cat "$V/ca/ca.key"
t_ok "control: root can" cat "$V/ca/ca.key"

r=$(vcurl 1 https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH")
t_match "a leaf signed by the CA process serves the sandbox" "auth=Bearer $V_PH_GH" "$r"
V_PH_A2=$("$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets placeholder AGENT2_TOKEN)
r=$(vcurl 2 https://api.github.test/echo -H "Authorization: Bearer $V_PH_A2")
t_match "sandbox 2 gets its own secret injected" "auth=\"Bearer agent2-value-0123\"" \
	"$(v_upstream_log)"

# the workers: one per sandbox with connections, children of the monitor
worker() { # sandbox -> pid of its worker
	local p
	for p in $(pgrep -P "$V_VAULT_PID" -x vault-worker); do
		tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -- "-W $1 " && echo "$p"
	done | head -1
}
w1=$(worker agent-1)
w2=$(worker agent-2)
t_ok "sandbox 1 has a worker process" test -n "$w1"
t_ok "sandbox 2 has another" test -n "$w2" -a "$w1" != "$w2"
[ -n "$w1" ] && [ -n "$w2" ] || { t_done; exit 1; }
wuid=$(id -u portcullis-vworker)
t_ok "the worker user is not the vault user" test "$wuid" != "$vuid"
# real, effective, saved and file system uid: all the worker user's
t_eq "the worker runs as its own user (portcullis-vworker)" "$wuid $wuid $wuid $wuid" \
	"$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$w1/status")"
t_eq "... the other sandbox's worker too" "$wuid" "$(uid "$w2")"
t_ok "... not the monitor's uid nor the CA's" \
	test "$(uid "$w1")" != "$(uid "$V_VAULT_PID")" -a "$(uid "$w1")" != "$(uid "$ca_pid")"
wgid=$(id -g portcullis-vworker)
t_eq "... with the worker user's group alone" "$wgid $wgid $wgid $wgid / $wgid" \
	"$(awk '/^Gid:/ {print $2, $3, $4, $5} /^Groups:/ {g = $2 ($3 ? " " $3 : "")} END {print "/", g}' \
		"/proc/$w1/status" | tr '\n' ' ' | sed 's/ $//')"
t_eq "... under a seccomp filter" 2 "$(awk '/^Seccomp:/ {print $2}' "/proc/$w1/status")"
t_eq "... without any capability (effective, permitted, ambient)" \
	"0000000000000000 0000000000000000 0000000000000000" \
	"$(caps "$w1" CapEff) $(caps "$w1" CapPrm) $(caps "$w1" CapAmb)"
t_eq "... and no_new_privs" 1 "$(caps "$w1" NoNewPrivs)"
# its records go to logd through a shared-memory ring it made as the
# worker user (logd refuses a ring registered by root), mapped by both
# (the same memfd: its inode, not the engine's rings logd maps as well)
ring_ino=$(awk '/memfd:portcullis-logring/ {print $5; exit}' "/proc/$w1/maps")
t_ok "... its records reach logd through a ring it made (memfd mapped)" test -n "$ring_ino"
t_ok "... which logd maps too" awk -v i="${ring_ino:-none}" \
	'$5 == i && /memfd:portcullis-logring/ {f = 1} END {exit !f}' \
	"/proc/$(v_pid portcullis-logd)/maps"
# as the worker's own uid and gid, read from the running worker
asw() { setpriv --reuid="$(uid "$w1")" --regid="$(awk '/^Gid:/ {print $2}' "/proc/$w1/status")" \
	--clear-groups "$@"; }
t_fail "the worker's uid cannot signal the monitor (kill -0)" asw kill -0 "$V_VAULT_PID"
t_fail "... nor the CA process" asw kill -0 "$ca_pid"
t_ok "control: the vault user can signal the monitor (a worker could, as that user)" \
	setpriv --reuid=portcullis-vault --regid=portcullis-vault --clear-groups \
	kill -0 "$V_VAULT_PID"
t_fail "the worker's uid cannot attach to the monitor (ptrace)" asw python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(0 if libc.ptrace(16, int(sys.argv[1]), 0, 0) == 0 else 1)' "$V_VAULT_PID"
for f in "$V/ca/ca.key" "$V/secrets/secret.key" "$V/secrets/GITHUB_TOKEN.sealed"; do
	t_fail "the worker's uid cannot open $(basename "$f")" asw cat "$f"
done
err=$(cat "$LAB_DIR/vault.stderr")
for f in "$V/ca/ca.key" "$V/secrets/secret.key" "$V/secrets/AGENT2_TOKEN.sealed"; do
	t_match "from inside the worker of agent-1, open($(basename "$f")) fails" \
		"worker agent-1: test: open\($f\): Operation not permitted" "$err"
done
t_ok "control: the vault user itself may open the store key (the filter stops the worker)" \
	setpriv --reuid=portcullis-vault --regid=portcullis-vault --clear-groups \
	cat "$V/secrets/secret.key"
t_nomatch "no worker opened anything" "test: open.*: opened" "$err"

# The CA private key in the forms it can take in memory: the PEM body's
# lines, the scalar big-endian (DER) and as OpenSSL's BIGNUM limbs hold it
# (little-endian on this machine).
priv=$(openssl ec -in "$V/ca/ca.key" -text -noout 2>/dev/null |
	sed -n '/^priv:/,/^pub:/p' | grep -v '^p' | tr -d ' :\n' | sed 's/^00//')
t_eq "the CA key's scalar was read" 64 "${#priv}"
rev=$(printf '%s' "$priv" | fold -w2 | tac | tr -d '\n')
pem=$(sed -n 2p "$V/ca/ca.key" | od -An -tx1 | tr -d ' \n')
memscan() { # pid hex-needle... -> the indices of the needles found
	python3 - "$@" <<-'EOF'
	import sys
	pid, needles = sys.argv[1], [bytes.fromhex(h) for h in sys.argv[2:]]
	found = set()
	# read in 64 MiB steps (overlapping by a needle's length); mappings of
	# 1 GiB and more are AddressSanitizer's shadow (make sanitize), reserved
	# and never holding program data: a read of one whole would fail
	step, over = 64 << 20, max(map(len, needles))
	with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
	    for line in maps:
	        f = line.split()
	        if f[1][0] != "r" or line.rstrip().endswith(("[vvar]", "[vsyscall]")):
	            continue
	        lo, hi = (int(x, 16) for x in f[0].split("-"))
	        if hi - lo >= 1 << 30:
	            continue
	        for at in range(lo, hi, step):
	            try:
	                mem.seek(at)
	                data = mem.read(min(step + over, hi - at))
	            except (OSError, OverflowError, ValueError):
	                continue
	            found.update(i for i, n in enumerate(needles) if n in data)
	print(" ".join(map(str, sorted(found))))
	EOF
}
t_match "control: the CA process's memory holds the CA key" "[0-9]" \
	"$(memscan "$ca_pid" "$priv" "$rev" "$pem")"
t_eq "the monitor's memory holds no form of it" "" \
	"$(memscan "$V_VAULT_PID" "$priv" "$rev" "$pem")"
t_eq "nor does a worker's" "" "$(memscan "$w1" "$priv" "$rev" "$pem")"

hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
gh=$(hex "$V_GH_VALUE")
a2=$(hex agent2-value-0123)
t_eq "control: each worker holds its own sandbox's value (agent-1: 0, agent-2: 1)" "0 1" \
	"$(memscan "$w1" "$gh" | tr -d '\n') $(memscan "$w2" "$gh" "$a2" | tr -d '\n')"
t_eq "the worker of agent-1 does not hold agent-2's value" "" "$(memscan "$w1" "$a2")"
t_eq "the worker of agent-2 does not hold agent-1's value" "" "$(memscan "$w2" "$gh")"
t_eq "the monitor holds no secret value" "" "$(memscan "$V_VAULT_PID" "$gh" "$a2")"

# Killing the worker of agent-1: its open connection breaks (nothing passes
# unjudged), agent-2 is served meanwhile, and the next connection of
# agent-1 gets a new worker.
lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" "$LAB_DIR/held" >"$LAB_DIR/held.out" 2>&1 <<-'EOF' &
	import os, socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	s = ctx.wrap_socket(socket.create_connection(("api.github.test", 443), timeout=20),
	                    server_hostname="api.github.test")
	s.sendall(b"GET / HTTP/1.1\r\nHost: api.github.test\r\n\r\n")
	print("first:", s.recv(4096).split(b"\r\n")[0].decode())
	open(sys.argv[2], "w").close()
	while os.path.exists(sys.argv[2]):
	    time.sleep(0.05)
	try:
	    s.sendall(b"GET /after-kill HTTP/1.1\r\nHost: api.github.test\r\n\r\n")
	    r = s.recv(4096)
	    print("second:", r.split(b"\r\n")[0].decode() if r else "EOF")
	except OSError as e:
	    print("second:", type(e).__name__)
	EOF
held=$!
for _ in $(seq 1 100); do [ -e "$LAB_DIR/held" ] && break; sleep 0.1; done
# the workers as they are now (the ones above may have ended idle during
# the scans in a slow run): agent-1's holds the connection, agent-2's has
# just served one
vcurl 2 https://api.github.test/ -o /dev/null
w1=$(worker agent-1)
w2=$(worker agent-2)
t_ok "agent-1 and agent-2 have a worker each" test -n "$w1" -a -n "$w2"
kill -KILL "$w1"
sleep 0.3
rm -f "$LAB_DIR/held"
wait $held
t_match "a held connection of agent-1 was served before" "first: HTTP/1.1 200" \
	"$(cat "$LAB_DIR/held.out")"
t_match "... and broken when its worker was killed" "second: (EOF|[A-Za-z]*Error)" \
	"$(cat "$LAB_DIR/held.out")"
t_nomatch "... its request sent after the kill never reached the upstream" "/after-kill" \
	"$(v_upstream_log)"
t_eq "agent-2 is served while agent-1's worker is gone" 200 \
	"$(vcurl 2 https://api.github.test/ -o /dev/null -w '%{http_code}')"
t_eq "the worker of agent-2 is the same" "$w2" "$(worker agent-2)"
t_eq "agent-1's next connection gets a new worker: 200" 200 \
	"$(vcurl 1 https://api.github.test/ -o /dev/null -w '%{http_code}')"
w1b=$(worker agent-1)
t_ok "... a new process" test -n "$w1b" -a "$w1b" != "$w1"

# memory per idle worker, as the metrics report it
M=$("$V_BIN/portcullis" -c "$V/portcullis.yaml" metrics 2>/dev/null)
rss=$(printf '%s\n' "$M" | grep "^portcullis_vault_worker_rss_bytes{sandbox=\"agent-2\"" | awk '{print $NF}')
t_ok "the metrics report each worker's memory" test -n "$rss"
t_diag "resident memory of the idle worker of agent-2: $((${rss:-0} / 1024)) KiB;" \
	"$(awk '/^(Pss|Private_Clean|Private_Dirty):/ {printf "%s %s KiB ", $1, $2}' \
		"/proc/$w2/smaps_rollup" 2>/dev/null)"
t_lt "... under 32 MiB" "${rss:-0}" $((32 * 1024 * 1024))
t_match "the metrics count the workers" "^portcullis_vault_workers 2" "$M"
t_match "and add up their requests" 'portcullis_vault_requests_total\{outcome="allowed"\} [4-9]' "$M"

# an idle worker ends (after twice vault.idle_timeout_ms: 5 s here, 20 s sanitized)
for _ in $(seq 1 $((V_IDLE_MS * 3 / 100))); do kill -0 "$w2" 2>/dev/null || break; sleep 0.1; done
t_fail "the idle worker of agent-2 ended" kill -0 "$w2"

# SIGHUP: the CA process rereads the policy with the daemon. A name it did
# not allow before is signed after (the daemon allows it only then too).
www() { vcurl 1 --resolve "www.github.test:443:$LAB_API4" https://www.github.test/echo -o /dev/null -w '%{http_code}'; }
t_eq "www.github.test, not allowed yet: no handshake" 000 "$(www 2>/dev/null)"
sed -i 's/^allow:$/allow:\n  - host: www.github.test\n    ports: [443]/' "$V/rules.d/agents.yaml"
kill -HUP "$V_VAULT_PID"
sleep 0.5
t_eq "after SIGHUP the CA process signs it: 200" 200 "$(www)"
t_eq "the CA process is the same one (reloaded, not restarted)" "$ca_pid" \
	"$(pgrep -P "$V_VAULT_PID" -x vault-ca)"
w1c=$(worker agent-1)
t_ok "the worker was replaced on reload" test -n "$w1c" -a "$w1c" != "$w1b"

# The CA process dies: the vault stops (fail closed) rather than serve
# without a CA it cannot restart (it is no longer root).
kill -KILL "$ca_pid"
for _ in $(seq 1 50); do kill -0 "$V_VAULT_PID" 2>/dev/null || break; sleep 0.1; done
t_fail "when the CA process dies the vault stops" kill -0 "$V_VAULT_PID"
t_match "... saying why" "the CA process ended; stopping" "$(cat "$LAB_DIR/vault.stderr")"
t_eq "... and serves nobody" 000 \
	"$(vcurl 1 https://api.github.test/echo -o /dev/null -w '%{http_code}' 2>/dev/null)"

# The monitor dies (SIGKILL): a worker ends too, by its death signal (set
# again after its change of uid, which clears it; the monitor's CAP_KILL
# lets the kernel deliver it to the other uid), even one serving an open
# connection: within 2 s, well before that connection's idle timeout.
vault_start
lab_sb 1 python3 - "$LAB_DIR/vault-ca.pem" "$LAB_DIR/held3" <<-'EOF' &
	import socket, ssl, sys, time
	ctx = ssl.create_default_context(cafile=sys.argv[1])
	s = ctx.wrap_socket(socket.create_connection(("api.github.test", 443), timeout=20),
	                    server_hostname="api.github.test")
	s.sendall(b"GET / HTTP/1.1\r\nHost: api.github.test\r\n\r\n")
	s.recv(4096)
	open(sys.argv[2], "w").close()
	time.sleep(15)
	EOF
held=$!
for _ in $(seq 1 100); do [ -e "$LAB_DIR/held3" ] && break; sleep 0.1; done
w=$(worker agent-1)
t_ok "a restarted vault's worker serves a held connection" test -n "$w"
kill -KILL "$V_VAULT_PID"
for _ in $(seq 1 20); do kill -0 "$w" 2>/dev/null || break; sleep 0.1; done
t_fail "when the monitor is killed its worker ends, a connection open" kill -0 "$w"
kill "$held" 2>/dev/null
wait "$held" 2>/dev/null
t_done
