#!/bin/bash
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/s14c; rm -rf $W; mkdir -p $W/new $W/exp $W/mid; ln -sf $B/mid-libvgpu_cuda.so $W/mid/libcuda.so.1; ln -sf $B/libvgpu_cuda.so $W/new/libcuda.so.1; ln -sf $B/exp-libvgpu_cuda.so $W/exp/libcuda.so.1
cd $W && cp $R/integration/cuda-tests/common.h $R/.gpu-s14/sweep.c . && nvcc -O2 -o sweep sweep.c -lcuda
$B/mid-backend --socket $W/sm --device cuda:0 > $W/mid.log 2>&1 &
$B/vgpu-backend --socket $W/sn --device cuda:0 > $W/new.log 2>&1 &
for _ in $(seq 100); do [ -S $W/sn ] && [ -S $W/sm ] && break; sleep 0.1; done
for i in 1 2; do echo "== native"; ./sweep; echo "== mid"; env LD_LIBRARY_PATH=$W/mid VGPU_SOCKET=$W/sm VGPU_LOOPBACK_MEM_MB=512 ./sweep; echo "== new"; env LD_LIBRARY_PATH=$W/new VGPU_SOCKET=$W/sn VGPU_LOOPBACK_MEM_MB=512 ./sweep; echo "== exp (all signalled)"; env LD_LIBRARY_PATH=$W/exp VGPU_SOCKET=$W/sn VGPU_LOOPBACK_MEM_MB=512 VGPU_CUDA_TRACE=$O/trace$i.txt ./sweep; done > $O/sweep.txt 2>&1
kill %1 %2
