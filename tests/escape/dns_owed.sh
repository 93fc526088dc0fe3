# runs alone: its flood must outrun one housekeeping round (10 s) to show the old loss; counted on a quiet machine
# Escape attempts, class "DNS records owed" (issue 30, item 4): an allowed
# query's record is deferred to its answer; a resolver that never answers
# leaves the engine owing the records. The guard owed them on one list
# bounded by DG_OWED_MAX (65536): past it the oldest were dropped, only
# counted, so a sandbox flooding allowed names at a resolver it had made
# mute (or a mute resolver and a busy one) sent queries that reached the
# resolver with no record in the log. Now each sandbox may owe at most its
# share (65536 over the policy's sandboxes): past it its new queries are
# refused, recorded (event.code dns_owed_quota), until records drain; none
# is dropped. Evidence: the upstream capture (every query that reached the
# resolver), the engine's counts of judged queries, and the log.
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init dns_owed "No DNS record dropped: a flood at a resolver that does not answer"
# Sandbox 1 may send as fast as the engine judges (its new-flow limit, 1000
# queries a second by default, raised as for a load test): the old list
# overflowed only past 65536 records owed in one housekeeping round.
ESC_ALLOW1='  - host: "*.owed.test"
    ports: [443]
limits: { new_flows_per_second: 1000000, new_flows_burst: 1000000 }'
esc_up 2
# Two flood rounds into one housekeeping round, whatever its phase: the
# old list overflowed past 65536 owed records in one round.
N=${PC_OWED_FLOOD:-140000}
DNSMASQ_PID=$(cat "$LAB_DIR/dnsmasq.pid")
trap 'kill -CONT $DNSMASQ_PID 2>/dev/null; esc_finish' EXIT

judged() { guard_status_field 's["dnsguard"]["queries_allowed"] + s["dnsguard"]["queries_refused"]'; }
# The flood's records and the names that reached the resolver, compared.
# Prints: records judged allowed refused_share refused_other reached unrecorded
owed_tally() {
	tcpdump -n -r "$LAB_DIR/upstream.pcap" "udp and dst port 53 and src host $SB1_4" 2>/dev/null |
		python3 -c '
import json, re, sys
reached = set()
for l in sys.stdin:
    m = re.search(r" ([A-Za-z0-9-]+\.owed\.test)\. ", l)
    if m:
        reached.add(m.group(1).lower())
allowed, share, other = set(), 0, 0
n = 0
for l in open(sys.argv[1]):
    if ".owed.test" not in l:
        continue
    r = json.loads(l)
    if r.get("event.action") != "dns-query":
        continue
    n += 1
    if r.get("event.reason") == "name allowed":
        allowed.add(r.get("dns.question.name"))
    elif r.get("event.code") == "dns_owed_quota":
        share += 1
    else:
        other += 1
print(n, len(allowed), share, other, len(reached), len(reached - allowed))
' "$GUARD_DIR/log/verdicts.jsonl"
}

t_match "baseline: sandbox 2's allowed name resolves" "^NOERROR" \
	"$(esc_craft 2 dns --server "$LAB_RESOLVER4" --name api.github.test)"
j0=$(judged)

esc_begin "sandbox 1 floods $N allowed names at a resolver that does not answer"
kill -STOP "$DNSMASQ_PID"
# Paced (16 queries a millisecond at most): a burst faster than the engine
# overflows its kernel queue, and a query the kernel drops is never judged.
t0=$SECONDS
out=$(esc_craft 1 dnsflood --server "$LAB_RESOLVER4" --count "$N" --suffix owed.test \
	--pace "${PC_OWED_PACE:-16}" 2>&1)
esc_settle
j1=$(judged)
want=$((j1 - j0))
t_diag "flood: $out in $((SECONDS - t0)) s; the engine judged $want"
# Sandbox 2 owes nothing: its share is its own (sandbox 1's flood filled
# only sandbox 1's). Its query is deferred and left unanswered too.
out2=$(esc_craft 2 dns --server "$LAB_RESOLVER4" --name api.github.test --timeout 1 2>&1 || true)
t_nomatch "sandbox 2's query is not refused for sandbox 1's share" "REFUSED" "$out2"
# Every judged query's record arrives: refused ones at once, deferred ones
# when they expire (10 s) at the next housekeeping round (10 s later at
# most). Polled against the judged count, with a deadline.
deadline=$((SECONDS + 90))
while :; do
	read -r recs allowed share other reached unrec <<<"$(owed_tally)"
	[ "$recs" -ge "$want" ] && break
	[ "$SECONDS" -lt "$deadline" ] || break
	sleep 1
done
kill -CONT "$DNSMASQ_PID"
t_diag "judged $want; records $recs: allowed $allowed, refused for the share $share, other $other; names that reached the resolver $reached, of them unrecorded $unrec"
t_eq "every query the engine judged has its record (none dropped)" "$want" "$recs"
t_eq "every name that reached the resolver has an allowed record" 0 "$unrec"
t_lt "the flood reached sandbox 1's share: queries refused for it" 0 "$share"
t_eq "no record of another kind" 0 "$other"
r=$(esc_reason "\"event.code\":\"dns_owed_quota\"")
t_match "a share refusal says why" "share of queries awaiting their record" "$r"
sb2_owed() { esc_field message "\"source.ip\":\"$SB2_4\".*\"dns.question.name\":\"api.github.test\"" | grep -q "no answer"; }
lab_wait_until sb2_owed
r2=$(esc_field message "\"source.ip\":\"$SB2_4\".*\"dns.question.name\":\"api.github.test\"")
t_match "sandbox 2's unanswered query has its record" "no answer within 10 s" "$r2"
esc_end "refused past the share, recorded; none dropped" \
	"judged $want, records $recs (allowed $allowed, share $share); reached $reached, unrecorded $unrec"
t_done
