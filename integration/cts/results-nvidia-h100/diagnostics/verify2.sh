#!/bin/bash
# Fifth GPU-machine batch (wip-cts2): kernel_name_size and the clone test
# natively and through vgpu; canny's work-group limits natively and through
# vgpu (wgprobe); the steps of OpenCV's Canny(apertureSize=5) and
# matchTemplate(TM_SQDIFF) natively and through vgpu (tapi_steps.py).
#   verify2.sh DIR OUT      (DIR: bin/ cts/ integration/ probe/, as diag.sh)
set -u
D=$(cd "$1" && pwd); O=$2; mkdir -p "$O"
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/bin/lib
W=$(mktemp -d /tmp/verify2.XXXXXX)
mkdir -p /etc/OpenCL/vendors "$W/nv" "$W/vg"
grep -l -i nvidia /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
cp "$(grep -l -i nvidia /etc/OpenCL/vendors/*.icd | head -1)" "$W/nv/nvidia.icd"
echo "$D/bin/libvgpu_opencl.so" > "$W/vg/vgpu.icd"
platform=$(OCL_ICD_VENDORS=$W/nv clinfo --raw 2>/dev/null | sed -n 's/^\[[^]]*\] *CL_PLATFORM_NAME *//p' | head -1)
{
echo "== CTS (60 s per sub-test)"
for side in native vgpu; do
  CTS_SIDES=$side CTS_TIMEOUT=60 VGPU_BIN_DIR=$D/bin CTS_NATIVE_ICD=$W/nv/nvidia.icd CTS_NATIVE_PLATFORM=$platform \
    CTS_BACKEND_ARGS="--device opencl:NVIDIA" CTS_DEADLINE=$(( $(date +%s) + 60 )) XDG_CACHE_HOME=$W/cache-$side \
    "$D/integration/cts/run.sh" --bin-dir "$D/cts" --out "$W/cts" \
    --suites "test_compiler:kernel_name_size,get_program_info_kernel_names test_api:create_kernels_in_program,get_program_info_kernel_names,clone_kernel_with_buf_image_kernels,negative_invalid_arg_sampler_size" \
    > "$W/cts-$side.log" 2>&1 &
done
wait
python3 "$D/integration/cts/compare.py" "$W/cts"
for f in "$W"/cts/*/*.tsv; do echo "-- $f"; cat "$f"; done
grep -h -A3 "ERROR" "$W"/cts/vgpu/*/*.log 2>/dev/null | head -40
echo "== backend for the probes"
"$D/bin/vgpu-backend" --socket "$W/s" --device opencl:NVIDIA --log-level warn > "$W/backend.log" 2>&1 &
bp=$!
for _ in $(seq 100); do [ -S "$W/s" ] && break; sleep 0.1; done
echo "== wgprobe: canny kernels, native then vgpu"
for k in "stage1_without_sobel|-D WITHOUT_SOBEL -D cn=1 -D GRP_SIZEX=32 -D GRP_SIZEY=32" \
         "stage1_with_sobel|-D WITH_SOBEL -D cn=1 -D TYPE=uchar -D convert_floatN=convert_float -D floatN=float -D GRP_SIZEX=32 -D GRP_SIZEY=32" \
         "stage2_hysteresis|-D STAGE2 -D PIX_PER_WI=8 -D LOCAL_X=32 -D LOCAL_Y=4"; do
  name=${k%%|*}; opts=${k#*|}
  echo -n "native "; OCL_ICD_VENDORS=$W/nv timeout 30 "$D/probe/wgprobe" "$D/probe/canny.cl" "$name" "$opts"
  echo -n "vgpu   "; OCL_ICD_VENDORS=$W/vg VGPU_SOCKET=$W/s timeout 30 "$D/probe/wgprobe" "$D/probe/canny.cl" "$name" "$opts"
done
echo "== tapi_steps native"
(cd "$D/integration/opencv" && OCL_ICD_VENDORS=$W/nv OPENCV_OPENCL_RUNTIME=$D/bin/lib/libOpenCL.so.1 OPENCV_OPENCL_DEVICE=:GPU: \
  XDG_CACHE_HOME=$W/ocv-n timeout 90 python3 tapi_steps.py 2>&1 | grep -v "warning generated")
echo "== tapi_steps vgpu"
(cd "$D/integration/opencv" && OCL_ICD_VENDORS=$W/vg VGPU_SOCKET=$W/s OPENCV_OPENCL_RUNTIME=$D/bin/lib/libOpenCL.so.1 OPENCV_OPENCL_DEVICE=:GPU: \
  XDG_CACHE_HOME=$W/ocv-v timeout 90 python3 tapi_steps.py 2>&1 | grep -v "warning generated")
kill $bp; wait $bp 2>/dev/null
echo "== backend log"; tail -20 "$W/backend.log"
} 2>&1 | tee "$O/verify2-output.txt"
tar -czf "$O/verify2-raw.tar.gz" -C "$W" cts cts-native.log cts-vgpu.log backend.log 2>/dev/null
