# Escape attempts, class "resource abuse": sandbox 1 tries to exhaust the
# guard — a SYN flood, a DNS flood, thousands of learned names — while
# sandbox 2 goes about its allowed business. What must hold: the flood gets
# nothing out that is not allowed, and sandbox 2's allowed request succeeds
# *during* the flood (no timing threshold: it simply has to work), the
# engine keeps its memory bounds, and the log still verifies. Slowloris
# against the vault is tests/escape/resource_vault.sh.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init resource "Resource abuse (engine)"
# Thousands of names with an address each: dnsmasq synthesizes
# <address-with-dashes>.flood.test inside a documentation IPv6 range.
LAB_DNS_EXTRA="--synth-domain=flood.test,2001:db8:f100::/112"
ESC_ALLOW1='  - host: "*.flood.test"
    ports: [443]'
esc_up 2
queued() { guard_status_field 'sum(q["queued"] for q in s["queues"])'; }
sb2_ok() { lab_sb 2 curl -sS --max-time 10 http://$LAB_DIRECT4/ 2>&1; }
sb2_host_ok() { lab_sb 2 curl -sS --max-time 10 --cacert "$LAB_CA" https://api.github.test/ 2>&1; }
wait_queued_beyond() { # n: until the engine has taken n more packets (the flood is on)
	local q0 i
	q0=$(queued)
	for i in $(seq 1 100); do
		[ "$(($(queued) - q0))" -ge "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

# ---- SYN flood ------------------------------------------------------------------------
esc_begin "SYN flood: 40,000 SYNs from sandbox 1 (random ports) to paste.evil.test:443 and to its allowed 203.0.113.99:80"
lab_sb 1 python3 "$ESC_CRAFT" synflood --dst $LAB_PASTE4 --dport 443 --count 30000 >"$LAB_DIR/flood1.out" 2>&1 &
f1=$!
lab_sb 1 python3 "$ESC_CRAFT" synflood --dst $LAB_DIRECT4 --dport 80 --count 10000 >"$LAB_DIR/flood2.out" 2>&1 &
f2=$!
wait_queued_beyond 500
out=$(sb2_ok)
t_match "during the flood, sandbox 2's allowed request succeeds" "^http 203.0.113.99 ok" "$out"
running=$(kill -0 $f1 2>/dev/null && echo yes || echo no)
wait $f1 $f2
t_diag "flood still running when sandbox 2's request finished: $running; $(cat "$LAB_DIR/flood1.out" "$LAB_DIR/flood2.out" | tr '\n' ' ')"
esc_expect_nothing "syn flood" "dst host $LAB_PASTE4"
st=$(guard_cli status --json)
t_ok "the engine is alive and answers" test -n "$st"
esc_end "all refused; sandbox 2 served during the flood" \
	"upstream capture: 0 packets to $LAB_PASTE4; sandbox 2: $(printf '%s' "$out" | head -1); kernel_dropped: $(printf '%s' "$st" | python3 -c 'import json,sys; print(sum(q["kernel_dropped"] for q in json.load(sys.stdin)["queues"]))')"

# ---- DNS flood -------------------------------------------------------------------------
esc_begin "DNS flood: 30,000 queries from sandbox 1 (new names, refused and allowed) while sandbox 2 resolves and connects"
r0=$(grep -c 'query\[' "$LAB_DIR/dnsmasq.log")
lab_sb 1 python3 "$ESC_CRAFT" dnsflood --server $LAB_RESOLVER4 --count 20000 --suffix evil.test >"$LAB_DIR/dflood1.out" 2>&1 &
f1=$!
lab_sb 1 python3 "$ESC_CRAFT" dnsflood --server $LAB_RESOLVER4 --count 10000 --suffix github.test --qtype TXT >"$LAB_DIR/dflood2.out" 2>&1 &
f2=$!
wait_queued_beyond 500
out=$(sb2_host_ok)
t_match "during the flood, sandbox 2 resolves api.github.test and connects" "^api.github.test ok" "$out"
wait $f1 $f2
t_diag "$(cat "$LAB_DIR/dflood1.out" "$LAB_DIR/dflood2.out" | tr '\n' ' ')"
leaked=$(grep -cE 'query\[[A-Z]+\] n[0-9]+-[0-9]+\.(evil|github)\.test' "$LAB_DIR/dnsmasq.log" | tr -d ' ')
t_eq "none of the flood's (refused) queries reached the resolver" 0 "$leaked"
t_ok "the engine is alive" guard_cli status
esc_end "all refused; sandbox 2 served during the flood" \
	"dnsmasq log: 0 flood queries; $(cat "$LAB_DIR/dflood1.out" | tr -d '\n'); sandbox 2: $(printf '%s' "$out" | head -1)"

# ---- thousands of learned names ------------------------------------------------------------
esc_begin "thousands of learned names: sandbox 1 resolves 5,000 names of an allowed wildcard, each its own address"
lab_sb 1 python3 - "$LAB_RESOLVER4" >"$LAB_DIR/learn.out" 2>&1 <<'EOF' &
import ipaddress, select, socket, struct, sys
res = sys.argv[1]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def q(name, ident):
    qn = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + qn + struct.pack("!HH", 28, 1)
base = int(ipaddress.IPv6Address("2001:db8:f100::"))
got = 0
for batch in range(25):                      # 25 x 200 names, each batch answered before the next
    for i in range(200):
        n = batch * 200 + i + 1
        name = str(ipaddress.IPv6Address(base + n)).replace(":", "-") + ".flood.test"
        s.sendto(q(name, n), (res, 53))
    for i in range(200):
        r, _, _ = select.select([s], [], [], 2)
        if not r:
            break
        s.recvfrom(4096)
        got += 1
print("answers", got)
EOF
lp=$!
wait_queued_beyond 200
out=$(sb2_host_ok)
t_match "meanwhile sandbox 2 resolves and connects" "^api.github.test ok" "$out"
wait $lp
t_diag "$(cat "$LAB_DIR/learn.out")"
st=$(guard_cli status --json)
learned=$(printf '%s' "$st" | python3 -c 'import json,sys; d=json.load(sys.stdin)["dnsguard"]; print(d["learned_entries"], d["learned_evicted"])')
t_match "the guard learned thousands of addresses" "^[0-9]{4,} " "$learned"
# (the count is over all sandboxes: sandbox 2's few api.github.test addresses come on top)
t_ok "within sandbox 1's bound (dns.max_learned_per_sandbox 4096, plus sandbox 2's few)" \
	test "${learned%% *}" -le $((4096 + 4))
t_lt "the oldest were evicted (learned_evicted)" 0 "${learned##* }"
t_match "sandbox 1's other allowed name still works" "^api.github.test ok" \
	"$(lab_sb 1 curl -sS --max-time 10 --cacert "$LAB_CA" https://api.github.test/ 2>&1)"
rss=$(lab_gw ps -o rss= -p "$(guard_engine_pid)" | tr -d ' ')
esc_end "bounded: learned ${learned%% *} entries, ${learned##* } evicted" "status dnsguard learned_entries/evicted; engine RSS ${rss} kB; sandbox 2 served meanwhile"

t_ok "the engine survived it all" guard_cli status
t_ok "the verdict log verifies" guard_cli log verify
t_done
