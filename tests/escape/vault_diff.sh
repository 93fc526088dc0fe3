# The vault against a second HTTP/1.1 parser (issue 33, deliverable 2):
# generated request streams from sandbox 1 through the real vault to an
# upstream that records the raw bytes it received and reflects every
# secret it got in every encoding the harness knows; h11 (python3-h11, not
# the vault's parser) reads what the upstream received. The cases, the
# checks and the shrinking are tests/escape/vault_diff.py's.
#
# Seeded and bounded: seed $PC_DIFF_SEED (33) and $PC_DIFF_COUNT cases
# (300: under a minute on the 2-core machine); with PC_SOAK=1 (make soak)
# 2000 cases from a random seed, printed (rerun one with PC_DIFF_SEED).
# PC_BUILD selects the binaries (tests/integration/vault_setup.bash): a
# build of an older commit shows what the harness finds there.
#
# The redirect is the test-only nat rule (VAULT_REDIRECT=fixture): the
# engine is not under test here, and one daemon fewer keeps the test light.
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

PY=/usr/bin/python3 # Debian's, which has h11 (a python3 earlier on PATH may not)
DIFF=$PC_TOP/tests/escape/vault_diff.py
"$PY" -c 'import h11' 2>/dev/null || { echo "1..0 # SKIP $PY has no h11 (make deps)"; exit 0; }

