# The vault's CA process (vault/casign.c): it alone can read ca.key. The
# daemon that parses sandbox bytes runs as the vault user, cannot open the
# key (a real attempt as its uid), and holds no byte of it in memory (its
# memory read through /proc, the CA process's read the same way as the
# control); the CA process reloads the policy with the daemon (a name added
# on SIGHUP gets a leaf); and when the CA process dies the vault stops
# rather than serve without it (fail closed).
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

vault_need_bins
lab_up 2
vault_config
# www.github.test is not allowed at start: added on SIGHUP below
sed -i '/host: www.github.test/,+1d' "$V/rules.d/agents.yaml"
vault_secrets
# a key as older versions made it (the vault user's): made root's at start
chown portcullis-vault: "$V/ca/ca.key"
vault_logd_start
vault_start
vault_redirect

ca_pid=$(pgrep -P "$V_VAULT_PID" -x vault-ca)
t_ok "the vault has a CA process (vault-ca), its child" test -n "$ca_pid"
[ -n "$ca_pid" ] || { t_done; exit 1; }
t_eq "ca.key is root's alone, an older vault-owned key included" "400 root:root" \
	"$(stat -c '%a %U:%G' "$V/ca/ca.key")"
uid() { awk '/^Uid:/ {print $2}' "/proc/$1/status"; }
vuid=$(id -u portcullis-vault)
t_eq "the daemon runs as the vault user" "$vuid" "$(uid "$V_VAULT_PID")"
t_eq "the CA process too, once the key is read" "$vuid" "$(uid "$ca_pid")"
t_eq "... without any capability" "0000000000000000" \
	"$(awk '/^CapEff:/ {print $2}' "/proc/$ca_pid/status")"
t_fail "the vault user (the daemon's uid) cannot open ca.key" \
	setpriv --reuid=portcullis-vault --regid=portcullis-vault --clear-groups \
	cat "$V/ca/ca.key"
t_ok "control: root can" cat "$V/ca/ca.key"

r=$(vcurl 1 https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH")
t_match "a leaf signed by the CA process serves the sandbox" "auth=Bearer $V_PH_GH" "$r"

# The CA private key in the forms it can take in memory: the PEM body's
# lines, the scalar big-endian (DER) and as OpenSSL's BIGNUM limbs hold it
# (little-endian on this machine).
priv=$(openssl ec -in "$V/ca/ca.key" -text -noout 2>/dev/null |
	sed -n '/^priv:/,/^pub:/p' | grep -v '^p' | tr -d ' :\n' | sed 's/^00//')
t_eq "the CA key's scalar was read" 64 "${#priv}"
rev=$(printf '%s' "$priv" | fold -w2 | tac | tr -d '\n')
pem=$(sed -n 2p "$V/ca/ca.key" | od -An -tx1 | tr -d ' \n')
memscan() { # pid hex-needle... -> the indices of the needles found
	python3 - "$@" <<-'EOF'
	import sys
	pid, needles = sys.argv[1], [bytes.fromhex(h) for h in sys.argv[2:]]
	found = set()
	with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
	    for line in maps:
	        f = line.split()
	        if f[1][0] != "r" or line.rstrip().endswith(("[vvar]", "[vsyscall]")):
	            continue
	        lo, hi = (int(x, 16) for x in f[0].split("-"))
	        try:
	            mem.seek(lo)
	            data = mem.read(hi - lo)
	        except (OSError, OverflowError, ValueError):
	            continue
	        found.update(i for i, n in enumerate(needles) if n in data)
	print(" ".join(map(str, sorted(found))))
	EOF
}
t_match "control: the CA process's memory holds the CA key" "[0-9]" \
	"$(memscan "$ca_pid" "$priv" "$rev" "$pem")"
t_eq "the daemon's memory holds no form of it" "" \
	"$(memscan "$V_VAULT_PID" "$priv" "$rev" "$pem")"

# SIGHUP: the CA process rereads the policy with the daemon. A name it did
# not allow before is signed after (the daemon allows it only then too).
www() { vcurl 1 --resolve "www.github.test:443:$LAB_API4" https://www.github.test/echo -o /dev/null -w '%{http_code}'; }
t_eq "www.github.test, not allowed yet: no handshake" 000 "$(www 2>/dev/null)"
sed -i 's/^allow:$/allow:\n  - host: www.github.test\n    ports: [443]/' "$V/rules.d/agents.yaml"
kill -HUP "$V_VAULT_PID"
sleep 0.5
t_eq "after SIGHUP the CA process signs it: 200" 200 "$(www)"
t_eq "the CA process is the same one (reloaded, not restarted)" "$ca_pid" \
	"$(pgrep -P "$V_VAULT_PID" -x vault-ca)"

# The CA process dies: the vault stops (fail closed) rather than serve
# without a CA it cannot restart (it is no longer root).
kill -KILL "$ca_pid"
for _ in $(seq 1 50); do kill -0 "$V_VAULT_PID" 2>/dev/null || break; sleep 0.1; done
t_fail "when the CA process dies the vault stops" kill -0 "$V_VAULT_PID"
t_match "... saying why" "the CA process ended; stopping" "$(cat "$LAB_DIR/vault.stderr")"
t_eq "... and serves nobody" 000 \
	"$(vcurl 1 https://api.github.test/echo -o /dev/null -w '%{http_code}' 2>/dev/null)"
t_done
