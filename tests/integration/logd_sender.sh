# Who wrote each record: logd names the sender (portcullis.sender) from the
# kernel's credentials of each message, never from what the client sends,
# and refuses the records a sender may not write (docs/logd.md, "Who may
# write"): a refused record ends that session, is counted in the metrics and
# logged, and nothing of it reaches the file.
set -u
. "$PC_TOP/tests/integration/logd_setup.bash"

lg_need_bins "logd sender" "$B/portcullis-logd" "$B/tests/helpers/logd_client"
lg_init logd-sender
lg_config
S=$D/run/logd.sock
cp "$B/tests/helpers/logd_client" "$D/client" # somewhere every user can run it from
chmod 755 "$D/client"
as_user() { # user cmd...
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --clear-groups "$@"
}
records() { grep -c '^{"event.sequence"' "$L"; }
last() { grep '^{"event.sequence"' "$L" | tail -n 1; }
sender_of_last() { last | sed -n 's/.*"portcullis\.sender":"\([a-z]*\)".*/\1/p'; }

logd_start || t_diag "logd did not start: $(cat "$D/logd.err")"
t_match "the first record, logd's own, names logd" '"portcullis.sender":"logd"' \
	"$(grep '^{"event.sequence"' "$L" | head -n 1)"

t_match "the engine's user writes a flow verdict" "^acked" \
	"$(as_user portcullis "$D/client" "$S" -a connect -V allowed)"
t_eq "... recorded as the engine's" engine "$(sender_of_last)"
t_match "the vault's user writes an http-request" "^acked" \
	"$(as_user portcullis-vault "$D/client" "$S" -a http-request -V allowed)"
t_eq "... recorded as the vault's" vault "$(sender_of_last)"
t_match "root writes a sandbox record" "^acked" "$("$D/client" "$S" -a sandbox -V none)"
t_eq "... recorded as root's" root "$(sender_of_last)"
t_match "the sender is part of the hashed line (before prev and hash)" \
	'^\{"event.sequence":[0-9]+,"@timestamp":"[^"]*",.*"portcullis\.sender":"root",.*,"portcullis\.prev":"[0-9a-f]{64}","event\.hash":"[0-9a-f]{64}"\}$' \
	"$(last)"

# A vault that tries to speak for the engine.
before=$(records)
out=$(as_user portcullis-vault "$D/client" "$S" -a connect -V allowed -t 2000 2>&1)
t_eq "the vault's user may not write a flow verdict (connect allowed)" 1 $?
t_match "... its session ends" "closed the connection|did not acknowledge" "$out"
out=$(as_user portcullis-vault "$D/client" "$S" -a dns-query -V allowed -t 2000 2>&1)
t_eq "nor a DNS verdict" 1 $?
t_eq "nothing of them reached the file" "$before" "$(records)"
t_match "logd says what it refused, from whom" \
	"refused a connect allowed record from pid [0-9]+ uid $(id -u portcullis-vault) \(sender vault\)" \
	"$(cat "$D/logd.err")"
sleep 1.1 # past the one-warning-a-second limit
out=$(as_user portcullis "$D/client" "$S" -a http-request -V allowed -t 2000 2>&1)
t_eq "the engine's user may not write a vault record (http-request)" 1 $?
out=$(as_user portcullis "$D/client" "$S" -a sandbox -V none -t 2000 2>&1)
t_eq "nor a sandbox record (the CLI's)" 1 $?
t_eq "nothing of them reached the file" "$before" "$(records)"
t_match "the vault may record a connection it refused itself" "^acked" \
	"$(as_user portcullis-vault "$D/client" "$S" -a connect -V refused)"
t_eq "... as the vault's" vault "$(sender_of_last)"

# Credentials count when a message is sent, not when the socket was
# connected: the engine connects as root before it drops privileges.
out=$("$D/client" "$S" -a connect -V allowed -U portcullis-vault -t 2000 2>&1)
t_eq "connected as root, then the vault's user: a flow verdict is refused" 1 $?
t_match "connected as root, then the engine's user: written" "^acked" \
	"$("$D/client" "$S" -a dns-query -V allowed -U portcullis)"
t_eq "... as the engine's, not root's" engine "$(sender_of_last)"

# What the client sends cannot name the sender: the wire form has no field
# for it, and strings are escaped.
t_match "a vault record whose message claims the engine" "^acked" \
	"$(as_user portcullis-vault "$D/client" "$S" -a http-request -V refused \
		-m '","portcullis.sender":"engine')"
t_eq "... is the vault's" vault "$(sender_of_last)"
t_eq "... with one sender member" 1 "$(last | grep -o '"portcullis\.sender":' | wc -l)"
t_eq "a field the wire form does not know ends the session" closed \
	"$("$D/client" --malformed tag "$S")"

out=$(PC metrics 2>&1)
t_match "the refused records are counted" '^portcullis_logd_refused_records_total [4-9]$' "$out"
logd_stop_ok
t_ok "the log verifies" PC log verify

# Senders are told apart by uid: one user for two senders is refused.
cp "$D/p.yaml" "$D/same.yaml"
printf 'engine:\n  user: portcullis\nvault:\n  user: portcullis\n' >>"$D/same.yaml"
out=$("$B/portcullis-logd" -c "$D/same.yaml" -t 2>&1)
t_eq "the engine's and the vault's user the same: -t fails (exit 1)" 1 $?
t_match "... saying why (config_start_check, the list policy lint reports too)" \
	"portcullis-logd would refuse to start: vault.user: 'portcullis' is engine.user's uid [0-9]+: the log tells the engine's records from the vault's by uid" "$out"
out=$(timeout 10 "$B/portcullis-logd" -c "$D/same.yaml" 2>&1) # old logds served on
t_eq "... and logd does not start (exit 3)" 3 $?

# Old logs (without the sender) still verify: logd_old/ was written by logd
# before records named their sender (main at fb8e840), with its sidecar and
# public key.
O=$PC_TOP/tests/integration/logd_old
t_nomatch "the old log has no sender" "portcullis\.sender" "$(cat "$O/verdicts.jsonl")"
out=$(PC log verify "$O/verdicts.jsonl" --key "$O/log.key.pub" 2>&1)
t_eq "it still verifies" 0 $?
t_match "... intact, its sidecar read" "intact: 7 records.*covers the whole file" "$(echo $out)"

t_done
