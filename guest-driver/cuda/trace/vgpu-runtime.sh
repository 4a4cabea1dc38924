#!/bin/bash
# On the GPU machine: how far do CUDA runtime programs get through vgpu?
# Runs clients/vecadd.cu (static and shared cudart) and torch's
# is_available() through libvgpu_cuda.so (loopback) with RUST_LOG=debug,
# then vecadd with cutrace stacked over libvgpu_cuda.so (which export
# tables cudart got), and compares every device attribute natively and
# through vgpu (attrprobe.c).
# usage: bash vgpu-runtime.sh BIN_DIR OUT_DIR   (BIN_DIR: vgpu-backend, libvgpu_cuda.so)
set -u
bin=$(cd "$1" && pwd); out=$2; mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); cd "$work"
nvcc -o vecadd_static "$here/clients/vecadd.cu" && nvcc -cudart shared -o vecadd_shared "$here/clients/vecadd.cu" &&
	nvcc -o attrprobe "$here/attrprobe.c" -lcuda || exit 1
mkdir -p lib && ln -sf "$bin/libvgpu_cuda.so" lib/libcuda.so.1 && ln -sf "$bin/libvgpu_cuda.so" lib/libcuda.so
sock=$work/vgpu.sock
RUST_LOG=info "$bin/vgpu-backend" --socket "$sock" --device cuda:0 >"$out/backend.log" 2>&1 &
backend=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
vgpu() { LD_LIBRARY_PATH=$work/lib VGPU_SOCKET=$sock RUST_LOG=debug "$@"; }
for p in vecadd_static vecadd_shared; do
	echo "== $p through vgpu"
	vgpu timeout 60 ./$p >"$out/$p.log" 2>&1
	echo "rc=$?"
	grep -v cuGetProcAddress "$out/$p.log" | head -15
done
echo "== vecadd_static: cutrace over libvgpu_cuda"
mkdir -p ct && cp -r "$here"/* ct/ && (cd ct && make REAL="$bin/libvgpu_cuda.so" libcuda.so.1 >/dev/null 2>&1 && mkdir -p lib && cp libcuda.so.1 lib/)
CUTRACE_REAL=$bin/libvgpu_cuda.so CUTRACE_OUT=$out/cutrace-vecadd LD_LIBRARY_PATH=$work/ct/lib VGPU_SOCKET=$sock \
	timeout 60 ./vecadd_static >/dev/null 2>&1
sed -n '/exporttable/,/integrity/p' "$out"/cutrace-vecadd.* | grep -v "code calls\|data 0x"
echo "== torch through vgpu"
vgpu timeout 120 python3 -c 'import torch; print("available", torch.cuda.is_available())' >"$out/torch.log" 2>&1
echo "rc=$?"
grep -v cuGetProcAddress "$out/torch.log" | tail -8
echo "== device attributes that differ (id, native result value | vgpu result value)"
./attrprobe >"$out/attr-native.txt"
LD_LIBRARY_PATH=$work/lib VGPU_SOCKET=$sock ./attrprobe >"$out/attr-vgpu.txt"
paste -d' ' "$out/attr-native.txt" "$out/attr-vgpu.txt" | awk '$2 != $5 || $3 != $6 {print $1, $2, $3, "|", $5, $6}'
kill "$backend"
wait "$backend" 2>/dev/null
