#!/bin/bash
# Worker file-system confinement (Landlock) on the GPU machine: the sandbox
# probe on NVIDIA OpenCL and on CUDA, confined; the paths each driver
# opens, unconfined (strace), and the refusals if a confined probe fails.
set -u
B=$PWD/.gpu-confine; O=${OUT:-/tmp/out}; mkdir -p $O
E=$O/env.txt
{ uname -r; id; nvidia-smi -L; ls -l /dev/nvidia* /dev/dri 2>&1; } > $E 2>&1
mkdir -p /etc/OpenCL/vendors
[ -e /etc/OpenCL/vendors/nvidia.icd ] || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
ls /etc/OpenCL/vendors >> $E 2>&1
timeout 30 $B/vgpu-backend --list-devices >> $E 2>&1
GPU=$(timeout 30 $B/vgpu-backend --list-devices 2>/dev/null | grep NVIDIA | head -1 | cut -f1)
echo "opencl device: $GPU" >> $E
mkdir -p /tmp/ctl && chmod 777 /tmp/ctl
ST() { LD_LIBRARY_PATH=$B/lib $B/strace "$@"; }
for kind in opencl cuda; do
  dev=$GPU; [ $kind = cuda ] && dev=cuda:0
  RUST_LOG=info timeout 90 $B/vgpu-backend --probe-sandbox --device "$dev" --control /tmp/ctl/c.sock \
    > $O/probe-$kind.json 2> $O/probe-$kind.log
  rc=$?; echo "probe $kind ($dev) rc=$rc" >> $E
  # The files the driver opens, unconfined (for the list), and, if the
  # confined probe failed, the calls refused to it.
  ST -f -qq -e trace=%file -o /tmp/st-$kind.txt timeout 90 $B/vgpu-backend --probe-sandbox --sandbox none \
    --device "$dev" > /dev/null 2>&1
  grep -v ENOENT /tmp/st-$kind.txt | grep -oE '"/[^"]*"' | tr -d '"' | sed -E 's#/proc/[0-9]+#/proc/PID#; s#vgpu-worker-[^/]*#WORKER#' | sort | uniq -c > $O/paths-$kind.txt
  if [ $rc != 0 ]; then
    ST -f -qq -Z -e trace=%file,ioctl,connect -o /tmp/den-$kind.txt timeout 90 $B/vgpu-backend --probe-sandbox \
      --device "$dev" --control /tmp/ctl/c.sock > /dev/null 2>&1
    grep -E "EACCES|EPERM" /tmp/den-$kind.txt | head -200 >> $O/denied.txt
  fi
done
cat $E
for kind in opencl cuda; do echo "== $kind"; head -c 1500 $O/probe-$kind.json; echo; tail -3 $O/probe-$kind.log; done
