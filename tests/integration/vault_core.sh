# A crash of portcullis-vault leaves no core dump to read a secret from:
# the daemon makes itself non-dumpable (PR_SET_DUMPABLE 0) and sets
# RLIMIT_CORE 0 before it loads a secret. The control — a process of the
# same user in the same directory under the same limits — does dump, so a
# missing core is the vault's doing, not the machine's.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

case $(cat /proc/sys/kernel/core_pattern) in
"|"*) echo "1..0 # SKIP core_pattern pipes cores to a helper; this test reads them from the cwd"; exit 0 ;;
esac

vault_need_bins
lab_up 2
V_CWD=$LAB_DIR/cores
mkdir -p "$V_CWD"
chmod 1777 "$V_CWD"
vault_config
vault_secrets
vault_logd_start
vault_start
vault_redirect

# the value is in the vault's memory: it has been injected
r=$(vcurl 1 https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH")
t_match "the secret was injected (the value is in the vault's memory)" \
	"auth=\"Bearer $V_GH_VALUE\"" "$(v_upstream_log)"
t_match "... and scrubbed" "auth=Bearer $V_PH_GH" "$r"

# control: same user, same directory, same limits -> a core appears
(
	cd "$V_CWD" && ulimit -c unlimited &&
		exec setpriv --reuid=portcullis-vault --regid=portcullis-vault --clear-groups \
			bash -c 'secret=CONTROL-MARKER-7f3a; sleep 30; echo $secret'
) &
ctl=$!
sleep 0.3
kill -SEGV "$(pgrep -P $ctl sleep || pgrep -P $ctl)" 2>/dev/null || kill -SEGV $ctl
wait $ctl 2>/dev/null
ctl_core=$(ls "$V_CWD" | grep -c '^core')
if [ "$ctl_core" = 0 ]; then
	t_skip "a crashing process of the vault user dumps core here" "this machine writes no cores"
	t_done
	exit 0
fi
t_ok "control: a crashing process of the vault user dumps core here" test "$ctl_core" -ge 1
rm -f "$V_CWD"/core*

t_eq "the vault is not dumpable (its /proc entries belong to root)" root \
	"$(stat -c %U "/proc/$V_VAULT_PID/mem")"
kill -SEGV "$V_VAULT_PID"
for _ in $(seq 1 50); do kill -0 "$V_VAULT_PID" 2>/dev/null || break; sleep 0.1; done
t_fail "the vault died of the signal" kill -0 "$V_VAULT_PID"
t_eq "no core file was written" "" "$(ls "$V_CWD")"
t_eq "no file anywhere in the run's directory holds the value (nginx's log aside)" "" \
	"$(grep -rlaF "$V_GH_VALUE" "$LAB_DIR" | grep -v nginx-access.log)"

t_done
