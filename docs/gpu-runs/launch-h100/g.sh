#!/bin/bash
# Launch thread: the driver-API suite (launch_order included), then launch
# rate and pinned copies A/B (launch thread on/off) against native, three
# times interleaved, then a backend profile; then the runtime suite, torch
# steps, deterministic losses, the torch checkpoint.
set -u
R=$PWD; B=$R/.gpu-s3/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi -L
echo "== driver-API suite"
timeout 200 bash integration/cuda-tests/run-gpu.sh $B /tmp/cuda > $O/cuda-suite.txt 2>&1
grep -E "^(PASS|FAIL)|passed|launch_order: impossible" $O/cuda-suite.txt | head -30
echo "== A/B launch thread"
W=/tmp/ab; rm -rf $W; mkdir -p $W/lib; cd $W
cp $R/integration/cuda-tests/{bench.c,common.h,kernels.cu} .
nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda || echo "FAIL nvcc"
ln -sf $B/libvgpu_cuda.so lib/libcuda.so.1
RUST_LOG=info $B/vgpu-backend --socket $W/on --device cuda:0 > $W/on.log 2>&1 &
P1=$!
VGPU_CUDA_LAUNCH_THREAD=0 RUST_LOG=info $B/vgpu-backend --socket $W/off --device cuda:0 --cuda-pin-guest-memory 0 > $W/off.log 2>&1 &
P2=$!
for _ in $(seq 100); do [ -S $W/on ] && [ -S $W/off ] && break; sleep 0.1; done
for i in 1 2 3; do
  ./bench kernels.ptx > n$i.txt 2>&1
  LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/on VGPU_LOOPBACK_MEM_MB=512 ./bench kernels.ptx > on$i.txt 2>&1
  LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/off VGPU_LOOPBACK_MEM_MB=512 ./bench kernels.ptx > off$i.txt 2>&1
done
kill $P1 $P2; wait $P1 $P2 2>/dev/null
grep -E "registered with CUDA|left pageable|cannot register" $W/on.log | head -4
for f in n1 on1 off1 n2 on2 off2 n3 on3 off3; do echo "-- $f"; grep bench $f.txt; done | tee $O/ab.txt
echo "== pinned probe"
cp $R/.gpu-s3/pinned_probe.c . && nvcc -O2 -o pinned_probe pinned_probe.c -lcuda
./pinned_probe | tee $O/probe-native.txt
VGPU_BACKEND_PROFILE=1 RUST_LOG=info $B/vgpu-backend --socket $W/q --device cuda:0 > $W/q.log 2>&1 &
P4=$!
for _ in $(seq 100); do [ -S $W/q ] && break; sleep 0.1; done
LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/q VGPU_LOOPBACK_MEM_MB=512 VGPU_CUDA_TRACE=1 ./pinned_probe > $O/probe-vgpu.txt 2>&1
sleep 1; kill $P4; wait $P4 2>/dev/null
grep -E "us$" $O/probe-vgpu.txt; grep -E "CuMemcpy|CuCtxSync|entry|round" $O/probe-vgpu.txt | head; grep -A12 "session profile" $W/q.log | head -14
echo "== profile"
VGPU_BACKEND_PROFILE=1 RUST_LOG=info $B/vgpu-backend --socket $W/p --device cuda:0 > $W/p.log 2>&1 &
P3=$!
for _ in $(seq 100); do [ -S $W/p ] && break; sleep 0.1; done
LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/p VGPU_LOOPBACK_MEM_MB=512 VGPU_CUDA_TRACE=1 ./bench kernels.ptx > $O/profile-bench.txt 2>&1
sleep 1; kill $P3; wait $P3 2>/dev/null
cp $W/p.log $O/profile-backend.log
grep -A30 "session profile" $W/p.log | head -40
cd $R
echo "== runtime suite"
timeout 240 bash integration/cuda-tests/run-runtime.sh $B /tmp/rt 2>&1 | tee $O/runtime.txt | grep -E "^(PASS|FAIL)|passed|panics"
timeout 120 bash integration/cuda-tests/run-runtime.sh $B /tmp/rt2 torch-steps 2>&1 | tee $O/torch-steps.txt | grep -E "torch-steps|native|vgpu" | head -8
cp /tmp/rt2/torch-steps.json $O/ 2>/dev/null
echo "== torch checkpoint (live rounds)"
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 timeout 120 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck 2>&1 | tee $O/torch-checkpoint.txt | grep -vE "^(native|  state): " | tail -6
