#!/bin/bash
# H100: the OpenCL harness with the OpenCL launch thread (default on 16
# CPUs), then enqueue and workloads again with it off, to compare.
set -u
O=${OUT:-/tmp/out}; mkdir -p $O/on $O/off
OUT=$O/on bash .gpu-s11/run.sh 2>&1 | tee $O/on/harness.txt | sed -n '/== Sync/,$p' | head -60
VGPU_OPENCL_LAUNCH_THREAD=0 ONLY=enqueue,workloads OUT=$O/off bash .gpu-s11/run.sh 2>&1 | tee $O/off/harness.txt | sed -n '/== Enqueue/,/== Targets/p'
