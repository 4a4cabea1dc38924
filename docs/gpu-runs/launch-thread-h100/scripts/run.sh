#!/bin/bash
# H100: the cost of an OpenCL event natively (evrate), then the OpenCL
# harness (NVIDIA OpenCL, native and vgpu side by side) with launches that
# ask the driver for no event and one driver cache per loopback backend.
set -u
O=${OUT:-/tmp/out}; mkdir -p $O
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
LD_LIBRARY_PATH=$PWD/.gpu-s11/hb/bin/lib ./.gpu-s12/evrate NVIDIA 2>&1 | tee $O/evrate.txt
OUT=$O bash .gpu-s11/run.sh 2>&1 | tee $O/harness.txt | tail -70
