#!/usr/bin/env bash
# docs/sandbox.md, "Worked example: libvirt", run as written: the blocks the
# page marks <!-- lab: libvirt... --> are extracted from the page (never
# retyped; tests/lib/doc_blocks.py) and the run is made twice in the lab's
# gateway, with only its three settings (IMG, CA, DIR) set to the lab's
# paths: with the tap's <interface> as written, then with the bridge port's
# in its place (libvirt makes and removes that tap itself, so the block's
# ip tuntap / ip link del lines go). Each time a real QEMU guest (make
# vm-image) started by libvirt must fetch from the allowed host with its
# placeholder (the upstream receives the real token), have a host not
# allowed refused, and leave no domain and no tap behind.
#
# The libvirtd is the test's own, started in the gateway's namespace and in
# a private mount namespace where libvirt's /etc, /run and /var/{lib,cache,
# log} directories are the test's (empty mount points are made where the
# package did not make them); its QEMU runs as root, without cgroups or a
# security driver. Nothing of the machine's libvirt (if it has one) is used
# or changed.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
for c in qemu-system-x86_64 virsh libvirtd; do
	command -v $c >/dev/null ||
		{ echo "1..0 # SKIP $c is not installed (make deps installs qemu-system-x86, libvirt-daemon, libvirt-clients)"; exit 0; }
done
getent passwd libvirt-qemu >/dev/null ||
	{ echo "1..0 # SKIP user libvirt-qemu missing (make deps creates it)"; exit 0; }
. "$PC_TOP/tests/integration/sandbox_setup.bash"

IMG=${PC_VM_IMAGE:-$PC_TOP/build/vm}
sh "$PC_TOP/packaging/vm/mkimage.sh" "$IMG" >/dev/null || { echo "Bail out! make vm-image failed"; exit 1; }
sb_guard_up 1 ghp_LIBVIRTDOC

LV=$LAB_DIR/libvirt
lv_cleanup() {
	[ ! -s "$LV/pid" ] || kill "$(cat "$LV/pid")" 2>/dev/null
	pkill -f "$LAB_DIR/vm[12]/" 2>/dev/null
	lab_gw ip link del vmtap1 2>/dev/null
}
trap 'lv_cleanup; lab_down' EXIT

mkdir -p "$LV/etc" "$LV/run" "$LV/lib" "$LV/cache" "$LV/log"
cp -r /etc/libvirt/. "$LV/etc/"
# libvirt's QEMU driver looks its default user up before it reads qemu.conf
# (hence libvirt-qemu must exist); this one runs QEMU as root, with nothing
# of the host's cgroups or security modules, and the console a plain file
cat >"$LV/etc/qemu.conf" <<EOF
user = "root"
group = "root"
dynamic_ownership = 0
security_driver = "none"
cgroup_controllers = [ ]
stdio_handler = "file"
EOF
cat >"$LV/etc/libvirtd.conf" <<EOF
unix_sock_rw_perms = "0700"
log_outputs = "3:file:$LV/libvirtd.log"
EOF

BLK=$LAB_DIR/doc-blocks
mkdir -p "$BLK"
python3 "$PC_TOP/tests/lib/doc_blocks.py" "$PC_TOP/docs/sandbox.md" "$BLK" libvirt-tap libvirt-bridge libvirt
t_eq "the page's marked blocks were extracted" 0 $?
t_eq "the tap's and the bridge's interface, then the run" \
	"01-libvirt-tap.sh 02-libvirt-bridge.sh 03-libvirt.sh" "$(cd "$BLK" && echo *)"
RUN=$BLK/03-libvirt.sh
for v in IMG CA DIR; do
	t_eq "the run sets $v once, at the start of a line" 1 "$(grep -c "^$v=" "$RUN")"
done
t_match "the address and resolver on the page are the lab's" \
	"portcullis.gw=$LAB_GW4 portcullis.dns=$LAB_RESOLVER4" "$(cat "$RUN")"
t_match "the bridge on the page is the lab's" "source bridge='$LAB_BR'" "$(cat "$BLK/02-libvirt-bridge.sh")"
# the bridge variant: the page's own bridge <interface> in place of its
# tap's, which must be in the run exactly as the page shows it alone
python3 - "$BLK" <<'EOF'
import sys
d = sys.argv[1]
tap = open(f"{d}/01-libvirt-tap.sh").read()
bridge = open(f"{d}/02-libvirt-bridge.sh").read()
run = open(f"{d}/03-libvirt.sh").read()
if run.count(tap) != 1:
    sys.exit("the run does not have the tap's <interface> as the page shows it")
