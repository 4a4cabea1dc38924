#!/bin/bash
# The OpenCL benchmark harness on the H100 (NVIDIA OpenCL), native and
# vgpu side by side: prebuilt programs (made newer than their sources so
# make does nothing), the backend on the NVIDIA device.
set -u
H=$PWD/.gpu-s6/hb; O=${OUT:-/tmp/out}
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
find $H/root/target/bench-programs -type f -exec touch {} +
export LD_LIBRARY_PATH=$H/bin/lib
GPU=$($H/bin/vgpu-backend --list-devices 2>/dev/null | grep NVIDIA | head -1 | cut -f1)
PLAT=${GPU#opencl:}; PLAT=${PLAT%%:*}
echo "gpu=$GPU platform=$PLAT"
cd $H/root && CLTEST_PLATFORM=$PLAT CLTEST_DEVICE=0 timeout 500 $H/bin/vgpu-bench --bin-dir $H/bin --root . --out $O/bench \
  --only ${ONLY:-roundtrip,enqueue,bandwidth,workloads} --reps 3 --backend-arg=--device --backend-arg=$GPU 2>&1 | tail -45
cp $O/bench/BENCHMARKS.md $O/bench/bench.json $O/ 2>/dev/null; ls $O/bench
