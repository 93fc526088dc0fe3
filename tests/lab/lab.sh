# The portcullis lab: a gateway, sandboxes and a simulated internet, each a
# network namespace of this run, with real peers upstream. Sourced by the
# integration tests, the escape and fault suites, the demo and the benchmarks.
#
#   sandbox ns ─veth─┐                      ┌─ upstream ns ("the internet")
#   sandbox ns ─veth─┤ gateway ns           │   dnsmasq 198.51.100.53 (zone .test)
#                    └ bridge pcbr0 ── up0 ─┘   nginx on 203.0.113.0/24 (HTTPS, lab CA)
#
# Nothing here touches the root namespace: every `ip` command names one of
# this run's namespaces (lab_ns_check refuses any other), and the only files
# outside $LAB_DIR are /etc/netns/<our ns>/resolv.conf, removed by lab_down.
# Names carry the creating shell's pid (pcl<pid>-gw), so stale namespaces of
# killed runs are recognised and removed, and parallel runs do not collide.
#
#   . tests/lab/lab.sh
#   lab_up                    # gateway + upstream + 2 sandboxes, open forwarding
#   lab_sb 1 curl ...         # run in sandbox 1
#   lab_gw nft list ruleset   # run in the gateway
#   lab_down                  # also run by the EXIT trap lab_up installs

LAB_PREFIX=${LAB_PREFIX:-pcl}
LAB_ID=${LAB_ID:-$LAB_PREFIX$$}
LAB_GW=$LAB_ID-gw
LAB_UP=$LAB_ID-up
LAB_TOP=${PC_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# GUARD_CPUS (a taskset CPU list, e.g. 0): the CPUs the guard's daemons,
# and the benches' baselines that stand in for them, run on, as a gateway's
# units place them with systemd's CPUAffinity= (docs/operations.md, "CPU
# placement"). Unset: wherever the kernel puts them. A command prefix:
# taskset execs the daemon, so $! stays the daemon's pid.
GUARD_PLACE=()
[ -z "${GUARD_CPUS:-}" ] || GUARD_PLACE=(taskset -c "$GUARD_CPUS")

# Addresses (documented in docs/lab.md).
LAB_BR=pcbr0
LAB_UPLINK=up0 # the gateway's interface toward the upstream namespace
LAB_SB_NET4=10.203.0.0/24
LAB_SB_NET6=fd00:203::/64
LAB_GW4=10.203.0.1
LAB_GW6=fd00:203::1
LAB_UPLINK_GW4=192.0.2.1
LAB_UPLINK_UP4=192.0.2.2
LAB_UPLINK_GW6=2001:db8:ff::1
LAB_UPLINK_UP6=2001:db8:ff::2
LAB_RESOLVER4=198.51.100.53
LAB_RESOLVER6=2001:db8:53::53
LAB_ROGUE_RESOLVER4=198.51.100.54 # a resolver portcullis is not configured with
LAB_API4=203.0.113.10             # api.github.test, www.github.test (CNAME)
LAB_API6=2001:db8:10::10
LAB_PYPI4=203.0.113.11            # pypi.test, a.chain.test -> b.chain.test -> pypi.test
LAB_PASTE4=203.0.113.12           # paste.evil.test
LAB_SHORT4=203.0.113.13           # short-ttl.test (TTL 2 s)
LAB_WRONGCERT4=203.0.113.14       # wrong-cert.test: serves a certificate for another name
LAB_UNTRUSTED4=203.0.113.15       # untrusted.test: self-signed certificate
LAB_CDN4=203.0.113.20             # cdn-good.test and cdn-evil.test share this address
LAB_CDN6=2001:db8:10::20
LAB_DIRECT4=203.0.113.99          # HTTPS with no DNS name (direct-IP attempts)
LAB_SSH4=198.51.100.22            # TCP echo on 22, UDP echo on 5000 (cidr rules)
LAB_SSH6=2001:db8:22::22
# DNS rebinding targets (tests/escape/rebind.sh): allowed-looking names in
# .evil.test whose answers are special-purpose addresses or the lab's own.
LAB_META4=169.254.169.254         # meta.evil.test: a cloud metadata service
LAB_INTERNAL4=10.99.0.5           # internal.evil.test: a private (RFC 1918) host
LAB_CGNAT4=100.64.0.5             # cgnat.evil.test: shared address space (RFC 6598)
LAB_ULA6=fd00:99::5               # ula.evil.test: unique-local (RFC 4193)
# The simulated internet lives in the documentation ranges, which are
# special-purpose: configurations of the lab declare them routable
# (dns.routable) so that the DNS guard learns them (docs/dnsguard.md).
LAB_ROUTABLE='192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, "2001:db8::/32"'

lab_log() { printf '# lab: %s\n' "$*" >&2; }
lab_die() { printf 'lab: %s\n' "$*" >&2; exit 1; }

# Refuse to operate on anything but a namespace of this run.
lab_ns_check() {
	case $1 in
	"$LAB_ID"-*) ;;
	*) lab_die "refusing to touch namespace '$1': not part of lab $LAB_ID" ;;
	esac
	[ -e "/run/netns/$1" ] || lab_die "namespace $1 does not exist"
	local root_ino ns_ino
	root_ino=$(stat -L -c %i /proc/$$/ns/net)
	ns_ino=$(stat -L -c %i "/run/netns/$1")
	[ "$root_ino" != "$ns_ino" ] || lab_die "namespace $1 is the root namespace: refusing"
}

