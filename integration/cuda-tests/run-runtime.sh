#!/bin/bash
# CUDA *runtime* programs through vgpu (issue 13), native vs vgpu loopback:
# a vecadd with nvcc's default static cudart and with -cudart shared,
# PyTorch (is_available, matmul, a 300-step MLP, conv2d, a 100-step CNN) and CuPy (elementwise,
# reduction, RawKernel, matmul). Each program's stdout must match the native run.
# Usage: run-runtime.sh BIN_DIR OUT_DIR [TESTS...]
#   BIN_DIR holds vgpu-backend and libvgpu_cuda.so; TESTS picks some of
#   vecadd-static vecadd-shared big-image torch-available torch-matmul
#   torch-mlp torch-conv torch-cnn torch-compile cupy-reduce cupy-matmul
#   cupy-fft cupy-random cupy (default: all), and torch-steps (a benchmark:
#   seconds per training step and cold start, JSON in
#   OUT_DIR/torch-steps.json). big-image is the driver-API
#   vecadd.c with its PTX padded past 8 MiB, so the image travels in
#   chunks (CuImageChunk + CuModuleLoadStaged). Per test, OUT_DIR gets the vgpu run's
#   debug log (NAME.log); the backend's log is backend-runtime.log.
# Prints "skipped: no CUDA device" and exits 0 where there is no GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?BIN_DIR}" && pwd)
out=$(mkdir -p "${2:?OUT_DIR}" && cd "$2" && pwd)
shift 2
tests=${*:-vecadd-static vecadd-shared big-image torch-available torch-matmul torch-mlp torch-conv torch-cnn torch-compile cupy-reduce cupy-matmul cupy-fft cupy-random cupy}
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1 || ! command -v nvcc >/dev/null; then
    echo "skipped: no CUDA device"
    exit 0
fi
clients=$here/../../guest-driver/cuda/trace/clients
[ -d "$clients" ] || clients=$here/runtime
work=$(mktemp -d)
cd "$work"
nvidia-smi -L; nvcc --version | tail -1
python3 -c 'import torch, cupy; print("torch", torch.__version__, "cupy", cupy.__version__)' 2>/dev/null
case " $tests " in *vecadd*)
    nvcc -o vecadd_static "$clients/vecadd.cu" && nvcc -cudart shared -o vecadd_shared "$clients/vecadd.cu" ||
        { echo "FAIL: nvcc vecadd"; exit 1; } ;;
esac
case " $tests " in *big-image*)
    nvcc -ptx -arch=sm_90 "$here/kernels.cu" -o big.ptx && nvcc -O2 -o vecadd_driver "$here/vecadd.c" -lcuda ||
        { echo "FAIL: nvcc big-image"; exit 1; }
    # 9 MiB of PTX comments: larger than one message.
    yes '// padding so that the image is larger than one vgpu message ......' | head -c $((9 << 20)) |
        sed '$d' >>big.ptx
    ls -l big.ptx | awk '{print "big.ptx", $5, "bytes"}' ;;
esac
mkdir -p lib
ln -sf "$bin/libvgpu_cuda.so" lib/libcuda.so.1
ln -sf "$bin/libvgpu_cuda.so" lib/libcuda.so
sock=$work/vgpu.sock
RUST_LOG=info "$bin/vgpu-backend" --socket "$sock" --device cuda:0 >"$out/backend-runtime.log" 2>&1 &
backend=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
vgpu() { PYTHONFAULTHANDLER=1 LD_LIBRARY_PATH=$work/lib TRITON_LIBCUDA_PATH=$work/lib VGPU_SOCKET=$sock VGPU_LOOPBACK_MEM_MB=512 RUST_LOG=${VGPU_LOG:-debug} "$@"; }

