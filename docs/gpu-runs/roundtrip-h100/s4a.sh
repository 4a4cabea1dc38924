#!/bin/bash
# Where does a synchronous CUDA call's added time go? Native set-up steps
# (sync_probe), then the pinned probe through backends with the profile,
# sandbox on/off and launch thread on/off.
set -u
R=$PWD; B=$R/.gpu-s4/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi -L; nproc; cat /sys/devices/system/clocksource/clocksource0/current_clocksource
W=/tmp/s4; rm -rf $W; mkdir -p $W/lib; cd $W
cp $R/integration/cuda-tests/common.h $R/.gpu-s4/*.c .
gcc -O2 -o sync_probe sync_probe.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda -lpthread || echo "FAIL gcc sync_probe"
nvcc -O2 -o pinned_probe pinned_probe.c -lcuda || echo "FAIL nvcc pinned"
echo "== native set-up steps"; ./sync_probe | tee $O/sync-probe.txt
echo "== native pinned probe"; ./pinned_probe | tee $O/probe-native.txt
ln -sf $B/libvgpu_cuda.so lib/libcuda.so.1
run() { # name, env for backend, backend args...
  local name=$1; shift; local envs=$1; shift
  env $envs VGPU_BACKEND_PROFILE=1 RUST_LOG=info $B/vgpu-backend --socket $W/$name --device cuda:0 "$@" > $W/$name.log 2>&1 &
  local p=$!
  for _ in $(seq 100); do [ -S $W/$name ] && break; sleep 0.1; done
  LD_LIBRARY_PATH=$W/lib VGPU_SOCKET=$W/$name VGPU_LOOPBACK_MEM_MB=512 VGPU_CUDA_TRACE=1 ./pinned_probe > $W/$name.out 2>&1
  sleep 0.5; kill $p; wait $p 2>/dev/null
  echo "-- $name: $envs $*"; grep -E "us$|^waits" $W/$name.out; grep -E "CuMemcpyDtoH|CuCtxSynchronize" $W/$name.out
  grep -A40 "session profile" $W/$name.log | grep -vE "INFO|^\s*$" | head -30
}
{
run def ""
run nosandbox "" --sandbox none
run nothread "VGPU_CUDA_LAUNCH_THREAD=0"
run nopin "" --cuda-pin-guest-memory 0
run poll0 "" --poll-us 0
run def2 ""
} 2>&1 | tee $O/vgpu-variants.txt
cp $W/def.log $O/backend-def.log
