#!/bin/bash
# Profiles of the transport's round trip on this host (system-wide perf,
# cpu-clock): Ping through a backend, then the pinned probe.
set -u
R=$PWD; B=$R/.gpu-s4/bin; O=${OUT:-/tmp/out}; mkdir -p $O
export PATH=$PATH:/usr/local/cuda/bin
PERF="env LD_LIBRARY_PATH=$R/.gpu-s4/perf/lib $R/.gpu-s4/perf/perf"
$PERF --version || exit 1
W=/tmp/s4d; rm -rf $W; mkdir -p $W/lib
$B/vgpu-backend --socket $W/s --device cuda:0 > $W/b.log 2>&1 & P=$!
for _ in $(seq 100); do [ -S $W/s ] && break; sleep 0.1; done
VGPU_SOCKET=$W/s $B/ping 1500000 > $W/ping.out & C=$!
sleep 1
$PERF record -a -e cpu-clock -F 10000 -g -o $W/ping.data -- sleep 3 2>&1 | tail -1
wait $C; cat $W/ping.out
for c in ping vring_worker; do echo "== $c"; $PERF report -i $W/ping.data --comm $c --no-children --sort sym --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -60; done | tee $O/ping-profile.txt
$PERF report -i $W/ping.data --sort comm --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -8
$PERF report -i $W/ping.data --comm vring_worker --children --sort sym --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -60 > $O/ping-vring-children.txt
$PERF report -i $W/ping.data --comm ping --children --sort sym --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -60 > $O/ping-client-children.txt
kill $P; wait $P 2>/dev/null
