#!/bin/bash
# Where a synchronous 1 MiB DtoH's time goes through vgpu (profiling build).
set -u
R=$PWD; B=$R/.gpu-perf/binprof; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/p7; mkdir -p $W/lib; cd $W
nvcc -O2 -o pinned_kinds $R/.gpu-perf/pinned_kinds.c -lcuda || exit 1
ln -sf $B/libvgpu_cuda.so lib/libcuda.so.1
RUST_LOG=warn $B/vgpu-backend --socket $W/s --device cuda:0 > $O/backend-prof-dtoh.log 2>&1 &
BK=$!; for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
./pinned_kinds | head -2
LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s VGPU_LOOPBACK_MEM_MB=512 VGPU_CUDA_TRACE=$O/trace-pinned.txt ./pinned_kinds
kill $BK; wait $BK 2>/dev/null
grep "prof: dtoh" $O/backend-prof-dtoh.log | sed 's/.*prof:/prof:/' | head -8
grep -E "CuMemcpy|cuMemcpy" $O/trace-pinned.txt
