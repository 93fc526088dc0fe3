# The gateway as `make demo` and the sandbox tests run it (sourced after
# tests/lab/lab.sh and tests/lib/guard.sh, and after lab_up): the guard's
# configuration with the vault's part, the appliance CA, and the three
# daemons — portcullis-logd, portcullisd, portcullis-vault — in the lab's
# gateway namespace. Everything lives under $GUARD_DIR.
#
#   gw_config               guard_config + the vault's keys (trust: the lab CA)
#   gw_start                CA, logd, engine, vault; wait until each serves
#   gw_vault_start / gw_vault_stop
#   gw_stop                 stop all three
#   gw_pc ARGS...           portcullis -c $GUARD_CONF ARGS in the gateway
#   gw_secret NAME VALUE    store a secret (the value through a pipe, never argv
#                           of a long-lived process); prints the placeholder

gw_config() {
	GUARD_EXTRA="vault:
  listen: 0.0.0.0:8443
  trust: $LAB_CA
  handshake_timeout_ms: 3000
  idle_timeout_ms: 5000
${GW_EXTRA:-}"
	guard_config
}

gw_pc() { guard_cli "$@"; }

gw_secret() { # name value
	printf '%s\n' "$2" | guard_cli secrets set "$1" 2>/dev/null
}

gw_vault_start() {
	lab_ns_check "$LAB_GW"
	ip netns exec "$LAB_GW" "$GUARD_BIN/portcullis-vault" -c "$GUARD_CONF" \
		2>>"$GUARD_DIR/vault.log" &
	echo $! >"$LAB_DIR/guard-vault.pid"
	# (bounded by lab_start_timeout: generous for sanitized builds)
	lab_wait_until -p $! _gw_vault_listening && return 0
	echo "# gateway: portcullis-vault did not come up: $(tail -3 "$GUARD_DIR/vault.log")" >&2
	return 1
}

_gw_vault_listening() { lab_gw ss -Hltn "sport = :8443" | grep -q .; }

gw_vault_stop() { guard_pid_stop guard-vault; }

gw_start() {
	[ -x "$GUARD_BIN/portcullis-vault" ] || { echo "# gateway: portcullis-vault not built" >&2; return 1; }
	guard_cli ca init >/dev/null || return 1
	guard_start && gw_vault_start
}

gw_stop() {
	gw_vault_stop
	guard_stop
}
