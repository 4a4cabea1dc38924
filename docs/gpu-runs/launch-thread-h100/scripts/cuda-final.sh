#!/bin/bash
# The merged tree on the H100 (CUDA): the transport's own round trip
# (ping), 1 MiB page-locked copies (pinned_probe), bench.c, the driver-API
# and runtime suites; native and vgpu interleaved.
set -u
R=$PWD; B=$R/.gpu-s10/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/fin; rm -rf $W; mkdir -p $W/lib; ln -sf $B/libvgpu_cuda.so $W/lib/libcuda.so.1
cd $W && cp $R/integration/cuda-tests/{bench.c,common.h,kernels.cu} $R/.gpu-s10/pinned_probe.c . && nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda && nvcc -O2 -o probe pinned_probe.c -lcuda
$B/vgpu-backend --socket $W/s --device cuda:0 > $W/backend.log 2>&1 & BK=$!
for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
vg="env LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s VGPU_LOOPBACK_MEM_MB=512"
{ for i in 1 2 3; do VGPU_SOCKET=$W/s $B/ping 200000; done; } 2>&1 | tee $O/ping.txt
{ for i in 1 2; do echo "== native"; ./probe; echo "== vgpu"; $vg ./probe; done; } 2>&1 | tee $O/probe.txt
{ for i in 1 2; do ./bench kernels.ptx > bn$i.txt 2>&1; $vg ./bench kernels.ptx > bv$i.txt 2>&1; paste <(grep bench bn$i.txt) <(grep bench bv$i.txt | awk '{print $3}'); done; } | tee $O/bench.txt
kill $BK; wait $BK 2>/dev/null
cd $R
timeout 200 bash integration/cuda-tests/run-gpu.sh $B $O/suite > $O/suite.txt 2>&1; grep -E "passed|^FAIL" $O/suite.txt
timeout 280 bash integration/cuda-tests/run-runtime.sh $B $O/runtime > $O/runtime.txt 2>&1; grep -E "passed|^FAIL" $O/runtime.txt
grep -il panic $W/backend.log $O/suite/backend.log $O/runtime/backend-runtime.log
