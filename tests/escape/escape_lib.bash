# Shared by the escape-attempt scripts (sourced; not a test itself): the
# lab with the real guard, the upstream capture that is the "reached
# nothing" evidence, and the result rows tests/escape/report turns into
# build/escape-report.md.
#
#   esc_init CLASS "title"       start the class's result file
#   esc_up [N]                   lab with N sandboxes, the standard policy, logd + engine,
#                                the upstream capture
#   esc_begin "attempt"          an attempt: the t_* checks until esc_end belong to it
#   esc_end "outcome" "evidence" one row of the report (held if its checks passed)
#   esc_settle                   wait until the engine gave every queued packet a verdict
#   esc_upstream FILTER          packets the upstream received matching a tcpdump filter
#   esc_reason ERE               event.reason of the last log record matching ERE
#   esc_code ERE                 its event.code
#   esc_flow_reason/_code SPORT  the same of the flow from sandbox port SPORT
#   esc_crafted_ports SB LO-HI   sandbox SB's own stack resets nothing on ports LO-HI
#   esc_evil_upstream SPORT      upstream packets from SPORT naming cdn-evil.test
#   esc_counter FAMILY CHAIN ERE packets counted by the rules of a chain matching ERE
#   esc_craft SB ARGS...         tests/escape/craft.py in sandbox SB
#   esc_gw_snmp6 NAME            the gateway's /proc/net/snmp6 counter NAME
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/lab/lab.sh"
. "$PC_TOP/tests/lib/guard.sh"

ESC_CRAFT=$PC_TOP/tests/escape/craft.py
ESC_OUT=$PC_TOP/build/escape
# What a refusal of an address says: no rule names it, or no allowed name
# was resolved to it.
ESC_REFUSED_RE='^(not on the allow list|no allowed name resolved to this address)$'
SB1_4=$(lab_sb_ip4 1) SB1_6=$(lab_sb_ip6 1) SB2_4=$(lab_sb_ip4 2) SB2_6=$(lab_sb_ip6 2)

# Issue 35's done-when: the log each escape test's guard wrote audits
# clean (`portcullis log audit`: every verdict in it is one docs/spec.md
# allows under the policy in force). One TAP line before the plan; the
# audit reads the live log (what logd signed so far: its checkpoints cover
# every acknowledged record). ESC_AUDIT=0 leaves it out (a test that
# rewrites the log on purpose).
esc_audit() {
	local dir=${GUARD_DIR:-} out rc=0
	[ "${ESC_AUDIT:-1}" != 0 ] && [ -n "$dir" ] && [ -s "$dir/log/verdicts.jsonl" ] || return 0
	# logd signs what it wrote within log.checkpoint.interval_ms: wait
	# for the file to end with a checkpoint (bounded)
	lab_wait_until _esc_log_signed "$dir/log/verdicts.jsonl" || true
	out=$(lab_gw "${GUARD_BIN:-$PC_TOP/build}/portcullis" -c "$GUARD_CONF" log audit 2>&1) ||
		rc=$?
	printf '%s\n' "$out" | grep -E '^(audit|disagreement|  record|not judged|\(|portcullis)' |
		head -60 | sed 's/^/# /'
	t_eq "the log of this run audits clean: every verdict confirmed" 0 "$rc"
}
_esc_log_signed() { tail -n 1 "$1" | grep -q '^{"checkpoint"'; }
eval "$(declare -f t_done | sed '1s/^t_done/_esc_tap_done/')"
t_done() {
	esc_audit
	_esc_tap_done
}

esc_init() { # class title
	ESC_CLASS=$1
	mkdir -p "$ESC_OUT"
	ESC_TSV=$ESC_OUT/$1.tsv
	printf '#\t%s\n' "$2" >"$ESC_TSV"
	trap 'esc_finish' EXIT
}

# The EXIT trap: write the report from every class's rows, then take the
# lab down (lab_up's own trap is replaced by this one).
esc_finish() {
	[ -z "${ESC_ATTEMPT:-}" ] || esc_end "did not finish" "the script stopped inside this attempt"
	"$PC_TOP/tests/escape/report" >/dev/null 2>&1 || true
	lab_down
}

