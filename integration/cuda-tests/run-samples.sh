#!/bin/bash
# NVIDIA's CUDA samples (programs nobody here wrote), natively and through
# vgpu (loopback), side by side, on a host with an NVIDIA GPU and nvcc.
# Usage: run-samples.sh SAMPLES_DIR BIN_DIR OUT_DIR [NAMES...]
#   SAMPLES_DIR  a checkout of github.com/NVIDIA/cuda-samples (its Common/
#                and Samples/); not part of this repository
#   BIN_DIR      vgpu-backend and libvgpu_cuda.so
#   OUT_DIR      gets summary.txt (one line per sample: exit codes, and
#                `same` when the outputs agree with numbers, timings and
#                bandwidths left out) and each run's output
#   NAMES        some samples (default: every one under Samples/*/ that
#                builds with plain nvcc)
# Each sample is built with nvcc -arch=$VGPU_SAMPLES_ARCH (default sm_90) from its directory's sources
# (fat binaries and PTX files its CMakeLists.txt asks for too) into
# $VGPU_SAMPLES_BUILD (default /tmp/cuda-samples-build, kept between runs).
set -u
cs=$(cd "${1:?SAMPLES_DIR}" && pwd)
bin=$(cd "${2:?BIN_DIR}" && pwd)
out=$(mkdir -p "${3:?OUT_DIR}" && cd "$3" && pwd)
shift 3
only=" ${*:-} "
rm -f "$out"/*.native "$out"/*.vgpu "$out"/summary.txt
work=${VGPU_SAMPLES_BUILD:-/tmp/cuda-samples-build}
arch=${VGPU_SAMPLES_ARCH:-sm_90}
mkdir -p "$work"
if ! command -v nvcc >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "skipped: no CUDA device"
    exit 0
fi
build() {
    local d=$1 name; name=$(basename "$d")
    local b=$work/$name
    [ -x "$b/$name" ] && return
    rm -rf "$b"; cp -r "$d" "$b"; cd "$b" || return
    local flags="-O2 -arch=$arch -I$cs/Common -w -std=c++17"
    local libs="-lcuda -lnvrtc -lcublas -lcurand -lcufft -lcusparse -lcusolver"
    local extra="" kernel=""
    case $name in cdp*|newdelete|warpAggregatedAtomicsCG) extra="-rdc=true -lcudadevrt";; esac
    case $name in cudaOpenMP|UnifiedMemoryStreams) extra="$extra -Xcompiler -fopenmp --extended-lambda";; esac
    if grep -q CUDA_KERNEL_SOURCE CMakeLists.txt 2>/dev/null; then
        kernel=$(sed -n 's/.*set(CUDA_KERNEL_SOURCE .*\/\([^/"]*\)").*/\1/p' CMakeLists.txt | head -1)
        local fat ptx
        fat=$(sed -n 's/.*set(CUDA_FATBIN_FILE .*\/\([^/"]*\)").*/\1/p' CMakeLists.txt | head -1)
        ptx=$(sed -n 's/.*set(CUDA_PTX_FILE .*\/\([^/"]*\)").*/\1/p' CMakeLists.txt | head -1)
        [ -n "$fat" ] && nvcc -I"$cs/Common" -arch=$arch -fatbin -o "$fat" "$kernel" >>build.log 2>&1
        [ -n "$ptx" ] && nvcc -I"$cs/Common" -arch=$arch -ptx -o "$ptx" "$kernel" >>build.log 2>&1
    fi
    local srcs
    srcs=$(ls *.cu *.cpp 2>/dev/null | grep -v -x "${kernel:-none}")
    # shellcheck disable=SC2086
    nvcc $flags $extra $srcs -o "$name" $libs >>build.log 2>&1 || echo "BUILD-FAIL $name"
}
export -f build
export work cs arch
dirs=()
for d in "$cs"/Samples/*/*/; do
    n=$(basename "$d")
    [ "$only" = "  " ] || [[ "$only" == *" $n "* ]] || continue
    dirs+=("$d")
done
printf '%s\n' "${dirs[@]}" | xargs -P 16 -I{} bash -c 'build {}' 2>&1 | sort
echo "built in $SECONDS s"
mkdir -p "$work/lib"
ln -sf "$bin/libvgpu_cuda.so" "$work/lib/libcuda.so.1"
ln -sf "$bin/libvgpu_cuda.so" "$work/lib/libcuda.so"
sock=$work/vgpu.sock
RUST_LOG=info "$bin/vgpu-backend" --socket "$sock" --device cuda:0 >"$out/backend.log" 2>&1 &
backend=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
norm() { sed -E 's/[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?/N/g' "$1" | grep -v -i -E 'time|msec|sec|GB/s|throughput|bandwidth|Gflop|perf' ; }
for d in "${dirs[@]}"; do
    n=$(basename "$d"); cd "$work/$n" 2>/dev/null || continue
    [ -x "$n" ] || { echo "$n: not built"; continue; }
    timeout 120 "./$n" >"$out/$n.native" 2>&1 </dev/null; rn=$?
    LD_LIBRARY_PATH=$work/lib VGPU_SOCKET=$sock VGPU_LOOPBACK_MEM_MB=1024 RUST_LOG=warn \
        timeout 120 "./$n" >"$out/$n.vgpu" 2>&1 </dev/null; rv=$?
    if [ "$rn" = "$rv" ] && [ "$(norm "$out/$n.native")" = "$(norm "$out/$n.vgpu")" ]; then s=same; else s=DIFF; fi
    echo "$n native=$rn vgpu=$rv $s" | tee -a "$out/summary.txt"
done
kill $backend; wait $backend 2>/dev/null
echo "total $SECONDS s"
sort -k4 "$out/summary.txt" | awk '{print} $4 == "same" {n++} END {print n " of " NR " samples give the same output"}'
