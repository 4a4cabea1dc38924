#!/bin/bash
# Paced looks and no per-chain futex wake: old (before) and new binaries,
# interleaved: Ping, the pinned probe, the suite's bench; a profile of the
# pinned probe; then the driver-API and runtime suites and the PyTorch
# checkpoint on the new binaries.
set -u
R=$PWD; N=$R/.gpu-s4/bin; OLD=$R/.gpu-s4/old; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
PERF="env LD_LIBRARY_PATH=$R/.gpu-s4/perf/lib $R/.gpu-s4/perf/perf"
W=/tmp/s4e; rm -rf $W; mkdir -p $W/new $W/old; cd $W
cp $R/integration/cuda-tests/{bench.c,common.h,kernels.cu} $R/.gpu-s4/pinned_probe.c .
nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda && nvcc -O2 -o pinned_probe pinned_probe.c -lcuda || echo "FAIL nvcc"
ln -sf $N/libvgpu_cuda.so new/libcuda.so.1; ln -sf $OLD/libvgpu_cuda.so old/libcuda.so.1
$N/vgpu-backend --socket $W/n.sock --device cuda:0 > $W/n.log 2>&1 & P1=$!
$OLD/vgpu-backend --socket $W/o.sock --device cuda:0 > $W/o.log 2>&1 & P2=$!
for _ in $(seq 100); do [ -S $W/n.sock ] && [ -S $W/o.sock ] && break; sleep 0.1; done
{
for i in 1 2 3; do
  echo "ping old: $(VGPU_SOCKET=$W/o.sock $OLD/ping 300000)"
  echo "ping new: $(VGPU_SOCKET=$W/n.sock $N/ping 300000)"
done
for i in 1 2 3; do
  echo "native: $(./pinned_probe | tr '\n' ' ')"
  echo "old:    $(LD_LIBRARY_PATH=$W/old VGPU_SOCKET=$W/o.sock VGPU_LOOPBACK_MEM_MB=512 ./pinned_probe | tr '\n' ' ')"
  echo "new:    $(LD_LIBRARY_PATH=$W/new VGPU_SOCKET=$W/n.sock VGPU_LOOPBACK_MEM_MB=512 ./pinned_probe | tr '\n' ' ')"
done
} 2>&1 | tee $O/ab-probe.txt
for i in 1 2; do
  ./bench kernels.ptx > bn$i.txt 2>&1
  LD_LIBRARY_PATH=$W/old VGPU_SOCKET=$W/o.sock VGPU_LOOPBACK_MEM_MB=512 ./bench kernels.ptx > bo$i.txt 2>&1
  LD_LIBRARY_PATH=$W/new VGPU_SOCKET=$W/n.sock VGPU_LOOPBACK_MEM_MB=512 ./bench kernels.ptx > bw$i.txt 2>&1
done
for f in bn1 bo1 bw1 bn2 bo2 bw2; do echo "-- $f"; grep bench $f.txt; done > $O/ab-bench.txt
paste <(grep bench bn1.txt) <(grep bench bo1.txt | awk '{print $3}') <(grep bench bw1.txt | awk '{print $3}') <(grep bench bn2.txt | awk '{print $3}') <(grep bench bo2.txt | awk '{print $3}') <(grep bench bw2.txt | awk '{print $3}') | head -30
echo "== profile of the pinned probe through the new backend"
(for k in 1 2 3 4 5; do LD_LIBRARY_PATH=$W/new VGPU_SOCKET=$W/n.sock VGPU_LOOPBACK_MEM_MB=512 ./pinned_probe > /dev/null; done) & C=$!
sleep 2; $PERF record -a -e cpu-clock -F 10000 -o $W/p.data -- sleep 3 2>&1 | tail -1; wait $C
for c in pinned_probe vring_worker; do echo "== $c"; $PERF report -i $W/p.data --comm $c --no-children --sort dso,sym --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -45; done > $O/probe-profile.txt
kill $P1 $P2; wait $P1 $P2 2>/dev/null
cd $R
echo "== driver-API suite"
timeout 200 bash integration/cuda-tests/run-gpu.sh $N /tmp/cuda > $O/cuda-suite.txt 2>&1
grep -E "^(PASS|FAIL)|passed" $O/cuda-suite.txt | tail -4
echo "== runtime suite"
timeout 240 bash integration/cuda-tests/run-runtime.sh $N /tmp/rt > $O/runtime.txt 2>&1
grep -E "^(PASS|FAIL)|passed|panics" $O/runtime.txt | tail -4
