#!/bin/bash
# Worker processes on the GPU machine: the sandbox probe on NVIDIA OpenCL,
# the OpenCL C suite natively and through vgpu on NVIDIA, and the CUDA
# driver-API suite (run-gpu.sh, with cross_vm) through vgpu.
# --no-probe skips the probe (the second run, which only wanted the suites).
set -u
PROBE=1; [ "${1:-}" = --no-probe ] && PROBE=0
R=$PWD; B=$PWD/.carry/w
O=${OUT:-/tmp/out}; mkdir -p $O
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
ls -l /dev/nvidia* | head -5
id; nproc
echo "== devices"; $B/vgpu-backend --list-devices 2>&1
GPU=$($B/vgpu-backend --list-devices 2>/dev/null | grep NVIDIA | head -1 | cut -f1)
echo "gpu=$GPU"
echo "== probe (worker confinement) on $GPU"
if [ $PROBE = 1 ]; then
  timeout 120 $B/vgpu-backend --probe-sandbox --device "$GPU" > $O/probe-nvidia.json 2> $O/probe-nvidia.log; echo "probe rc=$?"
  head -c 3000 $O/probe-nvidia.json; echo; tail -5 $O/probe-nvidia.log
fi
echo "== OpenCL C suite on NVIDIA, native vs vgpu"
W=/tmp/v; rm -rf $W; mkdir -p $W/icd; echo $B/libvgpu_opencl.so > $W/icd/vgpu.icd
$B/vgpu-backend --socket $W/s --control $W/c --device "$GPU" > /dev/null 2> $O/backend-opencl.log &
BK=$!
for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
export CLTEST_PROGRAMS="vector_add matmul reduction_local transpose nbody smith_waterman images"
( cd $W && LD_LIBRARY_PATH=$B/lib OCL_ICD_VENDORS=/etc/OpenCL/vendors/nvidia.icd CLTEST_QUICK=1 sh $R/integration/cl-tests/run-suite.sh $B/cl ) > $O/cl-native.log 2>&1
( cd $W && LD_LIBRARY_PATH=$B/lib OCL_ICD_VENDORS=$W/icd VGPU_SOCKET=$W/s CLTEST_QUICK=1 sh $R/integration/cl-tests/run-suite.sh $B/cl ) > $O/cl-vgpu.log 2>&1
tail -3 $O/cl-native.log; tail -3 $O/cl-vgpu.log
sh integration/cl-tests/run-suite.sh --compare $O/cl-native.log $O/cl-vgpu.log 2>&1 | tail -12
$B/vgpu-ctl --control $W/c status
kill $BK; wait $BK
grep -iE "died|error|sandbox" $O/backend-opencl.log | head -10
echo "== CUDA driver-API suite"
timeout 400 bash integration/cuda-tests/run-gpu.sh $B $O/cuda 2>&1 | grep -vE "^  (matmul|vecadd|globals|streams|cudarc)" | tail -40
grep -iE "died|sandbox|error" $O/cuda/backend.log | head -10
