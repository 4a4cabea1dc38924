#!/usr/bin/env bash
# Checkpoints while the guest computes, against stop-and-copy, in one run.
# A loopback checkpoint_loop holds SIZE MiB in 8 buffers and keeps updating
# ACTIVE of them; for each size and workload the backend writes:
#   - a stop-and-copy checkpoint (--rounds 0: every buffer read while the
#     guest waits),
#   - a checkpoint copied in rounds while the guest runs (--rounds 5), what
#     was rewritten since its copy owed (copy-on-write),
#   - an incremental checkpoint against that one (--incremental),
#   - a copy-on-write checkpoint (--copy-on-write: no rounds, every buffer
#     owed at the pause and read after it).
# The guest-visible pause is the backend's report (quiesce to resume).
# What the guest pays in all is its own figure: the program prints a
# line per iteration, each timestamped here; the longest iteration that
# overlaps a checkpoint is set against the median iteration before any.
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
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
echo "$lib" > "$work/vgpu.icd"

field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
ctl() { "$bin/vgpu-ctl" --control "$work/a.ctl" --json "$@" 2>/dev/null; }

# The longest iteration (ms) of the program's overlapping [T0, T1], and
# the median one before FIRST.
iterations() {
  python3 - "$work/prog.out" "$@" <<'PY'
import statistics, sys
stamps = [float(l.split()[0]) for l in open(sys.argv[1]) if l.split()[1:2] == ["PROGRESS"]]
first, windows = float(sys.argv[2]), sys.argv[3:]
gaps = list(zip(stamps, stamps[1:]))
quiet = [b - a for a, b in gaps if b <= first]
out = [statistics.median(quiet) * 1e3 if quiet else 0.0]
for w in windows:
    t0, t1 = map(float, w.split(":"))
    out.append(max([b - a for a, b in gaps if b > t0 and a < t1] or [0.0]) * 1e3)
print(" ".join(f"{x:.1f}" for x in out))
PY
}

# Each line of the program's output with the time it came (bash's read
# takes a pipe a byte at a time: fast iterations would queue up behind it).
stamp='
import sys, time
for line in iter(sys.stdin.readline, ""):
    sys.stdout.write("%.6f %s" % (time.time(), line))
    sys.stdout.flush()
'

# Runs `vgpu-ctl checkpoint FILE ARGS...` into $work/NAME.json; prints T0:T1.
checkpoint() {
  local name=$1; shift
  local t0=$EPOCHREALTIME
  ctl checkpoint "$work/$name.ckpt" "$@" > "$work/$name.json"
  echo "$t0:$EPOCHREALTIME"
}

