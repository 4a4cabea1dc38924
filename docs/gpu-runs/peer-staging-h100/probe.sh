#!/bin/bash
# Where a 1 MiB pageable copy's time goes through --peer-memory staging.
set -u
R=$PWD; src=$R/.gpu-s9/bin; out=${OUT:-/tmp/out}; mkdir -p $out
w=/tmp/gd; rm -rf $w; mkdir -p $w; chmod 777 $w
cp -r "$src" $w/bin; chmod -R a+rX $w/bin; d=$w/bin
export PATH=$PATH:/usr/local/cuda/bin
as_nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
cd $w && cp $R/integration/cuda-tests/common.h $R/integration/cuda-tests/kernels.cu $R/.gpu-s9/probe/pageable_probe.c . && nvcc -O2 -o probe pageable_probe.c -lcuda && chmod 755 probe
mkdir -p $w/lib && ln -sf "$d/libvgpu_cuda.so" $w/lib/libcuda.so.1
PERF="env LD_LIBRARY_PATH=$R/.gpu-s4/perf/lib $R/.gpu-s4/perf/perf"
backend() { rm -f $w/b.sock; (umask 000; VGPU_BACKEND_PROFILE=$2 VGPU_PEER_COPY_THREADS=$1 exec "$d/vgpu-backend" --socket $w/b.sock --log-level info --device cuda:0 --peer-memory) > $w/backend-$1-$2.log 2>&1 & bpid=$!; for _ in $(seq 300); do [ -S $w/b.sock ] && break; sleep 0.1; done; }
vg="env LD_LIBRARY_PATH=$w/lib VGPU_SOCKET=$w/b.sock VGPU_LOOPBACK_MEM_MB=512 VGPU_RECONNECT_SECS=0"
for size in 1024 4096 16384; do
  echo "== native $size"; $as_nobody ./probe 2000 $size
  for t in 1 4; do backend $t 0; echo "== vgpu t$t $size"; $as_nobody $vg ./probe 2000 $size; kill $bpid; wait $bpid 2>/dev/null; done
done 2>&1 | tee $out/probe.txt
backend 4 1
$as_nobody $vg VGPU_CUDA_TRACE=1 ./probe 3000 1024 > $out/trace.txt 2>&1
kill $bpid; wait $bpid 2>/dev/null
grep -h "staged transfers\|CuMemcpy\|batch" $w/backend-4-1.log | tail -30 > $out/profile.txt
backend 4 0
($as_nobody $vg ./probe 30000 1024 > $out/perfrun.txt 2>&1 &)
sleep 2; $PERF record -F 3000 -g -a -o $w/perf.data -- sleep 3 > /dev/null 2>&1
$PERF report -i $w/perf.data --no-children --sort comm,dso,sym 2>/dev/null | grep -E "^ +[0-9]" | head -70 > $out/perf.txt
$PERF report -i $w/perf.data --no-children --sort comm 2>/dev/null | grep -E "^ +[0-9]" | head -12 >> $out/perf.txt
sleep 6; kill $bpid; cat $out/perfrun.txt
tail -25 $out/trace.txt | head -25
cat $out/profile.txt | cut -c1-250
