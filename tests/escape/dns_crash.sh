# Escape attempts, class "DNS records owed" (issue 34, point 1): an allowed
# query leaves for the resolver before its record is in the log (its record
# goes with its answer, or is written when none comes). The engine killed
# while queries were outstanding took their records with it: names reached
# the resolver that the log never named. Now each such query's record is
# pledged to logd before the query leaves (published in the ring the engine
# dies with), and logd writes the pledges its engine did not redeem when the
# engine's last session ends. Evidence: the upstream capture (every query
# that reached the resolver) against the log.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init dns_crash "No DNS record dies with the engine: killed with queries outstanding"
ESC_ALLOW1='  - host: "*.crash.test"
    ports: [443]
limits: { new_flows_per_second: 1000000, new_flows_burst: 1000000 }'
esc_up 2
N=${PC_CRASH_QUERIES:-400}
DNSMASQ_PID=$(cat "$LAB_DIR/dnsmasq.pid")
trap 'kill -CONT $DNSMASQ_PID 2>/dev/null; esc_finish' EXIT

# The names that reached the resolver, against the log's dns-query records.
# Prints: reached recorded unrecorded twice pledged
crash_tally() {
	tcpdump -n -r "$LAB_DIR/upstream.pcap" "udp and dst port 53 and src host $SB1_4" 2>/dev/null |
		python3 -c '
import collections, json, re, sys
reached = set()
for l in sys.stdin:
    m = re.search(r" ([A-Za-z0-9-]+\.crash\.test)\. ", l)
    if m:
        reached.add(m.group(1).lower())
seen = collections.Counter()
pledged = 0
for l in open(sys.argv[1]):
    if ".crash.test" not in l:
        continue
    r = json.loads(l)
    if r.get("event.action") != "dns-query" or r.get("event.reason") != "name allowed":
        continue
    seen[r.get("dns.question.name")] += 1
    pledged += "the engine ended before" in r.get("message", "")
print(len(reached), len(seen), len(reached - set(seen)),
      sum(1 for n in seen.values() if n > 1), pledged)
' "$GUARD_DIR/log/verdicts.jsonl"
}

t_match "baseline: sandbox 2's allowed name resolves" "^NOERROR" \
	"$(esc_craft 2 dns --server "$LAB_RESOLVER4" --name api.github.test)"

esc_begin "sandbox 1 sends $N allowed queries to a resolver that does not answer; the engine is SIGKILLed"
kill -STOP "$DNSMASQ_PID"
out=$(esc_craft 1 dnsflood --server "$LAB_RESOLVER4" --count "$N" --suffix crash.test \
	--pace 4 2>&1)
esc_settle
guard_engine_stop KILL
# logd writes the pledges once it sees the engine's sessions end: polled
# against the capture, with a deadline
deadline=$((SECONDS + 30))
while :; do
	read -r reached recorded unrec twice pledged <<<"$(crash_tally)"
	[ "$reached" -gt 0 ] && [ "$unrec" = 0 ] && break
	[ "$SECONDS" -lt "$deadline" ] || break
	sleep 1
done
t_diag "flood: $out; names that reached the resolver $reached, recorded $recorded (pledges written $pledged), unrecorded $unrec, recorded twice $twice"
t_lt "the queries reached the resolver (the capture is live)" 0 "$reached"
t_eq "every name that reached the resolver has its record, the engine dead" 0 "$unrec"
t_lt "those records are the pledges logd wrote for the dead engine" 0 "$pledged"
t_eq "no name recorded twice" 0 "$twice"
r=$(esc_field message "\"dns.question.name\":\"[^\"]*\\.crash\\.test\"")
t_match "a written pledge says why it was written" "the engine ended before the query's answer" "$r"
t_match "logd says it wrote them" "pledged and not redeemed: written" \
	"$(cat "$GUARD_DIR/logd.log" 2>/dev/null)"
esc_end "every query that left has its record" \
	"reached $reached, recorded $recorded (pledged $pledged), unrecorded $unrec"
kill -CONT "$DNSMASQ_PID"
t_done
