#!/usr/bin/env bash
# `portcullis top` under tmux, over the real guard: the lab's portcullisd
# and portcullis-logd, sandbox 1 sending allowed flows (plain HTTP to
# $LAB_DIRECT4, a cidr rule) and refused ones (to paste.evil.test's address
# on a port this run picks, so the destination on the screen can only be
# the one sent here). The captured screen must show the sandbox with
# non-zero rates, that destination at the top of the refused list, and the
# queue and log lines; q and SIGTERM end it with exit 0 and the terminal as
# it was (the normal screen back, the cursor shown, the tty modes
# unchanged). --once and --json give the same facts without a terminal.
set -u
. "$PC_TOP/tests/lib/guard.sh"

command -v tmux >/dev/null || { echo "1..0 # SKIP tmux not installed (make deps)"; exit 0; }

guard_lab 1
guard_agent1 <<EOF
  - cidr: $LAB_DIRECT4/32
    ports: [80]
EOF
guard_start || { t_fail "guard started" true; t_done; }

T=$LAB_DIR/top
mkdir -p "$T"
S=$T/tmux.sock
PORT=$((20000 + RANDOM % 10000))
DEST="CONNECT $LAB_PASTE4:$PORT"
traffic=
cleanup() {
	touch "$T/stop"
	tmux -S "$S" kill-server 2>/dev/null
	[ -z "$traffic" ] || wait "$traffic"
	lab_down
}
trap cleanup EXIT

# the sandbox's traffic, until the test ends: allowed and refused, both
# every 0.2 s or so
lab_sb 1 sh -c "while [ ! -e '$T/stop' ]; do
	curl -s -o /dev/null --max-time 2 http://$LAB_DIRECT4/
	curl -s -o /dev/null --max-time 1 http://$LAB_PASTE4:$PORT/
	sleep 0.2
done" >/dev/null 2>&1 </dev/null &
traffic=$!

# top in the pane's shell, with the tty's modes before and after, its pid
# (exec keeps it) and its exit status
cat >"$T/run-top.sh" <<EOF
stty -g >"$T/stty.before"
sh -c 'echo \$\$ >"\$1"; shift; exec "\$@"' - "$T/pid" \
	ip netns exec "$LAB_GW" "$GUARD_BIN/portcullis" -c "$GUARD_CONF" top
echo \$? >"$T/rc"
stty -g >"$T/stty.after"
EOF
tmux -S "$S" new-session -d -x 120 -y 40 -s top "env PS1='pc-shell\$ ' bash --norc --noprofile"

screen() { tmux -S "$S" capture-pane -p -t top; }
pane() { tmux -S "$S" display -p -t top "$1"; }
wait_screen() { # regex: until the screen shows it (15 s)
	for _ in $(seq 75); do
		screen | grep -qE -- "$1" && return 0
		sleep 0.2
	done
	return 1
}
wait_file() { # file (10 s)
	for _ in $(seq 50); do
		[ -s "$1" ] && return 0
		sleep 0.2
	done
	return 1
}
start_top() {
	rm -f "$T/rc" "$T/pid" "$T/stty.before" "$T/stty.after"
	tmux -S "$S" send-keys -t top "sh $T/run-top.sh" Enter
}

start_top
t_ok "top draws its frame in the terminal" wait_screen '^portcullis top '
t_eq "... on the alternate screen" 1 "$(pane '#{alternate_on}')"
t_ok "the refused destination this test sent appears" wait_screen "^ +[0-9]+~? +$DEST +agent-1"
# rates over 10 s: let the window fill a little
sleep 2
scr=$(screen)
printf '%s\n' "$scr" | sed 's/^/# /' >&2
row=$(printf '%s\n' "$scr" | grep -E '^agent-1 ')
t_match "the sandbox has its row" '^agent-1 ' "$row"
t_ok "... with a non-zero rate of allowed verdicts" \
	awk -v r="$(awk '{print $2}' <<<"$row")" 'BEGIN { exit !(r > 0) }'
