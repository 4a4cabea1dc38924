#!/bin/bash
# CuPy's own test suite (a client nobody here wrote), natively and through
# vgpu loopback, test by test, on a host with an NVIDIA GPU, CuPy and
# pytest. The tests are not part of this repository: take them from the
# CuPy release that is installed, e.g.
#   git -C cupy archive v14.2.0 tests | tar x -C CUPY_CHECKOUT
# Usage: run-cupy-suite.sh CUPY_CHECKOUT BIN_DIR OUT_DIR [GROUP...]
#   CUPY_CHECKOUT  holds tests/ of CuPy's source tree
#   BIN_DIR        vgpu-backend and libvgpu_cuda.so
#   OUT_DIR        gets NATIVE|vgpu-GROUP.log (pytest -v) and summary.txt:
#                  per group the tests run on both sides and those whose
#                  outcome differs (cupy_suite_compare.py)
#   GROUP          cuda core math creation manipulation indexing random
#                  sorting statistics linalg fft sparse (default: all); the
#                  groups run in parallel, each side for at most
#                  $VGPU_CUPY_LIMIT seconds (default 240), so the slower
#                  side runs fewer tests: only tests run on both count.
# pytest-timeout, if installed, stops a single test after 60 s.
set -u
here=$(cd "$(dirname "$0")" && pwd)
checkout=$(cd "${1:?CUPY_CHECKOUT}" && pwd)
bin=$(cd "${2:?BIN_DIR}" && pwd)
out=$(mkdir -p "${3:?OUT_DIR}" && cd "$3" && pwd)
shift 3
if ! nvidia-smi -L >/dev/null 2>&1 || ! python3 -c 'import cupy, pytest' 2>/dev/null; then
    echo "skipped: no CUDA device, CuPy or pytest"
    exit 0
fi
limit=${VGPU_CUPY_LIMIT:-240}
t=$checkout/tests/cupy_tests
declare -A groups=(
    [cuda]="$t/cuda_tests" [core]="$t/core_tests" [math]="$t/math_tests"
    [creation]="$t/creation_tests" [manipulation]="$t/manipulation_tests"
    [indexing]="$t/indexing_tests" [random]="$t/random_tests"
    [sorting]="$t/sorting_tests" [statistics]="$t/statistics_tests"
    [linalg]="$t/linalg_tests" [fft]="$t/fft_tests"
    [sparse]="$checkout/tests/cupyx_tests/scipy_tests/sparse_tests"
)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(cuda core math creation manipulation indexing random sorting statistics linalg fft sparse)
for g in "${names[@]}"; do
    [ -n "${groups[$g]:-}" ] || { echo "unknown group: $g"; exit 2; }
done
lib=$out/lib
mkdir -p "$lib"
ln -sf "$bin/libvgpu_cuda.so" "$lib/libcuda.so.1"
sock=$out/vgpu.sock
rm -f "$sock"
RUST_LOG=info "$bin/vgpu-backend" --socket "$sock" --device cuda:0 >"$out/backend.log" 2>&1 &
backend=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
timeout_opt=()
python3 -c 'import pytest_timeout' 2>/dev/null && timeout_opt=(--timeout 60)
side() {  # native|vgpu group
    local env=()
    [ "$1" = vgpu ] && env=(LD_LIBRARY_PATH="$lib" VGPU_SOCKET="$sock" VGPU_LOOPBACK_MEM_MB=1024)
    # shellcheck disable=SC2086 # a group is a list of directories.
    (cd "$checkout" && env "${env[@]}" timeout "$limit" python3 -m pytest -v --tb=line \
        -p no:cacheprovider "${timeout_opt[@]}" ${groups[$2]} >"$out/$1-$2.log" 2>&1)
}
# Natively first, which also fills CuPy's kernel cache for the vgpu side.
for mode in native vgpu; do
    pids=()
    for g in "${names[@]}"; do side "$mode" "$g" & pids+=($!); done
    wait "${pids[@]}"
done
kill "$backend"
wait "$backend" 2>/dev/null
panics=$(grep -c -i panic "$out/backend.log")
python3 "$here/cupy_suite_compare.py" "$out" "${names[@]}" | tee "$out/summary.txt"
echo "backend panics: $panics" | tee -a "$out/summary.txt"
