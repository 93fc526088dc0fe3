# Escape attempts, class "DNS rebinding": a name on the allow list whose
# answer is a special-purpose address (a cloud metadata service at
# 169.254.169.254, loopback, RFC 1918, CGNAT, unique-local, an IPv4-mapped
# address) or one of the lab's own (a sandbox on the bridge, the gateway's
# addresses on either side). The guard must not learn any of them, so the
# sandbox's connection is refused as "no allowed name resolved to this
# address"; the answer's record says which address was not learned and why.
# Real listeners on 169.254.169.254, 10.99.0.5, 100.64.0.5 and fd00:99::5
# in the upstream namespace, reached through the gateway's default route,
# are the "nothing reached it" evidence with the upstream capture; sandbox
# 2, whose cidr rules open 169.254.169.254, 10.99.0.0/24 and fd00:99::/64
# explicitly, is the control that shows they are reachable (and that an
# explicit cidr entry is honoured).
. "$PC_TOP/tests/escape/escape_lib.bash"

esc_init rebind "DNS rebinding"
ESC_NO_POLICY=1
guard_need_bins
lab_up 2
trap 'esc_finish' EXIT

# The listeners: each connection appends its peer to the listener's log
# and gets a reply.
# (the request is read to its end first: closing on unread bytes would
# reset the connection and lose the reply)
printf '%s\n' '#!/bin/bash' 'echo "$SOCAT_PEERADDR" >>"$1/listen-$2.log"' \
	'while IFS= read -r -t 3 l && [ -n "${l%$'"'"'\r'"'"'}" ]; do :; done' \
	'printf "HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nsecret from %s\n" "$2"' >"$LAB_DIR/listen.sh"
chmod 0755 "$LAB_DIR/listen.sh"
for l in "$LAB_META4" "$LAB_INTERNAL4" "$LAB_CGNAT4"; do
	lab_upstream ip addr add "$l/32" dev lo
	lab_upstream socat -T 5 "TCP-LISTEN:80,bind=$l,fork,reuseaddr" \
		EXEC:"$LAB_DIR/listen.sh $LAB_DIR $l" &
	disown
done
lab_upstream ip -6 addr add "$LAB_ULA6/128" dev lo
# (socat splits EXEC's arguments at ':': the log is named without them)
lab_upstream socat -T 5 "TCP6-LISTEN:80,bind=[$LAB_ULA6],fork,reuseaddr" \
	EXEC:"$LAB_DIR/listen.sh $LAB_DIR ${LAB_ULA6//:/-}" &
disown
for l in "$LAB_META4" "$LAB_INTERNAL4" "$LAB_CGNAT4"; do lab_wait_tcp "$LAB_UP" "$l" 80; done

guard_config
names="meta.evil.test loop.evil.test internal.evil.test cgnat.evil.test ula.evil.test
bridge.evil.test gateway.evil.test uplink.evil.test mapped.evil.test"
{
	cat <<-EOF
	sandbox: agent-1
	match: { source: [$SB1_4/32, "$SB1_6/128"], port: $(lab_sb_port 1) }
	allow:
	  - host: api.github.test
	    ports: [443]
	EOF
	for n in $names; do printf '  - host: %s\n    ports: [80, 443, 2222]\n' "$n"; done
	cat <<-EOF
	---
	sandbox: agent-2
	match: { source: [$SB2_4/32, "$SB2_6/128"], port: $(lab_sb_port 2) }
	allow:
	  - host: meta.evil.test
	    ports: [80]
	  - host: internal.evil.test
	    ports: [80]
	  - cidr: $LAB_META4/32
	    ports: [8080]
	  - cidr: 10.99.0.0/24
	    ports: [80]
	  - host: ula.evil.test
	    ports: [80]
	  - cidr: "fd00:99::/64"
	    ports: [80]
	EOF
} | guard_rules agents
guard_start || { t_fail "the guard started" true; t_done; }
esc_capture_start

# connections from the sandboxes (lab_wait_tcp's probe comes from the upstream;
# socat writes IPv6 peers in full: [fd00:0203:0000:...])
listened() {
	local n
	n=$(grep -cE '^\[?(10\.203\.|fd00:0?203:)' "$LAB_DIR/listen-${1//:/-}.log" 2>/dev/null)
	echo "${n:-0}"
}
# The event.reason of every record about name (its DNS answers), newest last.
dns_reasons() {
	guard_records | tail -n +$((${ESC_REC0:-0} + 1)) | python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l)
    if r.get("dns.question.name") == sys.argv[1] and r.get("event.action") in ("dns-query", "dns-learn"):
        print(r.get("event.reason", ""))' "$1"
}
conn_reason() { esc_reason "\"event.action\":\"connect\".*\"destination.ip\":\"$1\""; }

