#!/bin/bash
# 1. Does where the backend and the program run (cores) decide the round
#    trip? pinned_probe natively and through vgpu with the backend and the
#    program pinned to: hyperthread siblings, two cores of one L3, cores far
#    apart, and unpinned.
# 2. CUDA checkpoints with module images shared (no copy in the pause).
set -u
R=$PWD; B=$R/.gpu-s4/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
{
lscpu | grep -E "Model name|Socket|Core|Thread|NUMA|L3"
for c in 2; do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list) l3 $(cat /sys/devices/system/cpu/cpu$c/cache/index3/shared_cpu_list 2>/dev/null)"; done
} | tee $O/topology.txt
A=2
SIB=$(cut -d, -f2 < /sys/devices/system/cpu/cpu$A/topology/thread_siblings_list | cut -d- -f2)
[ "$SIB" = "$A" ] && SIB=3
NEAR=4; FAR=$(( $(nproc) - 2 ))
W=/tmp/s4; rm -rf $W; mkdir -p $W/lib; cd $W
cp $R/integration/cuda-tests/common.h $R/.gpu-s4/pinned_probe.c .
nvcc -O2 -o pinned_probe pinned_probe.c -lcuda || echo "FAIL nvcc pinned"
ln -sf $B/libvgpu_cuda.so lib/libcuda.so.1
pair() { # name backend-cpus program-cpus
  local name=$1 bc=$2 pc=$3
  if [ "$bc" = any ]; then BT=""; else BT="taskset -c $bc"; fi
  if [ "$pc" = any ]; then PT=""; else PT="taskset -c $pc"; fi
  $BT $B/vgpu-backend --socket $W/$name --device cuda:0 > $W/$name.log 2>&1 &
  local p=$!
  for _ in $(seq 100); do [ -S $W/$name ] && break; sleep 0.1; done
  LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/$name VGPU_LOOPBACK_MEM_MB=512 $PT ./pinned_probe > $W/$name.out 2>&1
  kill $p; wait $p 2>/dev/null
  echo "$name backend=$bc program=$pc: $(tr '\n' ' ' < $W/$name.out)"
}
{
echo "native any: $(./pinned_probe | tr '\n' ' ')"
echo "native cpu$A: $(taskset -c $A ./pinned_probe | tr '\n' ' ')"
for k in 1 2; do
pair any$k any any
pair sib$k $SIB $A
pair near$k $NEAR $A
pair far$k $FAR $A
done
} 2>&1 | tee $O/placement.txt
cd $R
echo "== checkpoints"
CKPT_PROGRAM=torch_ckpt.py CKPT_ITERATIONS=30 CKPT_PAUSE_MS=100 timeout 150 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck1 2>&1 | tee $O/torch-checkpoint.txt | grep -E "^(PASS|FAIL)|passed|figures|ctl:"
timeout 200 bash integration/cuda-tests/checkpoint.sh $B /tmp/ck3 2>&1 | tee $O/c-checkpoint.txt | grep -E "^(PASS|FAIL)|passed|figures|ctl:"
echo "== checkpoint while PyTorch trains"
W=/tmp/live; rm -rf $W; mkdir -p $W/lib; ln -sf $B/libvgpu_cuda.so $W/lib/libcuda.so.1
$B/vgpu-backend --socket $W/s --control $W/c --device cuda:0 > $W/backend.log 2>&1 & BK=$!
for _ in $(seq 100); do [ -S $W/s ] && [ -S $W/c ] && break; sleep 0.1; done
LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/s VGPU_LOOPBACK_MEM_MB=512 timeout 120 python3 integration/cuda-tests/runtime/torch_ckpt.py 60 50 > $W/prog.txt 2>&1 & PR=$!
for _ in $(seq 600); do grep -q '^PROGRESS 10' $W/prog.txt && break; sleep 0.05; done
for i in 1 2 3; do $B/vgpu-ctl --control $W/c --json checkpoint $W/kc$i.ckpt --copy-on-write; echo; done | tee $O/live-ctl.txt
$B/vgpu-ctl --control $W/c --json checkpoint $W/k0.ckpt --rounds 0 | tee -a $O/live-ctl.txt; echo
wait $PR; echo "program rc=$?"; tail -2 $W/prog.txt
kill $BK; wait $BK 2>/dev/null
