#!/bin/bash
# Issue 19/16: synchronous page-locked copies answered before the DMA ends
# (the device signals the guest); old (before this session), mid (per-chain
# trims) and new interleaved, native alongside; the suites on new.
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/s14; rm -rf $W; mkdir -p $W/new $W/old $W/mid; for v in old mid; do ln -sf $B/$v-libvgpu_cuda.so $W/$v/libcuda.so.1; done; ln -sf $B/libvgpu_cuda.so $W/new/libcuda.so.1
cd $W && cp $R/integration/cuda-tests/{bench.c,common.h,kernels.cu} $R/.gpu-s14/{pinned_probe.c,pinned_check.c} . && nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda && nvcc -O2 -o probe pinned_probe.c -lcuda && nvcc -O2 -o check pinned_check.c -lcuda
$B/old-backend --socket $W/so --device cuda:0 > $W/old.log 2>&1 & BO=$!
$B/mid-backend --socket $W/sm --device cuda:0 > $W/mid.log 2>&1 & BM=$!
RUST_LOG=info $B/vgpu-backend --socket $W/sn --device cuda:0 > $W/new.log 2>&1 & BN=$!
for _ in $(seq 100); do [ -S $W/so ] && [ -S $W/sn ] && [ -S $W/sm ] && break; sleep 0.1; done
vg() { env LD_LIBRARY_PATH=$W/$1 VGPU_SOCKET=$W/s${1:0:1} VGPU_LOOPBACK_MEM_MB=512 "${@:2}"; }
{ echo "== native"; ./check; echo "== new"; vg new ./check; echo "== new traced"; vg new env VGPU_CUDA_TRACE=stderr ./probe 2>&1 | grep -E "Signalled|Synchronize|dtoh|htod|sync"; } > $O/check.txt 2>&1
{ for i in 1 2; do echo "== native"; ./probe; for s in old mid new; do echo "== $s"; vg $s ./probe; done; done; } > $O/probe.txt 2>&1
{ for i in 1 2 3; do echo "== round $i: metric native old mid new"; ./bench kernels.ptx > bn.txt 2>&1; vg old ./bench kernels.ptx > bo.txt 2>&1; vg mid ./bench kernels.ptx > bm.txt 2>&1; vg new ./bench kernels.ptx > bnew.txt 2>&1; paste <(grep bench bn.txt) <(grep bench bo.txt | awk '{print $3}') <(grep bench bm.txt | awk '{print $3}') <(grep bench bnew.txt | awk '{print $3}'); done; } > $O/bench.txt 2>&1
kill $BO $BN $BM; wait $BO $BN $BM 2>/dev/null
grep -il panic $W/*.log; grep -iE "warn|error" $W/new.log | head -5 > $O/newlog.txt
cd $R
timeout 200 bash integration/cuda-tests/run-gpu.sh $B /tmp/suite > $O/suite.txt 2>&1
timeout 240 bash integration/cuda-tests/run-runtime.sh $B /tmp/runtime > $O/runtime.txt 2>&1
grep -il panic /tmp/suite/*.log /tmp/runtime/*.log 2>/dev/null
exit 0
