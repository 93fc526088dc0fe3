#!/usr/bin/env bash
# `portcullis sandbox run` against the real guard (logd, engine, vault) in the
# lab's gateway: the command's exit status passes through; it runs
# unprivileged with placeholders and the trust bundle; the real secret is in
# nothing the sandbox can read; the secret is injected toward its host only;
# rules, links, processes and files are gone afterwards; a way out found by
# the check blocks the launch with the exit named, and so does a second link
# in the sandbox's own namespace; the errors an admin meets
# say what to do; a signal to the launcher reaches the command and cleans up.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$PC_TOP/tests/integration/sandbox_setup.bash"

sb_guard_up 1 ghp_SANDBOXTEST # sandbox 1 (port pcv1): a bystander on the bridge, seeds a way out later
t_match "a secret for the tests (placeholder printed)" '^pcph_GITHUB_TOKEN_[a-z2-7]{26}$' "$PH"
RUN=$GUARD_DIR/run

# run NAME-OR-- ARGS...: the launcher in the gateway; stdout+stderr in $OUT, status in $RC
run() {
	OUT=$(gw_pc sandbox run "$@" 2>&1) && RC=0 || RC=$?
}
no_leftovers() { # name
	t_eq "$1: no rule file left" "" "$(ls "$GUARD_DIR/rules.d" | grep -F "sandbox-$1" || true)"
	t_eq "$1: no sandbox directory left" "" "$(ls "$RUN/sandbox" 2>/dev/null | grep -vx lock || true)"
	t_eq "$1: no launcher link left on the gateway" "" \
		"$(lab_gw ip -o link show | grep -o 'pcs[0-9]*' || true)"
	t_eq "$1: the policy is the one from before" "$POLICY0" "$(gw_pc policy hash)"
	t_eq "$1: the engine runs the policy from before" "$POLICY0" \
		"$(guard_status_field 's["policy"]')"
}

# ---- the command's exit status ---------------------------------------------------------
run --name st7 --allow api.github.test -- sh -c 'exit 7'
t_eq "the command's exit status passes through (7)" 7 "$RC"
t_match "the summary says how it ended" "command +sh exited with status 7" "$OUT"
run --name st0 --allow api.github.test -- true
t_eq "... and 0" 0 "$RC"
t_match "the launcher read the sandbox's namespace: lo and its interface, its routes" \
	"the sandbox's namespace holds links lo, eth0; routes: .*default via $LAB_GW4 dev eth0" "$OUT"
run --name sig --allow api.github.test -- sh -c 'kill -TERM $$'
t_eq "a command killed by a signal: 128 + signal" 143 "$RC"
run --name nf --allow api.github.test -- /nonexistent/agent
t_eq "a command that does not exist: 127" 127 "$RC"
t_match "... said so" "cannot run '/nonexistent/agent'" "$OUT"
no_leftovers nf

# ---- inside: user, network, environment, trust bundle, injection -----------------------
cat >"$LAB_DIR/inside.sh" <<'EOF'
echo "uid=$(id -u) name=$(id -un)"
echo "token=$GITHUB_TOKEN"
for v in SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO; do
	eval "echo ca.$v=\${$v:-unset}"
done
echo "sandbox=$PORTCULLIS_SANDBOX home=$HOME"
echo "extra=${EXTRA_VAR:-unset} caller=${CALLER_ONLY:-unset}"
grep '^nameserver' /etc/resolv.conf | sed 's/^/resolv /'
ip -o -4 addr show dev eth0 | awk '{print "addr4 " $4}'
ip -4 route show default | sed 's/^/route /'
ip link set eth0 down 2>/dev/null && echo "netadmin=yes" || echo "netadmin=no"
curl -sS --max-time 8 -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.test/echo |
	sed 's/^/api /'
curl -sS --max-time 8 -o /dev/null -w 'www %{http_code}\n' \
	-H "Authorization: Bearer $GITHUB_TOKEN" https://www.github.test/ 2>&1
curl -sS --max-time 5 https://pypi.test/ >/dev/null 2>&1; echo "pypi rc=$?"
EOF
chmod 0644 "$LAB_DIR/inside.sh"
before=$(grep -c "Bearer $VALUE" "$LAB_DIR/nginx-access.log")
OUT=$(CALLER_ONLY=leak gw_pc sandbox run --name inside --allow api.github.test \
	--allow www.github.test --secret GITHUB_TOKEN --env EXTRA_VAR=hello -- \
	bash "$LAB_DIR/inside.sh" 2>&1) && RC=0 || RC=$?