lab_in() { # ns cmd...
	local ns=$1
	shift
	lab_ns_check "$ns"
	ip netns exec "$ns" "$@"
}
lab_gw() { lab_in "$LAB_GW" "$@"; }
lab_upstream() { lab_in "$LAB_UP" "$@"; }
lab_sb_ns() { echo "$LAB_ID-sb$1"; }
lab_sb() { # index cmd...
	local i=$1
	shift
	lab_in "$(lab_sb_ns "$i")" "$@"
}
lab_sb_ip4() { echo "10.203.0.$((10 + $1))"; }
lab_sb_ip6() { echo "fd00:203::$((10 + $1))"; }
lab_sb_mac() { printf '02:00:00:cb:00:%02x\n' $((10 + $1)); }
lab_sb_port() { echo "pcv$1"; } # bridge port (gateway side of the veth)

# Kill what runs in a namespace, then delete it.
_lab_ns_del() {
	local ns=$1 pids
	pids=$(ip netns pids "$ns" 2>/dev/null)
	[ -z "$pids" ] || kill -9 $pids 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	rm -rf "/etc/netns/$ns"
}

# Remove namespaces left by runs whose shell is gone.
lab_clean_stale() {
	local ns pid
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		case $ns in "$LAB_PREFIX"[0-9]*-*) ;; *) continue ;; esac
		pid=${ns#"$LAB_PREFIX"}
		pid=${pid%%-*}
		if ! kill -0 "$pid" 2>/dev/null; then
			lab_log "removing stale namespace $ns"
			_lab_ns_del "$ns"
		fi
	done
}

_lab_ns_add() {
	local ns=$1
	case $ns in "$LAB_ID"-*) ;; *) lab_die "bad namespace name $ns" ;; esac
	ip netns add "$ns" || lab_die "cannot create namespace $ns"
	LAB_NAMESPACES="${LAB_NAMESPACES:-} $ns"
	lab_in "$ns" ip link set lo up
	lab_in "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
}

