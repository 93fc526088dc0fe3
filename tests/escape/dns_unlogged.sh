# Escape attempts, class "DNS over TCP without its record": an allowed
# query over TCP whose record logd does not take is refused (no record,
# no connection), but its stream kept the message as judged: the same
# segment sent again (the sandbox's TCP retransmits it) was released "as
# judged before", with no record, and the query reached the resolver and
# through it the world (a DNS exfiltration channel with nothing in the
# log). Now a stream whose judged message was refused for want of its
# record fails, as a held flow does: every later data segment of it is
# refused, whether the record was not taken (logd down) or the window's
# timeout refused it (logd stopped). Evidence: dnsmasq's query log (what reached the resolver), the
# crafted client's segments, the guard's log.
. "$PC_TOP/tests/escape/escape_lib.bash"
esc_init dns_unlogged "DNS over TCP sent again after its record was not logged"
# one queue thread: the refused connect below and the query share its
# last outcome with logd (a query is recorded at once, not with its
# answer, once a record was not taken)
export GUARD_QUEUE_COUNT=1
esc_up 1
esc_crafted_ports 1 47300-47399
resolver_saw() { grep -ciE -- "query\[[A-Z0-9]+\] $1 " "$LAB_DIR/dnsmasq.log" 2>/dev/null | tr -d ' '; }
recorded() { # name: dns-query records naming it
	guard_records | grep '"event.action":"dns-query"' | grep -c "\"dns.question.name\":\"$1\"" |
		tr -d ' '
}
t_match "sandbox 1 resolves api.github.test over TCP" "^NOERROR" \
	"$(esc_craft 1 dns --server "$LAB_RESOLVER4" --tcp --name api.github.test --timeout 2)"

# The thread's last outcome made bad by a connect whose record is not
# taken (or not acknowledged within the window's 1 s), so that the query
# is recorded at once, not deferred to its answer; then the query, sent
# again twice: with logd still out, and after it is back.
# how: kill (logd stopped and started again: the record not taken) or
# stop (SIGSTOP, then SIGCONT: the window's timeout refuses the batch).
unlogged() { # how name sport
	local how=$1 name=$2 sport=$3 re failed0 P GO cpid n_down n rec out logd_pid
	re=${name//./\\.}
	t_eq "$name not asked of the resolver yet" 0 "$(resolver_saw "$re")"
	failed0=$(guard_status_field 's["log"]["failed"]')
	logd_pid=$(cat "$LAB_DIR/guard-logd.pid")
	if [ "$how" = kill ]; then guard_logd_stop; else kill -STOP "$logd_pid"; fi
	lab_sb 1 timeout 3 bash -c "exec 3<>/dev/tcp/$LAB_DIRECT4/80" 2>/dev/null || true
	lab_wait_until eval '[ "$(guard_status_field '\''s["log"]["failed"]'\'')" -gt "$failed0" ]'
	P=$LAB_DIR/unlogged-$how.progress GO=$LAB_DIR/unlogged-$how.go
	rm -f "$P" "$GO"
	esc_craft 1 dns-overlap --dst "$LAB_RESOLVER4" --sport "$sport" --scenario unlogged \
		--name "$name" --progress "$P" --go "$GO" >"$LAB_DIR/unlogged-$how.out" 2>&1 &
	cpid=$!
	lab_wait_until grep -q '^resent' "$P"
	esc_settle
	n_down=$(resolver_saw "$re")
	t_diag "logd out, sent twice: $(grep '^resent' "$P")"
	t_eq "logd out ($how): neither the query nor the same segment sent again reached the resolver" \
		0 "$n_down"
	if [ "$how" = kill ]; then guard_logd_start; else kill -CONT "$logd_pid"; fi
	touch "$GO"
	lab_wait_until grep -q '^done' "$P"
	wait $cpid
	esc_settle
	out=$(cat "$LAB_DIR/unlogged-$how.out")
	t_diag "craft: $out"
	n=$(resolver_saw "$re") rec=$(recorded "$name")
	t_eq "logd back ($how): the segment sent a third time did not reach the resolver either (the stream failed)" \
		0 "$n"
	t_eq "no query for $name reached the resolver without its record ($n asked, $rec recorded)" \
		0 "$((n > rec ? n - rec : 0))"
	t_match "the sandbox's connection was reset" "resets [1-9]" "$out"
	esc_end "refused: the stream failed with its record" \
		"dnsmasq: $n_down queries for $name while logd was out, $n in all; $rec records; craft: $out"
}

esc_begin "an allowed query over TCP while logd is down (not taken: refused), then the same segment again, logd still down and back"
unlogged kill pypi.test 47311

esc_begin "an allowed query over TCP while logd is stopped (the window's timeout refuses it), then the same segment again, logd still stopped and continued"
unlogged stop cdn-good.test 47312

esc_begin "logd back: a new connection resolves pypi.test over TCP, with its record"
t_match "sandbox 1 resolves pypi.test over TCP" "^NOERROR" \
	"$(esc_craft 1 dns --server "$LAB_RESOLVER4" --tcp --name pypi.test --timeout 2)"
esc_settle
lab_wait_until eval '[ "$(recorded pypi.test)" -ge 1 ]'
t_lt "its query is recorded" 0 "$(recorded pypi.test)"
esc_end "allowed" "dnsmasq: $(resolver_saw 'pypi\.test') queries for pypi.test; $(recorded pypi.test) records"
t_done
