# Shared helpers of the bench programs (sourced): option parsing, medians,
# the engine's and logd's memory, and the result file (bench/README.md,
# "Result protocol": one JSON object per program, written with --json FILE).
#
#   . "$PC_TOP/bench/lib.sh"
#   bench_args NAME "$@"            # --quick, -r ROUNDS, -t SECONDS, --json FILE
#   bench_begin NAME "title" "workload"
#   bench_metric name "label" unit higher|lower \
#       "baseline name" "s1 s2 ..." "subject name" "s1 s2 ..." KIND VALUE "target text" \
#       ["ceiling name" "s1 s2 ..."]
#   bench_note "text"
#   bench_end                       # writes $BENCH_JSON (if given)

PC_TOP=${PC_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
PC_BUILD=${PC_BUILD:-build}
export PC_TOP PC_BUILD
# The benches measure the guard's speed, not its per-sandbox new-flow limit
# (docs/engine.md, "New-flow limit"; default 1000/s): the guard they start
# (tests/lib/guard.sh, GUARD_EXTRA) lets a sandbox open up to 1,000,000 new
# flows/s. The limit's rule is still on every new flow's path, so its cost
# is measured; bench/flood gives its flooder the shipped default.
GUARD_EXTRA=${GUARD_EXTRA:-"limits: { new_flows_per_second: 1000000, new_flows_burst: 1000000 }"}
export GUARD_EXTRA

# Parse the options every new bench program takes; others are returned in
# BENCH_REST. Defaults: 3 rounds of 5 s; --quick: 2 rounds of 1 s.
bench_args() { # name args...
	BENCH_NAME=$1
	shift
	BENCH_ROUNDS=${BENCH_ROUNDS:-3} BENCH_SECS=${BENCH_SECS:-5} BENCH_QUICK=0 BENCH_JSON=
	BENCH_CMD="bench/$BENCH_NAME $*"
	BENCH_REST=()
	while [ $# -gt 0 ]; do
		case $1 in
		--quick) BENCH_QUICK=1 BENCH_ROUNDS=2 BENCH_SECS=1 ;;
		-r) BENCH_ROUNDS=$2; shift ;;
		-t) BENCH_SECS=$2; shift ;;
		--json) BENCH_JSON=$2; shift ;;
		*) BENCH_REST+=("$1") ;;
		esac
		shift
	done
	case $BENCH_JSON in "" | /*) ;; *) BENCH_JSON=$PWD/$BENCH_JSON ;; esac
}

bench_say() { printf '%s: %s\n' "$BENCH_NAME" "$*"; }

bench_median() { # the middle sample (the mean of the two middle ones for an even count)
	printf '%s\n' "$@" | grep -E '^-?[0-9.]+$' | sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else if (NR) print (a[NR/2]+a[NR/2+1])/2}'
}
bench_min() { printf '%s\n' "$@" | sort -g | head -1; }
bench_max() { printf '%s\n' "$@" | sort -g | tail -1; }
bench_ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }

# Resident memory of a process in KiB: current (VmRSS) and peak (VmHWM).
bench_rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
bench_hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null; }

# CPU time a process's threads have run so far, in ns (the scheduler's
# own account, /proc/PID/task/*/schedstat; utime and stime are sampled at
# the tick and miss threads that wake and sleep between ticks): the queue
# consumer's cost per verdict, steadier than wall-clock rates on a machine
# whose other work comes and goes. bench/flows, bench/dns and bench/flood
# take it around one run of traffic and divide by what the run made the
# consumer judge (new flows, queries).
bench_cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }
# portcullis' consumer: portcullisd and portcullis-logd together (the
# engine's verdict waits for logd's acknowledgement: logd's work is part of
# every verdict)
bench_guard_cpu_ns() {
	echo $(($(bench_cpu_ns "$(guard_engine_pid)") + $(bench_cpu_ns "$(cat "$LAB_DIR/guard-logd.pid")")))
}
# Context switches of a process's threads so far (voluntary and not,
# /proc/PID/task/*/status): a sleep and wake-up per verdict shows here as
# about one switch per thread involved (docs/logd.md "The record ring").
bench_ctxt() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches:/ {s += $2} END {printf "%.0f", s}'; }
bench_guard_ctxt() {
	echo $(($(bench_ctxt "$(guard_engine_pid)") + $(bench_ctxt "$(cat "$LAB_DIR/guard-logd.pid")")))
}
bench_nullq_ctxt() { bench_ctxt "$(cat "$LAB_DIR/nullq.pid")"; }
bench_per() { # count items -> count per item, 2 decimals (0 for no item)
	awk -v t="$1" -v n="$2" 'BEGIN { printf "%.2f", (n > 0 ? t / n : 0) }'
}
# the do-nothing consumer's (bench_mode nullq)
bench_nullq_cpu_ns() { bench_cpu_ns "$(cat "$LAB_DIR/nullq.pid")"; }
# the CPU time of the consumer of the current mode: nullq's or portcullis'
bench_consumer_cpu_ns() { # nullq|guarded
	if [ "$1" = nullq ]; then bench_nullq_cpu_ns; else bench_guard_cpu_ns; fi
}
# The whole machine's CPU time so far, all processes and all CPUs, from
# the kernel's account (/proc/stat's cpu line, in USER_HZ ticks): "busy
# idle", busy = user nice system irq softirq, idle = idle iowait (steal is
# the hypervisor's, neither). A consumer's own CPU per verdict misses what
# its verdicts move elsewhere (the peers' TCP in another task's softirq)
# and what they move onto it; the machine's is the sum, and the busy
# share says whether a rate was bound by the CPUs or by waiting.
bench_machine_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $5 + $6; exit }' /proc/stat; }
bench_us_per() { # ns count -> microseconds per item (0 for no item)
	awk -v t="$1" -v n="$2" 'BEGIN { printf "%.1f", (n > 0 ? t / 1e3 / n : 0) }'
}
# busy ticks (bench_machine_ticks' difference) count -> the machine's
# microseconds per item; a tick is 1/USER_HZ s (getconf CLK_TCK)
bench_machine_us_per() {
	bench_us_per $(($1 * 1000000000 / $(getconf CLK_TCK))) "$2"
}

