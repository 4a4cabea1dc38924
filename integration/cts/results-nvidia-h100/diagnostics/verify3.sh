#!/bin/bash
# Sixth GPU-machine batch (wip-cts2): the library leaves launches over
# CL_KERNEL_WORK_GROUP_SIZE to the device (6e76050). OpenCV's steps and
# its whole T-API check natively and through vgpu, and the CTS sub-tests
# that launch with explicit local sizes, natively and through vgpu.
#   verify3.sh DIR OUT      (DIR as verify2.sh)
set -u
D=$(cd "$1" && pwd); O=$2; mkdir -p "$O"
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/bin/lib
W=$(mktemp -d /tmp/verify3.XXXXXX)
mkdir -p /etc/OpenCL/vendors "$W/nv" "$W/vg"
grep -l -i nvidia /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
nv_icd=$(grep -l -i nvidia /etc/OpenCL/vendors/*.icd | head -1)
cp "$nv_icd" "$W/nv/nvidia.icd"
echo "$D/bin/libvgpu_opencl.so" > "$W/vg/vgpu.icd"
platform=$(OCL_ICD_VENDORS=$W/nv clinfo --raw 2>/dev/null | sed -n 's/^\[[^]]*\] *CL_PLATFORM_NAME *//p' | head -1)
{
echo "== OpenCV T-API check (integration/opencv/run.sh), in the background"
( TAPI_PYTHON=python3 TAPI_NATIVE_ICD=$nv_icd TAPI_LIBOPENCL=$D/bin/lib/libOpenCL.so.1 VGPU_BIN_DIR=$D/bin \
  TAPI_BACKEND_ARGS="--device opencl:NVIDIA" timeout 170 "$D/integration/opencv/run.sh" --out "$W/opencv" > "$W/opencv.log" 2>&1 ) &
ocv=$!
echo "== CTS, local sizes (60 s per sub-test)"
pids=()
for side in native vgpu; do
  CTS_SIDES=$side CTS_TIMEOUT=60 VGPU_BIN_DIR=$D/bin CTS_NATIVE_ICD=$W/nv/nvidia.icd CTS_NATIVE_PLATFORM=$platform \
    CTS_BACKEND_ARGS="--device opencl:NVIDIA" CTS_DEADLINE=$(( $(date +%s) + 90 )) XDG_CACHE_HOME=$W/cache-$side \
    "$D/integration/cts/run.sh" --bin-dir "$D/cts" --out "$W/cts" \
    --suites "test_api:execute_kernel_local_sizes,get_kernel_info,kernel_required_group_size,zero_sized_enqueue,null_required_work_group_size test_basic:enqueued_local_size,local_linear_id,work_item_functions,wg_barrier,barrier,local_arg_def,local_kernel_scope" \
    > "$W/cts-$side.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
python3 "$D/integration/cts/compare.py" "$W/cts"
echo "== tapi_steps native"
(cd "$D/integration/opencv" && OCL_ICD_VENDORS=$W/nv OPENCV_OPENCL_RUNTIME=$D/bin/lib/libOpenCL.so.1 OPENCV_OPENCL_DEVICE=:GPU: \
  XDG_CACHE_HOME=$W/ocv-n timeout 90 python3 tapi_steps.py 2>&1 | grep -v "warning generated")
"$D/bin/vgpu-backend" --socket "$W/s" --device opencl:NVIDIA --log-level warn > "$W/backend.log" 2>&1 &
bp=$!
for _ in $(seq 100); do [ -S "$W/s" ] && break; sleep 0.1; done
echo "== tapi_steps vgpu"
(cd "$D/integration/opencv" && OCL_ICD_VENDORS=$W/vg VGPU_SOCKET=$W/s OPENCV_OPENCL_RUNTIME=$D/bin/lib/libOpenCL.so.1 OPENCV_OPENCL_DEVICE=:GPU: \
  XDG_CACHE_HOME=$W/ocv-v timeout 90 python3 tapi_steps.py 2>&1 | grep -v "warning generated")
kill $bp; wait $bp 2>/dev/null
wait $ocv
echo "== OpenCV T-API check"; cat "$W/opencv.log"
} 2>&1 | tee "$O/verify3-output.txt"
tar -czf "$O/verify3-raw.tar.gz" -C "$W" cts cts-native.log cts-vgpu.log opencv opencv.log backend.log 2>/dev/null
