#!/bin/bash
# A CUDA driver-API program checkpointed and restored mid-run through vgpu
# (loopback), on a host with an NVIDIA GPU and nvcc. Usage:
#   checkpoint.sh BIN_DIR OUT_DIR
# BIN_DIR holds vgpu-backend, vgpu-ctl, libvgpu_cuda.so and ckpt-edit, built
# on a development machine. For each image kind (PTX, fat binary, cubin):
# checkpoint_loop runs through a backend; after 10 iterations
# `vgpu-ctl checkpoint FILE --then exit` stops the backend; a new backend
# starts with `--restore FILE` on the same socket; the program reconnects
# (VGPU_RECONNECT_SECS) and must print exactly what a native run prints.
# Then a checkpoint rewritten as if its modules were cubins for another
# architecture must be refused with a clear error. Prints PASS/FAIL lines
# and "N passed, N failed"; "skipped: no CUDA device" without a GPU.
# CKPT_PROGRAM=checkpoint_streams CKPT_KINDS=ptx runs the program that keeps
# two streams busy while the checkpoint is taken instead;
# CKPT_PROGRAM=checkpoint_pinned runs synchronous copies through page-locked
# memory (signalled copies) of 100 KiB to 16 MiB around a kernel instead;
# CKPT_PROGRAM=torch_ckpt.py runs the PyTorch training loop of
# runtime/torch_ckpt.py (one pass, no image kinds).
# CKPT_DEVICE (default cuda:0) is the first backend's device and
# CKPT_RESTORE_DEVICE (default the same) the restarted one's: on a host with
# two GPUs, cuda:1 re-homes the program to the other GPU.
set -u
device=${CKPT_DEVICE:-cuda:0}
restore_device=${CKPT_RESTORE_DEVICE:-$device}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?BIN_DIR}" && pwd)
out=${2:?OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1 || ! command -v nvcc >/dev/null; then
    echo "skipped: no CUDA device"
    exit 0
fi
program=${CKPT_PROGRAM:-checkpoint_loop}
case $program in
    *.py) kinds=${CKPT_KINDS:-python} ;;
    *) kinds=${CKPT_KINDS:-ptx fatbin cubin} ;;
esac
iterations=${CKPT_ITERATIONS:-30}
pause_ms=${CKPT_PAUSE_MS:-100}
work=$(mktemp -d)
cd "$work"
cp "$here"/checkpoint_loop.c "$here"/common.h "$here"/kernels.cu .
case $program in *.py) ;; *) cp "$here/$program.c" . ;; esac
nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx &&
nvcc -fatbin -gencode arch=compute_90,code='[sm_90,compute_90]' kernels.cu -o kernels.fatbin &&
nvcc -cubin -arch=sm_90 kernels.cu -o kernels.cubin &&
nvcc -O2 -o checkpoint_loop checkpoint_loop.c -lcuda &&
case $program in *.py) true ;; *) nvcc -O2 -o "$program" "$program.c" -lcuda ;; esac ||
    { echo "FAIL: nvcc"; exit 1; }
# run_program SECONDS KIND ITERATIONS PAUSE_MS: the program, with the image
# of KIND, stopped after SECONDS.
run_program() {
    case $program in
        *.py) timeout "$1" python3 "$here/runtime/$program" "$3" "$4" ;;
        *) timeout "$1" "./$program" "kernels.$2" "$3" "$4" ;;
    esac
}
mkdir -p lib
ln -sf "$bin/libvgpu_cuda.so" lib/libcuda.so.1
ln -sf "$bin/libvgpu_cuda.so" lib/libcuda.so