# Build a small C program of bench/ (no project libraries; extra compiler
# arguments, e.g. pkg-config's, after the name) into $PC_BUILD/bench/NAME
# when its source is newer.
bench_cc() { # name [cc args...] -> path on stdout
	local src=$PC_TOP/bench/$1.c out=$PC_TOP/$PC_BUILD/bench/$1
	shift
	mkdir -p "$(dirname "$out")"
	if [ ! -x "$out" ] || [ "$src" -nt "$out" ]; then
		${CC:-cc} -O2 -std=gnu11 -Wall -Wextra -Werror -o "$out" "$src" "$@" >&2 || return 1
	fi
	echo "$out"
}

# The three ways bench/flows, bench/dns and bench/flood run the same
# traffic, in interleaved rounds (lab and guard running):
#   plain    the same gateway forwarding alone: the engine stopped, its
#            tables and its policy-routing rules deleted. Deleting the
#            tables under a running engine is not enough: it watches them
#            and reinstalls them at once, and without its marks the routing
#            rules blackhole the bridge's traffic (docs/engine.md, "Fail
#            closed without nftables").
#   nullq    the ceiling of any NFQUEUE design on this machine: the
#            engine's tables and routing rules stay, the engine stops (no
#            engine, no traffic), and bench/nullq takes its queues, letting
#            every packet through with the engine's allow mark, deciding
#            and logging nothing. Reported, never judged: portcullis' own
#            cost is the gap between that row and the guarded one.
#   guarded  the engine running (started again if plain or nullq stopped
#            it: it installs its tables and rules) and its tables installed
#            again by portcullis reload: every new flow and DNS message
#            queued, judged and logged
# Leaving plain or nullq starts a new engine process (guard_engine_pid).
bench_mode() { # plain|nullq|guarded [nullq's mark: ALLOW (default) or PASS]
	_bench_nullq_off
	case $1 in
	plain)
		guard_engine_stop
		lab_gw nft delete table inet portcullis 2>/dev/null
		lab_gw nft delete table bridge portcullis 2>/dev/null
		lab_gw nft list tables | grep -q portcullis && lab_die "tables still there"
		_bench_routing_off
		;;
	guarded) _bench_tables_on ;;
	nullq) _bench_nullq_on "${2:-ALLOW}" ;;
	*) lab_die "bench_mode: no mode $1" ;;
	esac
}
# The engine's policy-routing rules of the bridge (nft/nft.h, NFT_ROUTE_*:
# the mark rules at 1000.., the blackhole lookup at 1010), both families;
# its blackhole table is harmless without them and stays.
_bench_routing_off() {
	local f p base drop
	base=$(sed -n 's/^#define NFT_ROUTE_PRIO_MARK \([0-9]*\)u.*/\1/p' "$PC_TOP/nft/nft.h")
	drop=$(sed -n 's/^#define NFT_ROUTE_PRIO_DROP \([0-9]*\)u.*/\1/p' "$PC_TOP/nft/nft.h")
	[ -n "$base" ] && [ -n "$drop" ] || lab_die "bench_mode plain: no NFT_ROUTE_PRIO_* in nft/nft.h"
	for f in -4 -6; do
		for p in $(seq "$base" $((drop - 1))) "$drop"; do
			while lab_gw ip "$f" rule del pref "$p" iif "$LAB_BR" 2>/dev/null; do :; done
		done
		lab_gw ip "$f" rule show | grep -q "iif $LAB_BR" &&
			lab_die "bench_mode plain: routing rules of $LAB_BR still there"
	done
}
_bench_engine_up() {
	[ -n "$(guard_engine_pid)" ] && kill -0 "$(guard_engine_pid)" 2>/dev/null && return 0
	GUARD_ENGINE_ARGS="" guard_engine_start || lab_die "the engine did not come back"
	bench_guard_nice
}
# BENCH_GUARD_NICE=N: every thread of portcullisd and portcullis-logd at
# nice N (an experiment: the guard's threads ahead of a sandbox's CPU hog;
# bench/report-notes.md). Unset: left as started.
bench_guard_nice() {
	[ -n "${BENCH_GUARD_NICE:-}" ] || return 0
	local p t
	for p in "$(guard_engine_pid)" "$(cat "$LAB_DIR/guard-logd.pid" 2>/dev/null)"; do
		[ -n "$p" ] || continue
		for t in /proc/"$p"/task/*; do
			renice -n "$BENCH_GUARD_NICE" -p "${t##*/}" >/dev/null 2>&1
		done
	done
}
_bench_tables_on() {
	_bench_engine_up
	guard_cli reload >/dev/null || lab_die "reload (table install) failed"
	lab_gw nft list tables | grep -q "inet portcullis" || lab_die "table not installed"
}
# The mark nullq gives must be the one the engine gives that traffic:
# ALLOW for flows (the conntrack entry then skips the queue, as the engine's
# verdict does), PASS for DNS (every message queued, as the engine has it);
# with ALLOW, a DNS client's later queries would bypass the queue and the
# "ceiling" would measure no queueing at all.
_bench_nullq_on() { # ALLOW|PASS
	local nullq queues mark
	# shellcheck disable=SC2046 # pkg-config's words
	nullq=$(bench_cc nullq $(pkg-config --cflags --libs libnetfilter_queue libmnl) -lpthread) ||
		lab_die "bench/nullq did not build"
	mark=$(sed -n "s/^#define NFT_MARK_$1 \\(0x[0-9a-f]*\\)u.*/\\1/p" "$PC_TOP/nft/nft.h")
	[ -n "$mark" ] || lab_die "bench_mode nullq: no mark NFT_MARK_$1"
	_bench_tables_on
	queues=$(guard_status_field '" ".join(str(q["num"]) for q in s["queues"])')
	guard_engine_stop
	lab_gw nft list tables | grep -q "inet portcullis" || lab_die "the engine took its tables away"
	lab_ns_check "$LAB_GW"
	# shellcheck disable=SC2086 # one word per queue
	ip netns exec "$LAB_GW" "${GUARD_PLACE[@]}" "$nullq" "$mark" $queues >"$LAB_DIR/nullq.out" 2>&1 &
	echo $! >"$LAB_DIR/nullq.pid"
	lab_wait_until -p "$(cat "$LAB_DIR/nullq.pid")" grep -q serving "$LAB_DIR/nullq.out" ||
		lab_die "bench/nullq did not start: $(cat "$LAB_DIR/nullq.out")"
}
# Packets the queues' consumer has been given since it bound (the queues'
# id counters start again at each bind): a ceiling run that queued less
# than its traffic needs did not measure the queue. Read before and after a
# run (no bind between), the packets any consumer, nullq or the engine, was
# handed during it.
bench_nullq_queued() {
	lab_gw cat /proc/net/netfilter/nfnetlink_queue | awk '{s += $8} END {print s + 0}'
}
_bench_nullq_off() {
	[ -s "$LAB_DIR/nullq.pid" ] || return 0
	kill "$(cat "$LAB_DIR/nullq.pid")" 2>/dev/null
	wait "$(cat "$LAB_DIR/nullq.pid")" 2>/dev/null
	rm -f "$LAB_DIR/nullq.pid"
}

