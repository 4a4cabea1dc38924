#!/usr/bin/env bash
# The demo: starts vgpu-backend on this host's OpenCL device, boots a Linux
# guest in the patched QEMU with the vhost-user-vgpu device, and runs OpenCL
# programs inside the guest; their kernels run on the host's device.
#
#   scripts/demo.sh [--device SPEC]       (SPEC as for vgpu-backend --device)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

work=$(mktemp -d /tmp/vgpu-demo.XXXXXX)
cleanup() {
  [ -n "${backend_pid:-}" ] && kill "$backend_pid" 2>/dev/null && wait "$backend_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

target/release/vgpu-backend --socket "$work/vgpu.sock" "$@" 2> "$work/backend.log" &
backend_pid=$!
for _ in $(seq 100); do [ -S "$work/vgpu.sock" ] && break; sleep 0.1; done
[ -S "$work/vgpu.sock" ] || { cat "$work/backend.log"; exit 1; }
echo "demo: vgpu-backend is serving: $(grep -o 'serving .*' "$work/backend.log")"

qemu=$(cat target/qemu-path)
accel=tcg
[ "${VGPU_ACCEL:-}" = kvm ] && accel=kvm
echo "demo: booting the guest ($accel) ..."
"$qemu" -machine q35,accel=$accel -cpu max -m 1G -display none -monitor none -nodefaults -no-reboot \
  -object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem \
  -chardev socket,id=vgpu0,path="$work/vgpu.sock" -device vhost-user-vgpu-pci,chardev=vgpu0 \
  -kernel target/guest-image/vmlinux -initrd target/guest-image/initramfs.gz \
  -append "console=ttyS0 quiet vgpu.run=/opt/vgpu/bin/vgpu-demo" \
  -serial stdio | tr -d '\r' | sed -n '/VGPU-GUEST-READY/,$p'
