#!/usr/bin/env bash
# Puts what the test guest needs from this build into OUT (the guest image
# builder copies OUT onto the guest's /): the OpenCL ICD and its vgpu.icd,
# the OpenCL C suite, the micro-benchmarks, the guest-side scripts.
#
#   integration/stage-guest-files.sh OUT [PROFILE]    (PROFILE: release, default)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: stage-guest-files.sh OUT [PROFILE]}
profile=${2:-release}
rm -rf "$out"
mkdir -p "$out/usr/lib" "$out/etc/OpenCL/vendors" "$out/opt/vgpu/bin"
out=$(cd "$out" && pwd)	# make -C below runs elsewhere
install -m 0755 "$root/target/$profile/libvgpu_opencl.so" "$out/usr/lib/libvgpu_opencl.so"
strip --strip-debug "$out/usr/lib/libvgpu_opencl.so"
echo /usr/lib/libvgpu_opencl.so > "$out/etc/OpenCL/vendors/vgpu.icd"
for prog in "$root"/target/cl-tests/*; do
  [ -x "$prog" ] && [ -f "$prog" ] && install -m 0755 "$prog" "$out/opt/vgpu/bin/"
done
# the micro-benchmarks (integration/bench/c), built for the guest's vm_datapath
make -s -C "$root/integration/bench/c" OUT="$out/opt/vgpu/bin" >/dev/null
install -m 0755 "$root"/integration/guest-files/* "$out/opt/vgpu/bin/"
echo "$out"