_bj_str() { # JSON string of $1
	local s=${1//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\t'/ }
	s=${s//$'\n'/ }
	printf '"%s"' "$s"
}
_bj_arr() { # "1 2 3" -> [1,2,3] (anything not a number becomes null)
	local out= x
	for x in $1; do
		[[ $x =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]] || x=null
		out+=${out:+,}$x
	done
	printf '[%s]' "$out"
}

bench_begin() { # name title workload
	BJ_HEAD="\"bench\":$(_bj_str "$1"),\"title\":$(_bj_str "$2"),\"workload\":$(_bj_str "$3")"
	BJ_METRICS=() BJ_NOTES=()
}

# The optional ceiling: the same measurement through the do-nothing queue
# consumer (bench_mode nullq), in the baseline's unit: the report puts its
# ratio to the baseline beside the subject's, as the most any NFQUEUE
# design reaches here. Reported, never judged.
bench_metric() { # name label unit better base-name base-samples subj-name subj-samples kind value text [ceil-name ceil-samples]
	local m
	m="{\"name\":$(_bj_str "$1"),\"label\":$(_bj_str "$2"),\"unit\":$(_bj_str "$3"),\"better\":$(_bj_str "$4")"
	[ -z "$5" ] || m+=",\"baseline\":{\"name\":$(_bj_str "$5"),\"samples\":$(_bj_arr "$6")}"
	m+=",\"subject\":{\"name\":$(_bj_str "$7"),\"samples\":$(_bj_arr "$8")}"
	[ -z "${9:-}" ] || m+=",\"target\":{\"kind\":$(_bj_str "$9"),\"value\":${10},\"text\":$(_bj_str "${11}")}"
	[ -z "${12:-}" ] || m+=",\"ceiling\":{\"name\":$(_bj_str "${12}"),\"samples\":$(_bj_arr "${13}")}"
	BJ_METRICS+=("$m}")
}

bench_note() { BJ_NOTES+=("$(_bj_str "$*")"); }

bench_end() {
	[ -n "${BENCH_JSON:-}" ] || return 0
	local IFS=,
	printf '{%s,"command":%s,"rounds":%s,"seconds":%s,"quick":%s,"metrics":[%s],"notes":[%s]}\n' \
		"$BJ_HEAD" "$(_bj_str "$BENCH_CMD")" "$BENCH_ROUNDS" "$BENCH_SECS" \
		"$([ "$BENCH_QUICK" = 1 ] && echo true || echo false)" \
		"${BJ_METRICS[*]}" "${BJ_NOTES[*]}" >"$BENCH_JSON"
	python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$BENCH_JSON" ||
		{ echo "$BENCH_NAME: the result file is not valid JSON" >&2; return 1; }
}

# Add "key: value" under a top-level section of the guard's portcullis.yaml
# (written by guard_config), e.g. bench_conf_set dns "max_learned_total: 200000".
bench_conf_set() { # section "key: value"
	grep -q "^$1:" "$GUARD_CONF" || printf '%s:\n' "$1" >>"$GUARD_CONF"
	sed -i "/^$1:/a\\  $2" "$GUARD_CONF"
}

# A hosts file for the lab's dnsmasq (LAB_DNS_EXTRA=--addn-hosts=FILE before
# lab_up): N names nI.learn.test with AAAA addresses in 2001:db8:aa::/48
# (documentation addresses: learned from answers, never contacted), and
# target.scale.test -> 203.0.113.99. bench_learn_queries writes the
# matching dnsperf input (names FROM..TO-1).
bench_learn_hosts() { # n file
	awk -v n="$1" 'BEGIN {
		print "203.0.113.99 target.scale.test"
		for (i = 0; i < n; i++)
			printf "2001:db8:aa:%x::%x n%d.learn.test\n", int(i / 65536), i % 65536 + 1, i
	}' >"$2"
}
bench_learn_queries() { # from to file
	awk -v a="$1" -v b="$2" 'BEGIN { for (i = a; i < b; i++) printf "n%d.learn.test AAAA\n", i }' >"$3"
}

# BENCH_PERF=DIR (bench/dns, bench/flows): a call-graph profile of
# portcullisd and portcullis-logd (all their threads, perf record -g -p)
# over each guarded measurement, DIR/NAME-ROUND.data, for the "where the
# time goes" notes (bench/report-notes.md). It costs CPU of its own, so
# the CPU per verdict of a profiled run is not comparable with another.
BENCH_PERF_PID=
bench_perf_start() { # name
	[ -n "${BENCH_PERF:-}" ] || return 0
	mkdir -p "$BENCH_PERF"
	# cpu-clock: no hardware counters on this machine's virtual CPUs
	perf record -q -g -e cpu-clock -F 2999 -p "$(guard_engine_pid),$(cat "$LAB_DIR/guard-logd.pid")" \
		-o "$BENCH_PERF/$1.data" >/dev/null 2>&1 &
	BENCH_PERF_PID=$!
	sleep 0.3
}
bench_perf_stop() {
	[ -n "$BENCH_PERF_PID" ] || return 0
	kill -INT "$BENCH_PERF_PID" 2>/dev/null
	wait "$BENCH_PERF_PID" 2>/dev/null
	BENCH_PERF_PID=
}
