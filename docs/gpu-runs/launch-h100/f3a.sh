#!/bin/bash
# Merged tree, H100: driver-API suite (+ bench, overlap), bench A/B (launch
# thread and guest-memory registration on/off) three times interleaved
# with native, the runtime suite, the PyTorch checkpoint with live rounds.
set -u
R=$PWD; B=$R/.gpu-s3/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi -L
echo "== driver-API suite"
timeout 200 bash integration/cuda-tests/run-gpu.sh $B /tmp/cuda > $O/cuda-suite.txt 2>&1
grep -E "^(PASS|FAIL)|passed" $O/cuda-suite.txt | tr '\n' ' '; echo
echo "== bench A/B"
W=/tmp/ab; rm -rf $W; mkdir -p $W/lib; cd $W
cp $R/integration/cuda-tests/{bench.c,common.h,kernels.cu} .
nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda || echo "FAIL nvcc"
ln -sf $B/libvgpu_cuda.so lib/libcuda.so.1
$B/vgpu-backend --socket $W/on --device cuda:0 > $W/on.log 2>&1 &
P1=$!
VGPU_CUDA_LAUNCH_THREAD=0 $B/vgpu-backend --socket $W/off --device cuda:0 --cuda-pin-guest-memory 0 > $W/off.log 2>&1 &
P2=$!
for _ in $(seq 100); do [ -S $W/on ] && [ -S $W/off ] && break; sleep 0.1; done
for i in 1 2 3; do
  ./bench kernels.ptx > n$i.txt 2>&1
  LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/on VGPU_LOOPBACK_MEM_MB=512 ./bench kernels.ptx > on$i.txt 2>&1
  LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/off VGPU_LOOPBACK_MEM_MB=512 ./bench kernels.ptx > off$i.txt 2>&1
done
kill $P1 $P2; wait $P1 $P2 2>/dev/null
for f in n1 on1 off1 n2 on2 off2 n3 on3 off3; do echo "-- $f"; grep bench $f.txt; done > $O/bench-ab.txt
awk '/^--/{r=$2} /bench/{print r, $2, $3}' $O/bench-ab.txt | awk '{k=$2; v[$1" "k]=$3; keys[k]=1} END{for(k in keys){printf "%-22s",k; split("n1 on1 off1 n2 on2 off2 n3 on3 off3",rs," "); for(i=1;i<=9;i++) printf " %s=%s",rs[i],v[rs[i]" "k]; print ""}}' | sort
cd $R
echo "== runtime suite"
timeout 240 bash integration/cuda-tests/run-runtime.sh $B /tmp/rt 2>&1 | tee $O/runtime.txt | grep -E "^(PASS|FAIL)|passed|panics"
echo "== torch checkpoint (live rounds)"
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 timeout 120 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck 2>&1 | tee $O/torch-checkpoint.txt | grep -E "^(PASS|FAIL)|passed|figures"