# ---- controls: the guard learns the lab's (routable) documentation ranges,
# and the listeners are reachable through the gateway when a cidr rule says so
esc_begin "control: an allowed name in the lab's routable documentation range"
out=$(lab_sb 1 curl -sS --max-time 5 --cacert "$LAB_CA" https://api.github.test/ 2>&1)
t_match "api.github.test is learned and served" "^api.github.test ok" "$out"
esc_end "allowed" "curl: \"$out\""

esc_begin "control: sandbox 2 whose cidr rule covers 10.99.0.0/24 explicitly"
out=$(lab_sb 2 curl -sS --max-time 5 http://internal.evil.test/ 2>&1)
t_match "internal.evil.test is learned (cidr covers it) and served" "^secret from $LAB_INTERNAL4" "$out"
t_eq "the listener on $LAB_INTERNAL4 logged sandbox 2's connection" 1 "$(listened $LAB_INTERNAL4)"
r=$(dns_reasons internal.evil.test | tr '\n' '|')
t_nomatch "its DNS record says nothing was refused" "not learned" "$r"
esc_end "allowed (explicit cidr)" "listener: 1 connection; log: \"$r\""

esc_begin "control: a cidr rule on another port still makes 169.254.169.254 learnable for its name"
out=$(lab_sb 2 curl -sS --max-time 5 http://meta.evil.test/ 2>&1)
t_match "meta.evil.test reached from sandbox 2 (the kernel forwards link-local upstream)" \
	"^secret from $LAB_META4" "$out"
t_eq "the listener on $LAB_META4 logged it" 1 "$(listened $LAB_META4)"
esc_end "allowed (explicit cidr)" "listener: 1 connection"

esc_begin "control: sandbox 2 whose cidr rule covers fd00:99::/64 explicitly (IPv6)"
out=$(lab_sb 2 curl -6 -sS --max-time 5 http://ula.evil.test/ 2>&1)
t_match "ula.evil.test is learned (cidr covers it) and served" "^secret from fd00-99--5" "$out"
t_eq "the listener on $LAB_ULA6 logged it" 1 "$(listened $LAB_ULA6)"
esc_end "allowed (explicit cidr)" "listener: 1 connection"

# ---- the attempts ---------------------------------------------------------------------------
# name, address it resolves to, curl's address family flag, what the record must say
# conn: "routed" when the connection crosses the engine (it then has a
# connect record); the gateway's own addresses are dropped before any
# verdict (fib daddr type local), a sandbox's by the bridge's port
# isolation, loopback never leaves the sandbox.
attempt() { # name addr family why-ERE [routed]
	local name=$1 addr=$2 fam=$3 why=$4 conn=${5:-} out r c n0 bracket=$2
	esc_begin "sandbox 1 resolves $name (allowed) to $addr and connects"
	n0=$(listened "$addr")
	dig=$(lab_sb 1 dig +short "$([ "$fam" = -6 ] && echo AAAA || echo A)" @$LAB_RESOLVER4 "$name" 2>&1)
	t_match "$name: the answer is released (the client sees $addr)" "^$addr$" "$dig"
	out=$(lab_sb 1 curl $fam -sS --max-time 3 "http://$name/" 2>&1)
	t_nomatch "$name: curl got nothing from $addr" "secret from" "$out"
	t_eq "$name: the listener on $addr got nothing" "$n0" "$(listened "$addr")"
	case $addr in *:*) bracket="ip6 host $addr" ;; *) bracket="host $addr" ;; esac
	esc_expect_nothing "$name" "$bracket and src host $([ "$fam" = -6 ] && echo "$SB1_6" || echo "$SB1_4")"
	r=$(dns_reasons "$name" | grep -F "not learned" | tail -1)
	t_match "$name: the answer's record says why $addr was not learned" \
		"$(printf '%s' "$addr" | sed 's/\./\\./g') not learned: (.*, and )?$why" "$r"
	c="(not routed through the engine)"
	if [ "$conn" = routed ]; then
		c=$(conn_reason "$addr")
		t_eq "$name: the connection is refused with its reason" \
			"no allowed name resolved to this address" "$c"
	fi
	esc_end "not learned; connection refused" "listener: nothing; upstream capture: $ESC_N packets; log: \"$r\" / \"$c\""
}

attempt meta.evil.test "$LAB_META4" -4 'link-local \(RFC 3927\), special-purpose' routed
attempt internal.evil.test "$LAB_INTERNAL4" -4 'private-use \(RFC 1918\), special-purpose' routed
attempt cgnat.evil.test "$LAB_CGNAT4" -4 'shared address space, CGNAT \(RFC 6598\), special-purpose' routed
attempt ula.evil.test "$LAB_ULA6" -6 'unique-local \(RFC 4193\), special-purpose' routed
attempt loop.evil.test 127.0.0.1 -4 'loopback \(RFC 1122\), special-purpose'
attempt bridge.evil.test "$SB2_4" -4 "the sandbox bridge's subnet"
attempt gateway.evil.test "$LAB_GW4" -4 "an address of the gateway"
# 192.0.2.1 is in a range the lab declares routable: only the gateway's own
# address list keeps it from being learned.
attempt uplink.evil.test "$LAB_UPLINK_GW4" -4 "an address of the gateway"
attempt uplink.evil.test "$LAB_UPLINK_GW6" -6 "an address of the gateway"

esc_begin "sandbox 1 resolves mapped.evil.test to ::ffff:$LAB_META4"
r=$(lab_sb 1 dig +short AAAA @$LAB_RESOLVER4 mapped.evil.test 2>&1)
t_match "the answer is released" "^::ffff:" "$r"
esc_settle
r=$(dns_reasons mapped.evil.test | grep -F "not learned" | tail -1)
t_match "the record says it was not learned" "::ffff:a9fe:a9fe not learned: IPv4-mapped \(RFC 4291\), special-purpose|::ffff:$LAB_META4 not learned: IPv4-mapped" "$r"
esc_end "not learned" "log: \"$r\""

esc_begin "the listeners, in the end"
t_eq "$LAB_META4 saw only sandbox 2's control connection" 1 "$(listened $LAB_META4)"
t_eq "$LAB_INTERNAL4 saw only sandbox 2's control connection" 1 "$(listened $LAB_INTERNAL4)"
t_eq "$LAB_CGNAT4 saw nothing" 0 "$(listened $LAB_CGNAT4)"
t_eq "$LAB_ULA6 saw only sandbox 2's control connection" 1 "$(listened $LAB_ULA6)"
esc_end "held" "listener logs"

t_done