lines = run.replace(tap, bridge).split("\n")
drop = ("ip tuntap add dev vmtap1 ", "ip link del vmtap1")
kept = [l for l in lines if not l.startswith(drop)]
if len(lines) - len(kept) != 2:
    sys.exit("the run does not have one ip tuntap and one ip link del line for vmtap1")
open(f"{d}/bridge-run.sh", "w").write("\n".join(kept))
EOF
t_eq "the bridge variant was made from the page's blocks" 0 $?

lv_run() { # block dir: the block in the gateway, under the test's libvirtd
	sed -e "s|^IMG=.*|IMG=$IMG|" -e "s|^CA=.*|CA=$GUARD_DIR/state/ca/ca.pem|" \
		-e "s|^DIR=.*|DIR=$2|" "$1" >"$1.lab"
	timeout 300 ip netns exec "$LAB_GW" unshare -m --propagation private \
		env GUARD_BIN="$GUARD_BIN" GUARD_CONF="$GUARD_CONF" bash -c '
	LV=$1
	for d in etc run lib cache log; do
		case $d in etc) m=/etc/libvirt ;; run) m=/run/libvirt ;; *) m=/var/$d/libvirt ;; esac
		mkdir -p "$m" && mount --bind "$LV/$d" "$m" || exit 90
	done
	rm -f "$LV/pid"
	libvirtd -d -p "$LV/pid" -f /etc/libvirt/libvirtd.conf || exit 91
	for _ in $(seq 100); do [ -S /run/libvirt/libvirt-sock ] && break; sleep 0.1; done
	export LIBVIRT_DEFAULT_URI=qemu:///system
	portcullis() { "$GUARD_BIN/portcullis" -c "$GUARD_CONF" "$@"; }
	(set -e; . "$2")
	rc=$?
	echo "domains left: [$(virsh list --all --name | tr -d "\n")]"
	virsh destroy agent >/dev/null 2>&1; virsh undefine agent >/dev/null 2>&1
	kill "$(cat "$LV/pid")"
	exit $rc' sh "$LV" "$1.lab" 2>&1
}

n=0
for variant in tap bridge; do
	n=$((n + 1))
	case $variant in tap) block=$RUN ;; bridge) block=$BLK/bridge-run.sh ;; esac
	dir=$LAB_DIR/vm$n
	before=$(grep -c "Bearer $VALUE" "$LAB_DIR/nginx-access.log")
	OUT=$(lv_run "$block" "$dir") && RC=0 || RC=$?
	printf '%s\n' "$OUT" | t_diag "$(cat)"
	t_eq "$variant: the page's run went to its end" 0 "$RC"
	t_match "$variant: attach proved the port QEMU holds" "check: proven" "$OUT"
	t_match "$variant: the guest's fetch went through the guard with its placeholder" \
		"host=api.github.test auth=Bearer $PH" "$OUT"
	t_eq "$variant: the upstream received the real token" "$((before + 1))" \
		"$(grep -c "Bearer $VALUE" "$LAB_DIR/nginx-access.log")"
	t_match "$variant: the host not allowed was refused" "pypi.test: refused" "$OUT"
	t_eq "$variant: the real secret is not in the guest's console" "" \
		"$(grep -F "$VALUE" "$dir/console" 2>/dev/null || true)"
	t_match "$variant: no domain left" "domains left: \[\]" "$OUT"
	t_eq "$variant: QEMU is gone" "" "$(pgrep -f "$dir/" || true)"
	t_eq "$variant: no tap left" "" "$(lab_gw ip -o link show vmtap1 2>/dev/null || true)"
	t_eq "$variant: the sandbox's rules went with it (the policy is the one from before)" \
		"$POLICY0" "$(gw_pc policy hash)"
done
LOG=$(gw_pc log show | tr '\n' ' ')
t_match "the log has the VM's allowed flows to api.github.test" "vm1.*api\.github\.test" "$LOG"
t_match "the log has the guest's refused lookups" "pypi\.test" "$LOG"
gw_stop
t_done
