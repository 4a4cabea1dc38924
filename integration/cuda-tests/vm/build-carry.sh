#!/usr/bin/env bash
# Builds, on this (GPU-less) Debian 12 machine, everything a CUDA run inside
# a VM on the GPU machine needs, as one archive: the CUDA test programs
# (built with NVIDIA's CUDA 13.0 compiler from PyPI, matching the GPU
# machine's driver), a test guest whose libcuda.so.1 is vgpu's, the patched
# QEMU with its libraries and firmware, and vgpu-backend.
#
#   integration/cuda-tests/vm/build-carry.sh CARRY_DIR
#
# CARRY_DIR gets vm.tar.xz, run-vm.sh and migrate-vm.sh; on the GPU machine:
#   bash CARRY_DIR/run-vm.sh CARRY_DIR OUT_DIR
#   bash CARRY_DIR/migrate-vm.sh CARRY_DIR OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
carry=$(mkdir -p "${1:?CARRY_DIR}" && cd "$1" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/vgpu
log() { echo "build-carry: $*" >&2; }

# --- CUDA 13.0 compiler and runtime from PyPI (cached) ---------------------
wheels=(nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96)
tc=$cache/cuda-pip-$(printf '%s\n' "${wheels[@]}" | sha256sum | cut -c1-12)
if [ ! -x "$tc/nvidia/cu13/bin/nvcc" ]; then
	log "fetching the CUDA compiler wheels"
	rm -rf "$tc.tmp" && mkdir -p "$tc.tmp"
	python3 -m pip download -q --no-deps --only-binary=:all: -d "$tc.tmp" "${wheels[@]}"
	(cd "$tc.tmp" && for w in *.whl; do unzip -qo "$w" && rm "$w"; done)
	ln -sfn ../lib "$tc.tmp/nvidia/cu13/nvvm/lib64"
	ln -sfn libcudart.so.13 "$tc.tmp/nvidia/cu13/lib/libcudart.so"
	rm -rf "$tc" && mv "$tc.tmp" "$tc"
fi
cu=$tc/nvidia/cu13
export PATH=$cu/bin:$PATH

# --- vgpu binaries ------------------------------------------------------------
log "building the release binaries"
(cd "$repo" && cargo build -q --release -p vgpu-backend -p vgpu-cuda)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/link"
install -m 0755 "$repo/target/release/vgpu-backend" "$repo/target/release/libvgpu_cuda.so" "$work/bin/"
strip "$work/bin/vgpu-backend" "$work/bin/libvgpu_cuda.so"
ln -s "$work/bin/libvgpu_cuda.so" "$work/link/libcuda.so"

# --- the programs -------------------------------------------------------------
log "building the CUDA programs"
progs=$work/guest/opt/vgpu/cuda
mkdir -p "$progs" "$work/guest/usr/lib/x86_64-linux-gnu"
src=$repo/integration/cuda-tests
(
	cd "$progs"
	nvcc -ptx -arch=sm_90 "$src/kernels.cu" -o kernels.ptx
	nvcc -fatbin -gencode arch=compute_90,code='[sm_90,compute_90]' "$src/kernels.cu" -o kernels.fatbin
	nvcc -cubin -arch=sm_90 "$src/kernels.cu" -o kernels.cubin
	for p in vecadd matmul streams async_copies host_funcs overlap globals checkpoint_loop; do
		nvcc -O2 -I"$src" -o $p "$src/$p.c" -L"$cu/lib" -L"$work/link" -lcuda
	done
	clients=$repo/guest-driver/cuda/trace/clients
	nvcc -L"$cu/lib" -o vecadd_static "$clients/vecadd.cu"
	nvcc -L"$cu/lib" -cudart shared -o vecadd_shared "$clients/vecadd.cu"
	install -m 0755 "$here/guest-suite.sh" "$here/tests.sh" "$here/loop.sh" .
)
install -m 0755 "$work/bin/libvgpu_cuda.so" "$work/guest/usr/lib/x86_64-linux-gnu/libcuda.so.1"
install -m 0755 "$cu/lib/libcudart.so.13" "$work/guest/usr/lib/x86_64-linux-gnu/"

# --- the guest, QEMU ------------------------------------------------------------
log "building the guest image"
image=$("$repo/integration/guest-image/build-guest-image.sh" "$work/image" "$work/guest" | tail -1)
qemu=$("$repo/qemu-configs/build-qemu.sh" | tail -1)
vm=$work/vm
mkdir -p "$vm/lib" "$vm/fw" "$vm/cuda" "$vm/cudart"
cp "$image" "$vm/initramfs.gz"
deb=$(ls "$cache"/debs/linux-image-*.deb | head -1)
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" --wildcards './boot/vmlinuz-*'
cp "$work"/boot/vmlinuz-* "$vm/bzImage"
cp "$qemu.bin" "$vm/qemu-system-x86_64.bin"
ldd "$vm/qemu-system-x86_64.bin" | awk '$3 ~ /^\// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux)[.-]' |
	xargs -I{} cp -L {} "$vm/lib/"
cp /usr/share/seabios/bios-256k.bin /usr/share/qemu/{linuxboot_dma,pvh,kvmvapic}.bin "$vm/fw/"
cp -a "$progs/." "$vm/cuda/"
# For the native run of vecadd_shared (the GPU machine's CUDA libraries
# need not be on the loader's path).
cp "$cu/lib/libcudart.so.13" "$vm/cudart/"
cp "$work/bin/"* "$vm/"
tar -C "$work" -cJf "$carry/vm.tar.xz" vm
install -m 0755 "$here/run-vm.sh" "$here/migrate-vm.sh" "$here/snapshot-vm.sh" "$here/guest-qemu.sh" "$carry/"
ls -l "$carry" >&2
