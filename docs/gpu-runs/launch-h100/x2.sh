#!/bin/bash
# Two GPUs: a PyTorch training loop and the C checkpoint loop checkpointed
# on cuda:0 (vgpu-ctl checkpoint --then exit), the backend restarted with
# --restore on cuda:1; the program goes on and must print what a native
# run prints.
set -u
R=$PWD; B=$R/.gpu-s3/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi -L | tee $O/gpus.txt
echo "== torch: cuda:0 -> cuda:1"
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 CKPT_RESTORE_DEVICE=cuda:1 timeout 240 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck1 2>&1 | tee $O/torch-rehome.txt | grep -vE "^(native|  state): " | tail -12
echo "== C checkpoint_loop: cuda:0 -> cuda:1"
CKPT_RESTORE_DEVICE=cuda:1 timeout 200 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck2 2>&1 | tee $O/c-rehome.txt | grep -E "^(PASS|FAIL)|passed|figures" | tail -12
grep -h "CUDA arena\|restored" /tmp/ck1/backend-*.log | tail -4
