# Shared start of the sandbox_* tests (sourced; not a test itself): the lab,
# the real guard with the vault in its gateway (tests/demo/gateway.bash), and
# one secret for the sandbox to use.
#
#   sb_guard_up SANDBOXES PREFIX   lab_up SANDBOXES, the guard started (a
#                                  failure bails out), and the secret
#                                  GITHUB_TOKEN stored: VALUE is its value
#                                  (PREFIX and random hex: distinctive, never
#                                  printed by a passing test), PH its
#                                  placeholder, POLICY0 the policy hash before
#                                  the test changes anything
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/lab/lab.sh"
. "$PC_TOP/tests/lib/guard.sh"
. "$PC_TOP/tests/demo/gateway.bash"
guard_need_bins
[ -x "$GUARD_BIN/portcullis-vault" ] || { echo "1..0 # SKIP portcullis-vault not built"; exit 0; }

sb_guard_up() { # sandboxes prefix
	lab_up "$1" 2>/dev/null
	gw_config
	gw_start || { echo "Bail out! the guard did not start"; exit 1; }
	VALUE="$2$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	PH=$(gw_secret GITHUB_TOKEN "$VALUE")
	POLICY0=$(gw_pc policy hash)
}
