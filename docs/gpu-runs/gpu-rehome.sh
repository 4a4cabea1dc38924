#!/bin/bash
# Re-home a running OpenCL program's vGPU PoCL CPU -> NVIDIA GPU -> PoCL, mid-run.
set -u
B=$PWD/.carry/bin
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
$B/vgpu-backend --list-devices
CPU=$($B/vgpu-backend --list-devices | grep -v NVIDIA | head -1 | cut -f1)
GPU=$($B/vgpu-backend --list-devices | grep NVIDIA | head -1 | cut -f1)
echo "cpu=$CPU gpu=$GPU"
W=/tmp/v; rm -rf $W; mkdir -p $W/icd; echo $B/libvgpu_opencl.so > $W/icd/vgpu.icd
ARGS="-m 512 -i 80 -p 1"
( cd $W && CLTEST_PLATFORM=0 $B/checkpoint_loop $ARGS > $W/native.out 2>&1 ); tail -2 $W/native.out
# The guest must see a profile both devices honour: the pool's common profile.
$B/vgpu-backend --device $CPU --write-profile $W/cpu.prof
$B/vgpu-backend --device $GPU --write-profile $W/gpu.prof
$B/vgpu-ctl common-profile $W/cpu.prof $W/gpu.prof -o $W/pool.prof && echo "pool profile written"
$B/vgpu-backend --socket $W/s --control $W/c --device $CPU --profile $W/pool.prof > /dev/null 2> $W/backend.log &
BACKEND=$!
sleep 1
ldconfig -p | grep -i libOpenCL
# The host loader may ignore OCL_ICD_VENDORS: the guest side uses ocl-icd, as a guest would.
LD_LIBRARY_PATH=$PWD/.carry/lib OCL_ICD_VENDORS=$W/icd VGPU_SOCKET=$W/s $B/checkpoint_loop $ARGS > $W/vgpu.out 2>&1 &
P=$!
wait_progress() { while ! grep -q "^PROGRESS $1\$" $W/vgpu.out; do sleep 0.05; if ! kill -0 $P 2>/dev/null; then break; fi; done; }
wait_progress 20
echo "== rehome to GPU at $(grep -c PROGRESS $W/vgpu.out) iterations"
$B/vgpu-ctl --control $W/c rehome --device $GPU
$B/vgpu-ctl --control $W/c status
wait_progress 50
$B/vgpu-ctl --control $W/c status
echo "== rehome back to CPU at $(grep -c PROGRESS $W/vgpu.out) iterations"
$B/vgpu-ctl --control $W/c rehome --device $CPU
wait $P; echo "program exit $?"
$B/vgpu-ctl --control $W/c status
tail -3 $W/vgpu.out
echo "== native:"; grep RESULT $W/native.out; echo "== vgpu re-homed twice:"; grep RESULT $W/vgpu.out
grep -E "re-homed|error|WARN" $W/backend.log | tail
kill $BACKEND; wait $BACKEND 2>/dev/null
cp $W/*.out $W/backend.log $OUT/ 2>/dev/null
