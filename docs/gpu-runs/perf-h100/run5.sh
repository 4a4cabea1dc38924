#!/bin/bash
# Where the backend's time per launch goes (a temporary profiling build):
# the launch bench through vgpu with per-launch and per-batch timers.
set -u
R=$PWD; B=$R/.gpu-perf/binprof; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
T=integration/cuda-tests
W=/tmp/b; mkdir -p $W/lib; cd $W; cp $R/$T/*.c $R/$T/*.h $R/$T/kernels.cu .
nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda || echo "FAIL nvcc"
ln -sf $B/libvgpu_cuda.so lib/libcuda.so.1
RUST_LOG=warn $B/vgpu-backend --socket $W/s --device cuda:0 > $O/backend-prof.log 2>&1 &
BK=$!; for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
vg() { LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s VGPU_LOOPBACK_MEM_MB=512 "$@"; }
./bench kernels.ptx | head -3; vg ./bench kernels.ptx | head -3
kill $BK; wait $BK 2>/dev/null
grep prof $O/backend-prof.log | sed 's/.*prof:/prof:/'