lab_certs() {
	local d=$LAB_DIR/pki
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=portcullis lab CA $LAB_ID" -keyout "$d/ca.key" -out "$d/ca.pem" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null ||
		lab_die "openssl: lab CA"
	_lab_leaf() { # name CA-prefix SAN...
		local n=$1 ca=$2 san
		shift 2
		san=$(printf '%s,' "$@")
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$n" \
			-keyout "$d/$n.key" -out "$d/$n.csr" 2>/dev/null || lab_die "openssl: key $n"
		printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "${san%,}" >"$d/$n.ext"
		openssl x509 -req -in "$d/$n.csr" -CA "$d/$ca.pem" -CAkey "$d/$ca.key" \
			-CAcreateserial -days 2 -extfile "$d/$n.ext" -out "$d/$n.pem" 2>/dev/null ||
			lab_die "openssl: sign $n"
	}
	_lab_leaf api.github.test ca DNS:api.github.test DNS:www.github.test IP:$LAB_API4 IP:$LAB_API6
	_lab_leaf pypi.test ca DNS:pypi.test DNS:a.chain.test DNS:b.chain.test
	_lab_leaf paste.evil.test ca DNS:paste.evil.test
	_lab_leaf short-ttl.test ca DNS:short-ttl.test
	_lab_leaf cdn.test ca DNS:cdn-good.test DNS:cdn-evil.test
	_lab_leaf direct ca IP:$LAB_DIRECT4
	_lab_leaf not-wrong-cert.test ca DNS:not-wrong-cert.test
	# untrusted.test: a CA of its own that nobody trusts.
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=untrusted CA" -keyout "$d/rogue-ca.key" -out "$d/rogue-ca.pem" \
		-addext basicConstraints=critical,CA:TRUE 2>/dev/null || lab_die "openssl: rogue CA"
	_lab_leaf untrusted.test rogue-ca DNS:untrusted.test
	LAB_CA=$d/ca.pem
}

lab_dns_start() {
	local d=$LAB_DIR
	# Authoritative for .test only; everything else is NXDOMAIN/REFUSED, the
	# way an isolated lab should be. --log-queries is the "what reached the
	# resolver" evidence that refusal tests read.
	lab_upstream dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-poll \
		--bind-interfaces --listen-address=$LAB_RESOLVER4,$LAB_RESOLVER6 --port=53 \
		--user=root --group=root --pid-file="$d/dnsmasq.pid" \
		--log-queries=extra --log-facility="$d/dnsmasq.log" --local=/test/ --local-ttl=300 \
		--host-record=api.github.test,$LAB_API4,$LAB_API6 \
		--cname=www.github.test,api.github.test \
		--host-record=pypi.test,$LAB_PYPI4 \
		--cname=a.chain.test,b.chain.test --cname=b.chain.test,pypi.test \
		--host-record=paste.evil.test,$LAB_PASTE4 \
		--host-record=short-ttl.test,$LAB_SHORT4,2 \
		--host-record=wrong-cert.test,$LAB_WRONGCERT4 \
		--host-record=untrusted.test,$LAB_UNTRUSTED4 \
		--host-record=cdn-good.test,$LAB_CDN4,$LAB_CDN6 \
		--host-record=cdn-evil.test,$LAB_CDN4,$LAB_CDN6 \
		--host-record=ssh.test,$LAB_SSH4,$LAB_SSH6 \
		--host-record=meta.evil.test,$LAB_META4 \
		--host-record=loop.evil.test,127.0.0.1,::1 \
		--host-record=internal.evil.test,$LAB_INTERNAL4 \
		--host-record=cgnat.evil.test,$LAB_CGNAT4 \
		--host-record=ula.evil.test,$LAB_ULA6 \
		--host-record=bridge.evil.test,$(lab_sb_ip4 2),$(lab_sb_ip6 2) \
		--host-record=gateway.evil.test,$LAB_GW4,$LAB_GW6 \
		--host-record=uplink.evil.test,$LAB_UPLINK_GW4,$LAB_UPLINK_GW6 \
		--host-record=mapped.evil.test,::ffff:$LAB_META4 \
		--txt-record=api.github.test,"v=lab" \
		${LAB_DNS_EXTRA:-} || lab_die "dnsmasq failed to start"
	# A second resolver the sandboxes must never be able to use.
	lab_upstream dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-poll \
		--bind-interfaces --listen-address=$LAB_ROGUE_RESOLVER4 --port=53 \
		--user=root --group=root --pid-file="$d/dnsmasq-rogue.pid" \
		--log-queries --log-facility="$d/dnsmasq-rogue.log" \
		--address=/#/$LAB_PASTE4 || lab_die "rogue dnsmasq failed to start"
}

