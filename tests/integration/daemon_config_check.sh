# `-t` of the three daemons answers the same way (portcullisd(8),
# portcullis-logd(8), portcullis-vault(8)): 0 when what it checks loads, 1
# when it was read and is invalid, 3 when a file could not be read. Files
# only, in a directory this test makes and removes; nothing is started.
set -u
. "$PC_TOP/tests/lib/tap.sh"
B=$PC_TOP/${PC_BUILD:-build}
t_need_built portcullis portcullisd portcullis-logd portcullis-vault
getent passwd portcullis-vault >/dev/null || { echo "1..0 # SKIP no daemon users (make deps)"; exit 0; }

t_tmpdir cfgcheck
mkdir -p "$D/rules.d" "$D/state"
cat >"$D/good.yaml" <<EOF
uplinks: [eth0]
run_dir: $D/run
state_dir: $D/state
rules: $D/rules.d
dns:
  resolvers: [198.51.100.53]
vault:
  ca_dir: $D/ca
  secrets: $D/secrets
  trust: /etc/ssl/certs/ca-certificates.crt
log:
  socket: $D/run/logd.sock
  file: $D/log/verdicts.jsonl
  key: $D/state/log.key
  syslog:
    local: false
EOF
cat >"$D/rules.d/a.yaml" <<EOF
sandbox: agent-1
match: { source: 10.203.0.11/32 }
allow:
  - host: api.github.test
    ports: [443]
EOF
# invalid: a key of the wrong type (read fine, wrong inside)
sed 's|^  resolvers: .*|  resolvers: not-an-address|' "$D/good.yaml" >"$D/bad.yaml"
"$B/portcullis" -c "$D/good.yaml" ca init >/dev/null 2>&1 || true

# code DAEMON CONFIG: the exit code of DAEMON -t -c CONFIG
code() { "$B/$1" -t -c "$2" >"$D/out" 2>&1 && echo 0 || echo $?; }

for d in portcullisd portcullis-logd portcullis-vault; do
	t_eq "$d -t: a valid configuration: 0" 0 "$(code "$d" "$D/good.yaml")"
	t_eq "$d -t: an invalid configuration: 1" 1 "$(code "$d" "$D/bad.yaml")"
	t_match "$d -t: ... naming the place" "bad.yaml:[0-9]+:[0-9]+" "$(cat "$D/out")"
	t_eq "$d -t: a configuration that cannot be read: 3" 3 "$(code "$d" "$D/missing.yaml")"
done

# what each daemon checks beyond the configuration
printf 'sandbox: x\nmatch: { source: 10.0.0.1/32 }\nallow: [ { host: "a b" } ]\n' >"$D/rules.d/z.yaml"
t_eq "portcullisd -t: an invalid rule file: 1" 1 "$(code portcullisd "$D/good.yaml")"
t_eq "portcullis-vault -t: an invalid rule file: 1" 1 "$(code portcullis-vault "$D/good.yaml")"
rm "$D/rules.d/z.yaml"
mv "$D/rules.d" "$D/rules.gone"
t_eq "portcullisd -t: a rules directory that cannot be read: 3" 3 "$(code portcullisd "$D/good.yaml")"
mv "$D/rules.gone" "$D/rules.d"
mv "$D/ca" "$D/ca.gone"
t_eq "portcullis-vault -t: no CA to read: 3" 3 "$(code portcullis-vault "$D/good.yaml")"
mv "$D/ca.gone" "$D/ca"
printf 'not a key\n' >"$D/state/log.key"
t_eq "portcullis-logd -t: a key that is not one: 1" 1 "$(code portcullis-logd "$D/good.yaml")"
rm "$D/state/log.key" # (generated at first start: -t says ok without one)

# What stops a daemon from starting that the configuration decides
# (rules/startcheck.c): `policy lint` must name exactly the daemons whose
# -t refuses the case (exit 1), and each of the others' -t must say ok.
# Each case is good.yaml with one key changed; the expected set is written
# out too, so that a case both sides stopped checking also fails. (lint once
# warned, exit 0, about a missing uplinks; -t said ok for engine.user root
# or a user that does not exist; lint said ok for a worker_user that the
# vault refuses.)
mkcase() { # NAME SED-EXPRESSION: $D/case-NAME.yaml
	sed "$2" "$D/good.yaml" >"$D/case-$1.yaml"
}
mkcase ok 's|^x||'
mkcase engine-root 's|^dns:|engine: {user: root}\ndns:|'
mkcase engine-nouser 's|^dns:|engine: {user: pc-no-such-user}\ndns:|'
mkcase worker-is-vault 's|^vault:|vault:\n  worker_user: portcullis-vault|'
mkcase worker-nouser 's|^vault:|vault:\n  worker_user: pc-no-such-worker|'
mkcase worker-root 's|^vault:|vault:\n  worker_user: root|'
mkcase vault-nouser 's|^vault:|vault:\n  user: pc-no-such-user|'
mkcase vault-is-engine 's|^vault:|vault:\n  user: portcullis|'
mkcase log-root 's|^log:|log:\n  user: root|'
mkcase log-nouser 's|^log:|log:\n  user: pc-no-such-user|'
mkcase no-uplinks '/^uplinks:/d'
mkcase uplink-bridge 's|^uplinks: .*|uplinks: [pcbr0]|'
mkcase uplink-lo 's|^uplinks: .*|uplinks: [eth0, lo]|'

# refusers CONFIG: the daemons whose -t exits 1, in the order of the lists
refusers() {
	local d r=""
	for d in portcullisd portcullis-vault portcullis-logd; do
		c=$(code "$d" "$1")
		case $c in
		1) r="$r $d" ;;
		0) ;;
		*) r="$r $d:exit$c" ;;
		esac
	done
	echo "${r# }"
}
# lint_names CONFIG: lint's exit code, then the daemons its errors say would refuse
lint_names() {
	local out r="" d
	out=$("$B/portcullis" -c "$1" policy lint 2>&1 >/dev/null) && c=0 || c=$?
	for d in portcullisd portcullis-vault portcullis-logd; do
		printf '%s\n' "$out" | grep -E "^$1:[0-9]+:[0-9]+: .*\b$d\b.* would refuse to start" \
			| grep -qv ': warning: ' && r="$r $d"
	done
	echo "$c${r:+ }${r# }"
}
for spec in "ok|" \
	"engine-root|portcullisd portcullis-logd" \
	"engine-nouser|portcullisd" \
	"worker-is-vault|portcullis-vault" \
	"worker-nouser|portcullis-vault" \
	"worker-root|portcullis-vault portcullis-logd" \
	"vault-nouser|portcullis-vault" \
	"vault-is-engine|portcullis-logd" \
	"log-root|portcullis-logd" \
	"log-nouser|portcullis-logd" \
	"no-uplinks|portcullisd" \
	"uplink-bridge|portcullisd" \
	"uplink-lo|portcullisd"; do
	name=${spec%%|*} want=${spec#*|}
	got=$(refusers "$D/case-$name.yaml")
	t_eq "$name: the daemons whose -t refuses it (exit 1)" "$want" "$got"
	if [ -n "$want" ]; then
		t_eq "$name: policy lint: exit 1, naming the same daemons" "1 $want" \
			"$(lint_names "$D/case-$name.yaml")"
	else
		t_eq "$name: policy lint: exit 0, naming no daemon" "0" \
			"$(lint_names "$D/case-$name.yaml")"
	fi
done
t_done