# The standard policy of the suite (a class may write its own instead;
# ESC_ALLOW1 = more allow entries for agent-1, YAML indented by two).
esc_policy() {
	guard_rules agents <<-EOF
	sandbox: agent-1
	match: { source: [$SB1_4/32, "$SB1_6/128"], port: $(lab_sb_port 1) }
	allow:
	  - cidr: $LAB_SSH4/32
	    ports: [22]
	  - cidr: "$LAB_SSH6/128"
	    ports: [22]
	  - cidr: $LAB_SSH4/32
	    ports: [5000]
	    proto: udp
	  - cidr: $LAB_DIRECT4/32
	    ports: [80]
	    proto: any
	  - host: api.github.test
	    ports: [443]
	  - host: cdn-good.test
	    ports: [443]
	  - host: pypi.test
	    ports: [443]
	    proto: any
	${ESC_ALLOW1:-}
	---
	sandbox: agent-2
	match: { source: [$SB2_4/32, "$SB2_6/128"], port: $(lab_sb_port 2) }
	allow:
	  - cidr: $LAB_DIRECT4/32
	    ports: [80]
	  - host: api.github.test
	    ports: [443]
	EOF
}

# Everything, in order. ESC_NO_POLICY=1: the caller wrote its rules already.
esc_up() { # [sandboxes]
	guard_need_bins
	lab_up "${1:-2}"
	trap 'esc_finish' EXIT
	guard_config
	[ -n "${ESC_NO_POLICY:-}" ] || esc_policy
	guard_start || { t_fail "the guard started" true; t_done; }
	ESC_GW_MAC=$(lab_gw cat /sys/class/net/$LAB_BR/address)
	export ESC_GW_MAC
	esc_capture_start
	[ -n "${ESC_NO_POLICY:-}" ] && return 0
	# The control: allowed traffic shows in the capture, so "the upstream
	# received nothing" below is a live check, not a dead file.
	ESC_T0=0
	t_match "baseline: sandbox 1's allowed address works" "^http 203.0.113.99 ok" \
		"$(lab_sb 1 curl -sS --max-time 3 http://$LAB_DIRECT4/)"
	t_lt "the upstream capture sees that allowed flow" 0 \
		"$(esc_upstream "src host $SB1_4 and dst host $LAB_DIRECT4 and tcp port 80")"
}

# Everything the upstream receives on its uplink, packet-buffered so that
# a count read after esc_settle is complete.
esc_capture_start() {
	lab_ns_check "$LAB_UP"
	ip netns exec "$LAB_UP" tcpdump -i eth0 -n -U --immediate-mode -s 512 -Z root \
		-w "$LAB_DIR/upstream.pcap" \
		2>"$LAB_DIR/tcpdump.err" &
	echo $! >"$LAB_DIR/tcpdump.pid"
	local i
	for i in $(seq 1 100); do
		grep -q "listening on" "$LAB_DIR/tcpdump.err" 2>/dev/null && return 0
		sleep 0.05
	done
	lab_die "tcpdump did not start: $(cat "$LAB_DIR/tcpdump.err")"
}

# Packets captured since the current attempt began (esc_begin) matching a
# tcpdump filter.
esc_upstream() { # tcpdump filter
	esc_settle
	esc_upstream_show "$@" | wc -l | tr -d ' '
}

# (by capture time: the attempt's start is a wall-clock time on this machine)
esc_upstream_show() { # tcpdump filter: the packets themselves (evidence on failure)
	tcpdump -tt -n -r "$LAB_DIR/upstream.pcap" "$@" 2>/dev/null |
		awk -v t="${ESC_T0:-0}" '$1 + 0 >= t + 0'
}

# Wait (bounded) until every packet the engine has taken from its queues
# has its verdict, then let the capture flush: what a verdict let through
# is then upstream. Readiness, not timing.
esc_settle() {
	local i st
	for i in $(seq 1 50); do
		st=$(guard_status_field 'sum(q["queued"]-q["accepted"]-q["refused"] for q in s["queues"])' \
			2>/dev/null) || st=x
		[ "$st" = 0 ] && break
		sleep 0.1
	done
	sleep 0.3
}

