# docs/install.md, "First protected VM", followed literally: every block the
# page marks <!-- lab: plan|gateway|vm --> is extracted from the page and
# run as written, in order — gateway blocks in a fresh gateway (a network
# namespace with one configured uplink, eth0, and nothing else), vm blocks
# in a "VM" (a namespace whose eth0 is the far end of the tap vnet0) — with
# the plan's variables set to the lab's values. Then the VM must reach the
# allowed host through the guard, and nothing else.
#
# What stands in for what the lab does not have: the package is installed
# with `make install` plus the package's own postinst (apt cannot run
# here), and `systemctl` is a shell function that runs the installed
# units' ExecStartPre/ExecStart/ExecStartPost lines. Both namespaces have a
# private mount namespace whose /etc, /usr, /var and /run are overlays, so
# the page's /etc/portcullis, /etc/nftables.conf, /etc/resolv.conf ... land
# in this run's directory, never on the host.
set -u
. "$PC_TOP/tests/lib/tap.sh"
. "$PC_TOP/tests/lab/lab.sh"

B=$PC_TOP/${PC_BUILD:-build}
case ${PC_BUILD:-build} in /*) B=$PC_BUILD ;; esac
t_need_built portcullis portcullisd portcullis-logd portcullis-vault
for u in portcullis portcullis-log portcullis-vault; do
	getent passwd "$u" >/dev/null || { echo "1..0 # SKIP no user $u (make deps)"; exit 0; }
done
command -v dnsmasq >/dev/null && command -v nginx >/dev/null ||
	{ echo "1..0 # SKIP dnsmasq or nginx missing (make deps)"; exit 0; }
PAGE=$PC_TOP/docs/install.md

# ---- the blocks of the page ------------------------------------------------------
lab_clean_stale
LAB_DIR=$(mktemp -d "/tmp/portcullis-$LAB_ID.XXXXXX")
chmod 0755 "$LAB_DIR"
trap lab_down EXIT
trap 'exit 130' INT TERM
BLK=$LAB_DIR/blocks
mkdir -p "$BLK"
python3 "$PC_TOP/tests/lib/doc_blocks.py" "$PAGE" "$BLK" plan gateway vm
t_eq "the page's marked blocks were extracted" 0 $?
blocks=$(cd "$BLK" && ls)
t_match "one plan block" "^01-plan.sh$" "$(printf '%s\n' "$blocks" | grep plan)"
t_match "gateway blocks (bridge, forwarding, resolver, rules, start, tap, check, log)" '^8$' \
	"$(printf '%s\n' "$blocks" | grep -c gateway)"
t_match "vm blocks (address, checks)" '^2$' "$(printf '%s\n' "$blocks" | grep -c -- -vm)"

# ---- a fresh gateway, an upstream "internet", a VM ------------------------------------
LAB_VM=$LAB_ID-vm
_lab_ns_add "$LAB_GW"
_lab_ns_add "$LAB_UP"
_lab_ns_add "$LAB_VM"
# the uplink, configured as the box came: address and default route
ip -n "$LAB_GW" link add eth0 type veth peer name eth0 netns "$LAB_UP" || lab_die "uplink"
lab_gw ip addr add $LAB_UPLINK_GW4/24 dev eth0
lab_gw ip link set eth0 up
lab_gw ip route add default via $LAB_UPLINK_UP4
lab_gw sysctl -qw net.bridge.bridge-nf-call-iptables=0 net.bridge.bridge-nf-call-ip6tables=0 \
	net.bridge.bridge-nf-call-arptables=0 2>/dev/null || true
lab_upstream ip addr add $LAB_UPLINK_UP4/24 dev eth0
lab_upstream ip link set eth0 up
# (no route back to the sandbox network upstream: only masquerade gets
# the VM's traffic answered)
for a in $LAB_RESOLVER4 $LAB_ROGUE_RESOLVER4 $LAB_API4 $LAB_PYPI4 $LAB_PASTE4 $LAB_SHORT4 \
	$LAB_WRONGCERT4 $LAB_UNTRUSTED4 $LAB_CDN4 $LAB_DIRECT4 $LAB_SSH4; do
	lab_upstream ip addr add "$a/32" dev lo
done
for a in $LAB_RESOLVER6 $LAB_API6 $LAB_CDN6 $LAB_SSH6; do
	lab_upstream ip -6 addr add "$a/128" dev lo nodad
done
# the VM's NIC: eth0 in the VM, the tap vnet0 on the gateway (down, off any bridge)
ip -n "$LAB_GW" link add vnet0 type veth peer name eth0 netns "$LAB_VM" || lab_die "tap"
lab_certs
lab_dns_start
lab_https_start
lab_wait_tcp "$LAB_UP" $LAB_API4 443

# A private mount namespace in ns $1 whose /etc (and $2...) are overlays
# kept under $LAB_DIR/ovl-$1; $LAB_DIR/anchor-$1 holds its pid.
anchor() { # ns dir...
	local ns=$1 o=$LAB_DIR/ovl-$1
	shift
	lab_ns_check "$ns"
	mkdir -p "$o"
	ip netns exec "$ns" unshare -m --propagation private sh -c '
		o=$1; shift
		for d; do
			mkdir -p "$o/$d/up" "$o/$d/work"
			mount -t overlay overlay -o "lowerdir=/$d,upperdir=$o/$d/up,workdir=$o/$d/work" "/$d" || exit 1
		done
		touch "$o/ready"
		exec sleep 3600' sh "$o" "$@" 2>>"$LAB_DIR/anchor.err" &
	echo $! >"$LAB_DIR/anchor-$ns.pid"
	for _ in $(seq 1 100); do
		[ -e "$o/ready" ] && return 0
		sleep 0.05
	done
	lab_die "mount namespace of $ns: $(cat "$LAB_DIR/anchor.err")"
}
in_ns() { # ns cmd...: in that namespace's network and mount namespaces
	local ns=$1
	shift
	nsenter -t "$(cat "$LAB_DIR/anchor-$ns.pid")" -m -n "$@"
}
anchor "$LAB_GW" etc usr var run
anchor "$LAB_VM" etc
t_eq "the gateway's /etc is this run's overlay" "" \
	"$(in_ns "$LAB_GW" sh -c 'touch /etc/pc-walkthrough-probe'; ls /etc/pc-walkthrough-probe 2>/dev/null)"
# The VM's image trusts the internet's CAs (the lab's CA is its internet's).
in_ns "$LAB_VM" sh -c "cat '$LAB_CA' >>/etc/ssl/certs/ca-certificates.crt"

# ---- step 1, as apt would: the package's tree and its postinst ------------------------
out=$(in_ns "$LAB_GW" sh -c "cd '$PC_TOP' && make --no-print-directory install BUILD='${PC_BUILD:-build}' &&
	sh packaging/debian/portcullis.postinst configure" 2>&1) && rc=0 || rc=$?
t_eq "install: make install and the package's postinst (exit 0)" 0 "$rc"
[ "$rc" = 0 ] || t_diag "$(printf '%s\n' "$out" | tail -15)"
t_ok "install: /usr/sbin/portcullis in the gateway" in_ns "$LAB_GW" test -x /usr/sbin/portcullis
t_ok "install: the log key made by the postinst" in_ns "$LAB_GW" test -s /var/lib/portcullis/log.key

# ---- the page's blocks, in order ---------------------------------------------------------
# The lab's values of the plan: its upstream lives in documentation ranges
# (hence dns.routable), its resolver and the allowed host are the lab's.
export UPLINK=eth0 SANDBOX_NET=10.203.0.0/24 GATEWAY=10.203.0.1 VM_ADDR=10.203.0.10 TAP=vnet0 \
	RESOLVER=$LAB_RESOLVER4 ROUTABLE="192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24" \
	ALLOWED_HOST=api.github.test
# systemctl, for the units the package installed: ExecStartPre, ExecStart
# (in the background, its pid where lab_down finds it), ready when it
# serves, then ExecStartPost.
cat >"$LAB_DIR/shim.sh" <<EOF
systemctl() {
	local verb=\$1 u f line
	shift
	case \$verb in
	enable | daemon-reload) return 0 ;;
	start) ;;
	*) echo "systemctl (lab): \$verb is not emulated" >&2; return 1 ;;
	esac
	for u; do
		u=\${u%.service}
		f=/lib/systemd/system/\$u.service
		[ -f "\$f" ] || { echo "systemctl (lab): no unit \$u" >&2; return 1; }
		[ "\$u" = nftables ] && continue
		while read -r line; do \$line || return 1; done < <(sed -n 's/^ExecStartPre=//p' "\$f")
		setsid \$(sed -n 's/^ExecStart=//p' "\$f") </dev/null >>"$LAB_DIR/unit-\$u.log" 2>&1 &
		echo \$! >"$LAB_DIR/unit-\$u.pid"
		for _ in \$(seq 1 200); do
			kill -0 \$! 2>/dev/null || { echo "systemctl (lab): \$u exited" >&2; return 1; }
			case \$u in
			portcullis-logd) [ -S /run/portcullis/logd.sock ] && break ;;
			portcullisd) portcullis status --json >/dev/null 2>&1 && break ;;
			portcullis-vault) [ -S /run/portcullis/vault.sock ] && break ;;
			esac
			sleep 0.05
		done
		while read -r line; do \$line || return 1; done < <(sed -n 's/^ExecStartPost=//p' "\$f")
	done
}
EOF
PLAN=$BLK/01-plan.sh
for b in $blocks; do
	case $b in *-plan.sh) continue ;; *-gateway.sh) ns=$LAB_GW ;; *-vm.sh) ns=$LAB_VM ;; esac
	what="$(basename "$b" .sh): $(grep -v '^\s*#' "$BLK/$b" | head -1)"
	out=$(in_ns "$ns" bash -c ". '$LAB_DIR/shim.sh'; set -e -o pipefail; . '$PLAN'; . '$BLK/$b'" 2>&1) &&
		rc=0 || rc=$?
	printf '%s\n' "$out" >"$LAB_DIR/$b.out"
	t_eq "page block $what (exit 0)" 0 "$rc"
	[ "$rc" = 0 ] || t_diag "$(printf '%s\n' "$out" | tail -15)"
	[ "$rc" = 0 ] || [ "$ns" != "$LAB_GW" ] ||
		t_diag "$(in_ns "$LAB_GW" portcullis check --verbose 2>&1 | grep -v '^  *\[ ok \]' | head -40)"
done

# ---- what the page promises ----------------------------------------------------------
t_match "the VM resolved the allowed host through the guard" "^($LAB_API4|$LAB_API6) +api.github.test" \
	"$(cat "$LAB_DIR/"*-vm.sh.out)"
t_match "the VM reached it over HTTPS: 200" "^200$" "$(cat "$LAB_DIR/"*-vm.sh.out)"
t_match "another name was refused" "example.org: refused, as it should be" \
	"$(cat "$LAB_DIR/"*-vm.sh.out)"
t_match "the upstream served the VM's request (masqueraded: no route back to the VM)" \
	'api.github.test "GET / HTTP/1.1" 200 .*sni="api.github.test"' "$(cat "$LAB_DIR/nginx-access.log")"
t_match "config show: the uplink and the resolver from the file" \
	"uplinks +\[eth0\] +# /etc/portcullis/portcullis.yaml:[0-9]+" "$(cat "$LAB_DIR/"*-gateway.sh.out)"
t_match "the log shows the VM's verdicts" "refused DNS example.org" "$(cat "$LAB_DIR/"*-gateway.sh.out)"
t_match "portcullis check proved containment" "proven" "$(cat "$LAB_DIR/"*-gateway.sh.out)"

# And what it does not say but must hold: nothing else leaves.
vm() { in_ns "$LAB_VM" "$@"; }
t_fail "the VM cannot connect to an address no rule allows" \
	vm curl -s -o /dev/null --max-time 3 "https://$LAB_PASTE4/" -k
rogue_answer() { # a DNS query for paste.evil.test straight to the rogue resolver
	vm python3 - "$LAB_ROGUE_RESOLVER4" <<'PY'
import socket, sys
q = bytes.fromhex("123401000001000000000000057061737465046576696c04746573740000010001")
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.sendto(q, (sys.argv[1], 53))
try:
    a = s.recv(512)
except OSError:
    sys.exit(1)
print("rcode", a[3] & 15)
sys.exit(0 if a[3] & 15 == 0 else 1)  # the guard's own answer is REFUSED
PY
}
t_fail "the VM gets no answer from a resolver not in dns.resolvers (only the guard's REFUSED)" \
	rogue_answer
t_nomatch "the rogue resolver saw no query" "query" "$(cat "$LAB_DIR/dnsmasq-rogue.log" 2>/dev/null)"
t_nomatch "paste.evil.test saw no request" 'paste.evil.test|203.0.113.12 ' "$(cat "$LAB_DIR/nginx-access.log")"
t_ok "the checker has teeth here: the tap's isolation off, portcullis check fails" \
	in_ns "$LAB_GW" sh -c 'bridge link set dev vnet0 isolated off; ! portcullis check >/dev/null 2>&1;
		rc=$?; bridge link set dev vnet0 isolated on; exit $rc'
t_eq "the gateway's nftables.conf kept portcullis's tables (nft -f again)" 0 \
	"$(in_ns "$LAB_GW" sh -c 'nft -f /etc/nftables.conf && nft list table inet portcullis >/dev/null 2>&1 && echo 0')"

t_done
