# The checker on a clean lab, with the real portcullisd and portcullis-logd
# running in the gateway: proven (exit 0) with the tables the engine
# installed; the certificate is issued only with logd's record, verifies
# with our tool and with openssl over the DSSE PAE, and verification fails
# for a one-byte edit, the wrong key, and (--live) a changed appliance.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/checker_setup.bash"

ck_setup 2
t_ok "the real engine serves (status answers)" ck_pc status --json

out=$(ck_pc check --verbose 2>&1) && rc=0 || rc=$?
t_eq "clean lab: check exits 0 (proven)" 0 "$rc"
t_match "clean lab: says proven" "^proven: bridge pcbr0" "$out"
t_match "clean lab: our tables identical to the engine's" "identical to what the engine builds" "$out"
t_match "clean lab: IPv6 walked too" "IPv6 from port pcv1" "$out"
json=$(ck_pc check --json 2>&1)
t_eq "--json: status proven" proven "$(printf '%s' "$json" | jq -r .status)"
t_eq "--json: every obligation held" 12 "$(printf '%s' "$json" | jq '[.obligations[] | select(.held)] | length')"

C=$LAB_DIR/cert
mkdir -p "$C"
t_ok "cert issued for agent-1 (with an HTML rendering)" ck_pc cert agent-1 -o "$C/agent-1.json" --html
t_ok "cert with a Markdown rendering" ck_pc cert agent-1 -o "$C/agent-1b.json" --md
t_match "issuance is a log record" '"cert-issue"' "$(cat "$K/log/verdicts.jsonl" 2>/dev/null)"
pub=$K/state/appliance.pub
t_ok "cert verify with the appliance key" ck_pc cert verify "$C/agent-1.json" --key "$pub"
t_ok "cert verify --live on an unchanged appliance" ck_pc cert verify "$C/agent-1.json" --live
t_eq "cert verify --live --json: one object, valid, live, its sandbox" "true true agent-1" \
	"$(ck_pc cert verify "$C/agent-1.json" --live --json 2>/dev/null | jq -r '"\(.valid) \(.live) \(.sandbox)"')"
st=$(jq -r .payload "$C/agent-1.json" | base64 -d)
t_eq "statement is in-toto v1" "https://in-toto.io/Statement/v1" "$(printf '%s' "$st" | jq -r ._type)"
t_eq "six subjects" 6 "$(printf '%s' "$st" | jq '.subject | length')"
spec_sha=$(sha256sum "$PC_TOP/docs/spec.md" | cut -c1-64)
t_eq "it cites the spec its guard was checked against (docs/spec.md's sha256)" \
	"sha256:$spec_sha" "$(printf '%s' "$st" | jq -r .predicate.spec)"
t_eq "... as a subject too" "$spec_sha" \
	"$(printf '%s' "$st" | jq -r '.subject[] | select(.name == "spec") | .digest.sha256')"
model=$(sed -n 's/^#define CK_MODEL_VERSION "\(.*\)"$/\1/p' "$PC_TOP/checker/checker.h")
t_eq "it names the containment model it was proven in (CK_MODEL_VERSION)" \
	"$model" "$(printf '%s' "$st" | jq -r .predicate.model)"
t_match "secret binding named, host given" '"name":"GITHUB_TOKEN","host":"api.github.test"' "$st"
t_match "HTML: three parts" "What was proven.*What the proof relies on.*What it does not cover" \
	"$(tr -d '\n' <"$C/agent-1.json.html")"
t_match "Markdown: three parts" "What it does not cover" "$(cat "$C/agent-1b.json.md")"
t_match "Markdown: the model's version" "Containment model\\*\\*: $model" "$(cat "$C/agent-1b.json.md")"
t_match "Markdown: the spec's hash" "Spec \\(docs/spec.md\\)\\*\\*: sha256:$spec_sha" "$(cat "$C/agent-1b.json.md")"

# openssl, without our tools: PAE = "DSSEv1 <len(type)> <type> <len(body)> <body>"
jq -r .payload "$C/agent-1.json" | base64 -d >"$C/payload"
jq -r '.signatures[0].sig' "$C/agent-1.json" | base64 -d >"$C/sig"
type=$(jq -r .payloadType "$C/agent-1.json")
{ printf 'DSSEv1 %d %s %d ' "${#type}" "$type" "$(stat -c %s "$C/payload")"; cat "$C/payload"; } >"$C/pae.bin"
t_ok "openssl pkeyutl verifies the DSSE PAE" \
	openssl pkeyutl -verify -rawin -pubin -inkey "$pub" -sigfile "$C/sig" -in "$C/pae.bin"

