#!/bin/bash
# OpenCV's OpenCL T-API natively and through vgpu: the same operations
# (tapi_check.py, tapi_ops.py) run twice natively and once through vgpu
# (the guest ICD over the loopback transport, against a backend on a
# temporary socket), and their results are compared (compare.py).
#
#   integration/opencv/run.sh [--out DIR]
#
# Natively the device is the platform of $TAPI_NATIVE_ICD (default: PoCL's
# .icd); through vgpu, the backend's device ($TAPI_BACKEND_ARGS, e.g.
# "--device opencl:NVIDIA"). OpenCV loads libOpenCL itself: both sides get
# the ocl-icd loader ($TAPI_LIBOPENCL, default the system's libOpenCL.so.1)
# with OCL_ICD_VENDORS naming one .icd. The native run is done twice so
# that results which vary run to run on the device itself are known (see
# compare.py). Exit status: 0 when every operation that runs on OpenCL
# natively gives the same result through vgpu, 1 otherwise or when a side
# could not run.
#
# Environment:
#   TAPI_PYTHON       a python3 with cv2 and numpy (default: a venv cached
#                     under ~/.cache/vgpu/ with the pinned versions below)
#   TAPI_NATIVE_ICD   the native side's .icd file (default: PoCL's)
#   TAPI_LIBOPENCL    the ICD loader OpenCV opens (OPENCV_OPENCL_RUNTIME)
#   TAPI_DEVICE       OPENCV_OPENCL_DEVICE (default ":GPU:" when the native
#                     side has a GPU, else ":CPU:")
#   TAPI_BACKEND_ARGS more vgpu-backend options (split on spaces)
#   TAPI_SIZE         the image size, WxH (default 640x480)
#   VGPU_BIN_DIR      a folder holding vgpu-backend and libvgpu_opencl.so
#                     (default: a cargo build of this checkout)
#   VGPU_PROFILE      release (default) or debug, for the cargo build
set -euo pipefail

PINS="opencv-python-headless==5.0.0.93 numpy==2.4.6"

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 1 ;;
    esac
done

python=${TAPI_PYTHON:-}
if [ -z "$python" ]; then
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/vgpu
    venv=$cache/opencv-venv-$(echo "$PINS" | sha256sum | cut -c1-12)
    if [ ! -x "$venv/bin/python" ]; then
        echo "== venv $venv"
        rm -rf "$venv.tmp"
        python3 -m venv "$venv.tmp"
        # shellcheck disable=SC2086
        "$venv.tmp/bin/python" -m pip install -q $PINS
        mv "$venv.tmp" "$venv"
    fi
    python=$venv/bin/python
fi

if [ -n "${VGPU_BIN_DIR:-}" ]; then
    bin=$(cd "$VGPU_BIN_DIR" && pwd)
else
    profile=${VGPU_PROFILE:-release}
    release=()
    [ "$profile" = release ] && release=(--release)
    (cd "$root" && cargo build -q "${release[@]}" -p vgpu-opencl -p vgpu-backend)
    bin=$root/target/$profile
fi

native_icd=${TAPI_NATIVE_ICD:-$(grep -l -i pocl /etc/OpenCL/vendors/*.icd 2>/dev/null | head -1 || true)}
if [ -z "$native_icd" ] || [ ! -f "$native_icd" ]; then
    echo "no native .icd (set TAPI_NATIVE_ICD)" >&2
    exit 1
fi
libopencl=${TAPI_LIBOPENCL:-$(ldconfig -p | sed -n 's/.*libOpenCL.so.1 (libc6,x86-64) => //p' | head -1)}
if [ -z "$libopencl" ] || [ ! -f "$libopencl" ]; then
    echo "no libOpenCL.so.1 (install ocl-icd-libopencl1 or set TAPI_LIBOPENCL)" >&2
    exit 1
fi

work=$(mktemp -d /tmp/vgpu-tapi.XXXXXX)
out=${out:-$root/target/opencv}
mkdir -p "$out" "$work/native-icd" "$work/vgpu-icd"
out=$(cd "$out" && pwd)
cp "$native_icd" "$work/native-icd/"
echo "$bin/libvgpu_opencl.so" > "$work/vgpu-icd/vgpu.icd"
socket=$work/vgpu.sock
backend_pid=
cleanup() {
    if [ -n "$backend_pid" ]; then
        kill "$backend_pid" 2>/dev/null || true
        wait "$backend_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
# shellcheck disable=SC2086
"$bin/vgpu-backend" --socket "$socket" --log-level warn ${TAPI_BACKEND_ARGS:-} > "$out/backend.log" 2>&1 &
backend_pid=$!
for _ in $(seq 200); do
    [ -S "$socket" ] && break
    sleep 0.1
done
[ -S "$socket" ] || { echo "the backend did not open $socket" >&2; exit 1; }

# run NAME ICD_DIR [ENV...]: tapi_check.py with one platform visible and a
# fresh cache folder (OpenCV's, and PoCL's kernel cache where it is used).
run() {
    local name=$1 icd=$2
    shift 2
    mkdir -p "$work/cache-$name"
    env OCL_ICD_VENDORS="$icd" OPENCV_OPENCL_RUNTIME="$libopencl" \
        OPENCV_OPENCL_DEVICE="$device" XDG_CACHE_HOME="$work/cache-$name" "$@" \
        "$python" "$here/tapi_check.py" "$out/$name.json" --size "${TAPI_SIZE:-640x480}" \
        --expect-device "$expect" > "$out/$name.log" 2>&1 || true
    tail -1 "$out/$name.log"
}

# The device: a GPU when the native platform has one.
probe='import cv2; cv2.ocl.setUseOpenCL(True); print(cv2.ocl.Device.getDefault().name() if cv2.ocl.useOpenCL() else "")'
device=${TAPI_DEVICE:-}
if [ -z "$device" ]; then
    device=:GPU:
    name=$(env OCL_ICD_VENDORS="$work/native-icd" OPENCV_OPENCL_RUNTIME="$libopencl" \
        OPENCV_OPENCL_DEVICE=$device "$python" -c "$probe" 2>/dev/null || true)
    [ -n "$name" ] || device=:CPU:
fi
expect=$(env OCL_ICD_VENDORS="$work/native-icd" OPENCV_OPENCL_RUNTIME="$libopencl" \
    OPENCV_OPENCL_DEVICE=$device "$python" -c "$probe" 2>/dev/null || true)
if [ -z "$expect" ]; then
    echo "natively OpenCV finds no OpenCL device ($device, $native_icd)" >&2
    exit 1
fi
echo "== device $device: $expect"
echo "== native (1)"; run native1 "$work/native-icd"
echo "== native (2)"; run native2 "$work/native-icd"
# Through vgpu the device's name is "vgpu: <native name> (<platform>)".
echo "== vgpu"; run vgpu "$work/vgpu-icd" VGPU_SOCKET="$socket"
for side in native1 native2 vgpu; do
    [ -s "$out/$side.json" ] || { echo "$side: no results (see $out/$side.log)" >&2; exit 1; }
done
status=0
python3 "$here/compare.py" "$out/native1.json" "$out/native2.json" "$out/vgpu.json" \
    > "$out/summary.md" || status=$?
cat "$out/summary.md"
echo "results: $out"
exit "$status"
