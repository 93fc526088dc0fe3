# Shared setup of the checker's integration tests and bench/check (sourced;
# not a test itself): the lab, a configuration and rules under $LAB_DIR,
# the engine's real ruleset in the gateway, and a real portcullis-logd.
#
# The ruleset: portcullisd installs it when it is built; until then the
# engine's own helper (tests/helpers/engine_nft apply) installs exactly what
# portcullisd would (the same builder, pc_ruleset_build + pc_nft_apply).
PC_TOP=${PC_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PC_BUILD=${PC_BUILD:-build}
. "$PC_TOP/tests/lab/lab.sh"

K_BIN=$PC_TOP/$PC_BUILD

ck_need_bins() {
	local b
	for b in portcullis portcullis-logd tests/helpers/engine_nft; do
		[ -x "$K_BIN/$b" ] || { echo "1..0 # SKIP $K_BIN/$b not built"; exit 0; }
	done
}

ck_config() {
	K=$LAB_DIR/k
	mkdir -p "$K/rules.d" "$K/run" "$K/state" "$K/log"
	chmod 0755 "$K" "$K/rules.d" "$K/run"
	cat >"$K/portcullis.yaml" <<-EOF
	bridge: $LAB_BR
	run_dir: $K/run
	state_dir: $K/state
	rules: $K/rules.d
	dns:
	  resolvers: [$LAB_RESOLVER4]
	vault:
	  listen: 0.0.0.0:8443
	log:
	  socket: $K/run/logd.sock
	  file: $K/log/verdicts.jsonl
	  key: $K/state/log.key
	EOF
	cat >"$K/rules.d/agents.yaml" <<-EOF
	sandbox: agent-1
	match: { source: $(lab_sb_ip4 1)/32 }
	allow:
	  - host: api.github.test
	    ports: [443]
	  - cidr: $LAB_SSH4/32
	    ports: [22]
	secrets:
	  - name: GITHUB_TOKEN
	    host: api.github.test
	---
	sandbox: agent-2
	match: { source: $(lab_sb_ip4 2)/32, port: $(lab_sb_port 2) }
	allow:
	  - host: pypi.test
	    ports: [443]
	EOF
	K_CFG=$K/portcullis.yaml
}

# (Re)install our tables exactly as the engine builds them.
ck_engine_apply() {
	lab_gw "$K_BIN/tests/helpers/engine_nft" -c "$K_CFG" apply >/dev/null ||
		lab_die "engine ruleset could not be installed"
}

ck_logd_start() {
	lab_gw "$K_BIN/portcullis-logd" -c "$K_CFG" 2>>"$LAB_DIR/logd.stderr" &
	local i
	for i in $(seq 1 100); do
		[ -S "$K/run/logd.sock" ] && return 0
		sleep 0.05
	done
	lab_die "logd did not start: $(cat "$LAB_DIR/logd.stderr")"
}

# portcullis in the gateway namespace with this run's configuration
ck_pc() { lab_gw "$K_BIN/portcullis" -c "$K_CFG" "$@"; }

ck_setup() { # [sandboxes=2]
	ck_need_bins
	lab_up "${1:-2}" >/dev/null 2>&1 || lab_die "lab_up failed"
	ck_config
	ck_engine_apply
}
