#!/bin/bash
# Final tree on the H100: PyTorch steps (500 after 20 warm-up; MLP, CNN,
# cold start) native vs vgpu twice; deterministic final losses; the
# suite's bench once.
set -u
R=$PWD; B=$R/.gpu-s8/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
for i in 1 2; do
  timeout 140 bash integration/cuda-tests/run-runtime.sh $B /tmp/st$i torch-steps > /tmp/st$i.txt 2>&1
  echo "-- run $i"; grep -E "torch-steps: " /tmp/st$i.txt | sed 's/^ *torch-steps: //'
done 2>&1 | tee $O/torch-steps.txt
W=/tmp/det; rm -rf $W; mkdir -p $W/lib; ln -sf $B/libvgpu_cuda.so $W/lib/libcuda.so.1
$B/vgpu-backend --socket $W/s --device cuda:0 > $W/backend.log 2>&1 & BK=$!
for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
det() { CUBLAS_WORKSPACE_CONFIG=:4096:8 timeout 100 python3 -c "
import sys, torch; torch.backends.cudnn.benchmark = False; torch.use_deterministic_algorithms(True)
sys.argv = ['torch_steps.py', '300']; exec(open('integration/cuda-tests/runtime/torch_steps.py').read())" 2>&1 | tail -1; }
echo "native $(det)" | tee $O/deterministic.txt
echo "vgpu   $(LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s det)" | tee -a $O/deterministic.txt
cd /tmp && cp $R/integration/cuda-tests/{bench.c,common.h,kernels.cu} . && nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda
./bench kernels.ptx > bn.txt 2>&1; LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s VGPU_LOOPBACK_MEM_MB=512 ./bench kernels.ptx > bv.txt 2>&1
paste <(grep bench bn.txt) <(grep bench bv.txt | awk '{print $3}') | tee $O/bench.txt
kill $BK; wait $BK 2>/dev/null
