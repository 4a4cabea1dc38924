#!/bin/bash
# Final merged tree on NVIDIA OpenCL: the OpenCL C suite native vs vgpu
# (confined workers), and OpenCV's T-API when cv2 is there.
set -u
R=$PWD; B=$PWD/.carry/w; O=${OUT:-/tmp/out}; mkdir -p $O
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
GPU=$($B/vgpu-backend --list-devices 2>/dev/null | grep NVIDIA | head -1 | cut -f1); echo "gpu=$GPU"
W=/tmp/v; rm -rf $W; mkdir -p $W/icd; echo $B/libvgpu_opencl.so > $W/icd/vgpu.icd
$B/vgpu-backend --socket $W/s --control $W/c --device "$GPU" > /dev/null 2> $O/backend-opencl.log &
BK=$!
for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
export CLTEST_PROGRAMS="vector_add matmul reduction_local transpose nbody smith_waterman images big_transfer"
( cd $W && LD_LIBRARY_PATH=$B/lib OCL_ICD_VENDORS=/etc/OpenCL/vendors/nvidia.icd CLTEST_QUICK=1 timeout 150 sh $R/integration/cl-tests/run-suite.sh $B/cl ) > $O/cl-native.log 2>&1
( cd $W && LD_LIBRARY_PATH=$B/lib OCL_ICD_VENDORS=$W/icd VGPU_SOCKET=$W/s CLTEST_QUICK=1 timeout 150 sh $R/integration/cl-tests/run-suite.sh $B/cl ) > $O/cl-vgpu.log 2>&1
tail -3 $O/cl-native.log; tail -3 $O/cl-vgpu.log
sh integration/cl-tests/run-suite.sh --compare $O/cl-native.log $O/cl-vgpu.log 2>&1 | tail -14
$B/vgpu-ctl --control $W/c status | grep -o '"file_system":"[^"]*"' | head -2
kill $BK; wait $BK
grep -iE "died|error|panic" $O/backend-opencl.log | head -10
if python3 -c "import cv2" 2>/dev/null; then
  echo "== OpenCV T-API"
  TAPI_PYTHON=python3 TAPI_NATIVE_ICD=/etc/OpenCL/vendors/nvidia.icd TAPI_LIBOPENCL=$B/lib/libOpenCL.so.1 \
    TAPI_BACKEND_ARGS="--device $GPU" VGPU_BIN_DIR=$B timeout 300 bash integration/opencv/run.sh --out /tmp/cv > $O/opencv.txt 2>&1
  echo "rc=$?"; tail -25 $O/opencv.txt
else echo "no cv2 on this machine"; fi
