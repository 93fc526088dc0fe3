# Shared helpers of the dnsguard_* integration tests (sourced; not a test
# itself). They run the real portcullis-logd and portcullisd in the lab's
# gateway (tests/lib/guard.sh) and judge the DNS guard by what real clients
# get, what the lab's dnsmasq logged ($LAB_DIR/dnsmasq.log: the "never
# reached the resolver" evidence) and the verdict log.
#
#   dg_dns_conf 'key: value'...   add keys to the dns: section of the config
#   dg_tool ARGS...               tests/integration/dnsguard_tool.py
#   dg_mark                       a mark in the resolver's query log
#   dg_upstream MARK              $UP = the resolver's query lines since MARK,
#                                 once a sentinel query sent after them is
#                                 logged (dnsmasq answers in order, so all
#                                 sent before it is there by then); no
#                                 sentinel in the log is a test failure
#   dg_rec NAME [ACTION]          verdict records for that query name
#   dg_stat FIELD                 one dnsguard counter of `portcullis status`
#   dg_curl_rc SB ARGS...         curl's exit code (0 ok, 7 refused, 35 reset
#                                 during TLS, 28 timeout)

set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/lab/lab.sh"
. "$PC_TOP/tests/lib/guard.sh"

DG_TOOL=$PC_TOP/tests/integration/dnsguard_tool.py
DG_SENTINEL=0

dg_dns_conf() {
	local l
	for l in "$@"; do
		sed -i "/^dns:\$/a\\  $l" "$GUARD_CONF"
	done
}

dg_tool() { python3 "$DG_TOOL" "$@"; }

dg_mark() { wc -l <"$LAB_DIR/dnsmasq.log"; }

dg_upstream() { # mark: sets UP
	local mark=$1 name i
	DG_SENTINEL=$((DG_SENTINEL + 1))
	name=sentinel-$DG_SENTINEL.test
	lab_upstream dig +short +time=2 +tries=1 @$LAB_RESOLVER4 "$name" >/dev/null 2>&1
	for i in $(seq 1 100); do
		grep -q "query\[A\] $name " "$LAB_DIR/dnsmasq.log" 2>/dev/null && break
		sleep 0.02
	done
	UP=$(tail -n +"$((mark + 1))" "$LAB_DIR/dnsmasq.log" 2>/dev/null | grep 'query\[')
	# Without the sentinel the log proves nothing: that is a failure.
	if ! printf '%s\n' "$UP" | grep -q "query\[A\] $name "; then
		_t_report 1 "the resolver's query log is complete (sentinel $name logged)" \
			"$(ls -l "$LAB_DIR/dnsmasq.log" 2>&1)"
		UP="(the resolver's log is incomplete)"
		return 1
	fi
	UP=$(printf '%s\n' "$UP" | grep -v ' sentinel-[0-9]*\.test ')
}

dg_rec() { # name [action]
	guard_records | grep -F "\"dns.question.name\":\"$1\"" |
		grep -F "\"event.action\":\"${2:-dns-query}\""
}

# The record that carries what an answer taught about name: its query's
# verdict record (one record per query, docs/dnsguard.md) or, when that
# query was logged at once, a dns-learn record.
dg_learned() { # name
	guard_records | grep -F "\"dns.question.name\":\"$1\"" | grep -F '"dns.resolved_ip":' |
		grep -E '"event.action":"(dns-query|dns-learn)"'
}

dg_stat() { guard_status_field "s['dnsguard']['$1']"; }

dg_curl_rc() { # sandbox, curl args...
	local i=$1 rc
	shift
	lab_sb "$i" curl -s -o /dev/null --max-time 4 "$@" && rc=0 || rc=$?
	echo "$rc"
}
