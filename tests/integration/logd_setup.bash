# Shared setup of the tests that run a real portcullis-logd by itself, outside
# the lab (logd_*, package_logrotate, package_siem; sourced, not a test
# itself): a configuration, the log and logd's socket in a temporary
# directory of the test's own.
#
#   lg_need_bins WHAT FILE...  skip the whole test (named WHAT) unless every
#                              FILE is built
#   lg_init NAME        B = the build, D = a fresh /tmp/pc-NAME.XXXXXX that
#                       every user may enter (logd drops to portcullis-log),
#                       L = the log file; on exit logd is stopped and D removed
#   lg_config [LINE...] write $D/p.yaml: run_dir and state_dir in D, log.file
#                       L, and each LINE as one more line of the log: section
#                       (indent nested keys by two more spaces); without a
#                       "syslog:" LINE, syslog.local is false: no test writes
#                       to the machine's syslog
#   logd_start [ARG...] start portcullis-logd (LOGD_PID), its stderr added to
#                       $D/logd.err; 0 once it listens (it makes its socket
#                       only once the log is ready), 1 if it exits first or
#                       does not listen within LG_START_TRIES tenths of a
#                       second (default: PC_START_TIMEOUT, else 120 s for a
#                       sanitized build, else 5 s)
#   logd_stop           stop it; returns its exit status
#   logd_stop_ok        stop it and assert that it stopped cleanly (exit 0)
#   lg_client ARG...    tests/helpers/logd_client on logd's socket
#   PC ARG...           the portcullis CLI on $D/p.yaml
#   lg_certs CN SAN     $D/ca.{key,pem} a CA, $D/srv.{key,pem} a certificate
#                       for CN with subjectAltName SAN, signed by it
#   rs_global WORKDIR   rsyslog's global(): WORKDIR, TLS with lg_certs' CA and
#                       server certificate
#   rs_sd_fields F...   rsyslog template lines, one a field F of the
#                       portcullis@32473 structured data, each ended by "|"
#   lg_cleanup          the exit trap; a test that starts more daemons traps
#                       its own cleanup, which stops them and calls this
#   lg_has_oracle       whether the second reader of the log can run: Debian's
#                       python with python3-cryptography (tests/lab/deps.sh)
#   lg_oracle ARG...    tests/integration/logd_oracle.py ARG... on that python

PC_TOP=${PC_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PC_BUILD=${PC_BUILD:-build}
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/lab/lab.sh" # lab_unix_ready only: these tests need no namespaces

B=$PC_TOP/$PC_BUILD
LOGD_PID=

lg_need_bins() { # what file...
	local what=$1 f
	shift
	for f in "$@"; do
		if [ ! -x "$f" ]; then
			t_skip "$what" "$f not built"
			t_done
			exit
		fi
	done
}

lg_init() { # name
	D=$(mktemp -d "/tmp/pc-$1.XXXXXX")
	chmod 755 "$D"
	L=$D/log/verdicts.jsonl
	trap lg_cleanup EXIT
}

lg_cleanup() {
	[ -z "$LOGD_PID" ] || kill "$LOGD_PID" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$D"
}

lg_config() { # line...
	local l syslog=
	{
		printf 'run_dir: %s\nstate_dir: %s\nlog:\n  file: %s\n' "$D/run" "$D/state" "$L"
		for l in "$@"; do
			printf '  %s\n' "$l"
			case $l in syslog:*) syslog=1 ;; esac
		done
		[ -n "$syslog" ] || printf '  syslog:\n    local: false\n'
	} >"$D/p.yaml"
}

logd_start() { # extra args...
	rm -f "$D/run/logd.sock"
	"$B/portcullis-logd" -c "$D/p.yaml" "$@" 2>>"$D/logd.err" &
	LOGD_PID=$!
	# (by default PC_START_TIMEOUT seconds, else 120 for a sanitized build,
	# else 5: readiness only, never a verdict)
	local tries=${LG_START_TRIES:-$((${PC_START_TIMEOUT:-$([[ ${PC_BUILD:-build} == *san* ]] && echo 120 || echo 5)} * 10))}
	for _ in $(seq "$tries"); do
		lab_unix_ready "$D/run/logd.sock" && kill -0 "$LOGD_PID" 2>/dev/null && return 0
		kill -0 "$LOGD_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

logd_stop() {
	local rc
	kill "$LOGD_PID"
	wait "$LOGD_PID"
	rc=$?
	LOGD_PID=
	return "$rc"
}

rs_global() { # workdir
	printf 'global(workDirectory="%s" maxMessageSize="64k"\n' "$1"
	printf '       DefaultNetstreamDriverCAFile="%s" DefaultNetstreamDriverCertFile="%s"\n' "$D/ca.pem" "$D/srv.pem"
	printf '       DefaultNetstreamDriverKeyFile="%s")\n' "$D/srv.key"
}

rs_sd_fields() { # field...
	local f
	for f in "$@"; do
		printf '  property(name="$!rfc5424-sd!portcullis@32473!%s") constant(value="|")\n' "$f"
	done
}

logd_stop_ok() {
	logd_stop
	t_eq "logd stops cleanly" 0 $?
}

lg_client() { "$B/tests/helpers/logd_client" "$D/run/logd.sock" "$@"; }

lg_has_oracle() {
	/usr/bin/python3 -c 'from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey' 2>/dev/null
}
lg_oracle() { /usr/bin/python3 "$PC_TOP/tests/integration/logd_oracle.py" "$@"; }

PC() { "$B/portcullis" -c "$D/p.yaml" "$@"; }

lg_certs() { # cn san
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=test CA" -keyout "$D/ca.key" -out "$D/ca.pem" 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
		-keyout "$D/srv.key" -out "$D/srv.csr" 2>/dev/null
	printf 'subjectAltName=%s\n' "$2" >"$D/ext"
	openssl x509 -req -in "$D/srv.csr" -CA "$D/ca.pem" -CAkey "$D/ca.key" -CAcreateserial \
		-days 2 -extfile "$D/ext" -out "$D/srv.pem" 2>/dev/null
}