t_eq "inside: exit 0" 0 "$RC"
t_match "the command runs as the unprivileged sandbox.user (nobody)" "uid=65534 name=nobody" "$OUT"
t_match "the secret's placeholder is in the environment under its name" "token=$PH\$" "$OUT"
for v in SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO; do
	t_match "$v names the sandbox's trust bundle" "ca.$v=$RUN/sandbox/inside/ca-bundle.pem" "$OUT"
done
t_match "PORTCULLIS_SANDBOX and a private HOME" "sandbox=inside home=$RUN/sandbox/inside/home" "$OUT"
t_match "--env passes a variable; the caller's environment does not leak" \
	"extra=hello caller=unset" "$OUT"
t_match "resolv.conf names the configured resolver" "resolv nameserver $LAB_RESOLVER4" "$OUT"
t_match "an address from the bridge's subnet" 'addr4 10\.203\.0\.[0-9]+/24' "$OUT"
t_match "a default route via the gateway" "route default via $LAB_GW4 dev eth0" "$OUT"
t_match "no CAP_NET_ADMIN inside (cannot reconfigure its link)" "netadmin=no" "$OUT"
t_match "the vault injected the real token toward its host (the sandbox sees the placeholder back)" \
	"api host=api.github.test auth=Bearer $PH" "$OUT"
t_eq "the upstream received the real token once more" "$((before + 1))" \
	"$(grep -c "Bearer $VALUE" "$LAB_DIR/nginx-access.log")"
t_match "the placeholder toward another allowed host: 403" "www 403" "$OUT"
t_match "a host not allowed does not resolve" "pypi rc=6" "$OUT"
t_match "summary: flows allowed" "flows +[1-9][0-9]* allowed" "$OUT"
t_match "summary: the injection and the exfiltration attempt" \
	"secrets injected +1 \(GITHUB_TOKEN\)" "$OUT"
t_match "summary: exfiltration refused" "exfiltration +1 refused" "$OUT"
t_match "summary: log range" "log +seq [0-9]+\.\.[0-9]+ in $GUARD_DIR/log/verdicts.jsonl" "$OUT"
CERT=$(printf '%s\n' "$OUT" | sed -n 's/^  certificate *//p')
t_ok "the certificate it issued verifies" gw_pc cert verify "$CERT" --key "$GUARD_DIR/state/appliance.pub"
t_ok "... with its Markdown rendering" test -s "$CERT.md"
t_match "the log has the sandbox's start and end" \
	"sandbox inside created on pcbr0.*sandbox inside ended: bash exited with status 0" \
	"$(gw_pc log show | tr '\n' ' ')"
no_leftovers inside

# ---- the real secret is nowhere the sandbox can read -----------------------------------
# The command dumps what it can read; the test (outside) looks for the value,
# which never enters the sandbox, not even to search for it.
cat >"$LAB_DIR/dump.sh" <<EOF
cat /proc/self/environ; echo
cat /etc/resolv.conf /etc/hosts "\$SSL_CERT_FILE"
cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; echo
find "$GUARD_DIR" /etc/netns "\$HOME" -type f -readable 2>/dev/null | while read -r f; do
	echo "== \$f"; cat "\$f" 2>/dev/null; done
ls "$GUARD_DIR/state/secrets" >/dev/null 2>&1 && echo "store=listable" || echo "store=closed"
test -r "$GUARD_DIR/state/secrets/secret.key" && echo "key=readable" || echo "key=unreadable"
test -r "$GUARD_DIR/state/secrets/GITHUB_TOKEN.sealed" && echo "sealed=readable" || echo "sealed=unreadable"
test -r "$GUARD_DIR/state/ca/ca.key" && echo "cakey=readable" || echo "cakey=unreadable"
EOF
chmod 0644 "$LAB_DIR/dump.sh"
run --name dump --allow api.github.test --secret GITHUB_TOKEN -- bash "$LAB_DIR/dump.sh"
t_eq "dump: exit 0" 0 "$RC"
t_match "the dump did read the sandbox's files (the bundle, the rules)" \
	"BEGIN CERTIFICATE.*sandbox-dump.yaml" "$(printf '%s' "$OUT" | tr '\n' ' ')"
t_match "the dump holds the placeholder" "$PH" "$OUT"
t_eq "the real secret is in nothing the sandbox can read (environ, resolv.conf, hosts, bundle, rules, log, other processes)" \
	0 "$(printf '%s\n' "$OUT" | grep -cF "$VALUE")"
t_match "the vault's store cannot be listed from inside" "store=closed" "$OUT"
t_match "its key and sealed files cannot be read" "key=unreadable" "$OUT"
t_match "... the sealed secret either" "sealed=unreadable" "$OUT"
t_match "the vault CA's key cannot be read" "cakey=unreadable" "$OUT"
t_fail "the sandbox's files are not in /etc/netns (private mounts instead)" test -e /etc/netns/dump

