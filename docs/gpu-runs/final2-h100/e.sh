#!/bin/bash
# Merged tree, H100: the CUDA runtime suite + training-step bench, the
# training step with deterministic algorithms (native vs vgpu final losses),
# a PyTorch checkpoint mid-training with live copy rounds.
set -u
R=$PWD; B=$R/.gpu-final2/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
echo "== runtime suite"
timeout 300 bash integration/cuda-tests/run-runtime.sh $B /tmp/rt ${TESTS:-} 2>&1 | tee $O/runtime.txt | grep -E "^(PASS|FAIL)|passed|panics"
timeout 150 bash integration/cuda-tests/run-runtime.sh $B /tmp/rt2 torch-steps 2>&1 | tee $O/torch-steps.txt | grep -E "torch-steps|native|vgpu" | head -8
cp /tmp/rt2/torch-steps.json $O/ 2>/dev/null
echo "== deterministic training steps, final losses"
W=/tmp/det; rm -rf $W; mkdir -p $W/lib; ln -sf $B/libvgpu_cuda.so $W/lib/libcuda.so.1
$B/vgpu-backend --socket $W/s --device cuda:0 > $W/backend.log 2>&1 & BK=$!
for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
det() { CUBLAS_WORKSPACE_CONFIG=:4096:8 timeout 100 python3 -c "
import sys, torch; torch.backends.cudnn.benchmark = False; torch.use_deterministic_algorithms(True)
sys.argv = ['torch_steps.py', '300']; exec(open('integration/cuda-tests/runtime/torch_steps.py').read())" 2>&1 | tail -1; }
echo "native $(det)" | tee $O/deterministic.txt
echo "native $(det)" | tee -a $O/deterministic.txt
echo "vgpu   $(LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s det)" | tee -a $O/deterministic.txt
echo "vgpu   $(LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s det)" | tee -a $O/deterministic.txt
kill $BK; wait $BK 2>/dev/null
echo "== torch checkpoint (live rounds)"
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 timeout 150 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck 2>&1 | tee $O/torch-checkpoint.txt | grep -vE "^(native|  state): " | tail -10
