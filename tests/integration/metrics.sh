# `portcullis metrics`: the engine, the vault and logd each serve their
# metrics on their control socket; the CLI prints the union in Prometheus
# text format. Real daemons in the lab, real traffic from a sandbox; the
# counters must move with it, and promtool must accept the output.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/integration/vault_setup.bash"

command -v promtool >/dev/null || { echo "1..0 # SKIP promtool not installed (make deps)"; exit 0; }
[ -x "$V_BIN/portcullisd" ] || { echo "1..0 # SKIP portcullisd not built"; exit 0; }
VAULT_REDIRECT=engine
HTTP_PORT=9812
V_CONF_EXTRA="engine: { metrics_port: $HTTP_PORT }"
vault_up

metrics() { "$V_BIN/portcullis" -c "$V/portcullis.yaml" metrics 2>"$LAB_DIR/metrics.err"; }
# value SAMPLE-REGEX: the value of the first sample line matching (0 if none)
value() { printf '%s\n' "$M" | grep -E "^$1 " | head -1 | awk '{print $NF}' | grep . || echo 0; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# the engine's first containment check is part of what is shown
for _ in $(seq 1 50); do
	metrics | grep -q '^portcullis_engine_checks_total [1-9]' && break
	sleep 0.1
done

M=$(metrics) && rc=0 || rc=$?
t_eq "portcullis metrics exits 0" 0 "$rc"
t_ok "promtool check metrics accepts the output" promtool check metrics <<<"$M"
for d in engine vault logd; do
	t_eq "$d answered (portcullis_up)" 1 "$(value "portcullis_up\{daemon=\"$d\"\}")"
done
t_eq "the engine's containment check is exported: proven" 1 \
	"$(value 'portcullis_engine_check_result\{result="proven"\}')"
before_dns=$(value 'portcullis_engine_verdicts_total\{action="dns-query",outcome="allowed",reason="dns_name"\}')
before_ref=$(value 'portcullis_engine_verdicts_total\{action="connect",outcome="refused",reason="not_resolved"\}')
before_req=$(value 'portcullis_vault_requests_total\{outcome="allowed"\}')
before_inj=$(value 'portcullis_vault_injections_total')
before_exf=$(value 'portcullis_vault_exfiltration_refused_total')
before_rec=$(value 'portcullis_logd_records_total')
RULE0='portcullis_engine_rule_hits_total\{rule="agent-1/allow\[0\]"\}'
RULE2='portcullis_engine_rule_hits_total\{rule="agent-1/allow\[2\]"\}'
t_match "every rule of the policy has its hit counter, 0 or more" '^[0-9]+$' "$(printf '%s\n' "$M" | grep -E "^$RULE2 " | awk '{print $2}')"
t_eq "the rule label is bounded by the policy: one series per allow entry" \
	"$(cat "$V"/rules.d/*.yaml | grep -cE '^  - (host|cidr):')" "$(printf '%s\n' "$M" | grep -c '^portcullis_engine_rule_hits_total{')"
before_r0=$(value "$RULE0")
before_r2=$(value "$RULE2")
for d in engine vault logd; do
	# (an idle daemon may not have used a clock tick of CPU yet: present, >= 0)
	t_match "$d: process_cpu_seconds_total" '^[0-9]+\.[0-9]{3}$' \
		"$(printf '%s\n' "$M" | grep -E "^process_cpu_seconds_total\{daemon=\"$d\"\} " | awk '{print $2}')"
	for f in process_resident_memory_bytes process_open_fds process_max_fds process_start_time_seconds; do
		t_ok "$d: $f" gt "$(value "$f\{daemon=\"$d\"\}")" 0
	done
done
t_eq "one HELP for process_cpu_seconds_total in the union (the three daemons grouped)" 1 \
	"$(printf '%s\n' "$M" | grep -c '^# HELP process_cpu_seconds_total ')"
now=$(date +%s)
t_ok "the engine's start time is in the past hour" awk -v s="$(value 'process_start_time_seconds\{daemon="engine"\}')" -v n="$now" 'BEGIN { exit !(s > n - 3600 && s <= n + 1) }'
before_q=$(value 'portcullis_engine_queue_packets_total\{queue="100"\}')
before_q=$((before_q + $(value 'portcullis_engine_queue_packets_total\{queue="101"\}')))

# ---- traffic --------------------------------------------------------------------
r=$(vcurl 1 -o /dev/null -w '%{http_code}' https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH")
t_eq "traffic: a request with its secret injected (200)" 200 "$r"
r=$(vcurl 1 -o /dev/null -w '%{http_code}' https://pypi.test/echo -H "X-Api-Key: $V_PH_GH")
t_eq "traffic: a placeholder sent to another host is refused (403)" 403 "$r"
t_fail "traffic: a destination no rule allows is refused" \
	lab_sb 1 curl -s -o /dev/null --max-time 3 "http://$LAB_DIRECT4/"
t_match "traffic: a name not on the list gets REFUSED" "status: REFUSED" \
	"$(lab_sb 1 dig +time=2 +tries=1 not-allowed.test A)"

M=$(metrics)
t_ok "after traffic: promtool still accepts the output" promtool check metrics <<<"$M"
t_ok "allowed DNS queries counted" gt \
	"$(value 'portcullis_engine_verdicts_total\{action="dns-query",outcome="allowed",reason="dns_name"\}')" \
	"$before_dns"
t_ok "refused DNS query counted with its reason" gt \
	"$(value 'portcullis_engine_verdicts_total\{action="dns-query",outcome="refused",reason="dns_name_not_allowed"\}')" 0
t_ok "refused connection counted with its reason (no allowed name resolved to it)" gt \
	"$(value 'portcullis_engine_verdicts_total\{action="connect",outcome="refused",reason="not_resolved"\}')" \
	"$before_ref"
t_ok "the redirect to the vault counted as an allowed connection" gt \
	"$(value 'portcullis_engine_verdicts_total\{action="connect",outcome="allowed",reason="vault"\}')" 0
q=$(($(value 'portcullis_engine_queue_packets_total\{queue="100"\}') + $(value 'portcullis_engine_queue_packets_total\{queue="101"\}')))
t_ok "queued packets counted" gt "$q" "$before_q"
t_eq "no queue drops on a quiet lab" 0 \
	"$(($(value 'portcullis_engine_queue_kernel_dropped_total\{queue="100"\}') + $(value 'portcullis_engine_queue_kernel_dropped_total\{queue="101"\}')))"
t_ok "learned DNS entries exported" gt "$(value portcullis_dnsguard_learned_entries)" 0
t_ok "vault: the allowed request counted" gt "$(value 'portcullis_vault_requests_total\{outcome="allowed"\}')" "$before_req"
t_ok "vault: the injection counted" gt "$(value portcullis_vault_injections_total)" "$before_inj"
t_ok "vault: the exfiltration attempt counted" gt \
	"$(value portcullis_vault_exfiltration_refused_total)" "$before_exf"
t_ok "logd: records counted" gt "$(value portcullis_logd_records_total)" "$before_rec"
t_match "logd: the last checkpoint's age is exported" '^[0-9]+\.[0-9]{3}$' \
	"$(value portcullis_logd_last_checkpoint_age_seconds)"
t_ok "rule hits: agent-1/allow[0] (api.github.test: its DNS query and its flow) moved" gt \
	"$(value "$RULE0")" "$before_r0"
t_ok "rule hits: agent-1/allow[2] (pypi.test) moved" gt "$(value "$RULE2")" "$before_r2"
hits=$("$V_BIN/portcullis" -c "$V/portcullis.yaml" status --json |
	python3 -c 'import json,sys; s=json.load(sys.stdin); print(" ".join("%s=%d@%s:%d" % (r["rule"], r["hits"], r["file"].split("/")[-1], r["line"]) for r in s["rules"]))')
t_match "status --json: the same counters, with the rule's file:line" \
	"agent-1/allow\[0\]=[1-9][0-9]*@agents.yaml:[0-9]+ " "$hits"

# ---- the HTTP /metrics listener (engine.metrics_port) --------------------------
hcurl() { lab_gw curl -sS --max-time 3 "$@"; }
H=$(hcurl "http://127.0.0.1:$HTTP_PORT/metrics") && rc=0 || rc=$?
t_eq "HTTP /metrics answers on 127.0.0.1:$HTTP_PORT (curl exit 0)" 0 "$rc"
t_ok "promtool accepts what it serves" promtool check metrics <<<"$H"
t_match "it serves the engine's families" '^portcullis_engine_rule_hits_total\{rule="agent-1/allow\[0\]"\} [1-9]' "$H"
t_match "... and the engine's process_* as the client conventions name them (no label)" \
	'^process_resident_memory_bytes [1-9][0-9]*$' "$H"
t_match "content type: the text format 0.0.4" 'Content-Type: text/plain; version=0.0.4' \
	"$(hcurl -o /dev/null -D - "http://127.0.0.1:$HTTP_PORT/metrics")"
t_eq "another path: 404" 404 "$(hcurl -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/")"
t_eq "another method: 405" 405 "$(hcurl -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$HTTP_PORT/metrics")"
t_match "a malformed request: 400" '^HTTP/1.1 400 ' \
	"$(printf 'GET metrics\r\n\r\n' | lab_gw socat -T 2 - TCP:127.0.0.1:$HTTP_PORT | head -1)"
t_match "listening on loopback only" "^127\.0\.0\.1:$HTTP_PORT\$" \
	"$(lab_gw ss -Hltn "sport = :$HTTP_PORT" | awk '{print $4}')"
hcurl -o /dev/null "http://$LAB_UPLINK_GW4:$HTTP_PORT/metrics" 2>/dev/null && rc=0 || rc=$?
t_eq "not on the gateway's uplink address (connection refused, curl 7)" 7 "$rc"
hcurl -o /dev/null "http://$LAB_GW4:$HTTP_PORT/metrics" 2>/dev/null && rc=0 || rc=$?
t_eq "... nor on its bridge address" 7 "$rc"
# a client that never finishes its request does not hold up the engine
lab_gw bash -c "exec 3<>/dev/tcp/127.0.0.1/$HTTP_PORT; printf 'GET /metr' >&3; sleep 4" &
slow=$!
sleep 0.2
t_eq "a stalled HTTP client: verdicts still flow (an allowed flow works)" 200 \
	"$(vcurl 1 -o /dev/null -w '%{http_code}' https://api.github.test/echo -H "Authorization: Bearer $V_PH_GH")"
t_ok "... and status answers" "$V_BIN/portcullis" -c "$V/portcullis.yaml" status --json
wait "$slow" 2>/dev/null

# ---- who may read them -----------------------------------------------------------
t_eq "vault.sock is root's, mode 600" "600 root" "$(stat -c '%a %U' "$V/run/vault.sock")"
t_eq "logd-control.sock is root's, mode 600" "600 root" "$(stat -c '%a %U' "$V/run/logd-control.sock")"
out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups \
	"$V_BIN/portcullis" -c "$V/portcullis.yaml" metrics 2>/dev/null)
