#!/usr/bin/env bash
# The test command: installs what is missing (scripts/setup.sh), then runs
# every test: unit tests, the daemon against real front-ends, the OpenCL C
# suite natively and through vgpu, and the VM tests in the patched QEMU.
#
#   scripts/test.sh                 everything
#   VGPU_SKIP_VM=1 scripts/test.sh  without QEMU and the guest image
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "test: cargo test --workspace"
if ! cargo test --workspace 2>&1 | tee target/test.log; then
  echo "test: FAILED (full log: target/test.log)" >&2
  exit 1
fi
echo "test: fuzz smoke run (libFuzzer with nightly, else the stable sweeps)"
scripts/fuzz.sh --smoke
echo "test: all passed"
