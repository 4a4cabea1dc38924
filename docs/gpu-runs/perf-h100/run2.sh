#!/bin/bash
# Perf session 2: the same after the occupancy/attribute answers and the
# single encoding: clean torch-steps twice, traced once, the bench, the
# PyTorch checkpoint with copy rounds, and both CUDA suites for regressions.
set -u
R=$PWD; B=$R/.gpu-perf/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
T=integration/cuda-tests
echo "== torch-steps x2"
for i in 1 2; do timeout 150 bash $T/run-runtime.sh $B /tmp/rt$i torch-steps 2>&1 | grep -E "torch-steps:" ; cp /tmp/rt$i/torch-steps.json $O/torch-steps-$i.json; done
echo "== torch-steps traced (after the MLP warm-up)"
VGPU_CUDA_TRACE=$O/trace-torch.txt VGPU_CUDA_TRACE_RESET=1 timeout 150 bash $T/run-runtime.sh $B /tmp/rt3 torch-steps 2>&1 | grep -E "torch-steps: .*vgpu"
head -25 $O/trace-torch.txt
echo "== bench"
W=/tmp/b; mkdir -p $W/lib; cd $W; cp $R/$T/*.c $R/$T/*.h $R/$T/kernels.cu .
nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda || echo "FAIL nvcc"
ln -sf $B/libvgpu_cuda.so lib/libcuda.so.1
RUST_LOG=info $B/vgpu-backend --socket $W/s --device cuda:0 > $O/backend-bench.log 2>&1 &
BK=$!; for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
vg() { LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s VGPU_LOOPBACK_MEM_MB=512 "$@"; }
./bench kernels.ptx > $O/bench-native.txt; vg ./bench kernels.ptx > $O/bench-vgpu.txt
VGPU_CUDA_TRACE=$O/trace-bench.txt vg ./bench kernels.ptx > /dev/null
paste $O/bench-native.txt $O/bench-vgpu.txt | head -12
grep -E "CuLaunchKernel|cuLaunchKernel" $O/trace-bench.txt
kill $BK; wait $BK 2>/dev/null
cd $R
echo "== torch checkpoint with copy rounds"
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 timeout 150 bash $T/checkpoint.sh $B /tmp/ck 2>&1 > $O/torch-checkpoint.txt; grep -E "copy round|PASS|FAIL" $O/torch-checkpoint.txt
