# The real receiver as the oracle (issue 30, item 2): seeded, generated TCP
# segment sequences (urgent data with pointers anywhere and on bare ACKs,
# overlaps in both orders with the same and other bytes, holes,
# retransmissions with other bytes, window edges and probes, FIN and RST
# inside data, timestamps (PAWS-stale too), SACK, window scale; IPv4 and
# IPv6) from sandbox 1 through the real gateway to a TLS server on the
# address cdn-good.test and cdn-evil.test share (with and without
# SO_OOBINLINE; it logs every byte its application read and the name it
# selected) and to dnsmasq (its query log). tests/escape/tcp_oracle.py
# checks every case against the engine's records alone and shrinks a
# disagreement to a minimal sequence. It does not share the engine's
# model of TCP: what counts is what the receiving application read.
#
# make test: a fixed seed and a bounded count (PC_ORACLE_SEED,
# PC_ORACLE_COUNT); PC_SOAK=1 (make soak): a random seed, printed, and
# more cases. Against other binaries: GUARD_BIN=/path/to/build.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init tcp_oracle "The receiving application as the oracle of the engine's TCP judgement"
ESC_ALLOW1='  - host: cdn-good.test
    ports: [8443, 8444]'
esc_up 1
esc_crafted_ports 1 50000-59999

srv() { # port [--inline]
	ip netns exec "$LAB_UP" python3 "$ESC_CRAFT" record-server --listen "$LAB_CDN4,$LAB_CDN6" \
		--port "$1" --cert "$LAB_DIR/pki/cdn.test.pem" --key "$LAB_DIR/pki/cdn.test.key" \
		--log "$LAB_DIR/record-server.log" --idle 1.5 ${2:-} >>"$LAB_DIR/record-server.err" 2>&1 &
	echo $! >"$LAB_DIR/record-server-$1.pid"
}
srv 8443 --inline
srv 8444
listening() { [ "$(grep -c '^listening' "$LAB_DIR/record-server.log" 2>/dev/null)" = 2 ]; }
lab_wait_until listening
t_eq "the two recording servers listen (8443 with SO_OOBINLINE, 8444 without)" 2 \
	"$(grep -c '^listening' "$LAB_DIR/record-server.log" 2>/dev/null)"

# The shared address is learned for cdn-good.test (both families): the
# engine holds the flows and judges their ClientHellos.
t_match "sandbox 1 resolves cdn-good.test (A)" "$LAB_CDN4" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test A)"
t_match "sandbox 1 resolves cdn-good.test (AAAA)" "$LAB_CDN6" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 cdn-good.test AAAA)"

if [ -n "${PC_SOAK:-}" ]; then
	seed=${PC_ORACLE_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
	count=${PC_ORACLE_COUNT:-400}
else
	seed=${PC_ORACLE_SEED:-22}
	count=${PC_ORACLE_COUNT:-60}
fi
t_diag "seed $seed, $count cases of each kind (PC_ORACLE_SEED=$seed reproduces them)"

esc_begin "generated segment sequences (seed $seed) to a TLS server on a shared address and to the resolver"
out=$(lab_sb 1 python3 "$PC_TOP/tests/escape/tcp_oracle.py" --seed "$seed" --count "$count" \
	--gw-mac "$ESC_GW_MAC" --sb4 "$SB1_4" --sb6 "$SB1_6" --cdn4 "$LAB_CDN4" --cdn6 "$LAB_CDN6" \
	--res4 "$LAB_RESOLVER4" --res6 "$LAB_RESOLVER6" --records "$GUARD_DIR/log/verdicts.jsonl" \
	--server-log "$LAB_DIR/record-server.log" --dnsmasq-log "$LAB_DIR/dnsmasq.log" ${PC_ORACLE_REPLAY:+--replay "$PC_ORACLE_REPLAY"} ${PC_ORACLE_ARGS:-} 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
summary=$(printf '%s\n' "$out" | grep '^cases checked' | tail -1)
t_match "cases were checked" "^cases checked [1-9]" "$summary"
t_match "every byte the applications read was judged, every name asked was allowed" \
	": 0 disagreements$" "$summary"
t_eq "the oracle exited cleanly" 0 "$rc"
esc_end "0 disagreements" "$summary"

for p in 8443 8444; do guard_pid_stop "record-server-$p"; done
t_done
