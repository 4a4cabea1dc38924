#!/bin/bash
# Peer copies through page-locked staging, pipelined and striped over
# threads (VGPU_PEER_COPY_THREADS): native vs vgpu loopback for CUDA
# (bench.c), NVIDIA OpenCL and PoCL (bandwidth); then the CUDA driver-API
# suite through --peer-memory. Programs run as nobody, the user the
# root-started backend's workers become (cross-memory attach needs one
# user on both ends).
set -u
R=$PWD; src=$R/.gpu-s9/bin; out=${OUT:-/tmp/out}; mkdir -p $out
w=/tmp/gd; rm -rf $w; mkdir -p $w $w/cache; chmod 777 $w; chown nobody:nogroup $w/cache
cp -r "$src" $w/bin; chmod -R a+rX $w/bin; d=$w/bin
nvidia-smi -L; nproc
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu PATH=$PATH:/usr/local/cuda/bin
as_nobody="setpriv --reuid=65534 --regid=65534 --clear-groups env POCL_CACHE_DIR=$w/cache"
echo "$d/libvgpu_opencl.so" > $w/vgpu.icd
backend() {  # label device-spec threads [extra]
  rm -f $w/b.sock
  local prof=0; case $3 in *p) prof=1 ;; esac
  (umask 000; VGPU_BACKEND_PROFILE=$prof VGPU_PEER_COPY_THREADS=${3%p} exec "$d/vgpu-backend" --socket $w/b.sock --log-level info --device "$2" ${4:-}) > $w/backend-$1.log 2>&1 &
  bpid=$!
  for _ in $(seq 300); do [ -S $w/b.sock ] && break; sleep 0.1; done
}
stop() { kill $bpid; wait $bpid 2>/dev/null; }
BW="-r 3 -m 1048576 -M 268435456"
ocl() {  # label native-platform-env device-spec
  local label=$1 penv=$2 spec=$3
  for round in 1 2; do
    echo "== $label native"; $as_nobody $penv timeout 100 "$d/bandwidth" $BW 2>&1 | grep -E "SAMPLE|RESULT" | sed "s/^/$label native /"
    for t in 1 4; do
      backend $label-t$t "$spec" $t --peer-memory
      echo "== $label peer t$t"; $as_nobody OCL_ICD_VENDORS=$w/vgpu.icd VGPU_SOCKET=$w/b.sock VGPU_RECONNECT_SECS=0 timeout 100 "$d/bandwidth" $BW 2>&1 | grep -E "SAMPLE|RESULT" | sed "s/^/$label peer-t$t /"
      stop
      grep -h "staged transfers" $w/backend-$label-t$t.log | tail -2 | sed "s/^/$label t$t: /"
    done
  done
}
for i in 0 1; do
  name=$($as_nobody CLTEST_PLATFORM=$i timeout 60 "$d/bandwidth" -r 1 -m 4096 -M 4096 2>&1 | grep "device:")
  echo "platform $i: $name"
  case "$name" in *NVIDIA*) nv=$i ;; *device:*) pocl=$i ;; esac
done
cd $w && cp $R/integration/cuda-tests/{bench.c,common.h,kernels.cu} . && nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o cubench bench.c -lcuda && chmod 755 cubench && chmod 644 kernels.ptx
mkdir -p $w/lib && ln -sf "$d/libvgpu_cuda.so" $w/lib/libcuda.so.1
{
  for round in 1 2; do
    echo "== cuda native"; $as_nobody timeout 100 ./cubench kernels.ptx | grep -E "htod|dtoh"
    for t in 1 4; do
      backend cuda-t$t cuda:0 $t --peer-memory
      echo "== cuda $t"; $as_nobody LD_LIBRARY_PATH=$w/lib VGPU_SOCKET=$w/b.sock VGPU_LOOPBACK_MEM_MB=512 VGPU_RECONNECT_SECS=0 timeout 100 ./cubench kernels.ptx | grep -E "htod|dtoh"
      stop
    done
  done
} 2>&1 | tee $out/cuda.txt
[ -n "${nv:-}" ] && ocl nvidia-opencl "CLTEST_PLATFORM=$nv" "opencl:$nv:0" 2>&1 | tee $out/nvidia-opencl.txt
[ -n "${pocl:-}" ] && [ -n "${WITH_POCL:-}" ] && ocl pocl "CLTEST_PLATFORM=$pocl" "opencl:$pocl:0" 2>&1 | tee $out/pocl.txt
# Medians per label, mode, direction and size (GB/s).
cat $out/nvidia-opencl.txt | awk '$3=="SAMPLE"{k=$1" "$2" "$4" "$5; v[k]=v[k]" "$6} END{for(k in v) print k, v[k]}' | sort -k1,1 -k3,3 -k4,4n -k2,2 |
  python3 -c "
import sys
for line in sys.stdin:
    f=line.split(); xs=sorted(map(float,f[4:])); print(f[0],f[1],f[2],int(f[3])>>20,'MiB median %.2f'%xs[len(xs)//2],'n=%d'%len(xs))
" | tee $out/opencl-medians.txt
# The driver-API suite through --peer-memory, as nobody (so its backend's
# workers and the programs share a user).
mkdir -p $w/suite && chmod 777 $w/suite
$as_nobody HOME=$w VGPU_BACKEND_ARGS=--peer-memory timeout 250 bash $R/integration/cuda-tests/run-gpu.sh $d $w/suite > $out/suite-peer.txt 2>&1
grep -E "^(PASS|FAIL)|passed|failed" $out/suite-peer.txt | tail -20
grep -h "peer" $w/suite/backend.log | head -5
grep -il "panic" $w/backend-*.log $w/suite/backend.log
