#!/bin/bash
# CUDA checkpoints with device-side copies at the pause: the PyTorch loop,
# the two-stream program and the C loop (PTX, fat binary, cubin), each
# checkpointed with --then exit and restored in a new backend; the
# report's owed_bytes / paused_bytes / pause_ms say where the contents
# were read. Then a checkpoint while the PyTorch loop goes on (no exit).
set -u
R=$PWD; B=$R/.gpu-s3/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 timeout 150 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck1 2>&1 | tee $O/torch-checkpoint.txt | grep -E "^(PASS|FAIL)|passed|figures|ctl:"
CKPT_PROGRAM=checkpoint_streams CKPT_KINDS=ptx timeout 120 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck2 2>&1 | tee $O/streams-checkpoint.txt | grep -E "^(PASS|FAIL)|passed|figures|ctl:"
timeout 200 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck3 2>&1 | tee $O/c-checkpoint.txt | grep -E "^(PASS|FAIL)|passed|figures|ctl:"
echo "== checkpoint while PyTorch trains"
W=/tmp/live; rm -rf $W; mkdir -p $W/lib; ln -sf $B/libvgpu_cuda.so $W/lib/libcuda.so.1
$B/vgpu-backend --socket $W/s --control $W/c --device cuda:0 > $W/backend.log 2>&1 & BK=$!
for _ in $(seq 100); do [ -S $W/s ] && [ -S $W/c ] && break; sleep 0.1; done
LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s VGPU_LOOPBACK_MEM_MB=512 timeout 120 python3 integration/cuda-tests/runtime/torch_ckpt.py 60 50 > $W/prog.txt 2>&1 & PR=$!
for _ in $(seq 600); do grep -q '^PROGRESS 10' $W/prog.txt && break; sleep 0.05; done
for r in 5 0; do $B/vgpu-ctl --control $W/c --json checkpoint $W/k$r.ckpt --rounds $r; echo; done | tee $O/live-ctl.txt
$B/vgpu-ctl --control $W/c --json checkpoint $W/kc.ckpt --copy-on-write | tee -a $O/live-ctl.txt; echo
wait $PR; echo "program rc=$?"; tail -2 $W/prog.txt
kill $BK; wait $BK 2>/dev/null
