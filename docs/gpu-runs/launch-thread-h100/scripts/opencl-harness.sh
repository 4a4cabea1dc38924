#!/bin/bash
# The OpenCL benchmark harness on the H100 (NVIDIA OpenCL), native and
# vgpu side by side, the backend with --peer-memory and the programs run
# as nobody (the user of a root-started backend's workers), so blocking
# transfers take the staged one-copy path.
set -u
O=${OUT:-/tmp/out}; mkdir -p $O
H=/tmp/hb; rm -rf $H; cp -r $PWD/.gpu-s11/hb $H; chmod -R a+rX $H
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
find $H/root/target/bench-programs -type f -exec touch {} +
export LD_LIBRARY_PATH=$H/bin/lib
GPU=$($H/bin/vgpu-backend --list-devices 2>/dev/null | grep NVIDIA | head -1 | cut -f1)
PLAT=${GPU#opencl:}; PLAT=${PLAT%%:*}
echo "gpu=$GPU platform=$PLAT"; nproc
mkdir -p $H/out; chmod 777 $H/out
cd $H/root && CLTEST_PLATFORM=$PLAT CLTEST_DEVICE=0 timeout 560 $H/bin/vgpu-bench --bin-dir $H/bin --root . --out $H/out/bench \
  --only ${ONLY:-roundtrip,enqueue,bandwidth,workloads} --reps 3 --program-user nobody \
  --backend-arg=--device --backend-arg=$GPU --backend-arg=--peer-memory 2>&1 | tail -60
cp $H/out/bench/BENCHMARKS.md $H/out/bench/bench.json $O/ 2>/dev/null; ls $H/out/bench
