# portcullis config show: the effective configuration, every key of the
# schema with the value the daemons use and where it came from — the
# default, derived from run_dir/state_dir, or file:line — and the shipped
# configuration files set nothing that equals its default (so that, for
# one, changing state_dir moves the keys, the CA, the secrets and the log
# key with it). Files only, no daemon, no network.
set -u
. "$PC_TOP/tests/lib/tap.sh"

PC=$PC_TOP/$PC_BUILD/portcullis
case $PC_BUILD in /*) PC=$PC_BUILD/portcullis ;; esac
T=$(mktemp -d /tmp/pc-cfgshow-XXXXXX)
trap 'rm -rf "$T"' EXIT

run() { # ARGS...: sets rc, out (stdout), err (stderr)
	"$PC" "$@" >"$T/out" 2>"$T/err" && rc=0 || rc=$?
	out=$(cat "$T/out")
	err=$(cat "$T/err")
}
# field KEY COLUMN: a key's value / source / line from --json output in $out
field() {
	printf '%s' "$out" | python3 -c '
import json, sys
k = {e["key"]: e for e in json.load(sys.stdin)["keys"]}[sys.argv[1]]
v = k.get(sys.argv[2])
print(json.dumps(v) if not isinstance(v, str) else v)' "$1" "$2"
}

# ---- an empty file: every key, each a default or derived ---------------------
: >"$T/empty.yaml"
run -c "$T/empty.yaml" config show --json
t_eq "empty file: exit 0" 0 "$rc"
printf '%s' "$out" >"$T/defaults.json"
schema=$(sed -n 's/^    [KN]("\([a-z_.0-9]*\)".*/\1/p' "$PC_TOP/rules/config.c" | sort)
t_eq "every key of the schema (rules/config.c) is shown, once" "$schema" \
	"$(python3 -c 'import json,sys; print("\n".join(sorted(e["key"] for e in json.load(open(sys.argv[1]))["keys"])))' "$T/defaults.json")"
t_eq "... and $(printf '%s\n' "$schema" | wc -l) of them" "$(printf '%s\n' "$schema" | wc -l)" \
	"$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["keys"]))' "$T/defaults.json")"
t_eq "log.key: derived from state_dir" "/var/lib/portcullis/log.key derived state_dir" \
	"$(field log.key value) $(field log.key source) $(field log.key from)"
t_eq "log.socket: derived from run_dir" "/run/portcullis/logd.sock derived run_dir" \
	"$(field log.socket value) $(field log.socket source) $(field log.socket from)"
t_eq "bridge: the default" "pcbr0 default" "$(field bridge value) $(field bridge source)"
t_eq "typed values: a number, a bool, a list" "4096 false [\"A\", \"AAAA\", \"CNAME\", \"HTTPS\", \"SVCB\"]" \
	"$(field queue.maxlen value) $(field engine.remove_table_on_exit value) $(field dns.qtypes value)"
t_eq "an unset prefix is null" "null" "$(field sandbox.pool4 value)"

# ---- a file that sets some: file:line, and the paths that follow state_dir --
cat >"$T/pc.yaml" <<'YAML'
# a comment
uplinks: [eth0, eth1]
state_dir: /srv/pc
dns:
  resolvers: [192.0.2.53, "2001:db8::53"]
  ttl_max: 600
log:
  file: relative/verdicts.jsonl
vault:
  secrets: /etc/pc-secrets
YAML
run -c "$T/pc.yaml" config show
t_eq "a file: exit 0" 0 "$rc"
t_match "state_dir from the file, with its line" "^state_dir +/srv/pc +# $T/pc.yaml:3$" "$out"
t_match "log.key follows state_dir" "^log.key +/srv/pc/log.key +# derived from state_dir$" "$out"
t_match "vault.ca_dir follows state_dir" "^vault.ca_dir +/srv/pc/ca +# derived from state_dir$" "$out"
t_match "vault.secrets set in the file does not follow it" "^vault.secrets +/etc/pc-secrets +# $T/pc.yaml:10$" "$out"
t_match "a nested key: its own line" "^dns.ttl_max +600 +# $T/pc.yaml:6$" "$out"
t_match "a list" "^dns.resolvers +\[192.0.2.53, 2001:db8::53\] +# $T/pc.yaml:5$" "$out"
t_match "a relative path resolved from the file's directory" \
	"^log.file +$T/relative/verdicts.jsonl +# $T/pc.yaml:8$" "$out"
t_match "run_dir untouched: the default" "^run_dir +/run/portcullis +# default$" "$out"
t_match "an empty string shown as one" '^log.syslog.remote +"" +# default$' "$out"
run -c "$T/pc.yaml" config show --json
t_eq "--json: the line as a number, the list as a list" '3 ["eth0", "eth1"] file 2' \
	"$(field state_dir line) $(field uplinks value) $(field uplinks source) $(field uplinks line)"

# ---- the shipped configuration files set nothing equal to its default --------
for f in docs/examples/portcullis.yaml packaging/conf/portcullis.yaml; do
	run -c "$PC_TOP/$f" config show --json
	t_eq "$f: exit 0" 0 "$rc"
	same=$(printf '%s' "$out" | python3 -c '
import json, sys
d = {e["key"]: e["value"] for e in json.load(open(sys.argv[1]))["keys"]}
print(" ".join(e["key"] for e in json.load(sys.stdin)["keys"]
               if e["source"] == "file" and e["value"] == d[e["key"]]))' "$T/defaults.json")
	t_eq "$f sets no key to its default value" "" "$same"
	# changing state_dir alone moves every path derived from it
	{ cat "$PC_TOP/$f"; echo "state_dir: /srv/other"; } >"$T/moved.yaml"
	run -c "$T/moved.yaml" config show --json
	t_eq "$f + state_dir: the log key, CA and secrets follow it" \
		"/srv/other/log.key /srv/other/ca /srv/other/secrets" \
		"$(field log.key value) $(field vault.ca_dir value) $(field vault.secrets value)"
done

# ---- errors ---------------------------------------------------------------------
printf 'queue:\n  count: 0\n' >"$T/bad.yaml"
run -c "$T/bad.yaml" config show
t_eq "an invalid value: exit 1" 1 "$rc"
t_match "... named with file:line:col" "bad.yaml:2:[0-9]+: .*queue.count" "$err"
t_eq "... and nothing on stdout" "" "$out"
run -c "$T/missing.yaml" config show
t_eq "a missing file: exit 3" 3 "$rc"
run -c "$T/empty.yaml" config
t_eq "config without show: exit 2" 2 "$rc"
t_match "... with the usage" "usage: portcullis \[-c FILE\] config show \[--json\]" "$err"
run -c "$T/empty.yaml" config show extra
t_eq "an extra argument: exit 2" 2 "$rc"
run -c "$T/empty.yaml" config show --help
t_eq "--help: exit 0" 0 "$rc"

t_done
