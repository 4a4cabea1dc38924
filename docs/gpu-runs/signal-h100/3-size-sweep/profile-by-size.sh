#!/bin/bash
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/s14d; rm -rf $W; mkdir -p $W/exp; ln -sf $B/exp-libvgpu_cuda.so $W/exp/libcuda.so.1
cd $W && cp $R/integration/cuda-tests/common.h $R/.gpu-s14/one.c . && nvcc -O2 -o one one.c -lcuda
VGPU_BACKEND_PROFILE=1 RUST_LOG=info $B/vgpu-backend --socket $W/sn --device cuda:0 > $W/new.log 2>&1 &
for _ in $(seq 100); do [ -S $W/sn ] && break; sleep 0.1; done
for k in 1024 4096 16384; do ./one $k; env LD_LIBRARY_PATH=$W/exp VGPU_SOCKET=$W/sn VGPU_LOOPBACK_MEM_MB=512 VGPU_CUDA_TRACE=$O/trace$k.txt ./one $k; done > $O/one.txt 2>&1
sleep 1; kill %1; sleep 1
grep -E "Signalled|session profile|vring thread|CuHostRegister" $W/new.log > $O/prof.txt