header="| state (MiB) | guest writes | stop-and-copy pause / held (ms) | live pause / held (ms) | rounds | copied while running (MiB) | read in the pause (MiB) | owed (MiB) | live total (s) | copy-on-write pause / held (ms) | copy-on-write total (s) | guest iteration (ms) | longest iteration: stop-and-copy / live / copy-on-write (ms) | incremental pause (ms) | whole file (MiB) | incremental file (MiB) |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
md=$header
json="["
for size in "${sizes[@]}"; do
  for active in "${actives[@]}"; do
    # The last run's output would let the wait below through at once.
    rm -f "$work"/*.sock "$work"/*.ctl "$work"/*.ckpt "$work/prog.out"
    "$bin/vgpu-backend" --socket "$work/a.sock" --control "$work/a.ctl" --log-level warn 2>"$work/a.log" &
    a=$!
    while [ ! -S "$work/a.sock" ]; do sleep 0.05; done
    OCL_ICD_VENDORS="$work/vgpu.icd" VGPU_SOCKET="$work/a.sock" VGPU_RECONNECT_SECS=0 \
      "$prog" -m "$size" -i 100000000 -p 1 -a "$active" \
      > >(python3 -u -c "$stamp" > "$work/prog.out") 2>&1 &
    p=$!
    while ! grep -q " PROGRESS 5$" "$work/prog.out" 2>/dev/null; do sleep 0.05; done
    # Quiet iterations first, and between checkpoints, for the guest's own figures.
    sleep 2
    stop_w=$(checkpoint stop --rounds 0); whole_stop=$(stat -c %s "$work/stop.ckpt"); rm -f "$work/stop.ckpt"
    sleep 2
    live_w=$(checkpoint live --rounds 5)
    sleep 2
    checkpoint delta --incremental "$work/live.ckpt" > /dev/null
    whole=$(stat -c %s "$work/live.ckpt"); delta=$(stat -c %s "$work/delta.ckpt")
    rm -f "$work/delta.ckpt"
    sleep 2
    cow_w=$(checkpoint cow --copy-on-write)
    rm -f "$work"/*.ckpt
    # The guest was computing throughout: it still answers.
    before=$(grep -c PROGRESS "$work/prog.out"); waited=0
    while [ "$(grep -c PROGRESS "$work/prog.out")" -le "$before" ]; do
      sleep 0.1; waited=$((waited + 1))
      [ $waited -lt 600 ] || { echo "the program stopped progressing" >&2; exit 1; }
    done
    sleep 1
    kill $p $a 2>/dev/null; wait $p $a 2>/dev/null || true
    read -r typical stop_iter live_iter cow_iter <<< "$(iterations "${stop_w%%:*}" "$stop_w" "$live_w" "$cow_w")"
    stop_pause=$(field "$work/stop.json" pause_ms)
    live_pause=$(field "$work/live.json" pause_ms)
    rounds=$(field "$work/live.json" rounds)
    precopied=$(field "$work/live.json" precopied_bytes)
    paused=$(field "$work/live.json" paused_bytes)
    owed=$(field "$work/live.json" owed_bytes)
    cow_pause=$(field "$work/cow.json" pause_ms)
    stop_held=$(field "$work/stop.json" held_ms)
    live_held=$(field "$work/live.json" held_ms)
    cow_held=$(field "$work/cow.json" held_ms)
    delta_pause=$(field "$work/delta.json" pause_ms)
    span() { printf "%.6f" "$(echo "${1#*:} - ${1%%:*}" | bc -l)"; }
    live_s=$(span "$live_w"); cow_s=$(span "$cow_w")
    mib() { echo "$1 / 1048576" | bc -l; }
    line=$(printf "| %s | %s of 8 buffers | %.1f / %.1f | %.1f / %.1f | %s | %.0f | %.0f | %.0f | %.2f | %.1f / %.1f | %.2f | %.1f | %.0f / %.0f / %.0f | %.1f | %.0f | %.0f |" \
      "$size" "$active" "$stop_pause" "$stop_held" "$live_pause" "$live_held" "$rounds" "$(mib "$precopied")" "$(mib "$paused")" "$(mib "$owed")" \
      "$live_s" "$cow_pause" "$cow_held" "$cow_s" "$typical" "$stop_iter" "$live_iter" "$cow_iter" \
      "$delta_pause" "$(mib "$whole")" "$(mib "$delta")")
    echo "$line"
    md="$md
$line"
    json="$json{\"benchmark\":\"live_checkpoint\",\"parameters\":{\"state_mib\":$size,\"active_buffers\":$active,\"buffers\":8},\"stop_and_copy\":$(cat "$work/stop.json"),\"live\":$(cat "$work/live.json"),\"live_total_s\":$live_s,\"copy_on_write\":$(cat "$work/cow.json"),\"copy_on_write_total_s\":$cow_s,\"guest_iteration_ms\":{\"median_before\":$typical,\"longest_during_stop_and_copy\":$stop_iter,\"longest_during_live\":$live_iter,\"longest_during_copy_on_write\":$cow_iter},\"incremental\":$(cat "$work/delta.json"),\"whole_file_bytes\":$whole,\"stop_and_copy_file_bytes\":$whole_stop,\"incremental_file_bytes\":$delta},"
  done
done
json="${json%,}]"
machine=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
cpus=$(nproc)
mkdir -p docs/bench
load=$(cut -d' ' -f1-3 /proc/loadavg)
cat > docs/bench/live-checkpoint.md <<MD
# Checkpoints while the guest computes

\`scripts/bench-live-checkpoint.sh\`, $(date -u +%Y-%m-%d), $machine, $cpus CPUs, PoCL;
release build; load average at the end $load. A loopback \`checkpoint_loop -m SIZE -p 1\`
updates the first ACTIVE of its 8 buffers continuously. Pauses are the backend's
(quiesce to resume), and of it the time every session was held (the rest
waited for the guest's batch in progress, its own \`clFinish\`). Stop-and-copy (\`--rounds 0\`) reads and writes every buffer in
the pause; the live checkpoint (\`--rounds 5\`) copies while the guest runs and owes
at the pause what was written since its copy (copy-on-write: read after the guest
resumed, its first write to one preserving it first); the copy-on-write one
(\`--copy-on-write\`) copies nothing before the pause and owes every buffer; the
incremental one (\`--incremental\` the live one) writes only what changed since.
"Guest iteration" is the program's own: the median iteration before any
checkpoint, and the longest one overlapping each checkpoint (what the guest paid
in all: the pause, the copy rounds' holds, the shadow copies ahead of its writes).

$md
MD
echo "$json" > docs/bench/live-checkpoint.json
echo "wrote docs/bench/live-checkpoint.md and .json"
