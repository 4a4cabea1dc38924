#!/bin/bash
# The final library against the backend before this session (no
# signalled copies) and against the final backend.
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/s14g; rm -rf $W; mkdir -p $W/new; ln -sf $B/libvgpu_cuda.so $W/new/libcuda.so.1
cd $W && cp $R/integration/cuda-tests/{common.h,pinned_sync.c} $R/.gpu-s14/sweep.c . && nvcc -O2 -o pinned_sync pinned_sync.c -lcuda && nvcc -O2 -o sweep sweep.c -lcuda
RUST_LOG=info $B/old-backend --socket $W/so --device cuda:0 > $W/old.log 2>&1 &
RUST_LOG=info $B/vgpu-backend --socket $W/sn --device cuda:0 > $W/new.log 2>&1 &
for _ in $(seq 100); do [ -S $W/so ] && [ -S $W/sn ] && break; sleep 0.1; done
for s in so sn; do echo "== backend $s"; env LD_LIBRARY_PATH=$W/new VGPU_SOCKET=$W/$s VGPU_LOOPBACK_MEM_MB=512 RUST_LOG=info ./pinned_sync; echo "rc=$?"; env LD_LIBRARY_PATH=$W/new VGPU_SOCKET=$W/$s VGPU_LOOPBACK_MEM_MB=512 ./sweep; done > $O/fallback.txt 2>&1
kill %1 %2