# one byte changed in the payload (a digit of the issue time)
python3 - "$C/agent-1.json" "$C/tampered.json" <<'EOF'
import base64, json, sys
env = json.load(open(sys.argv[1]))
p = bytearray(base64.b64decode(env["payload"]))
i = p.index(b'"issued":"') + 12
p[i] = ord('0') if p[i] != ord('0') else ord('1')
env["payload"] = base64.b64encode(bytes(p)).decode()
json.dump(env, open(sys.argv[2], "w"))
EOF
t_fail "tampered certificate (one byte): verify fails" ck_pc cert verify "$C/tampered.json" --key "$pub"
t_eq "... and --json says it is not valid, and why" "false true" \
	"$(ck_pc cert verify "$C/tampered.json" --key "$pub" --json 2>/dev/null | jq -r '"\(.valid) \(.error != null)"')"
openssl genpkey -algorithm ed25519 -out "$C/other.key" 2>/dev/null
openssl pkey -in "$C/other.key" -pubout -out "$C/other.pub" 2>/dev/null
out=$(ck_pc cert verify "$C/agent-1.json" --key "$C/other.pub" 2>&1) && rc=0 || rc=$?
t_eq "wrong key: verify exits 1" 1 "$rc"
t_fail "openssl rejects the tampered payload too" \
	openssl pkeyutl -verify -rawin -pubin -inkey "$pub" -sigfile "$C/sig" -in <(sed 's/agent-1/agent-9/' "$C/pae.bin")

# a certificate proven under another model is stale on --live: re-signed
# with the appliance key (as an older build would have), model changed
python3 - "$C/agent-1.json" "$C/oldmodel.payload" <<'EOF2'
import base64, json, sys
env = json.load(open(sys.argv[1]))
st = json.loads(base64.b64decode(env["payload"]))
st["predicate"]["model"] = "portcullis-containment-model/1"
open(sys.argv[2], "w").write(json.dumps(st, separators=(",", ":")))
EOF2
t=application/vnd.in-toto+json
{ printf 'DSSEv1 %d %s %d ' "${#t}" "$t" "$(stat -c %s "$C/oldmodel.payload")"; cat "$C/oldmodel.payload"; } >"$C/oldmodel.pae"
openssl pkeyutl -sign -rawin -inkey "$K/state/appliance.key" -in "$C/oldmodel.pae" -out "$C/oldmodel.sig" 2>/dev/null
jq --arg p "$(base64 -w0 "$C/oldmodel.payload")" --arg s "$(base64 -w0 "$C/oldmodel.sig")" \
	'.payload = $p | .signatures[0].sig = $s' "$C/agent-1.json" >"$C/oldmodel.json"
t_ok "a certificate of an older model still verifies offline" ck_pc cert verify "$C/oldmodel.json" --key "$pub"
out=$(ck_pc cert verify "$C/oldmodel.json" --live 2>&1) && rc=0 || rc=$?
t_eq "--live: a certificate of an older model is stale (exit 1)" 1 "$rc"
t_match "--live names the model" "stale: proven under model portcullis-containment-model/1" "$out"

# stale subjects: the appliance changed after issuance
lab_gw nft add table ip later
out=$(ck_pc cert verify "$C/agent-1.json" --live 2>&1) && rc=0 || rc=$?
t_eq "--live after a ruleset change: exit 1" 1 "$rc"
t_match "--live names the stale subject" "stale: subject nftables-ruleset" "$out"
lab_gw nft delete table ip later

# refusals: not proven -> no certificate; logd down -> no certificate
lab_gw ip link set "$(lab_sb_port 2)" type bridge_slave isolated off
out=$(ck_pc cert agent-1 -o "$C/refused.json" 2>&1) && rc=0 || rc=$?
t_eq "cert refused when containment is not proven (exit 1)" 1 "$rc"
t_fail "no certificate file written" test -e "$C/refused.json"
lab_gw ip link set "$(lab_sb_port 2)" type bridge_slave isolated on
ck_logd_stop
out=$(ck_pc cert agent-1 -o "$C/nolog.json" 2>&1) && rc=0 || rc=$?
t_eq "cert refused when logd is unreachable (exit 3)" 3 "$rc"
t_match "refusal says why" "could not be logged" "$out"
t_fail "no certificate file without the log record" test -e "$C/nolog.json"
t_done
