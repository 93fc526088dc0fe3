# Every policy the engine or the vault puts in force is kept in
# <state_dir>/policies under its hash, so that the hash a record cites can
# be turned back into the policy (issue 35, docs/policy.md "Policies kept by
# hash"): at start and at each reload, by both daemons; `policy show` prints
# one after checking it; a stored file that does not match its name is
# refused by `policy show` and, when a reload would store that policy, the
# reload is refused and a start too (fail closed). Real logd, engine and
# vault in the lab.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

VAULT_REDIRECT=engine
vault_up
S=$V/state/policies
pc() { lab_gw "$V_BIN/portcullis" -c "$V/portcullis.yaml" "$@"; }
run() { OUT=$(pc "$@" 2>&1) && RC=0 || RC=$?; }
engine_policy() { pc status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["policy"])'; }
sha() { printf 'sha256:%s' "$(sha256sum <"$1" | cut -c1-64)"; }

# ---- at start ------------------------------------------------------------------
H1=$(engine_policy)
t_match "the engine runs a policy" '^sha256:[0-9a-f]{64}$' "$H1"
t_eq "the store is a directory (engine's user, vault user's group, 01775)" \
	"directory portcullis portcullis-vault 1775" "$(stat -c '%F %U %G %a' "$S" 2>&1)"
t_eq "the policy in force at start is stored, a read-only regular file" \
	"regular file 444" "$(stat -c '%F %a' "$S/$H1" 2>&1)"
t_eq "its bytes hash to its name" "$H1" "$(sha "$S/$H1" 2>&1)"
pc policy hash --canonical >"$LAB_DIR/canon1"
t_eq "its bytes are the canonical form (policy hash --canonical)" "" \
	"$(cmp "$LAB_DIR/canon1" "$S/$H1" 2>&1)"
run policy show "$H1"
t_eq "policy show: exit 0" 0 "$RC"
t_eq "policy show prints the canonical form" "$(cat "$LAB_DIR/canon1")" "$OUT"
run policy show --json "$H1"
t_eq "policy show --json: hash and canonical text" "$H1 True" "$(printf '%s' "$OUT" | python3 -c '
import json,sys; r=json.load(sys.stdin); print(r["hash"], r["canonical"]==open(sys.argv[1]).read())' \
	"$LAB_DIR/canon1" 2>&1)"
t_eq "no temporary file left in the store" "" "$(ls -A "$S" | grep -v '^sha256:' || true)"

# ---- a reload with a changed policy ----------------------------------------------
printf 'sandbox: agent-9\nmatch: { source: 10.203.0.99/32 }\nallow:\n  - host: nine.test\n    ports: [443]\n' \
	>"$V/rules.d/agent9.yaml"
H2=$(pc policy hash)
t_match "the changed policy has a hash" "^sha256:[0-9a-f]{64}$" "$H2"
t_ok "... another than the first" test "$H2" != "$H1"
# A file already under the new policy's name that does not match it (an
# attacker's, or a corruption): never trusted, never replaced; the reload
# is refused and the running policy stays.
printf '{"portcullis_policy":1,"sandboxes":[]}' >"$S/$H2"
run reload
t_eq "a forged file under the new policy's name: reload refused (exit 1)" 1 "$RC"
t_match "the engine says which file does not match" \
	"portcullis: engine: reload refused: .*$S/$H2 does not match its name" "$OUT"
t_match "the vault refuses it too" "portcullis: vault: reload refused: .*does not match its name" \
	"$OUT"
t_eq "the engine keeps the old policy" "$H1" "$(engine_policy)"
t_eq "the forged file is left as it was (evidence)" '{"portcullis_policy":1,"sandboxes":[]}' \
	"$(cat "$S/$H2")"
rm -f "$S/$H2"
# a FIFO there: refused at once (nobody writes to it: a blocking open would
# hang the reload)
mkfifo "$S/$H2"
run reload --engine
t_eq "a FIFO under the new policy's name: reload refused (exit 1)" 1 "$RC"
t_match "... as not a regular file" "$H2 is not a regular file" "$OUT"
t_eq "... and the engine keeps the old policy" "$H1" "$(engine_policy)"
rm -f "$S/$H2"

