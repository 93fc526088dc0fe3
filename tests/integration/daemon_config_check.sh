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
t_done
