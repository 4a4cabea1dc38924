#!/usr/bin/env bash
# Runs a list of CTS sub-tests inside the test guest (the patched QEMU, the
# guest image of integration/guest-image, the vgpu ICD over /dev/vgpu0 to a
# vgpu-backend on this host) and, at the same time, natively (PoCL through
# ocl-icd) on this host; then compares the two like run.sh.
#
#   integration/cts/guest.sh CTS_DIR LIST OUT [TIMEOUT_S]
#
# CTS_DIR: a CTS build tree's test_conformance/ (run.sh --build-only makes
#   one in ~/.cache/vgpu/cts-<hash>/); only the suites LIST names are
#   copied into the guest, with their data folders.
# LIST: "suite sub-test" lines (guest-list.txt is the committed one).
# OUT: native/SUITE.tsv and vgpu/SUITE.tsv (sub-test, result, seconds; the
#   vgpu side is the guest), native.txt and console.log (every line of
#   each side, with the last log lines of what did not pass), backend.log,
#   results.json; the comparison table is printed (compare.py).
# TIMEOUT_S: per sub-test (default 120), the same on both sides.
#
# Environment: VGPU_PROFILE (debug or release: which build of the ICD and
# backend, default debug), VGPU_QEMU (default: target/qemu-path),
# VGPU_ACCEL (tcg, the default, or kvm), CTS_GUEST_MEMORY_MB (2048),
# CTS_NATIVE_ICD (PoCL's .icd), CTS_SIDES ("native vgpu"), CTS_BACKEND_ARGS
# (more vgpu-backend options, e.g. "--memory 1G" so that test_allocations
# fits the guest's RAM).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cts=$(cd "${1:?usage: guest.sh CTS_DIR LIST OUT [TIMEOUT_S]}" && pwd)
list=$(realpath "${2:?LIST}")
out=${3:?OUT}
timeout_s=${4:-120}
profile=${VGPU_PROFILE:-debug}
accel=${VGPU_ACCEL:-tcg}
memory=${CTS_GUEST_MEMORY_MB:-2048}
sides=${CTS_SIDES:-native vgpu}
qemu=${VGPU_QEMU:-$(cat "$root/target/qemu-path" 2>/dev/null || true)}
[ -x "$qemu" ] || { echo "no patched QEMU (VGPU_QEMU, or target/qemu-path from scripts/setup.sh)" >&2; exit 1; }
for f in "$root/target/$profile/vgpu-backend" "$root/target/$profile/libvgpu_opencl.so"; do
    [ -f "$f" ] || { echo "missing $f: cargo build -p vgpu-backend -p vgpu-opencl" >&2; exit 1; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-cts-guest.XXXXXX")
backend_pid=
cleanup() {
    [ -n "$backend_pid" ] && kill "$backend_pid" 2>/dev/null && wait "$backend_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# The guest's files: the ICD, the listed suites (binary and data folders,
# in the same layout as CTS_DIR) and the runner.
extra=$work/extra
"$root/integration/stage-guest-files.sh" "$extra" "$profile" > /dev/null
mkdir -p "$extra/opt/vgpu/cts"
for suite in $(awk '!/^[[:space:]]*#/ && NF >= 2 { print $1 }' "$list" | sort -u); do
    bin=$(find "$cts" -maxdepth 3 -type f -name "$suite" -perm -u+x | head -n 1)
    [ -n "$bin" ] || { echo "no $suite in $cts" >&2; exit 1; }
    rel=$(dirname "${bin#"$cts"/}")
    mkdir -p "$extra/opt/vgpu/cts/$rel"
    (cd "$(dirname "$bin")" && tar --exclude CMakeFiles --exclude cmake_install.cmake -cf - .) |
        tar -xf - -C "$extra/opt/vgpu/cts/$rel"
done
install -m 0644 "$list" "$extra/opt/vgpu/cts/list.txt"
install -m 0755 "$here/run-list.sh" "$extra/opt/vgpu/bin/vgpu-cts-run-list"
"$root/integration/guest-image/build-guest-image.sh" "$work/image" "$extra" > /dev/null

# Native side: the same runner on this host, PoCL only.
native_icd=${CTS_NATIVE_ICD:-$(grep -l -i pocl /etc/OpenCL/vendors/*.icd 2>/dev/null | head -n 1 || true)}
mkdir -p "$work/native-icd"
[ -n "$native_icd" ] && cp "$native_icd" "$work/native-icd/"
run_native() {
    env OCL_ICD_VENDORS="$work/native-icd" XDG_CACHE_HOME="$work/cache-native" \
        POCL_CACHE_DIR="$work/cache-native/pocl" TMPDIR="$work" \
        sh "$here/run-list.sh" "$list" "$cts" "$timeout_s" > "$out/native.txt" 2>&1
}

# vgpu side: a backend on a fresh socket, the guest on it.
run_guest() {
    local socket=$work/vgpu.sock
    # The backend's own PoCL cache: it drops to an unprivileged user, which
    # could not write one under $work.
    # shellcheck disable=SC2086 # CTS_BACKEND_ARGS is a list of words
    "$root/target/$profile/vgpu-backend" --socket "$socket" --log-level warn \
        ${CTS_BACKEND_ARGS:-} > "$out/backend.log" 2>&1 &
    backend_pid=$!
    for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.1; done
    local cpu=max
    [ "$accel" = kvm ] && cpu=host
    # The whole list may take its per-sub-test timeout at worst.
    local n
    n=$(grep -c -v '^[[:space:]]*#' "$list" || true)
    timeout -s KILL $(( n * (timeout_s + 10) + 120 )) \
        "$qemu" -machine "q35,accel=$accel" -cpu "$cpu" -m "${memory}M" \
        -display none -monitor none -no-reboot -nodefaults -nic none \
        -object "memory-backend-memfd,id=mem,size=${memory}M,share=on" -numa node,memdev=mem \
        -chardev "socket,id=vgpu0,path=$socket" -device vhost-user-vgpu-pci,chardev=vgpu0 \
        -serial "file:$out/console.log" \
        -kernel "$work/image/vmlinux" -initrd "$work/image/initramfs.gz" \
        -append "console=ttyS0 quiet vgpu.run=/opt/vgpu/bin/vgpu-cts-run-list,/opt/vgpu/cts/list.txt,/opt/vgpu/cts,$timeout_s" \
        > "$out/qemu.log" 2>&1 || echo "qemu: exit $?" >> "$out/qemu.log"
    kill "$backend_pid" 2>/dev/null || true
    wait "$backend_pid" 2>/dev/null || true
    backend_pid=
}

started=$(date +%s)
pids=()
for side in $sides; do
    case $side in
        native) run_native & pids+=($!) ;;
        vgpu) run_guest & pids+=($!) ;;
    esac
done
for p in "${pids[@]}"; do wait "$p" || true; done
echo "both sides done in $(( $(date +%s) - started )) s ($accel guest, $memory MiB)"

# One TSV per side and suite, as run.sh writes them (compare.py reads them).
split() {
    local side=$1 file=$2
    rm -rf "${out:?}/$side"
    mkdir -p "$out/$side"
    [ -f "$file" ] || return 0
    # A record may follow a guest kernel message or a log line left open
    # on the same console line.
    tr -d '\r' < "$file" | sed 's/^.*VGPU-CTS\t/VGPU-CTS\t/' | awk -F'\t' -v dir="$out/$side" \
        '$1 == "VGPU-CTS" && NF == 5 { print $3 "\t" $4 "\t" $5 > (dir "/" $2 ".tsv") }'
}
split native "$out/native.txt"
split vgpu "$out/console.log"
grep -h 'VGPU-GUEST-EXIT' "$out/console.log" || echo "the guest did not finish (console.log)"
python3 "$here/compare.py" "$out"