pass=0; fail=0
backend=""
stop_backend() {
    if [ -n "$backend" ]; then
        kill "$backend" 2>/dev/null
        timeout 10 tail --pid="$backend" -f /dev/null 2>/dev/null
        kill -9 "$backend" 2>/dev/null
        wait "$backend" 2>/dev/null
        backend=""
    fi
}
trap 'stop_backend; [ -n "${prog:-}" ] && kill -9 "$prog" 2>/dev/null' EXIT
start_backend() {  # socket control log device extra-args...
    local sock=$1 ctl=$2 log=$3 dev=$4; shift 4
    RUST_LOG=info "$bin/vgpu-backend" --socket "$sock" --control "$ctl" --device "$dev" "$@" >>"$log" 2>&1 &
    backend=$!
    for _ in $(seq 200); do
        [ -S "$sock" ] && [ -S "$ctl" ] && return 0
        kill -0 "$backend" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
now() { date +%s.%N; }
ms() { echo "$1 $2" | awk '{printf "%.0f", ($2 - $1) * 1000}'; }

native=$(run_program 120 ptx "$iterations" "$pause_ms" 2>/dev/null)
echo "$native" | sed 's/^/native: /'

for kind in $kinds; do
    sock=$work/$kind.sock ctl=$work/$kind.ctl ckpt=$work/$kind.ckpt log=$out/backend-$kind.log
    rm -f "$sock" "$ctl"
    if ! start_backend "$sock" "$ctl" "$log" "$device"; then
        echo "FAIL $kind: the backend did not start"; fail=$((fail + 1)); tail -5 "$log"; continue
    fi
    LD_LIBRARY_PATH=$work/lib VGPU_SOCKET=$sock VGPU_LOOPBACK_MEM_MB=512 VGPU_RECONNECT_SECS=60 \
        run_program 180 "$kind" "$iterations" "$pause_ms" >"$out/vgpu-$kind.txt" 2>"$out/vgpu-$kind.err" &
    prog=$!
    for _ in $(seq 600); do grep -q '^PROGRESS 10' "$out/vgpu-$kind.txt" && break; sleep 0.05; done
    t0=$(now)
    "$bin/vgpu-ctl" --control "$ctl" checkpoint "$ckpt" --then exit >"$out/ctl-$kind.json" 2>/dev/null
    ctl_rc=$?
    timeout 20 tail --pid="$backend" -f /dev/null
    wait "$backend" 2>/dev/null; backend=""
    t1=$(now)
    lines=$(wc -l <"$out/vgpu-$kind.txt")
    start_backend "$sock" "$ctl" "$log" "$restore_device" --restore "$ckpt" || echo "restarted backend failed: $(tail -3 "$log")"
    # Resumed: the program printed its next line.
    for _ in $(seq 1200); do [ "$(wc -l <"$out/vgpu-$kind.txt")" -gt "$lines" ] && break; sleep 0.01; done
    t2=$(now)
    wait "$prog"; rc=$?; prog=""
    stop_backend
    size=$(stat -c %s "$ckpt" 2>/dev/null || echo 0)
    echo "figures $kind ($device -> $restore_device): checkpoint_bytes=$size checkpoint_and_exit_ms=$(ms "$t0" "$t1") restart_to_next_iteration_ms=$(ms "$t1" "$t2") (includes the ${pause_ms} ms pause)"
    echo "  ctl: $(cat "$out/ctl-$kind.json")"
    grep -E "restored|CUDA arena|cannot|error|ERROR|WARN" "$log" | sed 's/^/  log: /' | tail -8
    [ -s "$ckpt" ] && [ -x "$bin/ckpt-edit" ] && "$bin/ckpt-edit" summary "$ckpt" | sed 's/^/  state: /'
    if [ $ctl_rc -eq 0 ] && [ $rc -eq 0 ] && [ "$native" == "$(cat "$out/vgpu-$kind.txt")" ] && grep -q "restored 1 session" "$log"; then
        echo "PASS checkpoint-restore-$kind"; pass=$((pass + 1))
    else
        echo "FAIL checkpoint-restore-$kind (ctl rc=$ctl_rc, program rc=$rc)"; fail=$((fail + 1))
        diff <(echo "$native") "$out/vgpu-$kind.txt" | head -20
        tail -5 "$out/vgpu-$kind.err"
    fi
done

# A module that would only run on sm_100 cannot be restored on this GPU:
# the backend refuses the checkpoint before building anything.
if [ -s "$work/cubin.ckpt" ] && [ -x "$bin/ckpt-edit" ]; then
    "$bin/ckpt-edit" retarget "$work/cubin.ckpt" "$work/forged.ckpt" 100
    log=$out/backend-forged.log
    timeout 30 "$bin/vgpu-backend" --socket "$work/forged.sock" --device cuda:0 --restore "$work/forged.ckpt" >"$log" 2>&1 &
    forged=$!
    for _ in $(seq 100); do [ -S "$work/forged.sock" ] && break; kill -0 $forged 2>/dev/null || break; sleep 0.05; done
    # The restore runs when the first front-end connects.
    LD_LIBRARY_PATH=$work/lib VGPU_SOCKET=$work/forged.sock VGPU_RECONNECT_SECS=0 timeout 20 ./checkpoint_loop kernels.cubin 1 0 >/dev/null 2>&1
    timeout 20 tail --pid=$forged -f /dev/null; kill -9 $forged 2>/dev/null; wait $forged
    frc=$?
    grep -iE "error|cannot" "$log" | sed 's/^/  log: /' | tail -4
    if [ $frc -ne 0 ] && grep -q "sm_100" "$log"; then
        echo "PASS refuse-cubin-for-another-gpu"; pass=$((pass + 1))
    else
        echo "FAIL refuse-cubin-for-another-gpu (rc=$frc)"; fail=$((fail + 1)); tail -5 "$log"
    fi
fi
echo "$pass passed, $fail failed"