t_match "another user: the engine's metrics (as its status, open to all)" \
	'^portcullis_up\{daemon="engine"\} 1$' "$out"
t_match "another user: not the vault's" '^portcullis_up\{daemon="vault"\} 0$' "$out"
t_match "another user: not logd's" '^portcullis_up\{daemon="logd"\} 0$' "$out"
t_nomatch "another user: no vault counter leaks" '^portcullis_vault_' "$out"

# ---- a daemon down -----------------------------------------------------------------
kill "$V_VAULT_PID"
for _ in $(seq 1 50); do kill -0 "$V_VAULT_PID" 2>/dev/null || break; sleep 0.1; done
M=$(metrics) && rc=0 || rc=$?
t_eq "vault down: still exit 0 (the others answered)" 0 "$rc"
t_eq "vault down: portcullis_up says so" 0 "$(value 'portcullis_up\{daemon="vault"\}')"
t_ok "vault down: the rest still parses" promtool check metrics <<<"$M"
t_match "vault down: the CLI says why on stderr" "portcullis: vault: " "$(cat "$LAB_DIR/metrics.err")"
# the checker of this test has teeth: a malformed sample is refused
t_fail "promtool refuses a malformed exposition" promtool check metrics <<<'portcullis_x{a="1} 1'

# ---- the listener is off by default ------------------------------------------------
kill "$V_ENGINE_PID"
for _ in $(seq 1 50); do kill -0 "$V_ENGINE_PID" 2>/dev/null || break; sleep 0.1; done
sed -i '/metrics_port/d' "$V/portcullis.yaml"
ip netns exec "$LAB_GW" "$V_BIN/portcullisd" -c "$V/portcullis.yaml" 2>>"$LAB_DIR/engine.stderr" &
V_ENGINE_PID=$!
lab_wait_until -p "$V_ENGINE_PID" lab_gw "$V_BIN/portcullis" -c "$V/portcullis.yaml" status --json >/dev/null
t_ok "the engine runs again without engine.metrics_port" kill -0 "$V_ENGINE_PID"
hcurl -o /dev/null "http://127.0.0.1:$HTTP_PORT/metrics" 2>/dev/null && rc=0 || rc=$?
t_eq "off by default: nothing listens (connection refused, curl 7)" 7 "$rc"
t_eq "... no listening socket of the engine's" "" "$(lab_gw ss -Hltnp | grep portcullisd)"
t_done
