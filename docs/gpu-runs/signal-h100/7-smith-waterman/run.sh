#!/bin/bash
# smith_waterman on the H100's NVIDIA OpenCL: native, and through vgpu with
# the guest library before and after it stopped resending unchanged
# kernel arguments (one backend), interleaved.
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
W=/tmp/s14sw; rm -rf $W; mkdir -p $W/old $W/new; chmod -R a+rwx $W
for v in old new; do cp $B/$v-libvgpu_opencl.so $W/$v/; echo $W/$v/$v-libvgpu_opencl.so > $W/$v/vgpu.icd; done
cp $B/smith_waterman $W/; cp -r $B/lib $W/lib; chmod -R a+rwX $W
GPU=$($B/vgpu-backend --list-devices 2>/dev/null | grep NVIDIA | head -1 | cut -f1)
PLAT=${GPU#opencl:}; PLAT=${PLAT%%:*}
echo "gpu=$GPU platform=$PLAT" > $O/sw.txt
(umask 0; exec env RUST_LOG=info VGPU_BACKEND_PROFILE=1 $B/vgpu-backend --socket $W/s --device $GPU --peer-memory > $W/b.log 2>&1) &

for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
AS="setpriv --reuid nobody --regid nogroup --clear-groups env HOME=/tmp/nbhome LD_LIBRARY_PATH=$W/lib"; mkdir -p /tmp/nbhome; chmod 777 /tmp/nbhome
echo "== native platform 0 (ocl-icd order)"; $AS CLTEST_PLATFORM=0 $W/smith_waterman -n 64 -m 128 -i 1 2>&1 | head -1 >> $O/sw.txt
echo "== vgpu"; $AS OCL_ICD_VENDORS=$W/new/vgpu.icd VGPU_SOCKET=$W/s $W/smith_waterman -n 64 -m 128 -i 1 2>&1 | head -4 >> $O/sw.txt
for i in 1 2 3 4 5 6; do
  for sz in "-n 512 -m 1024" "-n 1024 -m 2048"; do
  echo "native $sz $($AS CLTEST_PLATFORM=0 $W/smith_waterman $sz -i 2 2>&1 | grep TIME)"
  for v in old new; do echo "$v-icd $sz $($AS OCL_ICD_VENDORS=$W/$v/vgpu.icd VGPU_SOCKET=$W/s VGPU_RECONNECT_SECS=0 $W/smith_waterman $sz -i 2 2>&1 | grep -E 'TIME|rror' | head -2)"; done
  done
done >> $O/sw.txt 2>&1
sleep 1; kill %1; sleep 1
grep -c "front-end .* connected" $W/b.log >> $O/sw.txt; grep -E "SetKernelArg|EnqueueNDRange" $W/b.log | head -6 >> $O/sw.txt
grep -E "SetKernelArg|EnqueueNDRange|session profile" $W/b.log | head -12 >> $O/sw.txt
