# `portcullis reload` tells the truth (issue 18): it asks the engine and
# the vault to load the policy again, waits for both answers and exits 0
# only when both took it, 1 naming the error when one refused it, 3 when a
# daemon it must ask is down. The units' ExecReload runs it, so `systemctl
# reload` fails when the policy is refused (SIGHUP, before, always
# "succeeded"). Real logd, engine and vault in the lab.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

VAULT_REDIRECT=engine
vault_up
pc() { lab_gw "$V_BIN/portcullis" -c "$V/portcullis.yaml" "$@"; }
run() { OUT=$(pc "$@" 2>&1) && RC=0 || RC=$?; }
engine_policy() { pc status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["policy"])'; }

# ---- the units -------------------------------------------------------------
t_match "portcullisd.service reloads with portcullis reload --engine" \
	'^ExecReload=/usr/sbin/portcullis -c /etc/portcullis/portcullis.yaml reload --engine$' \
	"$(grep '^ExecReload=' "$PC_TOP/packaging/systemd/portcullisd.service")"
t_match "portcullis-vault.service reloads with portcullis reload --vault" \
	'^ExecReload=/usr/sbin/portcullis -c /etc/portcullis/portcullis.yaml reload --vault$' \
	"$(grep '^ExecReload=' "$PC_TOP/packaging/systemd/portcullis-vault.service")"

# ---- a good policy: both take it -------------------------------------------
run reload
t_eq "good policy: exit 0" 0 "$RC"
t_match "the engine's policy in force" "^policy sha256:[0-9a-f]{64} in force" "$OUT"
t_match "the vault's policy in force, with its secrets" \
	"vault: policy sha256:[0-9a-f]{64} in force, 6 secrets" "$OUT"
H=$(printf '%s\n' "$OUT" | sed -n 's/^policy \(sha256:[0-9a-f]*\) in force$/\1/p')
t_match "both run the same policy" "vault: policy $H in force" "$OUT"
run reload --json
t_eq "--json: exit 0" 0 "$RC"
t_eq "--json: both ok, same policy" "ok ok True" "$(printf '%s' "$OUT" | python3 -c '
import json,sys; r=json.load(sys.stdin)
print(r["engine"]["result"], r["vault"]["result"], r["engine"]["policy"]==r["vault"]["policy"])')"
OLD=$(engine_policy)

# ---- a policy both refuse ----------------------------------------------------
printf 'sandbox: agent-9\nmatch: { source: 10.203.0.99/32 }\nallow:\n  - cidr: [oops\n' \
	>"$V/rules.d/zz-broken.yaml"
run reload
t_eq "broken rule file: exit 1 (the policy was refused)" 1 "$RC"
t_match "the engine's refusal names file and line" \
	"portcullis: engine: reload refused: .*zz-broken.yaml:[45]:[0-9]+" "$OUT"
t_match "the vault's refusal names them too" \
	"portcullis: vault: reload refused: .*zz-broken.yaml:[45]:[0-9]+" "$OUT"
t_nomatch "... as the engine does, without a stray 'policy:' after the position" \
	"zz-broken.yaml:[0-9]+:[0-9]+: policy:" "$OUT"
t_eq "the engine keeps the old policy" "$OLD" "$(engine_policy)"
run reload --vault
t_eq "reload --vault alone: exit 1 too" 1 "$RC"
t_nomatch "... and asks only the vault" "engine" "$OUT"
rm -f "$V/rules.d/zz-broken.yaml"

# ---- what only the vault refuses: its answer counts ---------------------------
# A sealed secret that does not authenticate: the engine never reads the
# secrets, the vault refuses to load them.
cp -p "$V/secrets/PYPI_TOKEN.sealed" "$LAB_DIR/pypi.sealed"
t_flip_byte "$V/secrets/PYPI_TOKEN.sealed" 40
run reload
t_eq "a tampered sealed secret: exit 1" 1 "$RC"
t_match "the engine took the policy" "^policy sha256:[0-9a-f]{64} in force" "$OUT"
t_match "the vault refused, saying why" "portcullis: vault: reload refused: secrets: .*does not authenticate" "$OUT"
t_match "the vault's journal says it kept the running state" "reload failed, keeping the running state" \
	"$(cat "$LAB_DIR/vault.stderr")"
cp -p "$LAB_DIR/pypi.sealed" "$V/secrets/PYPI_TOKEN.sealed"
printf 'new-token-value-0123\n' | pc secrets set NEW_TOKEN >/dev/null 2>&1
run reload
t_eq "secret restored, one more set: exit 0" 0 "$RC"
t_match "... and the vault serves 7 secrets" "vault: policy sha256:[0-9a-f]{64} in force, 7 secrets" "$OUT"
t_match "the vault's journal says it reloaded" "reloaded: policy sha256:[0-9a-f]{64}, 7 secrets" \
	"$(cat "$LAB_DIR/vault.stderr")"

# ---- daemons down -------------------------------------------------------------
kill "$V_VAULT_PID"
lab_wait_until sh -c "! kill -0 $V_VAULT_PID 2>/dev/null"
run reload
t_eq "vault stopped, not named: exit 0 (a gateway need not run one)" 0 "$RC"
t_match "... and says it is not running" "vault: not running" "$OUT"
run reload --vault
t_eq "vault stopped, reload --vault: exit 3" 3 "$RC"
t_match "... naming the vault" "portcullis: vault: .*is portcullis-vault running" "$OUT"
kill "$V_ENGINE_PID"
wait "$V_ENGINE_PID" 2>/dev/null
run reload
t_eq "engine stopped: exit 3" 3 "$RC"
t_match "... naming the engine" "portcullis: engine: .*is portcullisd running" "$OUT"
run reload --engine
t_eq "engine stopped, reload --engine: exit 3" 3 "$RC"
run reload --bogus
t_eq "a bad option: exit 2" 2 "$RC"
t_match "... with the usage" "usage: portcullis .*reload \[--engine\] \[--vault\]" "$OUT"

t_done
