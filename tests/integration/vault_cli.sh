# The administrator's side of the vault: `portcullis ca init` and
# `portcullis secrets set|list|placeholder|rm` make the files docs/vault.md
# describes with the modes and owners it promises, take values from stdin
# only, never print a value, and `portcullis-vault -t` loads what they made.
set -u
. "$PC_TOP/tests/lib/tap.sh"
B=$PC_TOP/${PC_BUILD:-build}
t_need_built portcullis portcullis-vault
getent passwd portcullis-vault >/dev/null || { echo "1..0 # SKIP no portcullis-vault user (make deps)"; exit 0; }

t_tmpdir vaultcli
mkdir -p "$D/rules.d"
cat >"$D/portcullis.yaml" <<EOF
run_dir: $D/run
state_dir: $D/state
rules: $D/rules.d
vault:
  ca_dir: $D/ca
  secrets: $D/secrets
  trust: /etc/ssl/certs/ca-certificates.crt
EOF
cat >"$D/rules.d/a.yaml" <<EOF
sandbox: agent-1
match: { source: 10.203.0.11/32 }
allow:
  - host: api.github.test
    ports: [443]
secrets:
  - name: GITHUB_TOKEN
    host: api.github.test
EOF
pc() { "$B/portcullis" -c "$D/portcullis.yaml" "$@"; }
VALUE="ghp_CLITEST$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

t_ok "ca init" pc ca init
t_eq "the CA key is root's alone (read by the CA process before it drops)" "400 root" \
	"$(stat -c '%a %U' "$D/ca/ca.key")"
t_eq "the CA certificate is world-readable" 644 "$(stat -c %a "$D/ca/ca.pem")"
t_match "the CA is ECDSA P-256, a CA" "prime256v1|P-256" \
	"$(openssl x509 -in "$D/ca/ca.pem" -noout -text)"
t_match "... with CA:TRUE" "CA:TRUE" "$(openssl x509 -in "$D/ca/ca.pem" -noout -text)"
rc=0; pc ca init 2>"$D/err" || rc=$?
t_eq "a second ca init refuses (exit 1) without --force" 1 "$rc"
t_match "... and says so" "already has a CA" "$(cat "$D/err")"

ph=$(printf '%s\n' "$VALUE" | pc secrets set GITHUB_TOKEN 2>"$D/err")
t_match "secrets set prints the placeholder" "^pcph_GITHUB_TOKEN_[a-z2-7]{26}$" "$ph"
t_nomatch "secrets set never prints the value" "$VALUE" "$ph$(cat "$D/err")"
t_eq "the store key is the vault user's alone" "400 portcullis-vault" \
	"$(stat -c '%a %U' "$D/secrets/secret.key")"
t_eq "the sealed file is the vault user's alone" "400 portcullis-vault" \
	"$(stat -c '%a %U' "$D/secrets/GITHUB_TOKEN.sealed")"
t_eq "the placeholder file is world-readable and holds the placeholder" "644 $ph" \
	"$(stat -c %a "$D/secrets/GITHUB_TOKEN.placeholder") $(cat "$D/secrets/GITHUB_TOKEN.placeholder")"
t_eq "no file of the store holds the value" "" "$(grep -rlaF "$VALUE" "$D")"
t_eq "secrets placeholder NAME" "$ph" "$(pc secrets placeholder GITHUB_TOKEN)"
t_match "secrets list: name, placeholder, binding" "^GITHUB_TOKEN +$ph agent-1:api.github.test:443$" \
	"$(pc secrets list)"
t_eq "secrets list --json is JSON with the binding" "GITHUB_TOKEN $ph agent-1 api.github.test 443" \
	"$(pc secrets list --json | python3 -c 'import json,sys; s=json.load(sys.stdin)[0]; b=s["bindings"][0]; print(s["name"], s["placeholder"], b["sandbox"], b["host"], b["port"])')"
t_eq "rotation keeps the placeholder with --keep-placeholder" "$ph" \
	"$(printf 'another-value-123\n' | pc secrets set --keep-placeholder GITHUB_TOKEN 2>/dev/null)"
t_ok "portcullis-vault -t loads the CA, policy and store" "$B/portcullis-vault" -c "$D/portcullis.yaml" -t

rc=0; out=$(printf 'short\n' | pc secrets set OTHER 2>&1) || rc=$?
t_eq "a too short value is refused as usage (exit 2)" 2 "$rc"
t_nomatch "... and the message does not repeat it" "short$" "$out"
rc=0; pc secrets set lower </dev/null 2>/dev/null || rc=$?
t_eq "an invalid name is refused (exit 2)" 2 "$rc"
rc=0; pc secrets set GITHUB_TOKEN "$VALUE" </dev/null 2>/dev/null || rc=$?
t_eq "a value on the command line is not accepted (exit 2)" 2 "$rc"
t_ok "secrets rm" pc secrets rm GITHUB_TOKEN
t_eq "rm removed both files" "" "$(ls "$D/secrets" | grep GITHUB_TOKEN)"
rc=0; pc secrets placeholder GITHUB_TOKEN 2>/dev/null || rc=$?
t_eq "the placeholder of a removed secret: exit 1" 1 "$rc"
rc=0; pc secrets rm GITHUB_TOKEN 2>"$D/err" || rc=$?
t_eq "secrets rm of a name not stored: exit 3, as portcullis(8) says" 3 "$rc"
t_match "... naming it" "secrets rm: .*GITHUB_TOKEN" "$(cat "$D/err")"

# --json on the commands that print a result
js=$(printf '%s\n' "$VALUE" | pc secrets set --json GITHUB_TOKEN 2>/dev/null)
t_eq "secrets set --json: name and placeholder" "GITHUB_TOKEN $(cat "$D/secrets/GITHUB_TOKEN.placeholder")" \
	"$(printf '%s' "$js" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["name"], d["placeholder"])')"
t_eq "secrets placeholder --json NAME" "$(cat "$D/secrets/GITHUB_TOKEN.placeholder")" \
	"$(pc secrets placeholder --json GITHUB_TOKEN | python3 -c 'import json,sys; print(json.load(sys.stdin)["placeholder"])')"
t_eq "secrets placeholder NAME --json (either order)" "$(pc secrets placeholder --json GITHUB_TOKEN)" \
	"$(pc secrets placeholder GITHUB_TOKEN --json)"
t_eq "ca init --force --json: the CA's path" "$D/ca/ca.pem" \
	"$(pc ca init --force --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ca"])')"
pc secrets rm GITHUB_TOKEN

# a sealed file that was tampered with stops the vault from loading
printf '%s\n' "$VALUE" | pc secrets set GITHUB_TOKEN >/dev/null 2>&1
t_flip_byte "$D/secrets/GITHUB_TOKEN.sealed" 40
rc=0; out=$("$B/portcullis-vault" -c "$D/portcullis.yaml" -t 2>&1) || rc=$?
t_eq "a tampered sealed file: -t says the store is invalid (exit 1)" 1 "$rc"
t_match "... saying which file" "GITHUB_TOKEN.sealed: sealed secret does not authenticate" "$out"

t_done
