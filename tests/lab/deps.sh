#!/bin/sh
# Install every build and test dependency from Debian's archive, and the
# system users the daemons drop to. Idempotent; quiet when all is there.
set -eu

PKGS="build-essential clang clang-format libclang-rt-14-dev pkg-config
libnetfilter-queue-dev libnftnl-dev libmnl-dev libldns-dev libsodium-dev
libyaml-dev libssl-dev libseccomp-dev check libsubunit-dev libpsl-dev publicsuffix libncurses-dev tmux
nftables iptables iproute2 conntrack tcpdump
dnsmasq-base nginx-light openssl curl dnsutils socat python3 python3-h11 python3-cryptography iperf3 iputils-ping squid-openssl
rsyslog rsyslog-openssl gnuplot-nox dnsperf debhelper lintian debootstrap valgrind
systemd man-db logrotate prometheus
frama-c-base
qemu-system-x86 busybox-static lz4
libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing packages:$missing (run as root to install them)" >&2
		exit 1
	fi
	echo "deps: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get -qq update >/dev/null
	# Test peers (nginx, rsyslog) are started by the tests inside their own
	# namespaces; keep the packages from starting system-wide services on
	# this box while they install (policy-rc.d, only if none is there).
	prc=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		prc=/usr/sbin/policy-rc.d
		printf '#!/bin/sh\nexit 101\n' >"$prc" && chmod +x "$prc"
	fi
	apt-get -qq install -y --no-install-recommends $missing >/dev/null || rc=$?
	[ -z "$prc" ] || rm -f "$prc"
	[ "${rc:-0}" -eq 0 ] || { echo "deps: apt-get install failed" >&2; exit 1; }
fi

# The daemons' own users, as the Debian package creates them; and
# libvirt-qemu, which libvirt's QEMU driver looks up before it reads its
# configuration (libvirt-daemon-system would create it, but would also start
# libvirtd system-wide; tests/integration/sandbox_libvirt_doc.sh runs a
# libvirtd of its own and needs only the user to exist).
for u in portcullis portcullis-log portcullis-vault portcullis-vworker libvirt-qemu; do
	if ! getent passwd "$u" >/dev/null; then
		[ "$(id -u)" -eq 0 ] || { echo "deps: user $u missing (run as root)" >&2; exit 1; }
		useradd --system --no-create-home --home-dir /nonexistent \
			--shell /usr/sbin/nologin --user-group "$u"
	fi
done

