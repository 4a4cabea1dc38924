#!/bin/bash
# Both CUDA suites, native against vgpu, for regressions.
set -u
R=$PWD; B=$R/.gpu-perf/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
T=integration/cuda-tests
echo "== driver-API suite"
timeout 200 bash $T/run-gpu.sh $B /tmp/cuda > $O/cuda-suite.txt 2>&1; grep -E "^(PASS|FAIL)|passed" $O/cuda-suite.txt | tr '\n' ' '; echo
echo "== runtime suite"
timeout 240 bash $T/run-runtime.sh $B /tmp/rts > $O/runtime-suite.txt 2>&1; grep -E "^(PASS|FAIL)|passed|panics" $O/runtime-suite.txt | tr '\n' ' '; echo
echo "== torch re-home (cuda:0 -> a new executor on cuda:0) mid-training"
W=/tmp/rh; rm -rf $W; mkdir -p $W/lib; ln -sf $B/libvgpu_cuda.so $W/lib/libcuda.so.1
python3 $T/runtime/torch_ckpt.py 30 100 > $O/rehome-native.txt 2>/dev/null
RUST_LOG=info $B/vgpu-backend --socket $W/s --control $W/c --device cuda:0 > $O/backend-rehome.log 2>&1 &
BK=$!; for _ in $(seq 100); do [ -S $W/s ] && [ -S $W/c ] && break; sleep 0.1; done
LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s VGPU_LOOPBACK_MEM_MB=512 timeout 120 python3 $T/runtime/torch_ckpt.py 30 100 > $O/rehome-vgpu.txt 2> $W/err &
P=$!
for _ in $(seq 600); do grep -q '^PROGRESS 10' $O/rehome-vgpu.txt && break; sleep 0.05; done
timeout 60 $B/vgpu-ctl --control $W/c rehome --device cuda:0 > $O/rehome-ctl.txt 2>&1; echo "rehome rc=$?"; tail -3 $O/rehome-ctl.txt
wait $P; echo "program rc=$?"; kill $BK; wait $BK 2>/dev/null
if cmp -s $O/rehome-native.txt $O/rehome-vgpu.txt; then echo "PASS torch-rehome (output identical to native)"; else echo "FAIL torch-rehome"; diff $O/rehome-native.txt $O/rehome-vgpu.txt | head; tail -5 $W/err; grep -iE "error|warn" $O/backend-rehome.log | tail -5; fi
