#!/bin/bash
# A/B on one machine: the ICD without and with posted deferred batches.
set -u
H=$PWD/.carry/hb; O=${OUT:-/tmp/out}
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
find $H/root/target/bench-programs -type f -exec touch {} +
export LD_LIBRARY_PATH=$H/bin/lib
GPU=$($H/bin/vgpu-backend --list-devices 2>/dev/null | grep NVIDIA | head -1 | cut -f1)
PLAT=${GPU#opencl:}; PLAT=${PLAT%%:*}
cd $H/root
for round in 1 2; do for side in bin-old bin; do
  echo "== $side round $round"
  CLTEST_PLATFORM=$PLAT CLTEST_DEVICE=0 timeout 200 $H/bin/vgpu-bench --bin-dir $H/$side --root . --out $O/$side-$round \
    --only enqueue,roundtrip --reps 3 --backend-arg=--device --backend-arg=$GPU 2>&1 | grep -E "^enqueue_rate|clFinish \("
done; done
