# Shared setup of the vault's integration tests and bench/vault (sourced;
# not a test itself): the lab, a configuration and rules under $LAB_DIR, a
# real portcullis-logd, the appliance CA, sealed secrets, portcullis-vault,
# and the redirect of secret-bound flows to the vault.
#
# The redirect: by default the real engine (portcullisd) guards the lab: the
# sandboxes resolve through its DNS guard, and it marks and redirects the
# flows to secret-bound hosts to the vault (VAULT_REDIRECT=engine). With
# VAULT_REDIRECT=fixture (or no portcullisd built) a fixture nat rule in the
# lab's gateway namespace redirects TCP to the bound hosts' addresses
# instead, and nothing else is guarded (tests only, never product code).

PC_TOP=${PC_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PC_BUILD=${PC_BUILD:-build}
. "$PC_TOP/tests/lab/lab.sh"

# PC_BUILD may be absolute: the binaries of another tree (an older commit
# built in a worktree of its own, to show a test fails there)
case $PC_BUILD in
/*) V_BIN=$PC_BUILD ;;
*) V_BIN=$PC_TOP/$PC_BUILD ;;
esac
V_PORT=8443
# Test values: long, distinctive, never printed by a passing test.
V_GH_VALUE="ghp_VAULTTEST$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
V_WS_VALUE="ws-VAULTTEST$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
V_PYPI_VALUE="pypi-VAULTTEST$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

vault_need_bins() {
	local b
	for b in portcullis portcullis-vault portcullis-logd; do
		[ -x "$V_BIN/$b" ] || { echo "1..0 # SKIP $V_BIN/$b not built"; exit 0; }
	done
	# the vault refuses to start without its users (tests/lab/deps.sh
	# creates them, as the package does)
	for b in portcullis-vault portcullis-vworker; do
		getent passwd "$b" >/dev/null ||
			{ echo "1..0 # SKIP no $b user (make deps)"; exit 0; }
	done
}

# vault_config: write portcullis.yaml and the rules for sandbox 1 (agent-1)
# and sandbox 2 (agent-2); $V_ALLOW1_EXTRA (allow entries, indented as
# the others) is added to agent-1's; $V_CONF_EXTRA (top-level keys, one
# line, e.g. "engine: { metrics_port: 9812 }") to portcullis.yaml.
# vault.request_timeout_ms is written only when $V_REQUEST_MS is set (the
# default otherwise), so that a vault of a commit from before the key reads
# the configuration too (PC_BUILD of an older tree).
vault_config() {
	V=$LAB_DIR/v
	mkdir -p "$V/rules.d" "$V/run"
	chmod 0755 "$V" "$V/rules.d" "$V/run"
	cat >"$V/portcullis.yaml" <<-EOF
	bridge: $LAB_BR
	uplinks: [$LAB_UPLINK]
	queue:
	  base: 100
	  count: 2
	dns:
	  resolvers: [$LAB_RESOLVER4]
	  routable: [$LAB_ROUTABLE]
	run_dir: $V/run
	state_dir: $V/state
	rules: $V/rules.d
	vault:
	  listen: 0.0.0.0:$V_PORT
	  ca_dir: $V/ca
	  secrets: $V/secrets
	  trust: $LAB_CA
	  max_conns_per_sandbox: ${V_MAX_CONNS:-64}
	  handshake_timeout_ms: ${V_HANDSHAKE_MS:-3000}
	  idle_timeout_ms: ${V_IDLE_MS:-5000}
	${V_REQUEST_MS:+  request_timeout_ms: $V_REQUEST_MS}
	log:
	  socket: $V/run/logd.sock
	  file: $V/log/verdicts.jsonl
	  key: $V/state/log.key
	  syslog:
	    local: false
	${V_CONF_EXTRA:-}
	EOF
	mkdir -p "$V/state"
	cat >"$V/rules.d/agents.yaml" <<-EOF
	sandbox: agent-1
	match: { source: [$(lab_sb_ip4 1)/32, "$(lab_sb_ip6 1)/128"] }
	allow:
	  - host: api.github.test
	    ports: [443, 8444]
	  - host: www.github.test
	    ports: [443]
	  - host: pypi.test
	    ports: [443]
	  - host: wrong-cert.test
	    ports: [443]
	  - host: untrusted.test
	    ports: [443]
	  - host: paste.evil.test
	    ports: [443]
	${V_ALLOW1_EXTRA:-}
	secrets:
	  - name: GITHUB_TOKEN
	    host: api.github.test
	    header: Authorization
	    format: "Bearer {secret}"
	  - name: PYPI_TOKEN
	    host: pypi.test
	    header: X-Api-Key
	    format: "{secret}"
	  - name: WS_TOKEN
	    host: api.github.test
	    port: 8444
	  - name: WRONG_TOKEN
	    host: wrong-cert.test
	  - name: ROGUE_TOKEN
	    host: untrusted.test
	EOF
	cat >"$V/rules.d/agent2.yaml" <<-EOF
	sandbox: agent-2
	match: { source: $(lab_sb_ip4 2)/32 }
	allow:
	  - host: api.github.test
	    ports: [443]
	secrets:
	  - name: AGENT2_TOKEN
	    host: api.github.test
	EOF
}

# vault_secrets: the CA and the sealed secrets, through the real CLI.
vault_secrets() {
	"$V_BIN/portcullis" -c "$V/portcullis.yaml" ca init >/dev/null || lab_die "ca init failed"
	V_CA=$V/ca/ca.pem
	V_PH_GH=$(printf '%s\n' "$V_GH_VALUE" | "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets set GITHUB_TOKEN 2>/dev/null)
	V_PH_PYPI=$(printf '%s' "$V_PYPI_VALUE" | "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets set PYPI_TOKEN 2>/dev/null)
	printf '%s\n' "$V_WS_VALUE" | "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets set WS_TOKEN >/dev/null 2>&1
	V_PH_WS=$("$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets placeholder WS_TOKEN)
	printf 'agent2-value-0123\n' | "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets set AGENT2_TOKEN >/dev/null 2>&1
	printf 'wrong-cert-value-0123\n' | "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets set WRONG_TOKEN >/dev/null 2>&1
	printf 'untrusted-value-0123\n' | "$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets set ROGUE_TOKEN >/dev/null 2>&1
	V_PH_WRONG=$("$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets placeholder WRONG_TOKEN)
	V_PH_ROGUE=$("$V_BIN/portcullis" -c "$V/portcullis.yaml" secrets placeholder ROGUE_TOKEN)
	[ -n "$V_PH_GH" ] && [ -n "$V_PH_PYPI" ] || lab_die "secrets set failed"
	# the sandboxes trust the appliance CA (as the launcher installs it)
	cp "$V_CA" "$LAB_DIR/vault-ca.pem"
	chmod 0644 "$LAB_DIR/vault-ca.pem"
}

# The pid of this run's daemon (its configuration path is unique to the run):
# the oldest match, for the vault its monitor (its CA process and workers
# carry the same command line, and a pid that wrapped around can be lower).
v_pid() { pgrep -o -f "$1 -c $V/portcullis.yaml"; }

vault_logd_start() {
	lab_gw "${GUARD_PLACE[@]}" "$V_BIN/portcullis-logd" -c "$V/portcullis.yaml" 2>>"$LAB_DIR/logd.stderr" &
	# (bounded by lab_start_timeout: generous for sanitized builds)
	lab_wait_until -p $! _v_logd_up && return 0
	lab_die "logd did not start: $(cat "$LAB_DIR/logd.stderr")"
}
_v_logd_up() {
	V_LOGD_PID=$(v_pid portcullis-logd)
	lab_unix_ready "$V/run/logd.sock" && [ -n "$V_LOGD_PID" ]
}

vault_start() {
	# V_CWD: run it there with core dumps allowed by the shell (vault_core.sh)
	(
		[ -z "${V_CWD:-}" ] || { cd "$V_CWD" && ulimit -c unlimited; }
		lab_gw "${GUARD_PLACE[@]}" "$V_BIN/portcullis-vault" -c "$V/portcullis.yaml" 2>>"$LAB_DIR/vault.stderr"
	) &
	lab_wait_until -p $! _v_vault_up && return 0
	lab_die "vault did not start: $(cat "$LAB_DIR/vault.stderr")"
}
_v_vault_up() {
	V_VAULT_PID=$(v_pid portcullis-vault)
	lab_gw ss -Hltn "sport = :$V_PORT" | grep -q . && [ -n "$V_VAULT_PID" ]
}

vault_redirect() {
	if [ -z "${VAULT_REDIRECT:-}" ]; then
		VAULT_REDIRECT=fixture
		[ -x "$V_BIN/portcullisd" ] && VAULT_REDIRECT=engine
	fi
	if [ "$VAULT_REDIRECT" = engine ]; then
		lab_ns_check "$LAB_GW"
		ip netns exec "$LAB_GW" "${GUARD_PLACE[@]}" "$V_BIN/portcullisd" -c "$V/portcullis.yaml" \
			2>>"$LAB_DIR/engine.stderr" &
		V_ENGINE_PID=$!
		lab_wait_until -p "$V_ENGINE_PID" \
			lab_gw "$V_BIN/portcullis" -c "$V/portcullis.yaml" status --json && return 0
		lab_die "the engine did not start: $(cat "$LAB_DIR/engine.stderr")"
	fi
	# Fixture (tests only): what the engine does for flows it marked VAULT.
	lab_gw nft -f - <<-EOF || lab_die "fixture redirect failed"
	table ip vaultfixture {
		chain pre {
			type nat hook prerouting priority dstnat; policy accept;
			iifname "$LAB_BR" ip daddr { $LAB_API4, $LAB_PYPI4, $LAB_WRONGCERT4, $LAB_UNTRUSTED4 } tcp dport 443 redirect to :$V_PORT
			iifname "$LAB_BR" ip daddr $LAB_API4 tcp dport 8444 redirect to :$V_PORT
		}
	}
	table ip6 vaultfixture {
		chain pre {
			type nat hook prerouting priority dstnat; policy accept;
			iifname "$LAB_BR" ip6 daddr $LAB_API6 tcp dport 443 redirect to :$V_PORT
		}
	}
	EOF
}

# vault_up: everything, in order.
vault_up() {
	vault_need_bins
	lab_up 2
	vault_config
	vault_secrets
	vault_logd_start
	vault_start
	vault_redirect
}

# curl from a sandbox through the vault, trusting the appliance CA.
vcurl() { # sandbox-index curl-args...
	local i=$1
	shift
	lab_sb "$i" curl -sS --max-time 10 --cacert "$LAB_DIR/vault-ca.pem" "$@"
}

# The upstream's access log and the verdict log.
# nginx writes a request's access log line after the response went out, so
# the client can have the response first: let the line land before reading
v_upstream_log() { sleep 0.1; cat "$LAB_DIR/nginx-access.log" 2>/dev/null; }
# (with the records logd set aside at a restart after a kill: kept in
# quarantine files, docs/logd.md "Recovery")
v_verdicts() { cat "$V/log/verdicts.jsonl" "$V"/log/verdicts.jsonl.*-quarantine 2>/dev/null; }
