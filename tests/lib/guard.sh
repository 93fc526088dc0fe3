# Shared helpers for suites that run the real guard daemons (portcullis-logd,
# portcullisd) in the lab's gateway namespace (sources tests/lib/tap.sh and
# tests/lab/lab.sh unless the test did). Everything lives under
# $GUARD_DIR=$LAB_DIR/guard.
#
#   guard_lab N                  the usual start: guard_need_bins, lab_up N,
#                                guard_config (its knobs apply)
#   guard_agent1 [dual] <<EOF    rules.d/agents.yaml: sandbox 1 (agent-1, by
#                                its IPv4 address, with dual its IPv6 one
#                                too, and port) allowing the YAML list on
#                                stdin (more documents may follow)
#   guard_config                 write portcullis.yaml (knobs: GUARD_QUEUE_COUNT,
#                                GUARD_QUEUE_MAXLEN, GUARD_SNI_MS, GUARD_RESOLVERS,
#                                GUARD_ROUTABLE (dns.routable; default $LAB_ROUTABLE, "": none),
#                                GUARD_EXTRA = more YAML appended verbatim)
#   guard_rules NAME <<EOF       write rules.d/NAME.yaml from stdin
#   guard_start                  start logd, then the engine; wait until both serve
#   guard_logd_start / guard_logd_stop
#   guard_pid_stop NAME [SIGNAL] stop the daemon whose pid is in $LAB_DIR/NAME.pid
#   guard_engine_start / guard_engine_stop [SIGNAL]
#   guard_stop                   stop both
#   guard_cli ARGS...            run `portcullis -c $GUARD_CONF ARGS` in the gateway
#   guard_status_field EXPR      a value from `portcullis status --json`, EXPR
#                                being a python expression over `s` (the status)
#   guard_records                the verdict log (JSON lines)
#   guard_http_rc [MAX_TIME]     curl's exit code for sandbox 1's plain HTTP to
#                                $LAB_DIRECT4 (0 served, 7 refused at once)
#   guard_http_served            requests the upstream logged for $LAB_DIRECT4

command -v t_done >/dev/null || . "$PC_TOP/tests/lib/tap.sh"
command -v lab_up >/dev/null || . "$PC_TOP/tests/lab/lab.sh"

GUARD_BIN=${GUARD_BIN:-$PC_TOP/${PC_BUILD:-build}}

guard_need_bins() {
	local b
	for b in portcullisd portcullis-logd portcullis; do
		[ -x "$GUARD_BIN/$b" ] || { echo "1..0 # SKIP $GUARD_BIN/$b not built"; exit 0; }
	done
}

guard_config() {
	GUARD_DIR=$LAB_DIR/guard
	GUARD_CONF=$GUARD_DIR/portcullis.yaml
	# (log/ is left to logd: it creates it for its own user)
	mkdir -p "$GUARD_DIR/rules.d" "$GUARD_DIR/run" "$GUARD_DIR/state"
	chmod 0755 "$GUARD_DIR" "$GUARD_DIR/rules.d" "$GUARD_DIR/run"
	local routable=${GUARD_ROUTABLE-$LAB_ROUTABLE}
	# the periodic check off (0) unless a test asks for it: the lab's
	# tests follow the engine's checks trigger by trigger; set empty, the
	# key is left out (an engine from before it)
	GUARD_RECHECK_S=${GUARD_RECHECK_S-0}
	cat >"$GUARD_CONF" <<-EOF
	bridge: $LAB_BR
	uplinks: [${GUARD_UPLINKS:-$LAB_UPLINK}]
	rules: $GUARD_DIR/rules.d
	run_dir: $GUARD_DIR/run
	state_dir: $GUARD_DIR/state
	queue:
	  base: 100
	  count: ${GUARD_QUEUE_COUNT:-2}
	  maxlen: ${GUARD_QUEUE_MAXLEN:-4096}
	engine:
	  sni_timeout_ms: ${GUARD_SNI_MS:-3000}
	  ${GUARD_RECHECK_S:+recheck_interval_s: $GUARD_RECHECK_S}
	dns:
	  resolvers: [${GUARD_RESOLVERS:-$LAB_RESOLVER4, "$LAB_RESOLVER6"}]
	  ${routable:+routable: [$routable]}
	log:
	  socket: $GUARD_DIR/run/logd.sock
	  file: $GUARD_DIR/log/verdicts.jsonl
	  key: $GUARD_DIR/state/log.key
	  syslog:
	    local: false
	EOF
	[ -z "${GUARD_EXTRA:-}" ] || printf '%s\n' "$GUARD_EXTRA" >>"$GUARD_CONF"
	export GUARD_DIR GUARD_CONF
}

guard_rules() { # name, YAML on stdin
	cat >"$GUARD_DIR/rules.d/$1.yaml"
}

