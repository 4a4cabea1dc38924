#!/usr/bin/env bash
# Checkpoints while the guest computes, against stop-and-copy, in one run.
# A loopback checkpoint_loop holds SIZE MiB in 8 buffers and keeps updating
# ACTIVE of them; for each size and workload the backend writes:
#   - a stop-and-copy checkpoint (--rounds 0: every buffer read while the
#     guest waits),
#   - a checkpoint copied in rounds while the guest runs (--rounds 5),
#   - an incremental checkpoint against that one (--incremental).
# The guest-visible pause is the backend's report (quiesce to resume).
# Prints a table, writes docs/bench/live-checkpoint.{md,json}.
#
#   scripts/bench-live-checkpoint.sh [SIZE_MIB ...]   (default: 64 256 1024)
#   ACTIVE="2 8" to choose the workloads (buffers of 8 the guest writes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(64 256 1024)
read -r -a actives <<< "${ACTIVE:-2 8}"
bin=$root/target/release
prog=$root/target/cl-tests/checkpoint_loop
lib=$bin/libvgpu_opencl.so
[ -x "$bin/vgpu-backend" ] && [ -x "$bin/vgpu-ctl" ] && [ -f "$lib" ] && [ -x "$prog" ] || {
  echo "needs target/release/{vgpu-backend,vgpu-ctl,libvgpu_opencl.so} and target/cl-tests/checkpoint_loop" >&2
  exit 1
}
work=$(mktemp -d /tmp/vgpu-live-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
echo "$lib" > "$work/vgpu.icd"

field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
ctl() { "$bin/vgpu-ctl" --control "$work/a.ctl" --json "$@" 2>/dev/null; }

header="| state (MiB) | guest writes | stop-and-copy pause (ms) | live pause (ms) | rounds | copied while running (MiB) | read in the pause (MiB) | live total (s) | incremental pause (ms) | whole file (MiB) | incremental file (MiB) |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
md=$header
json="["
for size in "${sizes[@]}"; do
  for active in "${actives[@]}"; do
    rm -f "$work"/*.sock "$work"/*.ctl "$work"/*.ckpt
    "$bin/vgpu-backend" --socket "$work/a.sock" --control "$work/a.ctl" --log-level warn 2>"$work/a.log" &
    a=$!
    while [ ! -S "$work/a.sock" ]; do sleep 0.05; done
    OCL_ICD_VENDORS="$work/vgpu.icd" VGPU_SOCKET="$work/a.sock" VGPU_RECONNECT_SECS=0 \
      "$prog" -m "$size" -i 100000000 -p 1 -a "$active" > "$work/prog.out" 2>&1 &
    p=$!
    while ! grep -q "^PROGRESS 2$" "$work/prog.out" 2>/dev/null; do sleep 0.05; done
    ctl checkpoint "$work/stop.ckpt" --rounds 0 > "$work/stop.json"
    t0=$(date +%s.%N)
    ctl checkpoint "$work/live.ckpt" --rounds 5 > "$work/live.json"
    t1=$(date +%s.%N)
    ctl checkpoint "$work/delta.ckpt" --incremental "$work/live.ckpt" > "$work/delta.json"
    # The guest was computing throughout: it still answers.
    before=$(grep -c PROGRESS "$work/prog.out"); waited=0
    while [ "$(grep -c PROGRESS "$work/prog.out")" -le "$before" ]; do
      sleep 0.1; waited=$((waited + 1))
      [ $waited -lt 600 ] || { echo "the program stopped progressing" >&2; exit 1; }
    done
    kill $p $a 2>/dev/null; wait $p $a 2>/dev/null || true
    stop_pause=$(field "$work/stop.json" pause_ms)
    live_pause=$(field "$work/live.json" pause_ms)
    rounds=$(field "$work/live.json" rounds)
    precopied=$(field "$work/live.json" precopied_bytes)
    paused=$(field "$work/live.json" paused_bytes)
    delta_pause=$(field "$work/delta.json" pause_ms)
    whole=$(stat -c %s "$work/live.ckpt"); delta=$(stat -c %s "$work/delta.ckpt")
    live_s=$(printf "%.6f" "$(echo "$t1 - $t0" | bc -l)")
    mib() { echo "$1 / 1048576" | bc -l; }
    line=$(printf "| %s | %s of 8 buffers | %.1f | %.1f | %s | %.0f | %.0f | %.2f | %.1f | %.0f | %.0f |" \
      "$size" "$active" "$stop_pause" "$live_pause" "$rounds" "$(mib "$precopied")" "$(mib "$paused")" \
      "$live_s" "$delta_pause" "$(mib "$whole")" "$(mib "$delta")")
    echo "$line"
    md="$md
$line"
    json="$json{\"benchmark\":\"live_checkpoint\",\"parameters\":{\"state_mib\":$size,\"active_buffers\":$active,\"buffers\":8},\"stop_and_copy\":$(cat "$work/stop.json"),\"live\":$(cat "$work/live.json"),\"live_total_s\":$live_s,\"incremental\":$(cat "$work/delta.json"),\"whole_file_bytes\":$whole,\"incremental_file_bytes\":$delta},"
  done
done
json="${json%,}]"
machine=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
cpus=$(nproc)
mkdir -p docs/bench
cat > docs/bench/live-checkpoint.md <<MD
# Checkpoints while the guest computes

\`scripts/bench-live-checkpoint.sh\`, $(date -u +%Y-%m-%d), $machine, $cpus CPUs, PoCL;
release build; loopback \`checkpoint_loop -m SIZE\` updating the first ACTIVE of its
8 buffers continuously. Pauses are the backend's (quiesce to resume): what the
guest waits for. Stop-and-copy (\`--rounds 0\`) reads and writes every buffer in
the pause; the live checkpoint (\`--rounds 5\`) copies while the guest runs and
reads in the pause only what was written since its copy; the incremental one
(\`--incremental\` the live one) writes only what changed since.

$md
MD
echo "$json" > docs/bench/live-checkpoint.json
echo "wrote docs/bench/live-checkpoint.md and .json"