# ---- what the command leaves behind is stopped -------------------------------------------
run --name bg --allow api.github.test -- sh -c 'sleep 3007 & sleep 3008 & exit 0'
t_eq "a command that leaves processes: exit 0" 0 "$RC"
t_match "the launcher says it stopped them" "stopped 2 processes the command left" "$OUT"
t_eq "no process of the sandbox survives" "" "$(pgrep -f 'sleep 300[78]' || true)"
no_leftovers bg

# ---- a signal to the launcher reaches the command; everything is removed ----------------
lab_ns_check "$LAB_GW"
ip netns exec "$LAB_GW" "$GUARD_BIN/portcullis" -c "$GUARD_CONF" sandbox run --name term \
	--allow api.github.test -- sh -c 'touch '"$LAB_DIR"'/term.started; exec sleep 3009' \
	>"$LAB_DIR/term.out" 2>&1 &
lpid=$!
for i in $(seq 1 100); do [ -e "$LAB_DIR/term.started" ] && break; sleep 0.05; done
kill -TERM "$lpid"
wait "$lpid" && RC=0 || RC=$?
t_eq "SIGTERM to the launcher: the command ends by it (143)" 143 "$RC"
t_match "... and the summary is printed" "exit status +143" "$(cat "$LAB_DIR/term.out")"
t_eq "... the command is gone" "" "$(pgrep -f 'sleep 3009' || true)"
no_leftovers term

# ---- a way out found by the check blocks the launch ---------------------------------------
lab_gw ip link set "$(lab_sb_port 1)" type bridge_slave isolated off
run --name blocked --allow api.github.test -- touch "$LAB_DIR/blocked.ran"
t_eq "port isolation off on another port: refused (exit 1)" 1 "$RC"
t_match "the way out is named" "second exit: .*$(lab_sb_port 1).*isolat" "$OUT"
t_match "... and the refusal says the command did not start" \
	"containment is not proven .*the command was not started" "$OUT"
t_fail "the command did not run" test -e "$LAB_DIR/blocked.ran"
t_match "the refusal is in the log" "SANDBOX the command was not started .*\(containment not proven\)" "$(gw_pc log show 2>&1)"
no_leftovers blocked
lab_gw ip link set "$(lab_sb_port 1)" type bridge_slave isolated on

lab_gw nft -f - <<EOF
table ip sbtest_evil {
	chain pre {
		type nat hook prerouting priority -150; policy accept;
		iifname "$LAB_BR" tcp dport 443 dnat to $LAB_ROGUE_RESOLVER4
	}
}
EOF
run --name blocked2 --allow api.github.test -- touch "$LAB_DIR/blocked2.ran"
t_eq "a dnat in another table: refused (exit 1)" 1 "$RC"
t_match "the exit names the table and the dnat" "second exit: .*sbtest_evil.*dnat" "$OUT"
t_fail "the command did not run" test -e "$LAB_DIR/blocked2.ran"
lab_gw nft delete table ip sbtest_evil
no_leftovers blocked2

