#!/bin/bash
# Issue 16/19, session of 2026-11-25 (2): the backend and library before
# this session (old) against the final ones (new), native alongside, on
# one machine in one run: transport ping, 1 MiB page-locked copies and
# empty synchronizations, page-locked copies by size, and bench.c.
set -u
R=$PWD; B=$R/.gpu-s14/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
W=/tmp/s14f; rm -rf $W; mkdir -p $W/new $W/old; ln -sf $B/old-libvgpu_cuda.so $W/old/libcuda.so.1; ln -sf $B/libvgpu_cuda.so $W/new/libcuda.so.1
cd $W && cp $R/integration/cuda-tests/{bench.c,common.h,kernels.cu} $R/.gpu-s14/{pinned_probe.c,sweep.c} . && nvcc -ptx -arch=sm_90 kernels.cu -o kernels.ptx && nvcc -O2 -o bench bench.c -lcuda && nvcc -O2 -o probe pinned_probe.c -lcuda && nvcc -O2 -o sweep sweep.c -lcuda
$B/old-backend --socket $W/so --device cuda:0 > $W/old.log 2>&1 & BO=$!
$B/vgpu-backend --socket $W/sn --device cuda:0 > $W/new.log 2>&1 & BN=$!
for _ in $(seq 100); do [ -S $W/so ] && [ -S $W/sn ] && break; sleep 0.1; done
vg() { env LD_LIBRARY_PATH=$W/$1 VGPU_SOCKET=$W/s${1:0:1} VGPU_LOOPBACK_MEM_MB=512 "${@:2}"; }
{ nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)"; } > $O/device.txt
{ for i in 1 2 3; do echo "== old"; VGPU_SOCKET=$W/so $B/old-ping 200000; echo "== new"; VGPU_SOCKET=$W/sn $B/ping 200000; done; } > $O/ping.txt 2>&1
{ for i in 1 2; do echo "== native"; ./probe; for s in old new; do echo "== $s"; vg $s ./probe; done; done; } > $O/probe.txt 2>&1
{ for i in 1 2; do echo "== native"; ./sweep; for s in old new; do echo "== $s"; vg $s ./sweep; done; done; } > $O/sweep.txt 2>&1
{ for i in 1 2 3; do echo "== round $i: metric native old new"; ./bench kernels.ptx > bn.txt 2>&1; vg old ./bench kernels.ptx > bo.txt 2>&1; vg new ./bench kernels.ptx > bnew.txt 2>&1; paste <(grep bench bn.txt) <(grep bench bo.txt | awk '{print $3}') <(grep bench bnew.txt | awk '{print $3}'); done; } > $O/bench.txt 2>&1
kill $BO $BN; wait $BO $BN 2>/dev/null
grep -il panic $W/old.log $W/new.log
exit 0
