#!/bin/bash
# Why cuBLAS fails after a PyTorch restore: the same checkpoint run with
# debug logs; and whether the CNN's final loss is stable natively.
set -u
R=$PWD; B=$R/.gpu-final/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
echo "== native torch_steps twice (CNN final loss stability)"
for i in 1 2; do timeout 60 python3 integration/cuda-tests/runtime/torch_steps.py 200 2>/dev/null; done | tee $O/steps-native-twice.txt
echo "== torch checkpoint, debug"
RUST_LOG=debug CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=20 CKPT_PAUSE_MS=100 timeout 200 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck 2>&1 | tail -8
ls -la /tmp/ck
grep -v "procaddr\|cuGetProcAddress" /tmp/ck/vgpu-python.err > /tmp/err.txt
# the part after the restore
n=$(grep -n -m1 -i "reconnect" /tmp/err.txt | cut -d: -f1); echo "reconnect at line $n of $(wc -l < /tmp/err.txt)"
tail -n +${n:-1} /tmp/err.txt | head -c 6000000 > $O/after-restore.txt
grep -iE "error|fail|refus|not supported|CUresult [1-9]" /tmp/err.txt | grep -v "CUresult 201$\|storage get: CUresult 400" | tail -60
grep -iE "warn|error" /tmp/ck/backend-python.log | tail -30
cp /tmp/ck/backend-python.log $O/ 2>/dev/null
