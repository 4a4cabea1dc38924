#!/bin/bash
# The final tree's CUDA suite (posted batches included), PASS lines only.
set -u
B=$PWD/.carry/w; O=${OUT:-/tmp/out}
timeout 300 bash integration/cuda-tests/run-gpu.sh $B $O/cuda > $O/run-gpu.txt 2>&1
grep -E "^PASS|^FAIL|passed,|round_trip|launch_rate" $O/run-gpu.txt
grep -iE "died" $O/cuda/backend.log | head -5
