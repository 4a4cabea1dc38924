#!/bin/bash
# Issue 16/19 session: the backend that runs a batch's messages as they
# are decoded (new) against the one before (old), native alongside; then
# the driver-API and runtime suites on the new binaries.
set -u
R=$PWD; B=$R/.gpu-s13/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/s13; rm -rf $W; mkdir -p $W/lib; ln -sf $B/libvgpu_cuda.so $W/lib/libcuda.so.1
cd $W && cp $R/integration/cuda-tests/{bench.c,common.h,kernels.cu} $R/.gpu-s13/pinned_probe.c . && nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda && nvcc -O2 -o probe pinned_probe.c -lcuda
$B/old-backend --socket $W/so --device cuda:0 > $W/old.log 2>&1 & BO=$!
$B/vgpu-backend --socket $W/sn --device cuda:0 > $W/new.log 2>&1 & BN=$!
for _ in $(seq 100); do [ -S $W/so ] && [ -S $W/sn ] && break; sleep 0.1; done
vg() { env LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/$1 VGPU_LOOPBACK_MEM_MB=512 "${@:2}"; }
nvidia-smi -L | tee $O/device.txt; lscpu | grep -E "Model name|^CPU\(s\)" >> $O/device.txt
{ for i in 1 2; do for s in so sn; do echo "== $s"; VGPU_SOCKET=$W/$s $B/ping 200000; done; done; } 2>&1 | tee $O/ping.txt
{ for i in 1 2; do echo "== native"; ./probe; for s in so sn; do echo "== $s"; vg $s ./probe; done; done; } 2>&1 | tee $O/probe.txt
{ for i in 1 2 3; do echo "== round $i: metric native old new"; ./bench kernels.ptx > bn.txt 2>&1; vg so ./bench kernels.ptx > bo.txt 2>&1; vg sn ./bench kernels.ptx > bnew.txt 2>&1; paste <(grep bench bn.txt) <(grep bench bo.txt | awk '{print $3}') <(grep bench bnew.txt | awk '{print $3}'); done; } 2>&1 | tee $O/bench.txt
kill $BO $BN; wait $BO $BN 2>/dev/null
grep -il panic $W/old.log $W/new.log
cd $R
timeout 200 bash integration/cuda-tests/run-gpu.sh $B /tmp/suite > $O/suite.txt 2>&1; grep -E "passed|^FAIL" $O/suite.txt
timeout 240 bash integration/cuda-tests/run-runtime.sh $B /tmp/runtime > $O/runtime.txt 2>&1; grep -E "passed|^FAIL" $O/runtime.txt
grep -il panic /tmp/suite/*.log /tmp/runtime/*.log 2>/dev/null
exit 0
