#!/bin/bash
# Fourth GPU-machine batch: the three fixes, through vgpu only.
set -u
D=$(cd "$(dirname "$0")" && pwd); O=$1
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/bin/lib
grep -l -i nvidia /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
CTS_SIDES=vgpu CTS_TIMEOUT=60 VGPU_BIN_DIR=$D/bin CTS_BACKEND_ARGS="--device opencl:NVIDIA" CTS_DEADLINE=$(( $(date +%s) + 100 )) \
  $D/integration/cts/run.sh --bin-dir $D/cts --out $O/verify \
  --suites "test_compiler:kernel_name_size,get_program_info_kernel_names test_basic:hostptr,image_param,enqueue_map_image test_api:clone_kernel*,kernel_attributes,queue_flush_on_release,multi_queue_flush_on_release,get_program_info_kernel_names,create_kernels_in_program"
for f in $O/verify/vgpu/*.tsv; do echo "== $f"; cat $f; done
tar -czf $O/verify.tar.gz -C $O verify && rm -rf $O/verify
