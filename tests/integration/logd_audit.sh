#!/bin/bash
# `portcullis log audit` (docs/logd.md, "Audit"): a log the real engine
# wrote in the lab (allowed and refused connects, DNS queries and
# answers, a held flow promoted on its server name) audits clean; three
# logs that verify all the same (rewritten and signed again with logd's
# own key by tests/helpers/log_resign: a compromised engine's honest-looking
# lies) each give exactly the disagreements they should:
#   - the policy named by every record swapped for a stricter one,
#   - one refused connect flipped to allowed,
#   - the DNS answer before an allowed connect left out;
# and, one per kind the records now carry the facts of (issue 35), a
# record the spec allows and the same record made one it does not: a held
# flow's timeout refusal held shorter than engine.sni_timeout_ms, a held
# flow refused on a ClientHello naming an allowed name, the vault's V2
# refusal flipped to allowed, a refused DNS-over-TCP query flipped to
# allowed, a malformed packet's refusal flipped to allowed.
cd "${PC_TOP:-$(dirname "$0")/../..}" || exit 1
PC_TOP=$(pwd)
PC_BUILD=${PC_BUILD:-$PC_TOP/build}
GUARD_BIN=${GUARD_BIN:-$PC_BUILD}
. tests/escape/escape_lib.bash

RESIGN=$PC_BUILD/tests/helpers/log_resign
[ -x "$RESIGN" ] || { echo "1..0 # SKIP $RESIGN not built"; exit 0; }

# (the escape suite's lab and policy, without its report rows)
guard_need_bins
lab_up 2
trap lab_down EXIT
guard_config
esc_policy
guard_start || { t_fail "the guard started" true; t_done; }

# --- traffic: every kind of verdict record the model judges -----------------
lab_sb 1 dig +short +time=2 +tries=1 api.github.test A >/dev/null
t_match "held flow: the allowed name's HTTPS answers" "." \
	"$(lab_sb 1 curl -sS --max-time 4 --cacert "$LAB_CA" https://api.github.test/ 2>&1)"
t_eq "refused: a DNS query for a name the policy does not allow" "" \
	"$(lab_sb 1 dig +short +time=2 +tries=1 paste.evil.test A 2>/dev/null | grep -v '^;')"
lab_sb 1 curl -s -o /dev/null --max-time 3 -k "https://$LAB_PASTE4/" || true
lab_sb 2 curl -s -o /dev/null --max-time 3 "telnet://$LAB_SSH4:22" || true
# DNS over TCP: an allowed query and a refused one (S8, S9 on a stream)
lab_sb 1 dig +tcp +short +time=2 +tries=1 api.github.test A >/dev/null 2>&1 || true
lab_sb 1 dig +tcp +short +time=2 +tries=1 paste.evil.test A >/dev/null 2>&1 || true
# The engine starts again: what it learned died with the old process, so
# the address api.github.test had allows nothing until it is asked again
# (refused, not resolved); the audit's model forgets at the engine's
# "loaded at start" record too, or it would take the refusal for a flow
# the spec holds
guard_engine_stop
guard_engine_start || t_fail "the engine started again" true
t_eq "after an engine restart, the address learned before it is refused" "000" \
	"$(lab_sb 1 curl -s -o /dev/null -w '%{http_code}' --max-time 3 --cacert "$LAB_CA" \
		--resolve "api.github.test:443:$LAB_API4" https://api.github.test/ 2>/dev/null)"
esc_settle
guard_stop

LOG=$GUARD_DIR/log/verdicts.jsonl
KEY=$GUARD_DIR/state/log.key
POL=$LAB_DIR/policies
# the held flow's allowed record (its server name)
HELD=$(grep -o '"event.sequence":[0-9]*,[^}]*"tls.client.server_name":"api.github.test"' "$LOG" |
	head -1 | sed 's/"event.sequence":\([0-9]*\),.*/\1/')
# the policy store as docs/policy.md defines it: the canonical form under
# its hash
mkdir -p "$POL"
HASH=$(guard_cli policy hash | grep -o 'sha256:[0-9a-f]*')
guard_cli policy hash --canonical >"$POL/$HASH"

audit() { # out-file args...
	local out=$1
	shift
	lab_gw "$GUARD_BIN/portcullis" -c "$GUARD_CONF" log audit --policies "$POL" "$@" \
		>"$out" 2>&1
}

