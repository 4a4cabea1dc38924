#!/bin/bash
# Loopback transfer bandwidth on the GPU machine: native, vgpu copying
# through the shared memfd (copy), vgpu with --peer-memory (peer), for
# NVIDIA OpenCL, PoCL and CUDA. Programs run as nobody, the user a
# root-started backend's workers become (cross-memory attach needs the
# same user on both ends).
set -u
src=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/gd-out}
mkdir -p "$out"
w=/tmp/gd; rm -rf $w; mkdir -p $w $w/cache; chmod 777 $w; chown nobody:nogroup $w/cache
# Where nobody can read them whatever the checkout's folders allow.
cp -r "$src" $w/bin; chmod -R a+rX $w/bin; d=$w/bin
nvidia-smi -L; nproc; uptime
ls -l /dev/nvidia0 /dev/nvidiactl
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu
as_nobody="setpriv --reuid=65534 --regid=65534 --clear-groups env POCL_CACHE_DIR=$w/cache"
echo "$d/libvgpu_opencl.so" > $w/vgpu.icd

backend() {  # mode device-spec
  local extra=""; [ "$1" = peer ] && extra=--peer-memory
  rm -f $w/b.sock
  (umask 000; exec "$d/vgpu-backend" --socket $w/b.sock --log-level info --device "$2" $extra) > $w/backend-$1.log 2>&1 &
  bpid=$!
  for _ in $(seq 300); do [ -S $w/b.sock ] && break; sleep 0.1; done
}
stop() { kill $bpid; wait $bpid 2>/dev/null; grep -h "peer memory" $w/backend-*.log | tail -1; }

ocl() {  # label native-platform-env device-spec
  local label=$1 penv=$2 spec=$3
  echo "== $label native"; $as_nobody $penv timeout 120 "$d/bandwidth" -r 3 -m 1048576 -M 268435456 2>&1 | grep -E "device|SAMPLE|RESULT" | sed "s/^/$label native /"
  for mode in copy peer; do
    backend $mode "$spec"
    echo "== $label $mode"; $as_nobody OCL_ICD_VENDORS=$w/vgpu.icd VGPU_SOCKET=$w/b.sock VGPU_RECONNECT_SECS=0 timeout 120 "$d/bandwidth" -r 3 -m 1048576 -M 268435456 2>&1 | grep -E "device|SAMPLE|RESULT" | sed "s/^/$label $mode /"
    stop
  done
}
# Which platform index is NVIDIA natively.
for i in 0 1; do
  name=$($as_nobody CLTEST_PLATFORM=$i timeout 60 "$d/bandwidth" -r 1 -m 4096 -M 4096 2>&1 | grep "device:")
  echo "platform $i: $name"
  case "$name" in *NVIDIA*) nv=$i ;; *device:*) pocl=$i ;; esac
done
[ -n "${nv:-}" ] && ocl nvidia-opencl "CLTEST_PLATFORM=$nv" "opencl:$nv:0" 2>&1 | tee $out/nvidia-opencl.txt
[ -n "${pocl:-}" ] && ocl pocl "CLTEST_PLATFORM=$pocl" "opencl:$pocl:0" 2>&1 | tee $out/pocl.txt

# CUDA (the guest libcuda; no one-copy path yet: peer data is bounced).
cd $w && cp "$d"/bench.c "$d"/common.h "$d"/kernels.cu . && nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o cubench bench.c -lcuda && chmod 755 cubench && chmod 644 kernels.ptx
mkdir -p $w/lib && ln -sf "$d/libvgpu_cuda.so" $w/lib/libcuda.so.1
{
  echo "== cuda native"; $as_nobody timeout 120 ./cubench kernels.ptx | grep -E "htod|dtoh"
  for mode in copy peer; do
    backend $mode cuda:0
    echo "== cuda $mode"; $as_nobody LD_LIBRARY_PATH=$w/lib VGPU_SOCKET=$w/b.sock VGPU_LOOPBACK_MEM_MB=512 VGPU_RECONNECT_SECS=0 timeout 120 ./cubench kernels.ptx | grep -E "htod|dtoh"
    stop
  done
} 2>&1 | tee $out/cuda.txt
cp $w/backend-*.log $out/ 2>/dev/null
