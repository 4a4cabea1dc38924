#!/bin/bash
# Perf session 1: PyTorch steps with the guest library's trace (CNN only,
# after the warm-ups), the launch/transfer bench with a trace, and the
# PyTorch checkpoint with live copy rounds.
set -u
R=$PWD; B=$R/.gpu-perf/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
T=integration/cuda-tests
echo "== torch-steps (trace: CNN steady state)"
VGPU_CUDA_TRACE=$O/trace-torch-cnn.txt VGPU_CUDA_TRACE_RESET=2 timeout 200 bash $T/run-runtime.sh $B /tmp/rt torch-steps 2>&1 | tee $O/torch-steps.txt | grep -E "torch-steps|panics"
echo "== bench"
W=/tmp/b; mkdir -p $W/lib; cd $W; cp $R/$T/*.c $R/$T/*.h $R/$T/kernels.cu .
nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda || echo "FAIL nvcc"
ln -sf $B/libvgpu_cuda.so lib/libcuda.so.1
RUST_LOG=info $B/vgpu-backend --socket $W/s --device cuda:0 > $O/backend-bench.log 2>&1 &
BK=$!; for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
vg() { LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s VGPU_LOOPBACK_MEM_MB=512 "$@"; }
./bench kernels.ptx > $O/bench-native.txt; vg ./bench kernels.ptx > $O/bench-vgpu.txt
VGPU_CUDA_TRACE=$O/trace-bench.txt vg ./bench kernels.ptx > $O/bench-vgpu-traced.txt
paste $O/bench-native.txt $O/bench-vgpu.txt
kill $BK; wait $BK 2>/dev/null
cd $R
echo "== torch checkpoint with copy rounds"
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 timeout 200 bash $T/checkpoint.sh $B /tmp/ck 2>&1 | tee $O/torch-checkpoint.txt | grep -vE "^(native|  state): " | tail -14
grep -iE "INVALID_HANDLE|CUresult 400|error" /tmp/ck/vgpu-python.err | head -5