t_ok "... and of refused verdicts" \
	awk -v r="$(awk '{print $3}' <<<"$row")" 'BEGIN { exit !(r > 0) }'
refused=$(printf '%s\n' "$scr" | sed -n '/^REFUSED  *DESTINATION/,/^$/p')
t_match "the most refused destination is the one sent" \
	"^ +[0-9]+~? +$DEST +agent-1" "$(printf '%s\n' "$refused" | sed -n 2p)"
t_nomatch "the allowed destination is not in the refused list" "$LAB_DIRECT4:80" "$refused"
t_match "the header says the check proved containment" '^portcullis top .* check proven' "$scr"
t_match "the queue line: flows, packets queued, no drop" \
	'^queue +flows [0-9]+ +held [0-9]+ +queued [1-9][0-9]* +kernel drops 0 .*user drops 0 ' "$scr"
t_match "the engine's records: none that logd did not take" \
	'^engine +records sent [1-9][0-9]* +not taken by logd 0' "$scr"
t_match "the log line: logd's records, no write error, its last checkpoint" \
	'^log +records [1-9][0-9]* +write errors 0 +malformed 0 +unsealed [0-9]+ +checkpoint [0-9.]+ s ago' "$scr"

tmux -S "$S" send-keys -t top s
t_ok "s sorts by refused verdicts" wait_screen 'sorted by refused'

tmux -S "$S" send-keys -t top q
t_ok "q ends it" wait_file "$T/stty.after"
t_eq "... with exit 0" 0 "$(cat "$T/rc" 2>/dev/null)"
t_eq "... the terminal's modes as they were" "$(cat "$T/stty.before")" "$(cat "$T/stty.after")"
t_eq "... the normal screen back" 0 "$(pane '#{alternate_on}')"
t_eq "... the cursor shown" 1 "$(pane '#{cursor_flag}')"
t_nomatch "... and the frame gone from it" 'REFUSED +DESTINATION' "$(screen)"

for sig in TERM INT; do
	start_top
	wait_file "$T/pid"
	if ! wait_screen "$DEST"; then
		t_fail "top came back up for SIG$sig" true
		continue
	fi
	kill -"$sig" "$(cat "$T/pid")"
	t_ok "SIG$sig ends it" wait_file "$T/stty.after"
	t_eq "... with exit 0" 0 "$(cat "$T/rc" 2>/dev/null)"
	t_eq "... the terminal's modes as they were" "$(cat "$T/stty.before")" "$(cat "$T/stty.after")"
	t_eq "... the normal screen back" 0 "$(pane '#{alternate_on}')"
	t_eq "... the cursor shown" 1 "$(pane '#{cursor_flag}')"
done

# Without a terminal.
out=$(guard_cli top --once </dev/null) && rc=0 || rc=$?
t_eq "top --once exits 0" 0 "$rc"
t_match "... prints the sandbox's row" '^agent-1 +[0-9.]+ +[0-9.]+ +[1-9]' "$out"
t_match "... and the refused destination" "^ +[0-9]+~? +$DEST +agent-1" "$out"
t_nomatch "... as plain text (no escape sequence)" $'\e' "$out"
js=$(guard_cli top --json </dev/null) && rc=0 || rc=$?
t_eq "top --json exits 0" 0 "$rc"
t_eq "... one snapshot: the sandbox refused, the destination first, both daemons up" \
	"agent-1 True $DEST True True" "$(printf '%s' "$js" | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = [x for x in d["sandboxes"] if x["name"] == "agent-1"][0]
print(s["name"], s["refused_per_s"] > 0 and s["allowed_per_s"] > 0,
      d["refused_destinations"][0]["destination"], d["engine"]["up"], d["logd"]["up"])')"

# Without the engine: the view says so, the log is still counted.
guard_engine_stop
out=$(guard_cli top --once </dev/null) && rc=0 || rc=$?
t_eq "engine stopped: top --once still exits 0" 0 "$rc"
t_match "... and says the engine does not answer" '^portcullis top .* engine: not answering: ' "$out"
t_match "... with the log's counts" "^ +[0-9]+~? +$DEST +agent-1" "$out"
t_done
