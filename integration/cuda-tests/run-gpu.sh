#!/bin/bash
# CUDA driver-API tests and benchmarks, native vs vgpu loopback, on a host
# with an NVIDIA GPU and nvcc. Usage: run-gpu.sh BIN_DIR OUT_DIR
#   BIN_DIR holds vgpu-backend, libvgpu_cuda.so and (optionally)
#   cudarc-check, built on a development machine.
#   VGPU_BACKEND_ARGS: further backend options, e.g. --peer-memory (then
#   run the script as the user the backend's workers run as).
# Prints "skipped: no CUDA device" and exits 0 where there is no GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?BIN_DIR}" && pwd)
out=${2:?OUT_DIR}
mkdir -p "$out"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1 || ! command -v nvcc >/dev/null; then
    echo "skipped: no CUDA device"
    exit 0
fi
work=$(mktemp -d)
cd "$work"
nvidia-smi -L; nvcc --version | tail -1
grep -E '^#define (cuCtxCreate|cuMemAlloc|cuMemcpyHtoD|cuEventElapsedTime|cuGetProcAddress|cuDeviceGetUuid|cuCtxDestroy|cuStreamDestroy) ' \
    "$(dirname "$(command -v nvcc)")/../include/cuda.h" | sed 's/^/header: /'

# Kernels as PTX, a fat binary (sm_90 + PTX) and a cubin; the C programs.
cp "$here"/*.c "$here"/*.h "$here"/kernels.cu .
nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx &&
nvcc -fatbin -gencode arch=compute_90,code='[sm_90,compute_90]' kernels.cu -o kernels.fatbin &&
nvcc -cubin -arch=sm_90 kernels.cu -o kernels.cubin || { echo "FAIL: nvcc kernels"; exit 1; }
for p in vecadd matmul streams async_copies host_funcs overlap globals bench isolation cross_vm launch_order pinned_sync limits_coop memset_2d device_printf fresh_alloc pointer_attrs copy_2d mem_pool; do
    nvcc -O2 -o $p $p.c -lcuda || { echo "FAIL: nvcc $p"; exit 1; }
done

mkdir -p lib
ln -sf "$bin/libvgpu_cuda.so" lib/libcuda.so.1
ln -sf "$bin/libvgpu_cuda.so" lib/libcuda.so
for p in vecadd matmul streams async_copies host_funcs overlap globals bench isolation cross_vm launch_order pinned_sync limits_coop memset_2d device_printf fresh_alloc pointer_attrs copy_2d mem_pool; do
    missing=$(comm -23 <(nm -D --undefined-only $p | awk '{print $2}' | grep '^cu' | sort -u) \
                       <(nm -D --defined-only "$bin/libvgpu_cuda.so" | awk '{print $3}' | sort -u))
    [ -n "$missing" ] && echo "$p needs symbols the library lacks: $missing"
done

sock=$work/vgpu.sock
# shellcheck disable=SC2086 # VGPU_BACKEND_ARGS is a list of options.
RUST_LOG=info "$bin/vgpu-backend" --socket "$sock" --device cuda:0 ${VGPU_BACKEND_ARGS:-} >"$out/backend.log" 2>&1 &
backend=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
vgpu() { LD_LIBRARY_PATH=$work/lib VGPU_SOCKET=$sock VGPU_LOOPBACK_MEM_MB=512 "$@"; }

pass=0; fail=0
compare() {  # name, command...
    local name=$1; shift
    local native vgpu_out
    native=$(timeout 120 "$@" 2>&1); local rn=$?
    vgpu_out=$(vgpu timeout 120 "$@" 2>&1); local rv=$?
    if [ $rn -eq 0 ] && [ $rv -eq 0 ] && [ "$native" == "$vgpu_out" ]; then
        echo "PASS $name"; pass=$((pass + 1))
    else
        echo "FAIL $name (native rc=$rn, vgpu rc=$rv)"; fail=$((fail + 1))
        diff <(echo "$native") <(echo "$vgpu_out") | head -20
    fi
    echo "$vgpu_out" | head -n "${ECHO_LINES:-100000}" | sed "s/^/  $name: /"
}
compare vecadd ./vecadd kernels.ptx
compare matmul-ptx ./matmul kernels.ptx
compare matmul-fatbin ./matmul kernels.fatbin
compare streams ./streams kernels.ptx
compare async_copies ./async_copies kernels.ptx
compare launch_order ./launch_order kernels.ptx
compare pinned_sync ./pinned_sync
compare limits_coop ./limits_coop kernels.ptx
compare memset_2d ./memset_2d
compare fresh_alloc ./fresh_alloc kernels.ptx
compare pointer_attrs ./pointer_attrs
compare copy_2d ./copy_2d
compare mem_pool ./mem_pool
ECHO_LINES=12 compare device_printf ./device_printf kernels.ptx
compare host_funcs ./host_funcs kernels.ptx
compare overlap ./overlap kernels.ptx /dev/null
compare globals-ptx ./globals kernels.ptx
compare globals-fatbin ./globals kernels.fatbin
compare globals-cubin ./globals kernels.cubin
[ -x "$bin/cudarc-check" ] && compare cudarc "$bin/cudarc-check" kernels.ptx
if vgpu ./isolation kernels.ptx; then echo "PASS isolation"; pass=$((pass + 1)); else echo "FAIL isolation"; fail=$((fail + 1)); fi
# Two programs at once: one holds a secret, the other's kernel reads at its
# address (natively: two processes; through vgpu: two front-ends, each with
# its own worker process). Neither may see the other's memory.
cross_vm() {  # label, prefix...
    local label=$1; shift
    rm -f xa xa.done
    "$@" timeout 120 ./cross_vm hold xa kernels.ptx >hold.out 2>&1 & local holder=$!
    "$@" timeout 120 ./cross_vm peek xa kernels.ptx >peek.out 2>&1; local rp=$?
    touch xa.done; wait $holder; local rh=$?
    sed "s/^/  cross_vm $label: /" hold.out peek.out
    if [ $rp -eq 0 ] && [ $rh -eq 0 ]; then echo "PASS cross_vm $label"; pass=$((pass + 1))
    else echo "FAIL cross_vm $label (peek rc=$rp, hold rc=$rh)"; fail=$((fail + 1)); fi
}
cross_vm native env
cross_vm vgpu vgpu
grep -E "worker .* (died|ended)" "$out/backend.log" | sed 's/^/  backend: /'
echo "$pass passed, $fail failed"

echo "== native"; ./bench kernels.ptx | tee "$out/bench-native.txt"
echo "== vgpu"; vgpu ./bench kernels.ptx | tee "$out/bench-vgpu.txt"
# Copy/compute overlap on two streams: together / sum of the parts.
./overlap kernels.ptx "$out/overlap-native.json" >/dev/null &&
vgpu ./overlap kernels.ptx "$out/overlap-vgpu.json" >/dev/null &&
echo "== overlap" && cat "$out/overlap-native.json" "$out/overlap-vgpu.json"
kill "$backend"; wait "$backend" 2>/dev/null