# --- 1. the log as the engine wrote it ----------------------------------------
rc=0
audit "$LAB_DIR/clean.out" "$LOG" || rc=$?
sed 's/^/# /' "$LAB_DIR/clean.out"
t_eq "the lab's log audits clean (exit 0)" 0 "$rc"
t_lt "the log has the refusal after the restart (not resolved)" 0 \
	"$(grep '"event.code":"not_resolved"' "$LOG" | grep -c "\"destination.ip\":\"$LAB_API4\"")"
t_match "it judged verdicts of every kind the lab made" \
	"audit: [0-9]+ records, [0-9]+ verdicts .*: [1-9][0-9]* confirmed, 0 disagreements, 0 not judged" \
	"$(head -n 20 "$LAB_DIR/clean.out")"
for k in connect dns-query; do
	t_lt "the log has $k records allowed and refused" 0 \
		"$(grep -c "\"event.action\":\"$k\",\"event.outcome\":\"failure\"" "$LOG")"
done
t_lt "the log has the held flow's allowed record (its server name)" 0 \
	"$(grep -c '"tls.client.server_name":"api.github.test"' "$LOG")"
t_lt "the log has the answer the guard learned from" 0 \
	"$(grep -c '"event.action":"dns-learn"' "$LOG")"
# without --policies: the store the engine itself filled (docs/policy.md)
rc=0
lab_gw "$GUARD_BIN/portcullis" -c "$GUARD_CONF" log audit "$LOG" >"$LAB_DIR/store.out" 2>&1 ||
	rc=$?
t_eq "by default, against the policy store the engine filled: clean (exit 0)" 0 "$rc"
t_match "... every verdict confirmed" ", 0 disagreements, 0 not judged" "$(cat "$LAB_DIR/store.out")"

# --- 2. every record names a stricter policy -----------------------------------
# agent-1 loses api.github.test: its allowed connect and query must show.
STRICT=$LAB_DIR/strict
mkdir -p "$STRICT"
sed '/host: api.github.test/,+1d' "$GUARD_DIR/rules.d/agents.yaml" >"$STRICT/agents.yaml"
sed "s#^rules: .*#rules: $STRICT#" "$GUARD_CONF" >"$LAB_DIR/strict.yaml"
SHASH=$(lab_gw "$GUARD_BIN/portcullis" -c "$LAB_DIR/strict.yaml" policy hash |
	grep -o 'sha256:[0-9a-f]*')
lab_gw "$GUARD_BIN/portcullis" -c "$LAB_DIR/strict.yaml" policy hash --canonical \
	>"$POL/$SHASH"
"$RESIGN" "$KEY" "$LOG" "$LAB_DIR/strict.jsonl" "all:portcullis.policy=\"$SHASH\""
t_eq "the swapped log verifies (signed again with the log key)" 0 \
	"$(guard_cli log verify "$LAB_DIR/strict.jsonl" >/dev/null 2>&1; echo $?)"
rc=0
audit "$LAB_DIR/strict.out" "$LAB_DIR/strict.jsonl" || rc=$?
sed 's/^/# /' "$LAB_DIR/strict.out"
t_eq "a log under a stricter policy does not audit (exit 1)" 1 "$rc"
want=$(python3 - "$LOG" <<-'PY'
	import json, sys
	seqs = []
	for l in open(sys.argv[1]):
	    r = json.loads(l)
	    # what agent-1 was allowed for the name, and the answer it learned
	    # from (no query of it is outstanding under the stricter policy)
	    if r.get("portcullis.sandbox") != "agent-1" or \
	       r.get("event.outcome", "learn") not in ("success", "learn"):
	        continue
	    if r.get("dns.question.name") == "api.github.test" or \
	       r.get("tls.client.server_name") == "api.github.test":
	        seqs.append(str(r["event.sequence"]))
	print(" ".join(seqs))
	PY
)
got=$(sed -n 's/^disagreement: seq \([0-9]*\),.*/\1/p' "$LAB_DIR/strict.out" | tr '\n' ' ')
t_eq "exactly the allowed queries, their answer and the held flow for api.github.test disagree" "$want" "${got% }"

