#!/bin/bash
# Final merged tree: PyTorch checkpoint mid-training, the C checkpoint
# programs, and the CUDA driver-API suite (streams, async copies, overlap).
set -u
R=$PWD; B=$R/.gpu-final/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
echo "== torch checkpoint"
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 timeout 200 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck 2>&1 | tee $O/torch-checkpoint.txt | grep -vE "^(native|  state): " | tail -14
echo "== C checkpoint programs"
timeout 200 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck2 2>&1 | tee $O/c-checkpoint.txt | grep -E "^(PASS|FAIL)|passed|figures"
CKPT_PROGRAM=checkpoint_streams CKPT_KINDS=ptx timeout 120 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck3 2>&1 | tee $O/streams-checkpoint.txt | grep -E "^(PASS|FAIL)|passed|figures"
echo "== CUDA driver-API suite"
timeout 260 bash integration/cuda-tests/run-gpu.sh $B /tmp/cuda 2>&1 | tee $O/cuda-suite.txt | grep -E "^(PASS|FAIL)|passed|overlap|ratio|query|launch" | head -40
