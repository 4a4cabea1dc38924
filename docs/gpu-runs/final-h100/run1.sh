#!/bin/bash
# Final merged tree on the GPU: CUDA runtime suite + training-step bench,
# a PyTorch checkpoint mid-training, and the worker probe on CUDA/NVIDIA.
set -u
R=$PWD; B=$R/.gpu-final/bin; O=${OUT:-/tmp/out}; mkdir -p $O
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export PATH=$PATH:/usr/local/cuda/bin
echo "== probe cuda:0"; timeout 60 $B/vgpu-backend --probe-sandbox --device cuda:0 > $O/probe-cuda.json 2>$O/probe-cuda.log; echo "rc=$?"; head -c 1500 $O/probe-cuda.json; echo
GPU=$($B/vgpu-backend --list-devices 2>/dev/null | grep NVIDIA | head -1 | cut -f1)
echo "== probe $GPU"; timeout 60 $B/vgpu-backend --probe-sandbox --device "$GPU" > $O/probe-ocl.json 2>$O/probe-ocl.log; echo "rc=$?"; head -c 1500 $O/probe-ocl.json; echo
echo "== runtime suite"
timeout 330 bash integration/cuda-tests/run-runtime.sh $B /tmp/rt ${TESTS:-} 2>&1 | tee $O/runtime.txt | grep -E "^(PASS|FAIL)|passed|torch-steps|panics"
cp /tmp/rt/torch-steps.json $O/ 2>/dev/null
echo "== torch checkpoint"
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 timeout 200 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck 2>&1 | tee $O/torch-checkpoint.txt | tail -30
