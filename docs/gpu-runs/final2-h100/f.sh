#!/bin/bash
# Merged tree, H100: the CUDA driver-API suite, then the loopback transfer
# bandwidth (NVIDIA OpenCL, PoCL, CUDA; native, copy, peer).
set -u
R=$PWD; B=$R/.gpu-final2/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
echo "== CUDA driver-API suite"
timeout 240 bash integration/cuda-tests/run-gpu.sh $B /tmp/cuda 2>&1 | tee $O/cuda-suite.txt | grep -E "^(PASS|FAIL)|passed|overlap|ratio|query|launch|pinned" | head -40
echo "== transfers"
OUT=$O/datapath timeout 300 bash .gpu-final2/bin/run.sh 2>&1 | grep -E "RESULT|==" | head -60
