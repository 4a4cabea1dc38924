#!/bin/bash
# Synchronizations of known-complete work answered by the library: the
# suites, checkpoints, and bench.c old/new with native.
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
timeout 200 bash integration/cuda-tests/run-gpu.sh $B /tmp/suite > $O/suite.txt 2>&1
timeout 240 bash integration/cuda-tests/run-runtime.sh $B /tmp/runtime > $O/runtime.txt 2>&1
{ CKPT_PROGRAM=checkpoint_pinned CKPT_KINDS=ptx CKPT_PAUSE_MS=20 timeout 150 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck1;
  CKPT_PROGRAM=checkpoint_streams CKPT_KINDS=ptx timeout 120 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck2;
  CKPT_KINDS=ptx timeout 120 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck3; } > $O/checkpoint.txt 2>&1
W=/tmp/s14i; rm -rf $W; mkdir -p $W/new $W/old; ln -sf $B/old-libvgpu_cuda.so $W/old/libcuda.so.1; ln -sf $B/libvgpu_cuda.so $W/new/libcuda.so.1
cd $W && cp $R/integration/cuda-tests/{bench.c,common.h,kernels.cu} . && nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda
$B/old-backend --socket $W/so --device cuda:0 > $W/old.log 2>&1 & BO=$!
$B/vgpu-backend --socket $W/sn --device cuda:0 > $W/new.log 2>&1 & BN=$!
for _ in $(seq 100); do [ -S $W/so ] && [ -S $W/sn ] && break; sleep 0.1; done
vg() { env LD_LIBRARY_PATH=$W/$1 VGPU_SOCKET=$W/s${1:0:1} VGPU_LOOPBACK_MEM_MB=512 "${@:2}"; }
{ for i in 1 2 3; do echo "== round $i: metric native old new"; ./bench kernels.ptx > bn.txt 2>&1; vg old ./bench kernels.ptx > bo.txt 2>&1; vg new ./bench kernels.ptx > bnew.txt 2>&1; paste <(grep bench bn.txt) <(grep bench bo.txt | awk '{print $3}') <(grep bench bnew.txt | awk '{print $3}'); done; } > $O/bench.txt 2>&1
kill $BO $BN; wait $BO $BN 2>/dev/null
grep -il panic /tmp/suite/*.log /tmp/runtime/*.log /tmp/ck*/*.log $W/*.log 2>/dev/null
exit 0