pass=0; fail=0
# Whether two outputs agree: the same lines and words, numbers within the
# relative tolerance RTOL (0: identical text).
same() {  # rtol, a, b
    [ "$2" == "$3" ] && return 0
    [ "$1" == 0 ] && return 1
    awk -v rtol="$1" 'NR == FNR { a[FNR] = $0; n = FNR; next }
        { if (!(FNR in a)) exit 1; split(a[FNR], x); m = split($0, y)
          if (m != length(x)) exit 1
          for (i = 1; i <= m; i++) {
              if (x[i] == y[i]) continue
              if (x[i] !~ /^-?[0-9.]+$/ || y[i] !~ /^-?[0-9.]+$/) exit 1
              d = x[i] - y[i]; d = d < 0 ? -d : d; s = x[i] < 0 ? -x[i] : x[i]
              if (d > rtol * s + 1e-9) exit 1
          } }
        END { if (FNR != n) exit 1 }' <(echo "$2") <(echo "$3")
}
compare() {  # name, command... (RTOL in the environment: numbers may differ so much)
    local name=$1; shift
    local native vgpu_out t0 t1 t2
    t0=$(date +%s.%N)
    native=$(timeout 150 "$@" 2>/dev/null); local rn=$?
    t1=$(date +%s.%N)
    vgpu_out=$(vgpu timeout 200 "$@" 2>"$out/$name.log"); local rv=$?
    t2=$(date +%s.%N)
    local times
    times=$(awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "native %.1fs, vgpu %.1fs", b - a, c - b }')
    if [ $rn -eq 0 ] && [ $rv -eq 0 ] && same "${RTOL:-0}" "$native" "$vgpu_out"; then
        local how=""
        [ "$native" == "$vgpu_out" ] || how=", numbers within ${RTOL} relative"
        echo "PASS $name ($times$how)"; pass=$((pass + 1))
    else
        echo "FAIL $name (native rc=$rn, vgpu rc=$rv; $times)"; fail=$((fail + 1))
        diff <(echo "$native") <(echo "$vgpu_out") | head -20
        echo "  -- calls not supported:"
        grep -ohE "(cu[A-Za-z0-9_]+): not supported|cuGetExportTable[^\n]*refus[^\n]*" "$out/$name.log" | sort | uniq -c | head -20
        echo "  -- last failing calls:"
        grep -E "CUresult|error|panic" "$out/$name.log" | grep -v "cuGetProcAddress\|CUresult 201$" | tail -8
    fi
    echo "$vgpu_out" | sed "s/^/  $name: /"
}
for t in $tests; do
    case $t in
        vecadd-static) compare vecadd-static ./vecadd_static ;;
        vecadd-shared) compare vecadd-shared ./vecadd_shared ;;
        big-image) compare big-image ./vecadd_driver big.ptx ;;
        torch-available) compare torch-available python3 "$here/runtime/torch_mlp.py" available ;;
        torch-matmul) compare torch-matmul python3 "$here/runtime/torch_mlp.py" matmul ;;
        torch-matmul-no-21318) VGPU_REFUSE_TABLES=21318c60 compare "$t" python3 "$here/runtime/torch_mlp.py" matmul ;;
        torch-matmul-no-69a2) VGPU_REFUSE_TABLES=69a28e9f compare "$t" python3 "$here/runtime/torch_mlp.py" matmul ;;
        torch-mlp) compare torch-mlp python3 "$here/runtime/torch_mlp.py" ;;
        torch-conv) compare torch-conv python3 "$here/runtime/torch_mlp.py" conv ;;
        # cuDNN's backward convolutions add in no fixed order: natively too,
        # two runs differ in the last printed digit.
        torch-cnn) RTOL=1e-5 compare torch-cnn python3 "$here/runtime/torch_mlp.py" cnn ;;
        cupy-reduce) compare cupy-reduce python3 "$here/runtime/cupy_basic.py" reduce ;;
        cupy-matmul) compare cupy-matmul python3 "$here/runtime/cupy_basic.py" matmul ;;
        cupy-fft) compare cupy-fft python3 "$here/runtime/cupy_basic.py" fft ;;
        cupy-random) compare cupy-random python3 "$here/runtime/cupy_basic.py" random ;;
        torch-compile) compare torch-compile python3 "$here/runtime/torch_mlp.py" compile ;;
        cupy) compare cupy python3 "$here/runtime/cupy_basic.py" ;;
        # A benchmark, not a test: seconds per training step and the cold
        # start, natively then through vgpu (warnings only in its log).
        torch-steps)
            for side in native vgpu; do
                if [ $side = native ]; then timeout 300 python3 "$here/runtime/torch_steps.py"
                else VGPU_LOG=warn vgpu timeout 300 python3 "$here/runtime/torch_steps.py" 2>"$out/torch-steps.log"
                fi | sed "s/^/{\"side\": \"$side\", \"result\": /; s/\$/}/"
            done | tee "$out/torch-steps.json" | sed 's/^/  torch-steps: /' ;;
        *) echo "unknown test $t" ;;
    esac
done
echo "$pass passed, $fail failed"
echo "images sent in chunks:"
grep -h "sent in chunks" "$out"/*.log 2>/dev/null | sed 's/.*module image/module image/' | sort | uniq -c
kill "$backend"; wait "$backend" 2>/dev/null
grep -ciE "panic" "$out/backend-runtime.log" | sed 's/^/backend panics: /'
