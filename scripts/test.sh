#!/usr/bin/env bash
# The test command: installs what is missing (scripts/setup.sh), then runs
# every test: unit tests, the daemon against real front-ends, the OpenCL C
# suite natively and through vgpu, the VM tests in the patched QEMU, the
# packages, pyopencl's own tests natively and through vgpu (every test
# passing natively passes through vgpu, but those listed with their reason
# in integration/pyopencl/known-differences.txt), and a fuzz smoke run.
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
echo "test: the Debian packages and the systemd unit's command line"
scripts/test-package.sh
echo "test: pyopencl's own tests, natively and through vgpu"
PYOPENCL_KNOWN=integration/pyopencl/known-differences.txt integration/pyopencl/run.sh
echo "test: fuzz smoke run (libFuzzer with nightly, else the stable sweeps)"
scripts/fuzz.sh --smoke
echo "test: all passed"
