# The queue thread's pipeline (docs/engine.md, "The pipeline"): while logd
# has not acknowledged a batch's records, the thread reads and decides the
# next batches, and no packet of any of them passes before its record is
# in the file; when the acknowledgement times out, every batch of the
# window is refused at once. logd is stalled with SIGSTOP.
set -u
. "$PC_TOP/tests/lib/guard.sh"

GUARD_QUEUE_COUNT=1 guard_lab 1
guard_agent1 <<-EOF2
  - cidr: $LAB_DIRECT4/32
    ports: [80]
EOF2
guard_start || { t_fail "guard started" true; t_done; }

# Opens n connections gap_ms apart (each SYN its own batch: the thread is
# not asleep in a flush), writes each one's source port, "allsent", then
# each outcome and its time after the first SYN.
cat >"$LAB_DIR/syns.py" <<'PY'
import errno, select, socket, sys, time
host, port, n, gap, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
f = open(out, "w", buffering=1)
socks, t0 = {}, None
for i in range(n):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex((host, port))
    t0 = t0 or time.monotonic()
    socks[s] = s.getsockname()[1]
    f.write("sent %d\n" % socks[s])
    time.sleep(gap)
f.write("allsent\n")
deadline = t0 + 6
while socks and time.monotonic() < deadline:
    _, w, _ = select.select([], list(socks), [], 0.05)
    for s in w:
        e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        what = "connected" if e == 0 else "refused" if e == errno.ECONNREFUSED else errno.errorcode.get(e, str(e))
        f.write("%d %s %.3f\n" % (socks.pop(s), what, time.monotonic() - t0))
for p in socks.values():
    f.write("%d timeout\n" % p)
f.write("done\n")
PY
LOGD_PID=$(cat "$LAB_DIR/guard-logd.pid")
SB1=$(lab_sb_ip4 1)
has() { grep -q "^$2\$" "$1" 2>/dev/null; }
decided() { # ports file: how many of its SYNs the engine logged as decided
	local n=0 p
	for p in $(sed -n 's/^sent //p' "$1"); do
		grep -q "connect .* $SB1:$p -> $LAB_DIRECT4:80 " "$GUARD_DIR/engine.log" && n=$((n + 1))
	done
	echo $n
}
recorded() { # ports file: how many of its connections have a record in the file
	local n=0 p
	for p in $(sed -n 's/^sent //p' "$1"); do
		guard_records | grep '"event.action":"connect"' | grep -q "\"source.port\":$p[,}]" && n=$((n + 1))
	done
	echo $n
}
t_match "baseline: the allowed flow works" "^0$" "$(guard_http_rc)"

# ---- a short stall: four batches wait in the window, none passes -------------------
A=$LAB_DIR/short.out
kill -STOP "$LOGD_PID"
lab_sb 1 python3 "$LAB_DIR/syns.py" $LAB_DIRECT4 80 4 0.03 "$A" &
cpid=$!
lab_wait_until has "$A" allsent
# well inside the 1 s acknowledgement timeout (past it they are refused):
# what is seen here is seen while the first batch still awaits its ack
now_ms() { echo $(($(date +%s%N) / 1000000)); }
deadline=$(($(now_ms) + 400))
while n=$(decided "$A") && [ "$n" != 4 ] && [ "$(now_ms)" -lt "$deadline" ]; do sleep 0.02; done
conn=$(grep -c connected "$A") rec=$(recorded "$A")
kill -CONT "$LOGD_PID"
t_eq "logd stopped: the engine read and decided all 4 SYNs (4 batches awaiting one acknowledgement)" \
	4 "$n"
t_eq "... none of them passed (no connection established)" 0 "$conn"
t_eq "... and none of their records was in the file" 0 "$rec"
wait $cpid
t_eq "logd continued within the timeout: all 4 connections established" 4 \
	"$(grep -c ' connected ' "$A")"
t_eq "... each with its record in the file" 4 "$(recorded "$A")"

# ---- a long stall: the timeout refuses every batch of the window at once -----------------------
B=$LAB_DIR/long.out
failed0=$(guard_status_field 's["log"]["failed"]')
kill -STOP "$LOGD_PID"
lab_sb 1 python3 "$LAB_DIR/syns.py" $LAB_DIRECT4 80 4 0.06 "$B" &
cpid=$!
lab_wait_until has "$B" done
kill -CONT "$LOGD_PID"
wait $cpid
t_eq "logd stopped past the timeout: all 4 connections refused (RST), none established" \
	"4 0" "$(grep -c ' refused ' "$B") $(grep -c ' connected ' "$B")"
spread=$(awk '$2 == "refused" { t = $3 * 1000; if (min == "" || t < min) min = t; if (t > max) max = t }
	END { printf "%d", max - min }' "$B")
t_lt "... at once: the window's batches were refused together (spread ${spread} ms < 500 ms), not one timeout after another" \
	"$spread" 500
t_lt "... the engine counted the records logd did not acknowledge" "$failed0" \
	"$(guard_status_field 's["log"]["failed"]')"
lab_wait_until eval '[ "$(guard_http_rc)" = 0 ]'
t_match "logd back: the allowed flow works again" "^0$" "$(guard_http_rc)"
guard_stop
t_done
