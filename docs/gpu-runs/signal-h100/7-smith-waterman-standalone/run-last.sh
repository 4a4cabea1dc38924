#!/bin/bash
# smith_waterman on the H100's NVIDIA OpenCL: native, and through vgpu with
# the guest library before and after it stopped resending unchanged
# kernel arguments (one backend), interleaved.
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
W=/tmp/s14sw; rm -rf $W; mkdir -p $W/old $W/new; chmod -R a+rwx $W
for v in old new; do cp $B/$v-libvgpu_opencl.so $W/$v/; echo $W/$v/$v-libvgpu_opencl.so > $W/$v/vgpu.icd; done
cp $B/smith_waterman $W/; chmod -R a+rwX $W
GPU=$($B/vgpu-backend --list-devices 2>/dev/null | grep NVIDIA | head -1 | cut -f1)
PLAT=${GPU#opencl:}; PLAT=${PLAT%%:*}
echo "gpu=$GPU platform=$PLAT" > $O/sw.txt
(umask 0; exec env RUST_LOG=info $B/vgpu-backend --socket $W/s --device $GPU --peer-memory > $W/b.log 2>&1) &
(umask 0; exec $B/vgpu-backend --socket $W/so --device $GPU --peer-memory --poll-us 2000 > $W/bo.log 2>&1) &
(umask 0; exec env VGPU_OPENCL_LAUNCH_THREAD=0 $B/vgpu-backend --socket $W/st --device $GPU --peer-memory > $W/bt.log 2>&1) &
for _ in $(seq 100); do [ -S $W/s ] && [ -S $W/so ] && [ -S $W/st ] && break; sleep 0.1; done
AS="setpriv --reuid nobody --regid nogroup --clear-groups env HOME=/tmp/nbhome"; mkdir -p /tmp/nbhome; chmod 777 /tmp/nbhome
for i in 1 2 3; do
  echo "native -i2 $($AS CLTEST_PLATFORM=$PLAT $W/smith_waterman -n 512 -m 1024 -i 2 2>&1 | grep TIME)"
  echo "vgpu -i2 thread off $($AS OCL_ICD_VENDORS=$W/new VGPU_SOCKET=$W/st $W/smith_waterman -n 512 -m 1024 -i 2 2>&1 | grep -E 'TIME|rror' | head -2)"
  echo "vgpu -i2 default $($AS OCL_ICD_VENDORS=$W/new VGPU_SOCKET=$W/s $W/smith_waterman -n 512 -m 1024 -i 2 2>&1 | grep -E 'TIME|rror' | head -2)"
  echo "vgpu -i2 poll 2000us $($AS OCL_ICD_VENDORS=$W/new VGPU_SOCKET=$W/so $W/smith_waterman -n 512 -m 1024 -i 2 2>&1 | grep -E 'TIME|rror' | head -2)"
done >> $O/sw.txt 2>&1
sleep 1; kill %1 %2 %3; sleep 1
grep -v sandbox $W/b.log | cut -c1-200 | sort | uniq -c | sort -rn | head -8 >> $O/sw.txt
grep -E "SetKernelArg|EnqueueNDRange|session profile" $W/b.log | head -12 >> $O/sw.txt
