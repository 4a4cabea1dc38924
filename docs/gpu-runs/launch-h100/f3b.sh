#!/bin/bash
# Merged tree, H100: PyTorch training steps (500 after 20 warm-up; MLP and
# CNN; cold start) native vs vgpu, with the launch thread on and off,
# interleaved twice; final losses with deterministic algorithms.
set -u
R=$PWD; B=$R/.gpu-s3/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
for i in 1 2; do
  for mode in on off; do
    if [ $mode = off ]; then export VGPU_CUDA_LAUNCH_THREAD=0; else unset VGPU_CUDA_LAUNCH_THREAD; fi
    timeout 140 bash integration/cuda-tests/run-runtime.sh $B /tmp/st-$mode$i torch-steps > /tmp/st-$mode$i.txt 2>&1
    echo "-- launch thread $mode, run $i"; grep -E "torch-steps: " /tmp/st-$mode$i.txt | sed 's/^ *torch-steps: //'
  done
done 2>&1 | tee $O/torch-steps-ab.txt
unset VGPU_CUDA_LAUNCH_THREAD
echo "== deterministic training steps, final losses"
W=/tmp/det; rm -rf $W; mkdir -p $W/lib; ln -sf $B/libvgpu_cuda.so $W/lib/libcuda.so.1
$B/vgpu-backend --socket $W/s --device cuda:0 > $W/backend.log 2>&1 & BK=$!
for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
det() { CUBLAS_WORKSPACE_CONFIG=:4096:8 timeout 100 python3 -c "
import sys, torch; torch.backends.cudnn.benchmark = False; torch.use_deterministic_algorithms(True)
sys.argv = ['torch_steps.py', '300']; exec(open('integration/cuda-tests/runtime/torch_steps.py').read())" 2>&1 | tail -1; }
echo "native $(det)" | tee $O/deterministic.txt
echo "vgpu   $(LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s det)" | tee -a $O/deterministic.txt
kill $BK; wait $BK 2>/dev/null
