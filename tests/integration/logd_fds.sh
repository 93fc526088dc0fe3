# Descriptors handed to logd (SCM_RIGHTS) with a record: logd wants none, so
# it closes every one it receives and refuses the message that carried
# them (docs/logd.md, "Who may write"). With enough of them (20: more than
# the room logd gives a message's control data) the kernel truncates the
# control data, credentials included: such a message is refused too, never
# put down to the uid the connection had when it connected (root, for a
# daemon that connects before its privilege drop). Each sender kind, and
# each connected as root then dropped, as a compromised engine or vault
# would be; a record with 3 descriptors (no truncation) and with 20.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "logd descriptors" "$B/portcullis-logd" "$B/tests/helpers/logd_client"
lg_init logd-fds
lg_config
S=$D/run/logd.sock
cp "$B/tests/helpers/logd_client" "$D/client" # somewhere every user can run it from
chmod 755 "$D/client"
as_user() { # user cmd...
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --clear-groups "$@"
}
# the descriptors logd holds on the marker files, and all it holds
marker_fds() { find "/proc/$LOGD_PID/fd" -lname "$1" 2>/dev/null | wc -l; }
all_fds() { find "/proc/$LOGD_PID/fd" -mindepth 1 2>/dev/null | wc -l; }
# poll: logd's descriptors back to $1 (5 s); its transient ones (a
# checkpoint's sidecar) come and go, a leaked one stays
fds_back_to() {
	for _ in $(seq 50); do
		[ "$(all_fds)" -le "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

logd_start || t_diag "logd did not start: $(cat "$D/logd.err")"
t_match "a record without descriptors is written" "^acked" "$("$D/client" "$S" -a sandbox -V none)"
base=$(all_fds)

# kind: how the client runs; prefix: the command before the client; drop:
# -U USER (connected as root first) or nothing; action and verdict: a
# record that sender may write, so only the descriptors can refuse it
n=0
while read -r kind user drop action verdict; do
	for count in 3 20; do
		n=$((n + 1))
		tag="fd-smuggle-$n-$kind-$count"
		: >"$D/marker-$n"
		chmod 644 "$D/marker-$n"
		pre=()
		[ "$user" = - ] || pre=(as_user "$user")
		args=(-F "$count:$D/marker-$n" -a "$action" -V "$verdict" -m "$tag")
		[ "$drop" = - ] || args+=(-U "$drop")
		out=$("${pre[@]}" "$D/client" "$S" "${args[@]}" 2>&1)
		t_eq "$kind, $count descriptors: the record is refused (session ended)" closed "$out"
		t_eq "... it is not in the log" 0 "$(grep -c -- "$tag" "$L")"
		t_eq "... logd holds none of the descriptors" 0 "$(marker_fds "$D/marker-$n")"
	done
done <<'EOF'
root - - sandbox none
engine portcullis - connect allowed
vault portcullis-vault - http-request allowed
vault-worker portcullis-vworker - http-request allowed
engine-after-drop - portcullis connect allowed
vault-after-drop - portcullis-vault http-request allowed
EOF
# what a compromised engine would want: the CLI's record, written as root's
: >"$D/marker-x"
chmod 644 "$D/marker-x"
out=$("$D/client" "$S" -F "20:$D/marker-x" -a sandbox -V none -m fd-smuggle-as-root -U portcullis 2>&1)
t_eq "the engine after its drop, 20 descriptors, a sandbox record: refused" closed "$out"
t_eq "... not written (as root's or anyone's)" 0 "$(grep -c fd-smuggle-as-root "$L")"
t_eq "... logd holds none of the descriptors" 0 "$(marker_fds "$D/marker-x")"
t_ok "logd's descriptors are back to what they were before (no leak)" fds_back_to "$base"
t_match "logd says why it refused" "descriptors attached|control data truncated" \
	"$(cat "$D/logd.err")"
t_match "it serves on: a record without descriptors is written" "^acked" \
	"$(as_user portcullis "$D/client" "$S" -a connect -V allowed)"

logd_stop_ok
t_ok "the log verifies" PC log verify
out=$(PC log show 2>&1)
t_match "log show shows the records written" "SANDBOX agent-1" "$out"
t_eq "... and none of the refused ones" 0 "$(printf '%s\n' "$out" | grep -c fd-smuggle)"
t_done