# --- 3. one refused connect flipped to allowed -----------------------------------
FLIP=$(python3 - "$LOG" "$LAB_PASTE4" <<-'PY'
	import json, sys
	for l in open(sys.argv[1]):
	    r = json.loads(l)
	    if r.get("event.action") == "connect" and r.get("destination.ip") == sys.argv[2] \
	       and r.get("event.outcome") == "failure":
	        print(r["event.sequence"]); break
	PY
)
"$RESIGN" "$KEY" "$LOG" "$LAB_DIR/flip.jsonl" "$FLIP:event.outcome=\"success\""
t_eq "the flipped log verifies" 0 \
	"$(guard_cli log verify "$LAB_DIR/flip.jsonl" >/dev/null 2>&1; echo $?)"
rc=0
audit "$LAB_DIR/flip.out" "$LAB_DIR/flip.jsonl" || rc=$?
sed 's/^/# /' "$LAB_DIR/flip.out"
t_eq "a flipped verdict does not audit (exit 1)" 1 "$rc"
t_eq "exactly the flipped record disagrees, under S26 (refused)" \
	"disagreement: seq $FLIP, spec row S26: the spec allows REJECT; connect refused" \
	"$(grep '^disagreement:' "$LAB_DIR/flip.out")"
rc=0
audit "$LAB_DIR/from.out" --from $((FLIP + 1)) "$LAB_DIR/flip.jsonl" || rc=$?
t_eq "--from past the flipped record: what comes after it audits clean (exit 0)" 0 "$rc"
rc=0
audit "$LAB_DIR/from2.out" --from "$HELD" "$LAB_DIR/strict.jsonl" || rc=$?
t_match "--from the held flow under the stricter policy: the records before it are replayed, not judged" \
	"^disagreement: seq $HELD, spec row S26" "$(grep '^disagreement:' "$LAB_DIR/from2.out" | head -1)"

# --- 4. the answers before an allowed connect left out ---------------------------
# Every record that taught agent-1 api.github.test's addresses before its
# held flow (the dns-learn of dig's answer, curl's queries whose records
# were deferred to their answers) is dropped: the flow's record remains.
DROPS=$(python3 - "$LOG" "$HELD" <<-'PY'
	import json, sys
	for l in open(sys.argv[1]):
	    if l.startswith('{"checkpoint"'): continue
	    r = json.loads(l)
	    if r["event.sequence"] < int(sys.argv[2]) and r.get("dns.resolved_ip") and \
	       r.get("dns.question.name") == "api.github.test":
	        print("%d:drop" % r["event.sequence"])
	PY
)
ndrop=$(printf '%s\n' $DROPS | grep -c drop)
t_lt "the log has answers for the held flow's name before it" 0 "$ndrop"
# shellcheck disable=SC2086
"$RESIGN" "$KEY" "$LOG" "$LAB_DIR/noanswer.jsonl" $DROPS
rc=0
audit "$LAB_DIR/noanswer.out" "$LAB_DIR/noanswer.jsonl" || rc=$?
sed 's/^/# /' "$LAB_DIR/noanswer.out"
t_eq "a log without the answers does not audit (exit 1)" 1 "$rc"
t_eq "exactly the connect that needed them disagrees (not host-allowed: S26)" \
	"disagreement: seq $((HELD - ndrop)), spec row S26: the spec allows REJECT; connect refused" \
	"$(grep '^disagreement:' "$LAB_DIR/noanswer.out")"

# --- 5. a connect after what taught its address expired ---------------------------
# The answers say how long the guard keeps what they taught
# (portcullis.dns.ttl: the lab's resolver answers with TTL 300); the held
# flow's record moved 600 s later is a connect to an expired address.
t_eq "every dns-learn record says how long its addresses are kept (300 s)" "" \
	"$(grep '"event.action":"dns-learn"' "$LOG" | grep -v '"portcullis.dns.ttl":300,')"
