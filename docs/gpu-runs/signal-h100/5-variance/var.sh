#!/bin/bash
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/s14h; rm -rf $W; mkdir -p $W/new $W/mid; ln -sf $B/libvgpu_cuda.so $W/new/libcuda.so.1; ln -sf $B/mid-libvgpu_cuda.so $W/mid/libcuda.so.1
cd $W && cp $R/integration/cuda-tests/common.h $R/.gpu-s14/sweep.c . && nvcc -O2 -o sweep sweep.c -lcuda
VGPU_BACKEND_PROFILE=1 RUST_LOG=info $B/vgpu-backend --socket $W/sn --device cuda:0 > $W/new.log 2>&1 &
$B/mid-backend --socket $W/sm --device cuda:0 > $W/mid.log 2>&1 &
for _ in $(seq 100); do [ -S $W/sn ] && [ -S $W/sm ] && break; sleep 0.1; done
for i in 1 2 3 4 5; do echo "== native"; ./sweep; echo "== mid"; env LD_LIBRARY_PATH=$W/mid VGPU_SOCKET=$W/sm VGPU_LOOPBACK_MEM_MB=512 ./sweep; echo "== new"; env LD_LIBRARY_PATH=$W/new VGPU_SOCKET=$W/sn VGPU_LOOPBACK_MEM_MB=512 ./sweep; done > $O/var.txt 2>&1
sleep 1; kill %1 %2; sleep 1
grep -E "vring thread|Signalled" $W/new.log > $O/prof.txt
