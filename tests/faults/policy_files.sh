# Fault: the policy file replaced under the running engine — by garbage, an
# empty file, a 100 MB file, a file cut short mid-write, and files swapped
# while reloads run, and a FIFO named like a rule file. Each bad reload is
# refused with a clear error (the file named), the old policy stays in
# force, and traffic follows it; nothing that reads rules.d waits on a
# FIFO (policy lint, portcullisd -t, a reload).
set -u
. "$PC_TOP/tests/lib/guard.sh"

guard_lab 1
SB1=$(lab_sb_ip4 1)
good() { # port
	cat <<-Y
	sandbox: agent-1
	match: { source: $SB1/32, port: $(lab_sb_port 1) }
	allow:
	  - cidr: $LAB_DIRECT4/32
	    ports: [$1]
	Y
}
good 80 | guard_rules agents
guard_start || { t_fail "guard started" true; t_done; }
F=$GUARD_DIR/rules.d/agents.yaml
http_ok() { lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/ 2>&1; }
policy() { guard_status_field 's["policy"]'; }
old=$(policy)
t_match "baseline: the allowed flow works" "^http 203.0.113.99 ok" "$(http_ok)"

bad_reload() { # description
	local out rc
	out=$(guard_cli reload 2>&1) && rc=0 || rc=$?
	t_eq "$1: reload refused (exit 1)" 1 "$rc"
	t_match "$1: the error names the file" "agents.yaml" "$out"
	t_eq "$1: the old policy stays in force" "$old" "$(policy)"
	t_match "$1: traffic follows the old policy" "^http 203.0.113.99 ok" "$(http_ok)"
	t_diag "$1: $(printf '%s' "$out" | head -2)"
}

head -c 4096 /dev/urandom >"$F"
bad_reload "random bytes"
printf 'sandbox: [unclosed\n  - {: :\n\t\x01\x02\n' >"$F"
bad_reload "YAML garbage"
: >"$F"
bad_reload "an empty file"
good 80 | head -c 60 >"$F"
bad_reload "a file cut short mid-write"
{ good 80; printf '    # padding\n'; head -c $((100 * 1024 * 1024)) /dev/zero | tr '\0' 'x'; } >"$F"
bad_reload "a 100 MB file"
t_ok "the engine is still running" kill -0 "$(guard_engine_pid)"

# SIGHUP while the file is rewritten in place, many times: each reload sees
# either a whole good file (port 80 or 8080) or a broken one, and must end
# with one of the good policies — never none, never a half one.
good 80 >"$F"
t_ok "a good file reloads" guard_cli reload
old=$(policy)
pid=$(guard_engine_pid)
for i in $(seq 1 40); do
	if [ $((i % 2)) = 0 ]; then good 80 >"$F"; else good 8080 | head -c $((RANDOM % 120)) >"$F"; fi &
	kill -HUP "$pid"
	wait $!
done
good 80 >"$F"
kill -HUP "$pid"
policy_is() { [ "$(policy)" = "$1" ]; }
lab_wait_until policy_is "$old" # the last reload is done
t_ok "after 40 reloads racing the writer, the engine runs" kill -0 "$pid"
t_eq "the last good policy is in force" "$old" "$(policy)"
t_match "traffic follows it" "^http 203.0.113.99 ok" "$(http_ok)"
t_match "the refused reloads are logged with the file" "reload refused.*agents.yaml" "$(cat "$GUARD_DIR/engine.log")"
t_match "and recorded (policy-load, failure)" '"event.action":"policy-load","event.outcome":"failure"' "$(guard_records)"
# A FIFO named like a rule file: opened for reading it would wait for a
# writer for ever (and the daemons read rules.d with SIGTERM blocked). Every
# reader refuses it at once, naming it. timeout exits 124 if one waits.
good 80 >"$F"
mkfifo "$GUARD_DIR/rules.d/x.yaml"
fifo_refused() { # description, command...
	local d=$1 out rc
	shift
	out=$(lab_gw timeout -k 2 10 "$@" 2>&1) && rc=0 || rc=$?
	t_ok "$d: does not wait on the FIFO (timeout: 124, 137)" test "$rc" != 124 -a "$rc" != 137
	t_ok "$d: refused" test "$rc" != 0
	t_match "$d: the error names the file" "(x.yaml|conf.fifo) is a FIFO" "$out"
	t_diag "$d: exit $rc: $(printf '%s' "$out" | head -1)"
}
fifo_refused "policy lint" "$GUARD_BIN/portcullis" -c "$GUARD_CONF" policy lint
fifo_refused "portcullisd -t" "$GUARD_BIN/portcullisd" -c "$GUARD_CONF" -t
fifo_refused "reload of the running engine" "$GUARD_BIN/portcullis" -c "$GUARD_CONF" reload
t_eq "the FIFO: the old policy stays in force" "$old" "$(policy)"
rm -f "$GUARD_DIR/rules.d/x.yaml"
# The configuration file itself, given as a FIFO: the same, for each daemon
# and the CLI.
mkfifo "$GUARD_DIR/conf.fifo"
fifo_refused "policy lint -c FIFO" "$GUARD_BIN/portcullis" -c "$GUARD_DIR/conf.fifo" policy lint
fifo_refused "portcullisd -t -c FIFO" "$GUARD_BIN/portcullisd" -c "$GUARD_DIR/conf.fifo" -t
fifo_refused "portcullis-vault -t -c FIFO" "$GUARD_BIN/portcullis-vault" -c "$GUARD_DIR/conf.fifo" -t
fifo_refused "portcullis-logd -t -c FIFO" "$GUARD_BIN/portcullis-logd" -c "$GUARD_DIR/conf.fifo" -t
rm -f "$GUARD_DIR/conf.fifo"
t_ok "the verdict log verifies" guard_cli log verify
t_done
