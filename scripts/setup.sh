#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks and builds everything:
# Debian packages, the workspace, the patched QEMU and the guest image.
# Safe to run again: each step is skipped when its result is up to date.
#
#   scripts/setup.sh            everything
#   VGPU_SKIP_VM=1 scripts/setup.sh   host parts only (no QEMU, no guest image)
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

PACKAGES=(
  pocl-opencl-icd ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-headers clinfo
  gcc make pkg-config busybox-static cpio xz-utils
  jq curl dpkg-dev binutils util-linux python3-venv
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found: install a Rust toolchain (1.80 or newer), e.g. Debian's cargo or rustup" >&2
  exit 1
fi

echo "setup: building the workspace"
cargo build --workspace --release --quiet
cargo build --workspace --quiet

echo "setup: building the OpenCL test programs"
make -s -C integration/cl-tests OUT="$PWD/target/cl-tests" >/dev/null

if [ "${VGPU_SKIP_VM:-0}" != 1 ]; then
  echo "setup: patched QEMU (cached by content hash)"
  qemu=$(qemu-configs/build-qemu.sh | tail -n 1)
  echo "$qemu" > target/qemu-path
  echo "setup: guest image (cached by content hash)"
  integration/stage-guest-files.sh target/guest-files >/dev/null
  integration/guest-image/build-guest-image.sh target/guest-image target/guest-files | tail -n 2
fi
echo "setup: done"