guard_agent1() { # [dual], allow list on stdin
	local src
	src="$(lab_sb_ip4 1)/32"
	[ "${1:-}" != dual ] || src="[$src, \"$(lab_sb_ip6 1)/128\"]"
	{
		printf 'sandbox: agent-1\nmatch: { source: %s, port: %s }\nallow:\n' "$src" "$(lab_sb_port 1)"
		cat
	} | guard_rules agents
}

guard_lab() { # sandboxes
	guard_need_bins
	lab_up "$1"
	guard_config
}

guard_cli() {
	lab_gw "$GUARD_BIN/portcullis" -c "$GUARD_CONF" "$@"
}

# (bounded by lab_start_timeout, which is generous for sanitized builds;
# gives up at once if the daemon exits)
_guard_wait() { # description, pid, command...
	local what=$1 pid=$2
	shift 2
	lab_wait_until -p "$pid" "$@" && return 0
	echo "# guard: $what did not come up" >&2
	return 1
}

# Started with ip netns exec directly (not through a shell function) so that
# $! is the daemon's own pid: stop and kill -9 must reach the daemon.
guard_logd_start() {
	lab_ns_check "$LAB_GW"
	ip netns exec "$LAB_GW" "${GUARD_PLACE[@]}" "$GUARD_BIN/portcullis-logd" -c "$GUARD_CONF" 2>>"$GUARD_DIR/logd.log" &
	echo $! >"$LAB_DIR/guard-logd.pid"
	_guard_wait "portcullis-logd" $! lab_unix_ready "$GUARD_DIR/run/logd.sock"
}

# Stops the daemon whose pid is in $LAB_DIR/NAME.pid (none: nothing to do).
guard_pid_stop() { # name [signal]
	local pid
	pid=$(cat "$LAB_DIR/$1.pid" 2>/dev/null) || return 0
	kill "-${2:-TERM}" "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rm -f "$LAB_DIR/$1.pid"
}

guard_logd_stop() { guard_pid_stop guard-logd; }

guard_engine_start() {
	lab_ns_check "$LAB_GW"
	ip netns exec "$LAB_GW" "${GUARD_PLACE[@]}" "$GUARD_BIN/portcullisd" -c "$GUARD_CONF" ${GUARD_ENGINE_ARGS--v} \
		2>>"$GUARD_DIR/engine.log" &
	echo $! >"$LAB_DIR/guard-engine.pid"
	_guard_wait "portcullisd" $! guard_cli status --json
}

guard_engine_pid() { cat "$LAB_DIR/guard-engine.pid" 2>/dev/null; }

guard_engine_stop() { guard_pid_stop guard-engine "${1:-TERM}"; } # [signal]

guard_start() {
	guard_logd_start && guard_engine_start
}

guard_stop() {
	guard_engine_stop
	guard_logd_stop
}

guard_status_field() { # python expression over s
	guard_cli status --json | python3 -c "import json,sys; s=json.load(sys.stdin); print($1)"
}

# Milliseconds until CMD... succeeds (polled every 10 ms), or "never"
# after ${GUARD_MS_UNTIL:-5000} ms.
guard_ms_until() {
	local t0 now
	t0=$(date +%s%N)
	while :; do
		if "$@" >/dev/null 2>&1; then
			echo $((($(date +%s%N) - t0) / 1000000))
			return 0
		fi
		now=$(date +%s%N)
		[ $(((now - t0) / 1000000)) -lt "${GUARD_MS_UNTIL:-5000}" ] || break
		sleep 0.01
	done
	echo never
}
# The engine's last check ran after a trigger (an ERE), ended, with result.
guard_check_is() { # trigger result
	local got
	got=$(guard_status_field 's["check"].get("trigger","") + "/" + s["check"]["result"] + "/" + str(s["check"]["running"])' 2>/dev/null)
	[[ $got =~ ^($1)/(.*)/False$ ]] && [ "${BASH_REMATCH[2]}" = "$2" ]
}
guard_cut_is() { # true|false: status' cutoff.active
	[ "$(guard_status_field 'str(s["cutoff"]["active"]).lower()' 2>/dev/null)" = "$1" ]
}

guard_records() {
	cat "$GUARD_DIR/log/verdicts.jsonl" 2>/dev/null
}

# The fail-closed suites' allowed flow: sandbox 1's plain HTTP to the
# direct upstream, and what the upstream saw of it.
guard_http_rc() { # [max-time]
	local rc
	lab_sb 1 curl -s -o /dev/null --max-time "${1:-3}" http://$LAB_DIRECT4/ && rc=0 || rc=$?
	echo "$rc"
}
# Sandbox 1's allowed flow is served: the direct upstream's own page came
# back (after a cut-off the ports come back up: the sandbox's link and its
# neighbour entries take a moment; poll it)
guard_served() { # [max-time]
	lab_sb 1 curl -sS --max-time "${1:-2}" http://$LAB_DIRECT4/ 2>/dev/null | grep -q '^http 203.0.113.99 ok'
}
guard_http_served() {
	grep -c "^$LAB_DIRECT4 " "$LAB_DIR/nginx-access.log" 2>/dev/null || true
}
