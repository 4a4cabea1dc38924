#!/bin/bash
# Third GPU-machine batch: checks the arg-info fallback, pins the native heap corruption, traces the image failure.
set -u
D=$(cd "$(dirname "$0")" && pwd); O=$1
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/bin/lib
W=$(mktemp -d); mkdir -p $W/nv $W/vg
grep -l -i nvidia /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
cp $(grep -l -i nvidia /etc/OpenCL/vendors/*.icd | head -1) $W/nv/
echo $D/bin/libvgpu_opencl.so > $W/vg/vgpu.icd
start() { $D/bin/vgpu-backend --socket $W/s --device opencl:NVIDIA --log-level debug >> $O/backend-debug.log 2>&1 & B=$!; for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done; }
check() { kill -0 $B 2>/dev/null && echo "backend alive" || { echo "backend died"; rm -f $W/s; start; }; }
start
cd $W
for mode in names fnames; do for len in 256 512 1024 2048 4096; do
  echo "== native $mode $len"; OCL_ICD_VENDORS=$W/nv timeout 30 $D/probe/nvprobe $mode $len 2>&1 | grep -v "warning generated" | tail -4
done; done
echo "== vgpu build matrix (fixed backend)"; OCL_ICD_VENDORS=$W/vg VGPU_SOCKET=$W/s timeout 60 $D/probe/nvprobe build 2>&1 | grep "^build" | cut -c1-120; check
echo "== vgpu image"; OCL_ICD_VENDORS=$W/vg VGPU_SOCKET=$W/s VGPU_LOG=debug timeout 30 $D/probe/nvprobe image 2>&1 | tail -12; check
cd $D/cts/test_conformance
for t in "api/test_api queue_flush_on_release multi_queue_flush_on_release kernel_attributes clone_kernel_with_no_args clone_kernel_with_different_args clone_kernel_with_buf_image_kernels clone_kernel_with_svm_ptrs" "basic/test_basic hostptr"; do
  set -- $t; (cd $(dirname $1) && OCL_ICD_VENDORS=$W/vg VGPU_SOCKET=$W/s VGPU_LOG=debug timeout 90 ./$(basename $1) ${@:2} 2>&1 | grep -v "^\s*$" | grep -v "^ptxas\|Warning: Function" | tail -40); echo "rc $?"; check
done
kill $B