lab_https_start() {
	local d=$LAB_DIR p=$LAB_DIR/pki
	mkdir -p "$d/www" "$d/nginx-tmp"
	truncate -s "${LAB_BIG_SIZE:-100M}" "$d/www/big"
	_srv() { # listen-addrs server_names cert body
		local l
		for l in $1; do printf '\tserver { listen %s ssl; ' "$l"; printf 'server_name %s; ' "$2"
			printf 'ssl_certificate %s/%s.pem; ssl_certificate_key %s/%s.key;\n' "$p" "$3" "$p" "$3"
			printf '\t\tlocation / { return 200 "%s ok\\n"; }\n' "$4"
			printf '\t\tlocation = /echo { return 200 "host=$host auth=$http_authorization xkey=$http_x_api_key\\n"; }\n'
			printf '\t\tlocation = /big { root %s/www; }\n\t}\n' "$d"
		done
	}
	{
		cat <<-EOF
		daemon on; worker_processes 1; user root root;
		pid $d/nginx.pid; error_log $d/nginx-error.log warn;
		events { worker_connections 1024; }
		http {
			default_type text/plain;
			client_body_temp_path $d/nginx-tmp/body; proxy_temp_path $d/nginx-tmp/proxy;
			fastcgi_temp_path $d/nginx-tmp/fcgi; uwsgi_temp_path $d/nginx-tmp/uwsgi;
			scgi_temp_path $d/nginx-tmp/scgi;
			log_format lab '\$server_addr \$host "\$request" \$status auth="\$http_authorization" xkey="\$http_x_api_key" sni="\$ssl_server_name" reused="\$ssl_session_reused"';
			access_log $d/nginx-access.log lab;
			keepalive_requests 100000;
		EOF
		_srv "$LAB_API4:443 [$LAB_API6]:443" "api.github.test www.github.test" api.github.test api.github.test
		_srv "$LAB_PYPI4:443" "pypi.test a.chain.test b.chain.test" pypi.test pypi.test
		_srv "$LAB_PASTE4:443" "paste.evil.test" paste.evil.test paste.evil.test
		_srv "$LAB_SHORT4:443" "short-ttl.test" short-ttl.test short-ttl.test
		_srv "$LAB_CDN4:443 [$LAB_CDN6]:443" "cdn-good.test cdn-evil.test" cdn.test '$host'
		_srv "$LAB_DIRECT4:443" "_" direct direct
		_srv "$LAB_WRONGCERT4:443" "wrong-cert.test" not-wrong-cert.test wrong-cert.test
		_srv "$LAB_UNTRUSTED4:443" "untrusted.test" untrusted.test untrusted.test
		# plain HTTP on the same names
		printf '\tserver { listen %s:80; listen %s:80; listen %s:80; location / { return 200 "http $host ok\\n"; } }\n' \
			"$LAB_API4" "$LAB_PASTE4" "$LAB_DIRECT4"
		echo "}"
	} >"$d/nginx.conf"
	lab_upstream nginx -e "$d/nginx-error.log" -c "$d/nginx.conf" || lab_die "nginx failed to start"
}

lab_echo_start() {
	# TCP echo on ssh.test:22 and UDP echo on :5000, for cidr rules.
	lab_upstream socat -T 30 TCP-LISTEN:22,bind=$LAB_SSH4,fork,reuseaddr EXEC:cat &
	disown
	lab_upstream socat -T 30 "TCP6-LISTEN:22,bind=[$LAB_SSH6],fork,reuseaddr" EXEC:cat &
	disown
	lab_upstream socat -T 30 UDP-RECVFROM:5000,bind=$LAB_SSH4,fork EXEC:cat &
	disown
	# Anything else that reaches the upstream on 203.0.113.99:7 gets logged.
	lab_upstream socat -T 5 TCP-LISTEN:7,bind=$LAB_DIRECT4,fork,reuseaddr \
		SYSTEM:"cat >>$LAB_DIR/direct-7.log" &
	disown
}

# How long (seconds) something may take to come up: $PC_START_TIMEOUT, else
# 120 for a sanitized build (PC_BUILD=build/san: ASan+UBSan daemons need up
# to ~45 s to start on a loaded 2-core machine) or under valgrind
# (PC_VALGRIND=1), else 30. Readiness only: a longer wait costs time when
# something is slow and never changes a verdict.
lab_start_timeout() {
	if [ -n "${PC_START_TIMEOUT:-}" ]; then
		echo "$PC_START_TIMEOUT"
	elif [[ ${PC_BUILD:-build} == *san* ]] || [ -n "${PC_VALGRIND:-}" ]; then
		echo 120
	else
		echo 30
	fi
}

# Poll a command (output discarded) until it succeeds, for at most
# lab_start_timeout seconds; with -p PID, stop waiting once PID is gone.
# 0 when it succeeded.
lab_wait_until() { # [-p pid] command...
	local pid="" deadline
	if [ "$1" = -p ]; then
		pid=$2
		shift 2
	fi
	deadline=$((SECONDS + $(lab_start_timeout)))
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			"$@" >/dev/null 2>&1
			return
		fi
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# True when a SOCK_SEQPACKET UNIX socket accepts a connection: a daemon's
# socket file may outlive the daemon (it runs unprivileged at exit and does
# not remove it), so its existence says nothing about readiness.
lab_unix_ready() { # path
	python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])' "$1" 2>/dev/null
}

