#!/bin/bash
# Where a round trip's time goes on the GPU host: backend profile, client trace, floors.
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/s14; rm -rf $W; mkdir -p $W/lib; ln -sf $B/libvgpu_cuda.so $W/lib/libcuda.so.1
cd $W && cp $R/integration/cuda-tests/{common.h,kernels.cu} $R/.gpu-s14/{pinned_probe.c,spin.c} . && nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o probe pinned_probe.c -lcuda && gcc -O2 -o spin spin.c
{ lscpu; which perf; nproc; } > $O/host.txt 2>&1
{ ./spin; ./spin; } > $O/floor.txt 2>&1
VGPU_BACKEND_PROFILE=1 RUST_LOG=info $B/vgpu-backend --socket $W/s --device cuda:0 > $W/b.log 2>&1 & BP=$!
for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
{ echo "== native"; ./probe; echo "== vgpu"; env LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s VGPU_LOOPBACK_MEM_MB=512 VGPU_CUDA_TRACE=$O/trace.txt ./probe; VGPU_SOCKET=$W/s $B/ping 200000; } > $O/probe.txt 2>&1
sleep 1; kill $BP; wait $BP 2>/dev/null
grep -v "^\s*$" $W/b.log | grep -iv "debug" | tail -60 > $O/backend.txt
exit 0
