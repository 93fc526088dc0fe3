#!/usr/bin/env bash
# `portcullis sandbox run --vm` against the real guard in the lab's gateway:
# a real QEMU guest (Debian's cloud kernel, make vm-image) on a tap of the
# bridge runs a command through the guard. Its console streams back and its
# exit status passes through; it has the address the launcher assigned on the
# kernel command line; an allowed HTTPS fetch succeeds (the vault injects the
# secret the guest holds only as a placeholder); a host not allowed does not
# resolve and a direct address is refused; the log has the records, the
# certificate verifies, and the tap, rules and files are gone afterwards.
# The accelerator: auto (the default) says which it chose and why, falls
# back to TCG when /dev/kvm does not work (here /dev/null bound over it in
# the launcher's mount namespace), and --accel tcg is taken without a probe.
# The kernel QEMU gets: vmlinux beside vmlinuz when not older, else vmlinuz.
set -u
export PC_TOP=${PC_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
command -v qemu-system-x86_64 >/dev/null ||
	{ echo "1..0 # SKIP qemu-system-x86_64 is not installed (make deps installs qemu-system-x86)"; exit 0; }
. "$PC_TOP/tests/integration/sandbox_setup.bash"

IMG=${PC_VM_IMAGE:-$PC_TOP/build/vm}
sh "$PC_TOP/packaging/vm/mkimage.sh" "$IMG" >/dev/null || { echo "Bail out! make vm-image failed"; exit 1; }
sb_guard_up 1 ghp_VMTEST
VM=(--vm --kernel "$IMG/vmlinuz" --initrd "$IMG/initrd.img")

cat >"$LAB_DIR/vm-inside.sh" <<'EOF2'
echo "first line from the guest"
echo "kernel $(uname -r)"
ip -o -4 addr show dev eth0 | awk '{print "addr4 " $4}'
ip -4 route show default | sed 's/^/route /'
ip -o -6 addr show dev eth0 scope global | awk '{print "addr6 " $4}'
ip -6 route show default | sed 's/^/route6 /'
grep '^nameserver' /etc/resolv.conf | sed 's/^/resolv /'
echo "token=$GITHUB_TOKEN"
curl -sS --max-time 30 -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.test/echo | sed 's/^/api /'
curl -sS --max-time 20 https://pypi.test/ >/dev/null 2>&1; echo "pypi rc=$?"
curl -sSk --max-time 10 https://203.0.113.99/ >/dev/null 2>&1; echo "direct rc=$?"
exit 5
EOF2
before=$(grep -c "Bearer $VALUE" "$LAB_DIR/nginx-access.log")
t0=$(date +%s%N)
OUT=$(gw_pc sandbox run "${VM[@]}" --name vm1 --allow api.github.test --secret GITHUB_TOKEN -- \
	sh -c "$(cat "$LAB_DIR/vm-inside.sh")" 2>&1) && RC=0 || RC=$?
t1=$(date +%s%N)
echo "# sandbox run --vm took $(((t1 - t0) / 1000000)) ms (TCG, load $(cut -d' ' -f1 /proc/loadavg))"
t_eq "the guest command's exit status passes through (5)" 5 "$RC"
t_match "the launcher says it boots a VM and with which accelerator, chosen how" \
	"booting the VM \((software emulation, TCG|KVM), 256 MiB, 1 vCPU\) for sh; accelerator: auto, " "$OUT"
# this host: /dev/kvm opens, but a KVM guest hangs (nested virtualisation);
# where KVM works the probe says so and the VM runs under KVM
echo "# $(printf '%s\n' "$OUT" | grep -o 'accelerator: .*' | head -1)"
t_match "the guest's console streams back" "first line from the guest" "$OUT"
t_match "it is Debian's cloud kernel, not the gateway's namespace" "kernel [0-9.]+-[0-9]+-cloud-amd64" "$OUT"
t_match "the address assigned on the kernel command line" 'addr4 10\.203\.0\.[0-9]+/24' "$OUT"
t_match "a default route via the gateway" "route default via $LAB_GW4" "$OUT"
t_match "the IPv6 address assigned on the kernel command line" 'addr6 fd00:203::[0-9a-f]+/64' "$OUT"
t_match "an IPv6 default route via the gateway" "route6 default via $LAB_GW6" "$OUT"
t_nomatch "no error from the guest's network set-up" "^ip: " "$OUT"
t_match "the configured resolver" "resolv nameserver $LAB_RESOLVER4" "$OUT"
t_match "the guest holds the placeholder, not the secret" "token=$PH\$" "$OUT"
t_match "an allowed HTTPS fetch from the guest succeeds, the vault injected the secret" \
	"api host=api.github.test auth=Bearer $PH" "$OUT"
t_eq "the upstream received the real token" "$((before + 1))" \
	"$(grep -c "Bearer $VALUE" "$LAB_DIR/nginx-access.log")"
t_match "a host not allowed does not resolve" "pypi rc=6" "$OUT"
t_match "a direct address is refused" "direct rc=(7|28|35)" "$OUT"
t_eq "the real secret is not in the guest's output" "" "$(printf '%s' "$OUT" | grep -F "$VALUE" || true)"
t_eq "the guest's status line is not passed through" "" "$(printf '%s' "$OUT" | grep -F '@@portcullis-exit' || true)"
t_match "summary: the command in the VM" "sh exited with status 5 in the VM" "$OUT"
t_match "summary: flows allowed" "flows +[1-9][0-9]* allowed" "$OUT"
t_match "summary: the injection" "secrets injected +1 \(GITHUB_TOKEN\)" "$OUT"
CERT=$(printf '%s\n' "$OUT" | sed -n 's/^  certificate *//p')
t_ok "the certificate it issued verifies" gw_pc cert verify "$CERT" --key "$GUARD_DIR/state/appliance.pub"
LOG=$(gw_pc log show | tr '\n' ' ')
t_match "the log has the VM sandbox's start, command and end" \
	"sandbox vm1 created on pcbr0.*command sh started in a VM.*sandbox vm1 ended: sh exited with status 5 in the VM" "$LOG"
t_match "the log has the refused lookup from the guest" "pypi\.test" "$LOG"
t_eq "no tap left on the gateway" "" "$(lab_gw ip -o link show | grep -o 'pcs[0-9]*' || true)"
t_eq "no rule file left" "" "$(ls "$GUARD_DIR/rules.d" | grep -F sandbox-vm1 || true)"
t_eq "the policy is the one from before" "$POLICY0" "$(gw_pc policy hash)"

# the accelerator: auto falls back to TCG when /dev/kvm does not work; here
# it is /dev/null in the launcher's own mount namespace (KVM_GET_API_VERSION
# fails), whatever KVM the host has
OUT=$(lab_gw unshare -m sh -c 'mount --bind /dev/null /dev/kvm 2>/dev/null || [ ! -e /dev/kvm ] || exit 99
	exec "$@"' sh "$GUARD_BIN/portcullis" -c "$GUARD_CONF" sandbox run "${VM[@]}" --name vm2 \
	--allow api.github.test -- sh -c 'echo guest up' 2>&1) && RC=0 || RC=$?
t_eq "with a /dev/kvm that does not work, the VM still runs (auto)" 0 "$RC"
t_match "... under TCG, saying why" \
	"booting the VM \(software emulation, TCG, .*accelerator: auto, (no usable /dev/kvm|/dev/kvm does not answer as KVM)" "$OUT"
t_match "... and the command ran" "guest up" "$OUT"
t_match "the log says which accelerator ran the VM" "command sh started in a VM \(software emulation, TCG; auto, " \
	"$(gw_pc log show | tr '\n' ' ')"

# the kernel QEMU is given: vmlinux beside vmlinuz when it is not older
# (make vm-image writes it after vmlinuz), vmlinuz otherwise. A vmlinux that
# is not a kernel shows which one QEMU got: older, the VM boots (vmlinuz);
# newer, QEMU cannot load it and the run fails
IMG2=$LAB_DIR/img2
mkdir -p "$IMG2"
for f in vmlinuz initrd.img tools.img; do ln -sf "$IMG/$f" "$IMG2/$f"; done
echo "not a kernel" >"$IMG2/vmlinux"
touch -d @0 "$IMG2/vmlinux"
OUT=$(gw_pc sandbox run --vm --kernel "$IMG2/vmlinuz" --initrd "$IMG2/initrd.img" --accel tcg --name vm3 \
	--allow api.github.test -- sh -c 'echo guest up' 2>&1) && RC=0 || RC=$?
t_match "--accel tcg is taken as asked, without a probe" "accelerator: --accel tcg" "$OUT"
t_eq "a vmlinux older than vmlinuz is not used: the VM boots" 0 "$RC"
t_match "... and the command ran" "guest up" "$OUT"
touch "$IMG2/vmlinux"
OUT=$(gw_pc sandbox run --vm --kernel "$IMG2/vmlinuz" --initrd "$IMG2/initrd.img" --accel tcg --name vm4 \
	--allow api.github.test -- sh -c 'echo guest up' 2>&1) && RC=0 || RC=$?
t_ok "a vmlinux beside vmlinuz and not older is the kernel QEMU gets (here not a kernel: no boot)" [ "$RC" -ne 0 ]
t_match "... the run says the VM ended without the command's status" "ended without the command's status" "$OUT"
t_nomatch "... and no command ran" "guest up" "$OUT"
OUT=$(gw_pc sandbox run --vm --accel fast --allow api.github.test -- true 2>&1) && RC=0 || RC=$?
t_eq "--accel fast: a usage error (2)" 2 "$RC"
t_match "... naming the choices" "auto, kvm or tcg" "$OUT"

# errors an admin meets
OUT=$(gw_pc sandbox run --vm --kernel /nonexistent --initrd /nonexistent --allow api.github.test -- true 2>&1) && RC=0 || RC=$?
t_eq "no guest image: an error (3)" 3 "$RC"
t_match "... saying how to build one" "make vm-image" "$OUT"
OUT=$(gw_pc sandbox run --mem 64 --allow api.github.test -- true 2>&1) && RC=0 || RC=$?
t_match "--mem without --vm is a usage error" "go with --vm" "$OUT"
gw_stop
t_done