LATE=$(python3 - "$LOG" "$HELD" <<-'PY'
	import json, sys, datetime
	for l in open(sys.argv[1]):
	    if l.startswith('{"checkpoint"'): continue
	    r = json.loads(l)
	    if r["event.sequence"] == int(sys.argv[2]):
	        t = datetime.datetime.strptime(r["@timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
	        t += datetime.timedelta(seconds=600)
	        print(t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000))
	PY
)
"$RESIGN" "$KEY" "$LOG" "$LAB_DIR/late.jsonl" "$HELD:@timestamp=\"$LATE\""
rc=0
audit "$LAB_DIR/late.out" "$LAB_DIR/late.jsonl" || rc=$?
sed 's/^/# /' "$LAB_DIR/late.out"
t_eq "a connect after the learned TTL does not audit (exit 1)" 1 "$rc"
t_eq "exactly that connect disagrees (its address expired: S26)" \
	"disagreement: seq $HELD, spec row S26: the spec allows REJECT; connect refused" \
	"$(grep '^disagreement:' "$LAB_DIR/late.out")"

# --- 6. the vault's requests (V1, V3, V4 on what their records state) -------------
# The held flow's record rewritten as the vault's record of a request on
# that flow: without a secret it is one the spec allows; claiming to have
# injected a secret agent-1 does not have is a lie the audit names (V4).
"$RESIGN" "$KEY" "$LOG" "$LAB_DIR/vault.jsonl" "$HELD:event.action=\"http-request\""
rc=0
audit "$LAB_DIR/vault.out" "$LAB_DIR/vault.jsonl" || rc=$?
sed 's/^/# /' "$LAB_DIR/vault.out"
t_eq "a request through the vault to an allowed name, no secret: audits clean" 0 "$rc"
"$RESIGN" "$KEY" "$LOG" "$LAB_DIR/vault2.jsonl" "$HELD:event.action=\"http-request\"" \
	"$HELD:rule.name=\"agent-1/allow[4]\",\"portcullis.secrets\":[\"GH_TOKEN\"]"
rc=0
audit "$LAB_DIR/vault2.out" "$LAB_DIR/vault2.jsonl" || rc=$?
sed 's/^/# /' "$LAB_DIR/vault2.out"
t_eq "a request that injected a secret the sandbox lacks does not audit (exit 1)" 1 "$rc"
t_eq "exactly that request disagrees (V4)" \
	"disagreement: seq $HELD, spec row V4: the spec allows the request refused, not sent upstream (GH_TOKEN is not a secret of this sandbox)" \
	"$(grep '^disagreement:' "$LAB_DIR/vault2.out")"

# --- 7. what the audit judges since the records carry its facts --------------------
# (issue 35: a held flow's refusal, the vault's refusals, DNS over TCP, a
# malformed packet). Each rewritten record is first made one the spec
# allows (the log audits clean: the fact is judged, not waved through),
# then one it does not (exactly that record disagrees).
HELD_T=$(python3 - "$LOG" "$HELD" <<-'PY'
	import json, sys, datetime
	for l in open(sys.argv[1]):
	    if l.startswith('{"checkpoint"'): continue
	    r = json.loads(l)
	    if r["event.sequence"] == int(sys.argv[2]):
	        t = datetime.datetime.strptime(r["@timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
	        t += datetime.timedelta(seconds=5)
	        print(t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000))
	PY
)
TCPQ=$(python3 - "$LOG" <<-'PY'
	import json, sys
	for l in open(sys.argv[1]):
	    if l.startswith('{"checkpoint"'): continue
	    r = json.loads(l)
	    if r.get("event.action") == "dns-query" and r.get("network.transport") == "tcp" \
	       and r.get("dns.question.name") == "paste.evil.test":
	        print(r["event.sequence"]); break
	PY
)
t_lt "the log has a refused DNS-over-TCP query" 0 "${TCPQ:-0}"
# a case: name, expected exit, expected disagreement ("" none), edits...
tamper() {
	local name=$1 want_rc=$2 want=$3 rc=0
	shift 3
	"$RESIGN" "$KEY" "$LOG" "$LAB_DIR/$name.jsonl" "$@"
	audit "$LAB_DIR/$name.out" "$LAB_DIR/$name.jsonl" || rc=$?
	sed 's/^/# /' "$LAB_DIR/$name.out" | grep -v '^#   record' | grep -v '^# [/ ]' | head -8
	t_eq "$name: exit $want_rc" "$want_rc" "$rc"
	t_eq "$name: ${want:-no disagreement}" "$want" "$(grep '^disagreement:' "$LAB_DIR/$name.out")"
	t_nomatch "$name: nothing left not judged" "^not judged" "$(cat "$LAB_DIR/$name.out")"
}
TIMEOUT="\"no TLS ClientHello within engine.sni_timeout_ms\""
# the held flow's record, 5 s later, as a refusal on its timeout (H2):
# held 3.5 s (engine.sni_timeout_ms is 3 s), then held 1.2 s
tamper held-timeout 0 "" "$HELD:@timestamp=\"$HELD_T\"" "$HELD:event.outcome=\"failure\"" \
	"$HELD:event.code=\"tls_timeout\"" \
	"$HELD:event.reason=$TIMEOUT,\"portcullis.held.bytes\":\"timeout\",\"portcullis.held.ms\":3500"
tamper held-timeout-short 1 \
	"disagreement: seq $HELD, spec row H7: the spec allows PASS; no record" \
	"$HELD:@timestamp=\"$HELD_T\"" "$HELD:event.outcome=\"failure\"" \
	"$HELD:event.code=\"tls_timeout\"" \
	"$HELD:event.reason=$TIMEOUT,\"portcullis.held.bytes\":\"timeout\",\"portcullis.held.ms\":1200"
# refused on its bytes: a ClientHello naming cdn-evil.test (not agent-1's),
# then naming api.github.test, which H11 approves
SNIREF="\"TLS server name is not allowed\",\"portcullis.held.bytes\":\"client-hello\",\"portcullis.held.ms\":40"
tamper held-sni 0 "" "$HELD:event.outcome=\"failure\"" "$HELD:event.reason=$SNIREF" \
	"$HELD:tls.client.server_name=\"cdn-evil.test\""
tamper held-sni-allowed 1 \
	"disagreement: seq $HELD, spec row H11: the spec allows PASS; connect allowed (class SNI)" \
	"$HELD:event.outcome=\"failure\"" "$HELD:event.reason=$SNIREF"
# the vault's refusal of the request for a Host that is not its server
# name (V2), then the same record allowed
V2="\"http-request\""
tamper vault-host 0 "" "$HELD:event.action=$V2" "$HELD:event.code=\"vault_host_mismatch\"" \
	"$HELD:event.outcome=\"failure\""
tamper vault-host-allowed 1 \
	"disagreement: seq $HELD, spec row V2: the spec allows the request refused (its record's own check: vault_host_mismatch)" \
	"$HELD:event.action=$V2" "$HELD:event.code=\"vault_host_mismatch\""
# DNS over TCP: the refused query for paste.evil.test, then allowed (S9)
tamper dnstcp-allowed 1 \
	"disagreement: seq $TCPQ, spec row S9: the spec allows REJECT; dns-query refused" \
	"$TCPQ:event.outcome=\"success\""
# a packet that did not parse (S3), then the same record allowed
MAL="\"malformed packet\""
tamper malformed 0 "" "$FLIP:event.reason=$MAL" "$FLIP:event.code=\"malformed\""
tamper malformed-allowed 1 \
	"disagreement: seq $FLIP, spec row S3: the spec allows DROP; connect refused (class MALFORMED)" \
	"$FLIP:event.reason=$MAL" "$FLIP:event.code=\"malformed\"" \
	"$FLIP:event.outcome=\"success\""

# --- 8. JSON, and a log that does not verify is not audited -----------------------
rc=0
lab_gw "$GUARD_BIN/portcullis" -c "$GUARD_CONF" log audit --policies "$POL" --json \
	"$LAB_DIR/flip.jsonl" >"$LAB_DIR/flip.json" 2>/dev/null || rc=$?
t_eq "--json: the same disagreement" "$FLIP S26" \
	"$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(str(x["seq"])+" "+x["row"] for x in d["disagreements"]))' "$LAB_DIR/flip.json")"
sed "s/\"event.outcome\":\"failure\"/\"event.outcome\":\"success\"/" "$LOG" >"$LAB_DIR/edited.jsonl"
rc=0
lab_gw "$GUARD_BIN/portcullis" -c "$GUARD_CONF" log audit --policies "$POL" \
	"$LAB_DIR/edited.jsonl" >/dev/null 2>&1 || rc=$?
t_eq "a log edited without the key fails its verification first (exit 1)" 1 "$rc"
# a stored policy that is not the one its name says is never believed
cp "$POL/$SHASH" "$POL/$HASH"
rc=0
audit "$LAB_DIR/swapped.out" "$LOG" || rc=$?
t_eq "a store whose file does not match its name: exit 1" 1 "$rc"
t_match "... and every verdict under it is named as not judged" \
	"^not judged: [0-9]+ record\\(s\\), first seq [0-9]+: .*$HASH holds policy $SHASH, not the one its name says" \
	"$(cat "$LAB_DIR/swapped.out")"
t_done
