#!/bin/bash
# The CTS and OpenCV's T-API on a machine with an NVIDIA GPU, natively
# (NVIDIA OpenCL) and through vgpu (loopback, the backend on the same
# GPU), in one batch with a hard end: what a short lease on the GPU machine
# allows. Nothing is built there; everything comes from a folder prepared
# on a development machine:
#
#   integration/cts/gpu-machine.sh DIR OUT [SECONDS]
#
# DIR holds bin/ (vgpu-backend, libvgpu_opencl.so, clinfo, lib/libOpenCL.so.1
# from ocl-icd: the machine's own loader may not read OCL_ICD_VENDORS),
# cts/ (a --bin-dir for run.sh) and integration/{cts,opencv}/ (these
# scripts). SECONDS (default 450) is how long the CTS may run: the suites
# run in parallel streams, each side of a stream at the same time, and
# every sub-test not finished by then is recorded as not run. OpenCV's
# T-API check runs beside them. OUT receives a few files (the device tool
# brings back at most 8): the two summaries, the run's log, and tarballs
# of the raw results.
#
# Environment: GPU_CTS_STREAMS overrides the streams (one per line, suites
# separated by spaces, as run.sh's --suites); CTS_TIMEOUT the per-sub-test
# limit (default 120 s); GPU_NATIVE_ICD the native .icd (default NVIDIA's,
# written into /etc/OpenCL/vendors when missing) and GPU_BACKEND_DEVICE the
# backend's --device (default opencl:NVIDIA): with PoCL's, the script can
# be tried on a machine without a GPU.
set -uo pipefail
dir=$(cd "${1:?DIR}" && pwd)
out=$(mkdir -p "${2:?OUT}" && cd "$2" && pwd)
seconds=${3:-450}
start=$(date +%s)
deadline=$((start + seconds))

# The test_basic subset of CONFORMANCE.md (PoCL), the long compilers last.
basic="test_basic:arraycopy,arrayreadwrite,bufferreadwriterect,constant,constant_source,createkernelsinprogram,enqueue_map_buffer,enqueue_map_image,enqueued_local_size,get_global_offset,get_linear_ids,global_linear_id,global_work_offsets,hostptr,if,immutable_arrayreadwrite,immutable_bufferreadwriterect,int2fp,fp2int,kernel_call_kernel_function,kernel_limit_constants,kernel_numeric_constants,kernel_preprocessor_macros,local_arg_def,local_kernel_def,local_kernel_scope,local_linear_id,loop,mri_multiple,mri_one,parameter_types,pointer_cast,sizeof,vec_type_hint,wg_barrier,barrier,work_item_functions*,readimage,writeimage,imagecopy,image_param,progvar_prog_scope_init,hiloeo,async_copy_global_to_local,async_strided_copy_global_to_local,prefetch"
streams=${GPU_CTS_STREAMS:-"test_api test_events test_mem_host_flags test_cl_get_info
test_compiler test_profiling test_commonfns
test_buffers test_image_streams:1D
$basic"}

export PATH=$dir/bin:$PATH
export LD_LIBRARY_PATH=$dir/bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CTS_TIMEOUT=${CTS_TIMEOUT:-120} CTS_DEADLINE=$deadline
work=$(mktemp -d /tmp/gpu-cts.XXXXXX)
# NVIDIA's ICD: the machine's vendors folder may lack it.
mkdir -p /etc/OpenCL/vendors
nvidia_icd=${GPU_NATIVE_ICD:-$(grep -l -i nvidia /etc/OpenCL/vendors/*.icd 2>/dev/null | head -1)}
if [ -z "$nvidia_icd" ]; then
    echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
    nvidia_icd=/etc/OpenCL/vendors/nvidia.icd
fi
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
    echo "cpus: $(nproc)"
    echo "nvidia icd: $nvidia_icd ($(cat "$nvidia_icd"))"
    OCL_ICD_VENDORS=$(dirname "$nvidia_icd") clinfo --raw 2>/dev/null |
        grep -E 'CL_PLATFORM_(NAME|VERSION)|CL_DEVICE_(NAME|VERSION)|CL_DRIVER_VERSION|CL_DEVICE_IMAGE_SUPPORT' | sort -u
    "$dir/bin/vgpu-backend" --list-devices
    "${TAPI_PYTHON:-python3}" -c 'import cv2, numpy; print("opencv", cv2.__version__, "numpy", numpy.__version__)'
    echo "vgpu: ${VGPU_COMMIT:-unknown}"
    echo "cts: $(cat "$dir/cts/.cts-commit")"
    echo "timeout per sub-test: $CTS_TIMEOUT s; CTS deadline after $seconds s"
    echo "streams:"
    echo "$streams" | sed 's/^/  /'
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
icd_dir=$work/native-icd
mkdir -p "$icd_dir"
cp "$nvidia_icd" "$icd_dir/"
platform=$(OCL_ICD_VENDORS=$icd_dir clinfo --raw 2>/dev/null |
    sed -n 's/^\[[^]]*\] *CL_PLATFORM_NAME *//p' | head -1)
device=${GPU_BACKEND_DEVICE:-opencl:NVIDIA}

# OpenCV first in the background: it needs a minute, the CTS the rest.
(
    TAPI_PYTHON=${TAPI_PYTHON:-python3} TAPI_NATIVE_ICD=$nvidia_icd \
        TAPI_LIBOPENCL=$dir/bin/lib/libOpenCL.so.1 VGPU_BIN_DIR=$dir/bin \
        TAPI_BACKEND_ARGS="--device $device" \
        timeout $((seconds + 60)) "$dir/integration/opencv/run.sh" --out "$work/opencv"
) > "$work/opencv.log" 2>&1 &
opencv=$!

results=$work/cts
mkdir -p "$results"
pids=()
n=0
while IFS= read -r suites; do
    [ -n "$suites" ] || continue
    n=$((n + 1))
    for side in native vgpu; do
        CTS_SIDES=$side VGPU_BIN_DIR=$dir/bin CTS_NATIVE_ICD=$icd_dir/$(basename "$nvidia_icd") \
            CTS_NATIVE_PLATFORM=$platform CTS_BACKEND_ARGS="--device $device" \
            XDG_CACHE_HOME=$work/cache-$n-$side \
            "$dir/integration/cts/run.sh" --bin-dir "$dir/cts" --suites "$suites" --out "$results" \
            > "$work/stream-$n-$side.log" 2>&1 &
        pids+=($!)
    done
done <<< "$streams"
for p in "${pids[@]}"; do wait "$p"; done
echo "== CTS done after $(( $(date +%s) - start )) s"
python3 "$dir/integration/cts/compare.py" "$results" > "$out/cts-summary.md" 2>&1
cp "$out/machine.txt" "$results/"
cat "$out/cts-summary.md"
wait "$opencv"
cat "$work/opencv.log" > "$out/opencv-summary.md"
echo "== OpenCV"; cat "$out/opencv-summary.md"
tar -czf "$out/cts-raw.tar.gz" -C "$work" cts $(cd "$work" && ls stream-*.log)
tar -czf "$out/opencv-raw.tar.gz" -C "$work" opencv opencv.log
echo "== all done after $(( $(date +%s) - start )) s"
