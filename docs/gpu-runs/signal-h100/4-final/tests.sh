#!/bin/bash
# Final binaries: the driver-API suite (pinned_sync included), the runtime
# suite (PyTorch, CuPy, cudart), and checkpoints taken while signalled
# copies and busy streams run.
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
timeout 200 bash integration/cuda-tests/run-gpu.sh $B /tmp/suite > $O/suite.txt 2>&1
timeout 240 bash integration/cuda-tests/run-runtime.sh $B /tmp/runtime > $O/runtime.txt 2>&1
{ CKPT_PROGRAM=checkpoint_pinned CKPT_KINDS=ptx CKPT_PAUSE_MS=20 timeout 150 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck1;
  CKPT_PROGRAM=checkpoint_streams CKPT_KINDS=ptx timeout 120 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck2; } > $O/checkpoint.txt 2>&1
grep -il panic /tmp/suite/*.log /tmp/runtime/*.log /tmp/ck1/*.log /tmp/ck2/*.log 2>/dev/null
exit 0
