#!/usr/bin/env bash
# Checkpoint and restore figures against vGPU state size: a loopback run of
# the C suite's checkpoint_loop holds SIZE MiB of buffers; the backend
# writes a checkpoint of it (vgpu-ctl checkpoint), then a second backend
# starts from it (--restore). Prints a table, writes docs/bench/checkpoint.{md,json}.
#
#   scripts/bench-checkpoint.sh [SIZE_MIB ...]     (default: 64 256 1024)
#
# The benchmark harness (scripts/bench.sh, `vgpu-bench --only checkpoint`)
# measures the same at 64 and 256 MiB, five runs each, into BENCHMARKS.md;
# this script stays for other sizes (1 GiB) in one run each.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(64 256 1024)
bin=$root/target/release
prog=$root/target/cl-tests/checkpoint_loop
[ -x "$bin/vgpu-backend" ] && [ -x "$prog" ] || { echo "run scripts/setup.sh first" >&2; exit 1; }
work=$(mktemp -d /tmp/vgpu-ckpt-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
echo "$bin/libvgpu_opencl.so" > "$work/vgpu.icd"
json="["; md="| state (MiB) | checkpoint (s) | write rate (GB/s) | backend peak RSS during save (MiB) | restore at start-up (s) | read rate (GB/s) | file (MiB) |
| --- | --- | --- | --- | --- | --- | --- |"
for size in "${sizes[@]}"; do
  rm -f "$work"/*.sock "$work"/*.ctl "$work/ckpt"
  "$bin/vgpu-backend" --socket "$work/a.sock" --control "$work/a.ctl" --log-level warn 2>"$work/a.log" &
  a=$!
  while [ ! -S "$work/a.sock" ]; do sleep 0.05; done
  OCL_ICD_VENDORS="$work/vgpu.icd" VGPU_SOCKET="$work/a.sock" VGPU_RECONNECT_SECS=0 \
    "$prog" -m "$size" -i 100000 -p 1 > "$work/prog.out" 2>&1 &
  p=$!
  while ! grep -q "^PROGRESS 2$" "$work/prog.out" 2>/dev/null; do sleep 0.05; done
  # The program's vGPU lives in its own worker process.
  w=$("$bin/vgpu-ctl" --control "$work/a.ctl" --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["vms"][0]["worker_pid"])')
  rss_before=$(awk '/VmRSS/ {print $2}' /proc/$w/status)
  t0=$(date +%s.%N)
  "$bin/vgpu-ctl" --control "$work/a.ctl" --json checkpoint "$work/ckpt" --then pause > "$work/ckpt.json" 2>/dev/null
  t1=$(date +%s.%N)
  peak=$(awk '/VmHWM/ {print $2}' /proc/$w/status)
  kill $p $a 2>/dev/null; wait $p $a 2>/dev/null || true
  bytes=$(stat -c %s "$work/ckpt")
  t2=$(date +%s.%N)
  "$bin/vgpu-backend" --socket "$work/b.sock" --log-level info --restore "$work/ckpt" 2>"$work/b.log" &
  b=$!
  while ! grep -q "restored" "$work/b.log" 2>/dev/null; do sleep 0.01; kill -0 $b 2>/dev/null || break; done
  t3=$(date +%s.%N)
  kill $b 2>/dev/null; wait $b 2>/dev/null || true
  save=$(echo "$t1 - $t0" | bc -l); load=$(echo "$t3 - $t2" | bc -l)
  wrate=$(echo "$bytes / $save / 1000000000" | bc -l); rrate=$(echo "$bytes / $load / 1000000000" | bc -l)
  grow=$(( (peak - rss_before) / 1024 ))
  line=$(printf "| %s | %.3f | %.2f | %s (+%s over its size before) | %.3f | %.2f | %.0f |" "$size" "$save" "$wrate" "$((peak / 1024))" "$grow" "$load" "$rrate" "$(echo "$bytes/1048576" | bc -l)")
  echo "$line"; md="$md
$line"
  json="$json{\"benchmark\":\"checkpoint\",\"parameters\":{\"state_mib\":$size},\"save_s\":$save,\"restore_s\":$load,\"bytes\":$bytes,\"peak_rss_kib\":$peak},"
done
json="${json%,}]"
machine=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), cpus=$(nproc)
cat > docs/bench/checkpoint.md <<MD
# Checkpoint and restore against state size

\`scripts/bench-checkpoint.sh\`, $(date -u +%Y-%m-%d), $machine, $cpus CPUs, PoCL; release
build; checkpoint to the local disk (\`vgpu-ctl checkpoint\`, atomic write), restore
by a second backend at start-up (\`--restore\`: read, check, rebuild the program,
upload the buffers). The checkpoint time includes the quiesce and drain.

$md

Peak RSS is the backend's high-water mark while it saved: the stream is
written in 4 MiB chunks, so the growth does not follow the state size
(PoCL's own buffers count in the RSS before the save).
MD
echo "$json" > docs/bench/checkpoint.json
echo "wrote docs/bench/checkpoint.md"
