#!/usr/bin/env bash
# docs/sandbox.md, "Worked example: plain QEMU", run as written: the block
# the page marks <!-- lab: qemu --> is extracted from the page (never
# retyped; tests/lib/doc_blocks.py, as for docs/install.md) and run in the
# lab's gateway with only its three settings (IMG, CA, DIR) set to the lab's
# paths. A real QEMU guest (make vm-image) on the tap the block creates must
# fetch from the allowed host with its placeholder (the upstream receives the
# real token), have a host not allowed refused, and leave nothing behind.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
command -v qemu-system-x86_64 >/dev/null ||
	{ echo "1..0 # SKIP qemu-system-x86_64 is not installed (make deps installs qemu-system-x86)"; exit 0; }
command -v socat >/dev/null || { echo "1..0 # SKIP socat is not installed (make deps)"; exit 0; }
. "$PC_TOP/tests/integration/sandbox_setup.bash"

IMG=${PC_VM_IMAGE:-$PC_TOP/build/vm}
sh "$PC_TOP/packaging/vm/mkimage.sh" "$IMG" >/dev/null || { echo "Bail out! make vm-image failed"; exit 1; }
sb_guard_up 1 ghp_QEMUDOC

BLK=$LAB_DIR/doc-blocks
mkdir -p "$BLK"
python3 "$PC_TOP/tests/lib/doc_blocks.py" "$PC_TOP/docs/sandbox.md" "$BLK" qemu
t_eq "the page's marked block was extracted" 0 $?
t_eq "one qemu block" "01-qemu.sh" "$(cd "$BLK" && ls)"
B=$BLK/01-qemu.sh
for v in IMG CA DIR; do
	t_eq "the block sets $v once, at the start of a line" 1 "$(grep -c "^$v=" "$B")"
done
# the page's settings, the lab's values; everything else as written
sed -i -e "s|^IMG=.*|IMG=$IMG|" -e "s|^CA=.*|CA=$GUARD_DIR/state/ca/ca.pem|" \
	-e "s|^DIR=.*|DIR=$LAB_DIR/vm1|" "$B"
t_match "the address and resolver on the page are the lab's" \
	"portcullis.gw=$LAB_GW4 portcullis.dns=$LAB_RESOLVER4" "$(cat "$B")"
before=$(grep -c "Bearer $VALUE" "$LAB_DIR/nginx-access.log")
OUT=$(lab_gw env GUARD_BIN="$GUARD_BIN" GUARD_CONF="$GUARD_CONF" bash -c '
	portcullis() { "$GUARD_BIN/portcullis" -c "$GUARD_CONF" "$@"; }
	set -e
	. "$1"' sh "$B" 2>&1) && RC=0 || RC=$?
# whatever happened, nothing of the block's stays
[ -r "$LAB_DIR/vm1/pid" ] && kill "$(cat "$LAB_DIR/vm1/pid")" 2>/dev/null
lab_gw ip link del vmtap1 2>/dev/null
printf '%s\n' "$OUT" | t_diag "$(cat)"
t_eq "the page's block ran to its end" 0 "$RC"
t_match "attach proved the tap the VM holds" "check: proven" "$OUT"
t_match "the guest's fetch went through the guard with its placeholder" \
	"host=api.github.test auth=Bearer $PH" "$OUT"
t_eq "the upstream received the real token" "$((before + 1))" \
	"$(grep -c "Bearer $VALUE" "$LAB_DIR/nginx-access.log")"
t_match "the host not allowed was refused" "pypi.test: refused" "$OUT"
t_eq "the real secret is not in the guest's console" "" "$(grep -F "$VALUE" "$LAB_DIR/vm1/console" 2>/dev/null || true)"
LOG=$(gw_pc log show | tr '\n' ' ')
t_match "the log has the VM's allowed flow to api.github.test" "vm1.*api\.github\.test" "$LOG"
t_match "the log has the guest's refused lookup" "pypi\.test" "$LOG"
t_eq "QEMU is gone" "" "$(pgrep -f "$LAB_DIR/vm1/qmp" || true)"
t_eq "no tap left" "" "$(lab_gw ip -o link show vmtap1 2>/dev/null || true)"
t_eq "the policy is the one from before" "$POLICY0" "$(gw_pc policy hash)"
gw_stop
t_done