# A field of the last record since the attempt began matching ERE.
esc_field() { # field ERE
	guard_records | tail -n +$((${ESC_REC0:-0} + 1)) | grep -E -- "$2" | tail -1 |
		python3 -c 'import json,sys
l = sys.stdin.read().strip()
print(json.loads(l).get(sys.argv[1], "(no %s)" % sys.argv[1].split(".")[-1]) if l else "(no record)")' "$1"
}
esc_reason() { esc_field event.reason "$1"; } # ERE
esc_code() { esc_field event.code "$1"; }     # ERE
esc_flow_reason() { esc_reason "\"source.port\":$1,"; } # sport
esc_flow_code() { esc_code "\"source.port\":$1,"; }     # sport

# Ports a crafted client of sandbox SB uses: the sandbox's own stack would
# reset the connections it does not know; its RSTs from them are dropped
# (in the sandbox's namespace, which the lab made).
esc_crafted_ports() { # sandbox lo-hi
	# and none of the sandbox kernel's own sockets (dig, curl) takes one of
	# them as its ephemeral port: a crafted connection's port is its own
	lab_sb "$1" sysctl -qw net.ipv4.ip_local_reserved_ports="$2" ||
		lab_die "cannot reserve ports $2 in sandbox $1"
	lab_sb "$1" nft -f - <<-EOF
		table inet esc_crafted {
			chain out {
				type filter hook output priority 0; policy accept;
				tcp sport $2 tcp flags rst drop
			}
		}
	EOF
}

# Packets the upstream received from sandbox port SPORT whose bytes name
# cdn-evil.test (a ClientHello carries the name in clear).
esc_evil_upstream() { # sport
	esc_settle
	tcpdump -n -A -r "$LAB_DIR/upstream.pcap" "tcp and src port $1" 2>/dev/null |
		grep -c 'cdn-evil\.test' | tr -d ' '
}

esc_counter() { # family chain ERE: sum of the counters of the rules matching ERE
	# (the whole table, cut to the chain: nft cannot name a chain called "arp")
	lab_gw nft list table "$1" portcullis 2>/dev/null |
		awk -v c="$2" '$1 == "chain" && $2 == c {p = 1; next} p && $1 == "}" {p = 0} p' |
		grep -E -- "$3" |
		grep -oE 'counter packets [0-9]+' | awk '{s += $3} END {print s + 0}'
}

# Read directly: nstat keeps a history file other runs on this machine share.
esc_gw_snmp6() { # name
	lab_gw awk -v k="$1" '$1 == k { print $2 }' /proc/net/snmp6
}

esc_craft() { # sandbox args...
	local i=$1
	shift
	lab_sb "$i" env ESC_GW_MAC="$ESC_GW_MAC" python3 "$ESC_CRAFT" "$@"
}

esc_begin() {
	ESC_ATTEMPT=$1
	ESC_T0=$(date +%s.%N)
	ESC_REC0=$(guard_records | wc -l)
	ESC_FAILED0=$T_FAILED
	t_diag "attempt: $1"
}

esc_end() { # outcome evidence [result: held unless a check failed; "limit" = a documented limit]
	local res=${3:-held}
	[ "$T_FAILED" = "$ESC_FAILED0" ] || res=FAILED
	# (one row per attempt: newlines and tabs inside a field become spaces)
	printf '%s\t%s\t%s\t%s\n' "${ESC_ATTEMPT//[$'\n\t']/ }" "${1//[$'\n\t']/ }" \
		"${2//[$'\n\t']/ }" "$res" | tr -d '\r' >>"$ESC_TSV"
	ESC_ATTEMPT=
}

# One common shape: an attempt whose upstream packets and log record are
# checked. esc_expect_nothing DESC FILTER -> the count (0 expected), asserted.
# A refusal's evidence: nothing matching FILTER reached upstream, and the
# record matching RECORD-ERE was logged with a refusal's reason (REASON-ERE,
# default $ESC_REFUSED_RE); $r: that reason, for esc_end.
esc_refused() { # desc tcpdump-filter record-ERE [reason-ERE]
	esc_expect_nothing "$1" "$2"
	r=$(esc_reason "$3")
	t_match "logged with its reason" "${4:-$ESC_REFUSED_RE}" "$r"
}

esc_expect_nothing() { # desc tcpdump-filter...
	local d=$1 n
	shift
	n=$(esc_upstream "$@")
	if [ "$n" = 0 ]; then t_eq "$d: upstream received nothing" 0 "$n"; else
		t_eq "$d: upstream received nothing" 0 "$n $(esc_upstream_show "$@" | head -5)"; fi
	ESC_N=$n
}