if [ -n "${PC_SOAK:-}" ]; then
	SEED=${PC_DIFF_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
	COUNT=${PC_DIFF_COUNT:-2000}
else
	SEED=${PC_DIFF_SEED:-33}
	COUNT=${PC_DIFF_COUNT:-300}
fi
# PC_DIFF_CASES=N,N: only those cases of the seed (a reproducer of each
# of their violations)
[ -z "${PC_DIFF_CASES:-}" ] || COUNT=$(($(tr -cd , <<<"$PC_DIFF_CASES" | wc -c) + 1))
t_diag "seed $SEED, $COUNT cases (rerun: PC_DIFF_SEED=$SEED PC_DIFF_COUNT=$COUNT)"

VAULT_REDIRECT=fixture
vault_need_bins
lab_up 2
vault_config
# two secrets bound to the recording upstream (api.github.test:8444) beside
# WS_TOKEN (Authorization, Bearer), their values full of what encoders
# escape: / + = " \
cat >>"$V/rules.d/agents.yaml" <<-EOF
  - name: DIFF_A
    host: api.github.test
    port: 8444
    header: X-Diff-Auth
    format: "Token {secret}"
  - name: DIFF_B
    host: api.github.test
    port: 8444
    header: X-Diff-Key
    format: "{secret}"
EOF
vault_secrets
hex8() { head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
V_A_VALUE="a/$(hex8)+$(hex8)=$(hex8)\"$(hex8)\\$(hex8)/"
V_B_VALUE="b+$(hex8)/$(hex8)\\$(hex8)\"$(hex8)=="
for n in A B; do
	v=V_${n}_VALUE
	printf '%s' "${!v}" | "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets set "DIFF_$n" >/dev/null 2>&1 ||
		lab_die "secrets set DIFF_$n failed"
done
vault_logd_start
vault_start
vault_redirect

ph() { "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets placeholder "$1"; }
CFG=$LAB_DIR/diff.json
UP=$LAB_DIR/diff-up
SEC=$LAB_DIR/diff-secrets
mkdir -p "$UP" "$SEC"
chmod 0700 "$SEC"
# name, value, header, format, bound to api.github.test:8444, random (a
# value the sandbox must never see: vault_setup's fixed test values, such
# as "untrusted-value-0123", share 8 bytes with the vault's own refusals,
# and the upstream never gets them to reflect). The values stay in the
# lab's directory: nothing prints them.
printf '%s\t%s\t%s\t%s\t%s\t%s\n' GITHUB_TOKEN "$V_GH_VALUE" Authorization "Bearer {secret}" 0 1 \
	PYPI_TOKEN "$V_PYPI_VALUE" X-Api-Key "{secret}" 0 1 \
	WS_TOKEN "$V_WS_VALUE" Authorization "Bearer {secret}" 1 1 \
	AGENT2_TOKEN agent2-value-0123 Authorization "Bearer {secret}" 0 0 \
	WRONG_TOKEN wrong-cert-value-0123 Authorization "Bearer {secret}" 0 0 \
	ROGUE_TOKEN untrusted-value-0123 Authorization "Bearer {secret}" 0 0 \
	DIFF_A "$V_A_VALUE" X-Diff-Auth "Token {secret}" 1 1 \
	DIFF_B "$V_B_VALUE" X-Diff-Key "{secret}" 1 1 >"$SEC/list"
while IFS=$'\t' read -r n _; do
	ph "$n" >"$SEC/$n.ph" || lab_die "no placeholder for $n"
done <"$SEC/list"
"$PY" -c 'import json, sys
sec, cfg = sys.argv[1], json.loads(sys.argv[3])
cfg["secrets"] = []
for line in open(sec + "/list").read().splitlines():
    n, v, h, f, here, rnd = line.split("\t")
    cfg["secrets"].append({"name": n, "value": v, "header": h, "format": f,
                           "bound_here": here == "1", "random": rnd == "1", "host": "api.github.test", "port": 8444,
                           "placeholder": open(sec + "/" + n + ".ph").read().strip()})
json.dump(cfg, open(sys.argv[2], "w"))' "$SEC" "$CFG" \
	"{\"addr\": \"$LAB_API4\", \"port\": 8444, \"sni\": \"api.github.test\",
	  \"ca\": \"$LAB_DIR/vault-ca.pem\",
	  \"log_cmd\": [\"$V_BIN/portcullis\", \"-c\", \"$V/portcullis.yaml\", \"log\", \"show\", \"--json\"]}" ||
	lab_die "writing $CFG failed"

# the recording, reflecting upstream on api.github.test:8444
lab_upstream "$PY" "$DIFF" serve "$LAB_API4" 8444 "$LAB_DIR/pki/api.github.test.pem" \
	"$LAB_DIR/pki/api.github.test.key" "$CFG" "$UP" 2>"$LAB_DIR/diff-up.stderr" &
echo $! >"$LAB_DIR/diff-up.pid"
lab_wait_tcp "$LAB_UP" "$LAB_API4" 8444

# Holes known and still open, each with where it is being fixed: their
# cases are counted and reported as skipped (with a reproducer), never
# passed in silence; any other violation of the same check fails.
# PC_DIFF_STRICT=1: none is excused. Remove an entry when its fix lands.
declare -A OPEN=()
open_spec=""
if [ -z "${PC_DIFF_STRICT:-}" ]; then
	for k in "${!OPEN[@]}"; do open_spec+="$k;"; done
fi

out=$(lab_sb 1 env PC_DIFF_CASES="${PC_DIFF_CASES:-}" PC_DIFF_OPEN="$open_spec" "$PY" "$DIFF" run "$CFG" "$UP" "$SEED" "$COUNT" 2>&1)
printf '%s\n' "$out" | sed 's/^\([^#]\)/# \1/'
t_match "the harness checked $COUNT cases (seed $SEED)" "^cases: $COUNT, violations: [0-9]+$" "$out"
for kind in h11 placeholder refused secret-place format recorded leak; do
	n=$(printf '%s\n' "$out" | sed -n "s/^kind $kind: //p")
	t_eq "$kind: no case violates it" 0 "${n:-missing}"
	o=$(printf '%s\n' "$out" | sed -n "s/^open $kind: //p")
	if [ "${o:-0}" != 0 ]; then
		for k in "${!OPEN[@]}"; do
			[ "${k%%=*}" = "$kind" ] && t_skip "$kind: $o cases of a hole known open" "${OPEN[$k]}"
		done
	fi
done
t_ok "the verdict log verifies" "$V_BIN/portcullis" -c "$V/portcullis.yaml" log verify
t_done