# Wait until a TCP port answers inside a namespace (readiness, not timing).
lab_wait_tcp() { # ns addr port
	lab_wait_until lab_in "$1" bash -c "exec 3<>/dev/tcp/$2/$3" ||
		lab_die "timed out waiting for $2:$3 in $1"
}

lab_sandbox_add() { # index
	local i=$1 ns port
	ns=$(lab_sb_ns "$i")
	port=$(lab_sb_port "$i")
	_lab_ns_add "$ns"
	ip -n "$LAB_GW" link add "$port" type veth peer name eth0 netns "$ns" ||
		lab_die "veth for sandbox $i"
	lab_gw ip link set "$port" master $LAB_BR
	lab_gw ip link set "$port" type bridge_slave isolated on learning on
	lab_gw ip link set "$port" up
	lab_sb "$i" ip link set eth0 address "$(lab_sb_mac "$i")"
	lab_sb "$i" ip addr add "$(lab_sb_ip4 "$i")/24" dev eth0
	lab_sb "$i" ip -6 addr add "$(lab_sb_ip6 "$i")/64" dev eth0 nodad
	lab_sb "$i" ip link set eth0 up
	lab_sb "$i" ip route add default via $LAB_GW4
	lab_sb "$i" ip -6 route add default via $LAB_GW6
	mkdir -p "/etc/netns/$ns"
	printf 'nameserver %s\n' "$LAB_RESOLVER4" >"/etc/netns/$ns/resolv.conf"
	# getent/curl must not look anywhere but DNS (and /etc/hosts of the host).
	printf 'hosts: files dns\n' >"/etc/netns/$ns/nsswitch.conf"
}

