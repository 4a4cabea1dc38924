#!/bin/bash
# Seventh GPU-machine batch (wip-cts2): arguments of programs NVIDIA builds
# without argument info, classed by the device's answers (arg_probe.rs).
# The CTS sub-tests that set kernel arguments, natively and through vgpu,
# with the backend's debug log of the probes.
#   verify4.sh DIR OUT      (DIR as verify2.sh)
set -u
D=$(cd "$1" && pwd); O=$2; mkdir -p "$O"
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/bin/lib
W=$(mktemp -d /tmp/verify4.XXXXXX)
mkdir -p /etc/OpenCL/vendors "$W/nv"
grep -l -i nvidia /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
cp "$(grep -l -i nvidia /etc/OpenCL/vendors/*.icd | head -1)" "$W/nv/nvidia.icd"
platform=$(OCL_ICD_VENDORS=$W/nv clinfo --raw 2>/dev/null | sed -n 's/^\[[^]]*\] *CL_PLATFORM_NAME *//p' | head -1)
{
echo "== CTS, kernel arguments (60 s per sub-test)"
pids=()
for side in native vgpu; do
  RUST_LOG=vgpu_backend::executor::opencl::arg_probe=debug,warn \
  CTS_SIDES=$side CTS_TIMEOUT=60 VGPU_BIN_DIR=$D/bin CTS_NATIVE_ICD=$W/nv/nvidia.icd CTS_NATIVE_PLATFORM=$platform \
    CTS_BACKEND_ARGS="--device opencl:NVIDIA" CTS_DEADLINE=$(( $(date +%s) + 100 )) XDG_CACHE_HOME=$W/cache-$side \
    "$D/integration/cts/run.sh" --bin-dir "$D/cts" --out "$W/cts" \
    --suites "test_api:clone_kernel*,set_kernel_arg*,negative_invalid_arg*,negative_set*,get_kernel_arg_info,kernel_attributes,local_arg_size_zero,create_kernels_in_program test_basic:parameter_types,sizeof,hostptr,local_arg_def" \
    > "$W/cts-$side.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
python3 "$D/integration/cts/compare.py" "$W/cts"
for f in "$W"/cts/*/*.tsv; do echo "-- $f"; cat "$f"; done
echo "== backend probe log"
grep -h "without argument info" "$W"/cts/backend.log | sort | uniq -c | head -40
grep -h -i "warn\|error" "$W"/cts/backend.log | head -10
} 2>&1 | tee "$O/verify4-output.txt"
tar -czf "$O/verify4-raw.tar.gz" -C "$W" cts cts-native.log cts-vgpu.log 2>/dev/null
