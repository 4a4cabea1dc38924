#!/bin/bash
# Host step costs and the transport's own round trip (Ping, no device work).
set -u
R=$PWD; B=$R/.gpu-s4/bin; O=${OUT:-/tmp/out}; mkdir -p $O
cat /sys/devices/system/clocksource/clocksource0/current_clocksource
gcc -O2 -o /tmp/hostcost .gpu-s4/hostcost.c -lpthread && /tmp/hostcost
W=/tmp/s4c; rm -rf $W; mkdir -p $W
for mode in default none; do
  $B/vgpu-backend --socket $W/$mode --sandbox $mode > $W/$mode.log 2>&1 & P=$!
  for _ in $(seq 100); do [ -S $W/$mode ] && break; sleep 0.1; done
  for k in 1 2; do echo "sandbox $mode: $(VGPU_SOCKET=$W/$mode $B/ping 200000)"; done
  kill $P; wait $P 2>/dev/null
done