# ---- a second link in the sandbox's own namespace blocks the launch (issue 31) ----------
# The namespace is the launcher's (held by a descriptor, named nowhere). The
# vault is paused, so the launcher, which reloads it for the secret, waits
# (SIGHUP pending, up to 10 s) with the namespace made; a second veth goes in
# through the launcher's descriptor, its peer in the upstream's namespace: a
# path around the gateway, which no check of the gateway can see; the vault
# resumes.
GWNS=$(lab_gw readlink /proc/self/ns/net)
launcher_netns() { # the launcher's descriptor of a namespace other than the gateway's
	local f l
	for f in /proc/"$lpid"/fd/*; do
		l=$(readlink "$f" 2>/dev/null) || continue
		case $l in net:*) [ "$l" != "$GWNS" ] && { echo "$f"; return 0; } ;; esac
	done
	return 1
}
VPID=$(cat "$LAB_DIR/guard-vault.pid")
kill -STOP "$VPID"
ip netns exec "$LAB_GW" "$GUARD_BIN/portcullis" -c "$GUARD_CONF" sandbox run --name extra \
	--allow api.github.test --secret GITHUB_TOKEN -- sh -c 'exit 9' \
	>"$LAB_DIR/extra.out" 2>&1 &
lpid=$!
lab_wait_until -p "$lpid" launcher_netns &&
	nsenter --net="$(launcher_netns)" ip link add ckx0 type veth peer name ckx1 netns "$LAB_UP"
kill -CONT "$VPID"
wait "$lpid" && RC=0 || RC=$?
t_eq "a second link in the sandbox's namespace: refused (exit 1)" 1 "$RC"
t_match "... named" "namespace holds ckx0 \(veth\) besides its interface and lo" \
	"$(cat "$LAB_DIR/extra.out")"
t_fail "the command did not run (it would exit 9)" grep -q "running sh as" "$LAB_DIR/extra.out"
t_match "the refusal is in the log" "SANDBOX the sandbox's namespace holds ckx0" "$(gw_pc log show 2>&1)"
no_leftovers extra

# ---- the errors an admin meets ---------------------------------------------------------
run --name dup --allow api.github.test --secret NOPE_TOKEN -- true
t_eq "a secret not in the store: exit 3" 3 "$RC"
t_match "... says how to store it" "secret NOPE_TOKEN is not in the store.*portcullis secrets set NOPE_TOKEN" "$OUT"

guard_rules admin <<EOF
sandbox: taken
match: { source: 10.203.0.200/32 }
allow:
  - host: api.github.test
    ports: [443]
EOF
gw_pc reload >/dev/null
POLICY0=$(gw_pc policy hash)
run --name taken --allow api.github.test -- true
t_eq "a name the policy uses: exit 3" 3 "$RC"
t_match "... names where, and what to do" "name 'taken' is in use by the policy \(.*admin.yaml:1\): choose another --name" "$OUT"
ip netns exec "$LAB_GW" "$GUARD_BIN/portcullis" -c "$GUARD_CONF" sandbox run --name busy \
	--allow api.github.test -- sh -c 'touch '"$LAB_DIR"'/busy.started; exec sleep 3010' \
	>/dev/null 2>&1 &
bpid=$!
for i in $(seq 1 100); do [ -e "$LAB_DIR/busy.started" ] && break; sleep 0.05; done
run --name busy --allow api.github.test -- true
t_eq "a name another launcher runs: exit 3" 3 "$RC"
t_match "... says so" "name 'busy' is in use by another running launcher" "$OUT"
run --name busy2 --allow api.github.test -- sh -c 'ip -o -4 addr show dev eth0'
t_eq "two sandboxes at once: the second runs" 0 "$RC"
t_match "... on another address" 'inet 10\.203\.0\.3/24' "$OUT"
kill -TERM "$bpid"
wait "$bpid" 2>/dev/null

gw_vault_stop
run --name novault --allow api.github.test --secret GITHUB_TOKEN -- true
t_eq "vault down and a secret asked for: exit 3" 3 "$RC"
t_match "... says how to start it" "vault is not running.*systemctl start portcullis-vault" "$OUT"
gw_vault_start
guard_engine_stop
run --name noengine --allow api.github.test -- true
t_eq "engine down: exit 3" 3 "$RC"
t_match "... says how to start it" "engine is not running.*systemctl start portcullisd" "$OUT"
guard_engine_start
guard_logd_stop
run --name nologd --allow api.github.test -- true
t_eq "logd down: exit 3" 3 "$RC"
t_match "... says how to start it" "portcullis-logd is not running.*systemctl start portcullis-logd" "$OUT"
guard_logd_start
sed "s/^bridge: .*/bridge: pcbr9/" "$GUARD_CONF" >"$GUARD_DIR/nobridge.yaml"
OUT=$(lab_gw "$GUARD_BIN/portcullis" -c "$GUARD_DIR/nobridge.yaml" sandbox run --name nb \
	--allow api.github.test -- true 2>&1) && RC=0 || RC=$?
t_eq "the bridge missing: exit 3" 3 "$RC"
t_match "... says how to create it" "pcbr9 does not exist.*create the sandbox bridge" "$OUT"
run --allow api.github.test
t_eq "no command: usage (exit 2)" 2 "$RC"
run --name ../x --allow api.github.test -- true
t_eq "a name that is not a sandbox name: usage (exit 2)" 2 "$RC"
run --name bad --allow 203.0.113.10 -- true
t_match "an address given to --allow points to --allow-cidr" "use --allow-cidr" "$OUT"
OUT=$(lab_gw runuser -u nobody -- "$GUARD_BIN/portcullis" -c "$GUARD_CONF" sandbox run \
	--allow api.github.test -- true 2>&1) && RC=0 || RC=$?
t_eq "not root: exit 3" 3 "$RC"
t_match "... says why" "must run as root" "$OUT"
no_leftovers errors

# ---- the root namespace was never touched ------------------------------------------------
t_eq "no launcher link in the root namespace" "" "$(ip -o link show | grep -o 'pcs[0-9]*' || true)"
t_eq "no portcullis table in the root namespace" "" "$(nft list tables | grep portcullis || true)"

gw_stop
t_done
