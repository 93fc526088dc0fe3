# Fault: kill -9 of each daemon (engine, logd, vault) while a sandbox keeps
# making requests — secret-bound ones through the vault, allowed direct
# ones, and refused ones. Nothing refused reaches the upstream at any time;
# while a daemon is gone new requests fail; after its restart service
# resumes; every request the upstream served has its acknowledged record
# (none lost), and the log verifies.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

vault_up
PH=$V_PH_GH
engine_start() {
	ip netns exec "$LAB_GW" "$V_BIN/portcullisd" -c "$V/portcullis.yaml" 2>>"$LAB_DIR/engine.stderr" &
	V_ENGINE_PID=$!
	lab_wait_until -p "$V_ENGINE_PID" lab_gw "$V_BIN/portcullis" -c "$V/portcullis.yaml" status --json
}
# One round of traffic: prints "vault CODE direct CODE denied CODE".
round() {
	local a b c
	a=$(vcurl 1 -o /dev/null -w '%{http_code}' --max-time 4 https://api.github.test/echo -H "Authorization: Bearer $PH" 2>/dev/null)
	b=$(lab_sb 1 curl -s -o /dev/null -w '%{http_code}' --max-time 4 --cacert "$LAB_CA" https://paste.evil.test/ 2>/dev/null)
	c=$(lab_sb 1 curl -s -o /dev/null -w '%{http_code}' --max-time 2 -k https://$LAB_DIRECT4/ 2>/dev/null)
	echo "vault ${a:-000} direct ${b:-000} denied ${c:-000}"
}
traffic() { # rounds -> background loop writing $LAB_DIR/traffic.out
	for i in $(seq 1 "$1"); do round; done >>"$LAB_DIR/traffic.out" 2>&1 &
	TRAFFIC=$!
}
more_rounds() { [ "$(wc -l <"$LAB_DIR/traffic.out")" -gt "$1" ]; }
up_lines() { v_upstream_log | wc -l | tr -d ' '; }
t_eq "baseline" "vault 200 direct 200 denied 000" "$(round)"

for d in engine logd vault; do
	: >"$LAB_DIR/traffic.out"
	traffic 30
	while [ "$(wc -l <"$LAB_DIR/traffic.out")" -lt 3 ]; do sleep 0.1; done
	case $d in
	engine) kill -9 "$V_ENGINE_PID"; wait "$V_ENGINE_PID" 2>/dev/null ;;
	logd) kill -9 "$(v_pid portcullis-logd)" ;;
	vault) kill -9 "$(v_pid portcullis-vault)" ;;
	esac
	t_diag "$d killed during traffic"
	out=$(round)
	case $d in
	engine) t_match "engine gone: new connections fail" "vault 000 direct 000 denied 000" "$out" ;;
	logd) t_match "logd gone: no record, no request (vault 503, direct refused)" "vault (503|000) direct 000 denied 000" "$out" ;;
	vault) t_match "vault gone: secret-bound requests fail, others go on" "vault 000 direct 200 denied 000" "$out" ;;
	esac
	# the traffic loop, too, ran a round with the daemon gone
	lab_wait_until -p "$TRAFFIC" more_rounds "$(wc -l <"$LAB_DIR/traffic.out")"
	case $d in
	engine) engine_start ;;
	logd) vault_logd_start ;;
	vault) vault_start ;;
	esac
	wait $TRAFFIC
	t_eq "$d restarted: service resumes" "vault 200 direct 200 denied 000" "$(round)"
	t_nomatch "$d: no refused request ever got through" "denied [1-9]" "$(cat "$LAB_DIR/traffic.out")"
	t_diag "$d: $(sort "$LAB_DIR/traffic.out" | uniq -c | tr '\n' ';')"
done

t_eq "the upstream never served the refused address" 0 "$(v_upstream_log | grep -c "^$LAB_DIRECT4 ")"
served_vault=$(v_upstream_log | grep -c '^203.0.113.10 api.github.test "GET /echo')
served_direct=$(v_upstream_log | grep -c '^203.0.113.12 paste.evil.test "GET / ')
rec_vault=$(v_verdicts | grep '"event.action":"http-request"' | grep '"event.outcome":"success"' | grep -c '"url.path":"/echo"')
rec_direct=$(v_verdicts | grep '"event.action":"connect"' | grep '"event.outcome":"success"' | grep -c '"destination.domain":"paste.evil.test"')
t_diag "served: vault $served_vault direct $served_direct; records: vault $rec_vault direct $rec_direct"
t_ok "every request the upstream served through the vault has its record" test "$rec_vault" -ge "$served_vault"
t_ok "every direct connection the upstream served has its record" test "$rec_direct" -ge "$served_direct"
# Every DNS query of the sandbox that reached the resolver has its allowed
# dns-query record, whichever daemon died under it: a query leaves before
# its record is in (deferred to its answer, docs/dnsguard.md), so a death
# between the two must not take the record with it. Owed records are
# written every 10 s: polled. Prints: reached unrecorded [which]
dns_unrecorded() {
	v_verdicts | python3 -c '
import collections, json, re, sys
reached = collections.Counter()
for l in open(sys.argv[1], errors="replace"):
    m = re.search(r"query\[(\w+)\] (\S+) from (\S+)$", l.strip())
    if m and m.group(3) == sys.argv[2]:
        reached[(m.group(2).lower().rstrip("."), m.group(1))] += 1
recs = collections.Counter()
for l in sys.stdin:
    r = json.loads(l)
    if r.get("event.action") == "dns-query" and r.get("event.outcome") == "success":
        recs[(r.get("dns.question.name"), r.get("dns.question.type"))] += 1
short = {k: n - recs[k] for k, n in reached.items() if recs[k] < n}
print(sum(reached.values()), sum(short.values()), short or "")
' "$LAB_DIR/dnsmasq.log" "$(lab_sb_ip4 1)"
}
dns_all_recorded() { [ "$(dns_unrecorded | cut -d" " -f2)" = 0 ]; }
deadline=$((SECONDS + 30))
until dns_all_recorded || [ "$SECONDS" -ge "$deadline" ]; do sleep 1; done
read -r dns_reached dns_short dns_which <<<"$(dns_unrecorded)"
t_diag "DNS: $dns_reached queries of the sandbox reached the resolver; without a record: $dns_short $dns_which"
t_lt "the sandbox's DNS queries reached the resolver" 0 "$dns_reached"
t_eq "every DNS query that reached the resolver has its record" 0 "$dns_short"
t_ok "the log verifies after three kills" "$V_BIN/portcullis" -c "$V/portcullis.yaml" log verify
t_nomatch "the value never reached a sandbox or the log" "$V_GH_VALUE" "$(cat "$LAB_DIR/traffic.out"; v_verdicts)"
t_done