run reload
t_eq "the store cleared: reload exit 0" 0 "$RC"
t_eq "the new policy is in force" "$H2" "$(engine_policy)"
t_eq "the new policy is stored, read-only, by the engine's or vault's user" \
	"regular file 444 yes" "$(stat -c '%F %a' "$S/$H2" 2>&1) $(
		case $(stat -c %U "$S/$H2") in portcullis | portcullis-vault) echo yes ;; *) echo no ;; esac)"
t_eq "the old one is still there" "regular file 444" "$(stat -c '%F %a' "$S/$H1" 2>&1)"
pc policy hash --canonical >"$LAB_DIR/canon2"
run policy show "$H2"
t_eq "policy show prints the new policy" "0 $(cat "$LAB_DIR/canon2")" "$RC $OUT"
run policy show "${H1#sha256:}"
t_eq "policy show prints the old policy (bare hex digits)" "0 $(cat "$LAB_DIR/canon1")" "$RC $OUT"

# ---- the vault stores what it puts in force, alone ------------------------------
printf 'sandbox: agent-8\nmatch: { source: 10.203.0.98/32 }\nallow:\n  - host: eight.test\n    ports: [443]\n' \
	>"$V/rules.d/agent8.yaml"
H3=$(pc policy hash)
run reload --vault
t_eq "reload --vault: exit 0" 0 "$RC"
t_eq "the vault stored its new policy, as its user" "portcullis-vault 444 $H3" \
	"$(stat -c '%U %a' "$S/$H3" 2>&1) $(sha "$S/$H3" 2>&1)"
t_eq "the engine did not reload" "$H2" "$(engine_policy)"

# ---- and so does the engine, as its user after the drop ---------------------------
printf 'sandbox: agent-7\nmatch: { source: 10.203.0.97/32 }\nallow:\n  - host: seven.test\n    ports: [443]\n' \
	>"$V/rules.d/agent7.yaml"
H4=$(pc policy hash)
run reload --engine
t_eq "reload --engine: exit 0" 0 "$RC"
t_eq "the engine stored its new policy, as its user" "portcullis 444 $H4" \
	"$(stat -c '%U %a' "$S/$H4" 2>&1) $(sha "$S/$H4" 2>&1)"
t_eq "... and put it in force" "$H4" "$(engine_policy)"

# ---- a tampered stored policy --------------------------------------------------
sed -i 's/nine\.test/evil.test/' "$S/$H2"
run policy show "$H2"
t_eq "a tampered stored policy: policy show exits 1" 1 "$RC"
t_match "... saying it does not match its name" "does not match its name \(tampered" "$OUT"
t_nomatch "... and prints nothing of it" "evil.test" "$OUT"
run policy show --json "$H2"
t_eq "--json too: exit 1" 1 "$RC"
t_nomatch "--json: nothing of it" "evil.test" "$OUT"
t_eq "... nothing on stdout" "" "$(pc policy show "$H2" 2>/dev/null)"
run policy show "sha256:$(printf '%064d' 0)"
t_eq "a policy never stored: exit 1" 1 "$RC"
run policy show sha256:1234
t_eq "a malformed hash: exit 2" 2 "$RC"
# bytes that hash to their name but are no canonical form (an escape
# sequence for the admin's terminal): not printed
printf '\033]0;owned\007{}' >"$LAB_DIR/esc"
HE=$(sha "$LAB_DIR/esc")
cp "$LAB_DIR/esc" "$S/$HE"
run policy show "$HE"
t_eq "a file that matches its name but is no canonical form: exit 1" 1 "$RC"
t_match "... said so" "is not a policy's canonical form" "$OUT"
t_nomatch "... and not printed" "owned" "$OUT"
rm -f "$S/$HE"
ln -s "$S/$H1" "$S/$HE"
run policy show "$HE"
t_eq "a symbolic link in the store: exit 3" 3 "$RC"
t_match "... not a regular file" "$HE is not a regular file" "$OUT"
rm -f "$S/$HE"

# ---- a start over a tampered copy of the policy it would put in force --------------
# (the rules give H4, which the engine stored)
printf ' ' >>"$S/$H4"
kill "$V_ENGINE_PID"
wait "$V_ENGINE_PID" 2>/dev/null
out=$(lab_gw timeout 10 "$V_BIN/portcullisd" -c "$V/portcullis.yaml" 2>&1) && rc=0 || rc=$?
t_eq "the engine refuses to start over a tampered stored policy (exit 3)" 3 "$rc"
t_match "... naming the file" "storing the policy: stored policy $S/$H4 does not match its name" "$out"

t_done
