#!/bin/bash
# Run on the GPU machine from the prepared folder (see integration/cts/gpu-machine.sh): ./diag.sh OUT
# Second GPU-machine batch: the causes of the differences of the first.
set -u
D=$(cd "$(dirname "$0")" && pwd); O=$1
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/bin/lib
W=$(mktemp -d); mkdir -p $W/nv $W/vg
grep -l -i nvidia /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
cp $(grep -l -i nvidia /etc/OpenCL/vendors/*.icd | head -1) $W/nv/
echo $D/bin/libvgpu_opencl.so > $W/vg/vgpu.icd
$D/bin/vgpu-backend --socket $W/s --device opencl:NVIDIA --log-level debug > $O/backend-debug.log 2>&1 &
B=$!
for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
{
echo "== probe native"; (cd $W && OCL_ICD_VENDORS=$W/nv $D/probe/nvprobe)
echo "== clinfo diff (native < > vgpu)"
diff <(OCL_ICD_VENDORS=$W/nv clinfo --raw | sed 's/^\[[^]]*\] *//' | sort) <(OCL_ICD_VENDORS=$W/vg VGPU_SOCKET=$W/s clinfo --raw | sed 's/^\[[^]]*\] *//' | sort)
echo "== OpenCV native with -cl-kernel-arg-info"
OCL_ICD_VENDORS=$W/nv OPENCV_OPENCL_RUNTIME=$D/bin/lib/libOpenCL.so.1 OPENCV_OPENCL_DEVICE=:GPU: OPENCV_OPENCL_BUILD_EXTRA_OPTIONS=-cl-kernel-arg-info XDG_CACHE_HOME=$W/c1 \
  timeout 120 python3 $D/integration/opencv/tapi_check.py $O/opencv-native-arginfo.json --expect-device NVIDIA | grep -E "Canny|matchTemplate|of 60"
python3 -c "
import json,sys
for p in ['$O/opencv-native-arginfo.json']:
    r=json.load(open(p))['ops']
    for op in ('Canny_aperture5','matchTemplate_SQDIFF'): print(op, r[op].get('digest','-')[:12], r[op].get('sum'))
"
echo "== probe through vgpu"; (cd $W && OCL_ICD_VENDORS=$W/vg VGPU_SOCKET=$W/s timeout 120 $D/probe/nvprobe); echo "probe rc $?"
kill -0 $B 2>/dev/null && echo "backend alive" || { echo "backend died"; $D/bin/vgpu-backend --socket $W/s --device opencl:NVIDIA --log-level debug >> $O/backend-debug.log 2>&1 & B=$!; sleep 1; }
echo "== CTS through vgpu with the backend at debug"
cd $D/cts/test_conformance
for t in "basic/test_basic hostptr image_param" "api/test_api queue_flush_on_release kernel_attributes" "compiler/test_compiler kernel_name_size"; do
  set -- $t; (cd $(dirname $1) && OCL_ICD_VENDORS=$W/vg VGPU_SOCKET=$W/s timeout 60 ./$(basename $1) ${@:2} 2>&1 | grep -v "^\s*$" | tail -25); echo "rc $?"
  kill -0 $B 2>/dev/null && echo "backend alive" || { echo "backend died"; $D/bin/vgpu-backend --socket $W/s --device opencl:NVIDIA --log-level debug >> $O/backend-debug.log 2>&1 & B=$!; sleep 1; }
done
} > $O/diag.txt 2>&1
cat $O/diag.txt | cut -c1-400
echo "== test_compiler through vgpu without kernel_name_size"
kill $B; wait $B 2>/dev/null
CTS_DEADLINE=$(( $(date +%s) + 150 )) CTS_TIMEOUT=60 CTS_SIDES=vgpu VGPU_BIN_DIR=$D/bin CTS_BACKEND_ARGS="--device opencl:NVIDIA" \
  $D/integration/cts/run.sh --bin-dir $D/cts --suites "test_compiler:!kernel_name_size" --out $W/cts > $O/compiler-rerun.log 2>&1
tail -5 $O/compiler-rerun.log
tar -czf $O/compiler-rerun.tar.gz -C $W cts
gzip -f $O/backend-debug.log
ls -la $O
