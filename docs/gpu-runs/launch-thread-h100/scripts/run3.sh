#!/bin/bash
# H100, final tree: the CUDA suites, ping and probes (cuda-final.sh), then
# the OpenCL harness (round trip, enqueue, bandwidth, workloads).
set -u
O=${OUT:-/tmp/out}; mkdir -p $O/cuda $O/opencl
OUT=$O/cuda bash .gpu-s10/final.sh 2>&1 | tail -4
OUT=$O/opencl bash .gpu-s11/run.sh > $O/opencl/harness.txt 2>&1; sed -n '/== Targets/,/^vgpu-bench: no plots/p' $O/opencl/harness.txt
