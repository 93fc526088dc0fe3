# Shared setup of the checker's integration tests and bench/check (sourced;
# not a test itself): the lab, a configuration and rules, and the real guard
# in the gateway — portcullis-logd and portcullisd (tests/lib/guard.sh), so
# the tables the checker proves are the ones the running engine installed.
PC_TOP=${PC_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PC_BUILD=${PC_BUILD:-build}
. "$PC_TOP/tests/lab/lab.sh"
. "$PC_TOP/tests/lib/guard.sh"

K_BIN=$PC_TOP/$PC_BUILD

ck_need_bins() {
	guard_need_bins
}

# guard_config's configuration (vault.listen keeps its default,
# 0.0.0.0:8443: the table redirects secret-bound flows there) and two
# sandboxes, one with a secret binding and one matched by port too.
ck_config() {
	GUARD_RESOLVERS=$LAB_RESOLVER4 guard_config
	K=$GUARD_DIR
	K_CFG=$GUARD_CONF
	guard_rules agents <<-EOF
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
}

# Put our tables back as the engine builds them: a reload makes the
# running engine install them again (one atomic batch).
ck_engine_reinstall() {
	guard_cli reload >/dev/null || lab_die "the engine did not reinstall its tables"
}

ck_logd_start() { guard_logd_start || lab_die "logd did not start: $(cat "$K/logd.log")"; }
ck_logd_stop() { guard_logd_stop; }

# portcullis in the gateway namespace with this run's configuration
ck_pc() { guard_cli "$@"; }

# The engine follows link changes on its own (the bridge's port set):
# wait, bounded, until a check proves the lab again and the engine no
# longer has the sandboxes cut off after the last foreign nftables change
# (docs/engine.md, "Cut off until proven"), so the next seed meets the
# ports as the lab has them, up. 0 proven, 1 not. Twice in a row: a
# change made just before (a probe's tc qdisc, a foreign table deleted)
# may not have reached the engine yet at the first look, and cuts the
# sandboxes off a moment later.
ck_wait_proven() {
	local i ok=0
	for i in $(seq 1 60); do
		if ck_pc check >/dev/null 2>&1 && ! guard_cut_is true; then
			ok=$((ok + 1))
			[ "$ok" -lt 2 ] || return 0
		else
			ok=0
		fi
		sleep 0.1
	done
	return 1
}

ck_setup() { # [sandboxes=2]
	ck_need_bins
	lab_up "${1:-2}" >/dev/null 2>&1 || lab_die "lab_up failed"
	ck_config
	guard_start || lab_die "the guard did not start: $(cat "$K/logd.log" "$K/engine.log" 2>/dev/null | tail -5)"
}
