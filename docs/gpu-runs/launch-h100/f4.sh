#!/bin/bash
# Final tree, H100: driver-API suite, runtime suite, PyTorch checkpoint.
set -u
R=$PWD; B=$R/.gpu-s3/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
timeout 200 bash integration/cuda-tests/run-gpu.sh $B /tmp/cuda > $O/cuda-suite.txt 2>&1
grep -E "^(PASS|FAIL)|passed|launch_rate" $O/cuda-suite.txt | tr '\n' ' '; echo
timeout 240 bash integration/cuda-tests/run-runtime.sh $B /tmp/rt 2>&1 | tee $O/runtime.txt | grep -E "^(PASS|FAIL)|passed|panics"
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 timeout 120 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck 2>&1 | tee $O/torch-checkpoint.txt | grep -E "^(PASS|FAIL)|passed|figures"
CKPT_PROGRAM=checkpoint_streams CKPT_KINDS=ptx timeout 120 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck2 2>&1 | tee $O/streams-checkpoint.txt | grep -E "^(PASS|FAIL)|passed|figures"
