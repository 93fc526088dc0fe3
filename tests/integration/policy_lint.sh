# portcullis policy lint / policy hash, run as an admin would: the shipped
# example files lint clean, every error is printed as file:line:col with the
# exit codes of portcullis(8), and the hash follows meaning, not spelling.
# No network: files only, in a directory this test makes and removes.
set -u
. "$PC_TOP/tests/lib/tap.sh"

PC=$PC_TOP/$PC_BUILD/portcullis
case $PC_BUILD in /*) PC=$PC_BUILD/portcullis ;; esac
T=$(mktemp -d /tmp/pc-lint-XXXXXX)
trap 'rm -rf "$T"' EXIT

# run ARGS...: sets rc, out (stdout), err (stderr)
run() {
	"$PC" "$@" >"$T/out" 2>"$T/err" && rc=0 || rc=$?
	out=$(cat "$T/out")
	err=$(cat "$T/err")
}

# --- the shipped examples -------------------------------------------------
run policy lint "$PC_TOP/docs/examples/rules.d/agent-1.yaml"
t_eq "example rule file lints clean (exit 0)" 0 "$rc"
t_match "and says what it checked" '^1 rule file: ok: 1 sandbox, 3 allow entries, 1 secret$' "$out"

# (the example sets no key: every one is commented out at its default;
# uplinks has no default, and lint refuses the file without it, as
# portcullisd -t does)
{ cat "$PC_TOP/docs/examples/portcullis.yaml"; echo "rules: $PC_TOP/docs/examples/rules.d"; } \
	>"$T/example.yaml"
run -c "$T/example.yaml" policy lint
t_eq "example configuration without uplinks: an error (exit 1), as portcullisd -t" 1 "$rc"
t_match "... saying portcullisd would refuse to start" \
	"^$T/example.yaml:1:1: portcullisd would refuse to start: uplinks is not set" "$err"
echo "uplinks: [eth0]" >>"$T/example.yaml"
run -c "$T/example.yaml" policy lint
t_eq "example configuration with the example rules lints clean" 0 "$rc"
t_match "lint prints the policy hash" 'rules.d: ok: 1 sandbox, 3 allow entries, 1 secret, policy sha256:[0-9a-f]{64}$' "$out"
lint_hash=$(printf '%s\n' "$out" | grep -oE 'sha256:[0-9a-f]{64}')
run -c "$T/example.yaml" policy hash
t_eq "policy hash exits 0" 0 "$rc"
t_eq "policy hash prints the same hash as lint" "$lint_hash" "$out"
"$PC" -c "$T/example.yaml" policy hash --canonical >"$T/canon"
t_eq "the hash is sha256 of the canonical form" "${lint_hash#sha256:}" \
	"$(sha256sum <"$T/canon" | cut -d' ' -f1)"
t_match "the canonical form is JSON naming the rule" '^\{"portcullis_policy":1,"sandboxes":\[\{"allow":\[\{"host":"api.github.com"' \
	"$(cat "$T/canon")"
run policy lint "$T/example.yaml"
t_eq "a configuration given as FILE is linted with its rules directory" 0 "$rc"
t_match "... and recognised as a configuration" "example.yaml: ok" "$out"

# Every shipped example (the files the package installs as the admin's
# model: a rule file it installs as rules.d/agent-1.yaml.example, the
# configuration) passes lint --strict: an example lint warns about teaches
# the habit lint warns of. A configuration is linted with the example
# rules and its one required key (uplinks, which has no default) set as
# the admin is told to, by uncommenting it, and nothing else.
for f in "$PC_TOP"/docs/examples/rules.d/*.yaml "$PC_TOP"/packaging/conf/agent-1.yaml; do
	run policy lint --strict "$f"
	t_eq "shipped example ${f#$PC_TOP/}: lint --strict exit 0" 0 "$rc"
	t_eq "... and nothing on stderr" "" "$err"
done
for f in "$PC_TOP"/docs/examples/portcullis.yaml "$PC_TOP"/packaging/conf/portcullis.yaml; do
	t_match "${f#$PC_TOP/}: uplinks is there to uncomment" '^#uplinks: \[eth0\]$' "$(cat "$f")"
	{ sed 's/^#uplinks:/uplinks:/' "$f"; echo "rules: $PC_TOP/docs/examples/rules.d"; } >"$T/shipped.yaml"
	run -c "$T/shipped.yaml" policy lint --strict
	t_eq "shipped example ${f#$PC_TOP/} (uplinks uncommented): lint --strict exit 0" 0 "$rc"
	t_eq "... and nothing on stderr" "" "$err"
done

# --- a configuration of our own ---------------------------------------------
mkdir -p "$T/etc/rules.d"
cat >"$T/etc/portcullis.yaml" <<'EOF'
uplinks: [eth0]
rules: rules.d
run_dir: run
EOF
cat >"$T/etc/rules.d/10-a.yaml" <<'EOF'
sandbox: a
match: {source: 10.203.0.10}
allow:
  - {host: api.example.com, ports: [443, 80]}
  - {cidr: 192.0.2.0/24, ports: ["8000-8080"], proto: any}
secrets:
  - {name: TOKEN, host: api.example.com}
EOF
cat >"$T/etc/rules.d/20-b.yaml" <<'EOF'
- sandbox: b
  match: {source: [10.203.0.11, "fd00:203::11"]}
  allow: [{host: "*.example.org", ports: [443]}]
EOF
echo 'this is not a rule file: [' >"$T/etc/rules.d/README"
run -c "$T/etc/portcullis.yaml" policy lint
t_eq "relative rules directory, two files: clean" 0 "$rc"
t_match "counts both files' sandboxes" 'ok: 2 sandboxes, 3 allow entries, 1 secret' "$out"
run -c "$T/etc/portcullis.yaml" policy hash
h1=$out

# Same meaning, different spelling: keys reordered, comments, ports and
# sources reordered and merged, names in upper case with a trailing dot,
# sandboxes moved between files.
cat >"$T/etc/rules.d/10-a.yaml" <<'EOF'
# sandbox b moved here, a moved to the other file
- allow: [{host: "*.EXAMPLE.org.", ports: ["443-443"]}]
  match: {source: ["fd00:203:0::11/128", 10.203.0.11/32]}
  sandbox: b
EOF
cat >"$T/etc/rules.d/20-b.yaml" <<'EOF'
secrets: [{host: API.example.com, name: TOKEN, port: 443, header: Authorization}]
allow:
  - ports: [80, 443]            # order of ports has no meaning
    host: api.example.com.
  - {proto: any, ports: ["8000-8079", 8080], cidr: 192.0.2.0/24}
match: {source: 10.203.0.10/32}
sandbox: a
EOF
run -c "$T/etc/portcullis.yaml" policy hash
t_eq "equal meaning gives the equal hash" "$h1" "$out"

# Swapping the two allow entries changes which rule a log line names.
cat >"$T/etc/rules.d/20-b.yaml" <<'EOF'
sandbox: a
match: {source: 10.203.0.10}
allow:
  - {cidr: 192.0.2.0/24, ports: ["8000-8080"], proto: any}
  - {host: api.example.com, ports: [443, 80]}
secrets:
  - {name: TOKEN, host: api.example.com}
EOF
run -c "$T/etc/portcullis.yaml" policy hash
t_match "a different policy hashes differently" '^sha256:[0-9a-f]{64}$' "$out"
t_fail "allow order is part of the hash" test "$h1" = "$out"

# --- errors ---------------------------------------------------------------
cat >"$T/bad.yaml" <<'EOF'
sandbox: c
match: {source: 10.203.0.12, prot: tap3}
allow:
  - host: a.*.example.com
    ports: [443]
  - cidr: 10.0.0.1/8
    ports: [0]
    proto: icmp
secrets:
  - {name: TOKEN, host: api.example.com}
EOF
run policy lint "$T/bad.yaml"
t_eq "a bad rule file exits 1" 1 "$rc"
t_eq "nothing on stdout when there are errors" "" "$out"
t_match "unknown key with did-you-mean, at its line:col" \
	"^$T/bad.yaml:2:30: unknown key 'prot' in match \(did you mean 'port'\?\); expected one of: source, mac, port$" "$err"
t_match "invalid host pattern" \
	"^$T/bad.yaml:4:11: host: invalid host 'a.\*.example.com': '\*' is only allowed as the whole first label" "$err"
t_match "invalid CIDR" "^$T/bad.yaml:6:11: cidr: invalid prefix '10.0.0.1/8': address bits are set after the first 8 \(the network is 10.0.0.0/8\)" "$err"
t_match "invalid port" "^$T/bad.yaml:7:13: ports: port 0 is not a port" "$err"
t_match "invalid proto" "^$T/bad.yaml:8:12: proto: expected tcp, udp or any, found 'icmp'$" "$err"
t_eq "every error is printed, one per line" 5 "$(printf '%s\n' "$err" | grep -c "^$T/bad.yaml:")"

printf 'sandbox: x\nmatch: {source: 10.0.0.1}\nallow:\n\t- host: a.example.com\n' >"$T/tab.yaml"
run policy lint "$T/tab.yaml"
t_eq "YAML syntax error exits 1" 1 "$rc"
t_eq "YAML syntax error names the place" \
	"$T/tab.yaml:4:1: invalid YAML: a tab character; expected spaces (YAML indents with spaces only)" "$err"

cat >"$T/dup1.yaml" <<'EOF'
sandbox: agent
match: {source: 10.0.0.0/24}
EOF
cat >"$T/dup2.yaml" <<'EOF'
- sandbox: agent
  match: {source: 10.1.0.0/24}
- sandbox: other
  match: {source: 10.0.0.128/25}
  allow: [{host: a.example.com, ports: [443]}]
  secrets: [{name: KEY, host: a.example.com, port: 8443}]
EOF
run policy lint "$T/dup1.yaml" "$T/dup2.yaml"
t_eq "errors across files exit 1" 1 "$rc"
t_match "duplicate sandbox names across files" \
	"^$T/dup2.yaml:1:12: duplicate sandbox name 'agent' \(first at $T/dup1.yaml:1:10\)" "$err"
t_match "overlapping selectors" \
	"^$T/dup2.yaml:4:10: sandbox 'other' can claim the same packets as sandbox 'agent' \($T/dup1.yaml:2:8\): source 10.0.0.128/25" "$err"
t_match "secret bound to a host the sandbox may not reach on that port" \
	"^$T/dup2.yaml:6:31: secret 'KEY' is bound to a.example.com:8443, which sandbox 'other' may not reach" "$err"

cat >"$T/etc/bad-config.yaml" <<'EOF'
rules: rules.d
queue: {count: 0}
dns: {resolvrs: [198.51.100.53]}
EOF
run policy lint "$T/etc/bad-config.yaml"
t_eq "a bad configuration exits 1" 1 "$rc"
t_match "config value out of range" "^$T/etc/bad-config.yaml:2:16: queue.count: expected a whole number from 1 to 64, found 0$" "$err"
t_match "config unknown key with did-you-mean" \
	"^$T/etc/bad-config.yaml:3:7: unknown key 'resolvrs' in 'dns' \(did you mean 'resolvers'\?\)" "$err"

# --- unreadable input: exit 3 -------------------------------------------------
run policy lint "$T/nonexistent.yaml"
t_eq "a missing file exits 3" 3 "$rc"
t_eq "and says which" "portcullis: policy lint: $T/nonexistent.yaml: No such file or directory" "$err"
run -c "$T/nonexistent.yaml" policy lint
t_eq "a missing configuration exits 3" 3 "$rc"
printf 'rules: %s/no-such-dir\n' "$T" >"$T/nodir.yaml"
run -c "$T/nodir.yaml" policy hash
t_eq "policy hash with a missing rules directory exits 3" 3 "$rc"
t_eq "and prints no hash" "" "$out"
t_match "naming the directory" "rules directory $T/no-such-dir: No such file or directory" "$err"
printf 'rules: %s\n' "$T" >"$T/badrules.yaml"
cp "$T/bad.yaml" "$T/rules-bad.yaml"
run -c "$T/badrules.yaml" policy hash
t_eq "policy hash of an invalid policy exits 1" 1 "$rc"
t_eq "and prints no hash" "" "$out"

# --- usage ------------------------------------------------------------------
run policy
t_eq "policy without a subcommand is a usage error" 2 "$rc"
run policy frobnicate
t_eq "an unknown subcommand is a usage error" 2 "$rc"
run -c "$T/etc/portcullis.yaml" policy hash --bogus
t_eq "an unknown hash option is a usage error" 2 "$rc"

t_done