lab_up() { # [sandboxes=2]
	local n=${1:-2} i
	[ "$(id -u)" = 0 ] || lab_die "the lab needs root (network namespaces)"
	command -v dnsmasq >/dev/null && command -v nginx >/dev/null || lab_die "run make deps first"
	lab_clean_stale
	LAB_DIR=$(mktemp -d "/tmp/portcullis-$LAB_ID.XXXXXX")
	chmod 0755 "$LAB_DIR"
	trap lab_down EXIT
	trap 'exit 130' INT TERM
	lab_log "up: $LAB_ID in $LAB_DIR"

	_lab_ns_add "$LAB_GW"
	_lab_ns_add "$LAB_UP"
	# Uplink between gateway and the simulated internet.
	ip -n "$LAB_GW" link add up0 type veth peer name eth0 netns "$LAB_UP" || lab_die "uplink veth"
	lab_gw ip addr add $LAB_UPLINK_GW4/24 dev up0
	lab_gw ip -6 addr add $LAB_UPLINK_GW6/64 dev up0 nodad
	lab_gw ip link set up0 up
	lab_upstream ip addr add $LAB_UPLINK_UP4/24 dev eth0
	lab_upstream ip -6 addr add $LAB_UPLINK_UP6/64 dev eth0 nodad
	lab_upstream ip link set eth0 up
	# The simulated hosts are addresses on the upstream's loopback (this
	# kernel has no dummy interfaces).
	for i in $LAB_RESOLVER4 $LAB_ROGUE_RESOLVER4 $LAB_API4 $LAB_PYPI4 $LAB_PASTE4 $LAB_SHORT4 \
		$LAB_WRONGCERT4 $LAB_UNTRUSTED4 $LAB_CDN4 $LAB_DIRECT4 $LAB_SSH4; do
		lab_upstream ip addr add "$i/32" dev lo
	done
	for i in $LAB_RESOLVER6 $LAB_API6 $LAB_CDN6 $LAB_SSH6; do
		lab_upstream ip -6 addr add "$i/128" dev lo
	done
	lab_upstream ip route add $LAB_SB_NET4 via $LAB_UPLINK_GW4
	lab_upstream ip -6 route add $LAB_SB_NET6 via $LAB_UPLINK_GW6

	# The sandbox bridge. Bridged frames do not go through the inet hooks
	# (bridge-nf-call-* off): sandbox traffic is routed by the gateway.
	lab_gw ip link add $LAB_BR type bridge
	# its random address set as its own: a bridge whose address is not set
	# takes its lowest port's, so a VM's tap joining later could change the
	# gateway's MAC under the sandboxes (and under ESC_GW_MAC)
	lab_gw ip link set $LAB_BR address "$(lab_gw cat /sys/class/net/$LAB_BR/address)"
	lab_gw ip addr add $LAB_GW4/24 dev $LAB_BR
	lab_gw ip -6 addr add $LAB_GW6/64 dev $LAB_BR nodad
	lab_gw ip link set $LAB_BR up
	lab_gw ip route add default via $LAB_UPLINK_UP4
	lab_gw ip -6 route add default via $LAB_UPLINK_UP6
	lab_gw sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
	lab_gw sysctl -qw net.bridge.bridge-nf-call-iptables=0 \
		net.bridge.bridge-nf-call-ip6tables=0 net.bridge.bridge-nf-call-arptables=0 2>/dev/null || true

	for i in $(seq 1 "$n"); do lab_sandbox_add "$i"; done

	lab_certs
	lab_dns_start
	lab_https_start
	lab_echo_start
	lab_wait_tcp "$LAB_UP" $LAB_API4 443
	lab_wait_tcp "$LAB_UP" $LAB_SSH4 22
	# Settle IPv6 (no DAD) and neighbour entries are learned on first use.
	export LAB_ID LAB_DIR LAB_GW LAB_UP LAB_CA
}

lab_down() {
	local ns
	trap - EXIT
	[ -n "${LAB_DIR:-}" ] || return 0
	for f in "$LAB_DIR"/*.pid; do
		[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		case $ns in "$LAB_ID"-*) _lab_ns_del "$ns" ;; esac
	done
	if [ -n "${LAB_KEEP:-}" ]; then lab_log "kept $LAB_DIR"; else rm -rf "$LAB_DIR"; fi
	LAB_DIR=
}
