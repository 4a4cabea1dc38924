#!/usr/bin/env bash
# Runs the cargo-fuzz targets (nightly Rust and cargo-fuzz; ASan), each for
# a given time, starting from the committed seed corpus.
#
#   scripts/fuzz.sh [--time SECONDS] [--runs N] [--jobs J] [--fork F] [--leaks-after] [--smoke] [TARGET...]
#
# Targets (default: all):
#   protocol_decode    fuzz/: every protocol decoder (requests, replies,
#                      payloads of every opcode, CUDA's included, CUDA images)
#   backend_dispatch   fuzz/: request sequences through the backend's decode,
#                      dispatch and OpenCL executor on the real device
#   backend_chains     fuzz/: batches (OpenCL and CUDA messages) behind
#                      hostile descriptor chains in real guest memory, through
#                      chain::resolve and a quota-bound Vgpu::accept; then a
#                      damaged real checkpoint restored into the live vGPU
#   snapshot_decode    migration/fuzz/: its three targets, stream_reader,
#                      stream_sealed and state_decode (each may be named)
#
# --time SECONDS  per target (default 60)
# --runs N        per target: stop after N executions (a long campaign:
#                 `--runs 10000000 --time 86400`); whichever limit comes first
# --jobs J        targets fuzzed at once (default 1); each prints its
#                 executions, executions a second, coverage and findings
# --fork F        F processes for each target (libFuzzer's fork mode, one
#                 corpus); a crash in one is a finding like any other
# --leaks-after   leak checks only at the end: the run goes without
#                 LeakSanitizer, then every input of the working corpus
#                 runs once with it (a leak is a finding like any
#                 other). For long campaigns of the PoCL targets: LSan
#                 scans the whole heap, PoCL's and LLVM's included, after
#                 every input that allocates more than it frees: more than
#                 half of backend_chains' CPU time
# --smoke         for the test command: a fixed seed and a fixed number of
#                 executions per target, so that every machine runs the
#                 same inputs and a CI run cannot fail on a new input a
#                 fuzzing campaign should find. Not bounded by a short
#                 time: a slow machine that stopped after fewer executions
#                 ran other inputs than a fast one (a dispatcher finding at
#                 the 113th showed up on one CI run in several); 600 s per
#                 target only ends a stuck run. Without nightly or
#                 cargo-fuzz it runs the stable-Rust corpus replay and
#                 mutation sweeps of fuzz/tests/ instead (no libFuzzer, no
#                 ASan) and says so; without an OpenCL device the
#                 dispatcher's part is skipped with a message
#
# Seeds: fuzz/corpus/<target>/ (committed; `cargo run --bin make_seeds` in
# fuzz/ writes them again) and migration/fuzz/corpus/<target>/ (written by
# its make_seeds when missing). Inputs of past findings, fuzz/regressions/
# <target>/, run first, every time. New inputs go to the working corpus
# fuzz/target/corpus-work/<target>/ (kept between runs, not committed);
# crashes to <crate>/artifacts/<target>/. A summary (executions, coverage,
# findings per target) goes to fuzz/target/fuzz-summary.txt.
#
# VGPU_FUZZ_STABLE=1 makes --smoke take the stable path even with nightly.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

time_s=60
runs_n=
jobs=1
fork=
smoke=0
leaks_after=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) time_s=${2:?--time needs SECONDS}; shift 2 ;;
    --time=*) time_s=${1#--time=}; shift ;;
    --runs) runs_n=${2:?--runs needs N}; shift 2 ;;
    --runs=*) runs_n=${1#--runs=}; shift ;;
    --jobs) jobs=${2:?--jobs needs J}; shift 2 ;;
    --jobs=*) jobs=${1#--jobs=}; shift ;;
    --fork) fork=${2:?--fork needs F}; shift 2 ;;
    --fork=*) fork=${1#--fork=}; shift ;;
    --leaks-after) leaks_after=1; shift ;;
    --smoke) smoke=1; time_s=600; shift ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    -*) echo "fuzz: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(protocol_decode backend_dispatch backend_chains snapshot_decode)

unavailable() {
  if [ "$smoke" = 1 ]; then
    echo "fuzz: $1: libFuzzer runs skipped; stable corpus replay and mutation sweeps instead"
    mkdir -p fuzz/target
    if (cd fuzz && cargo test --release -- --nocapture) >fuzz/target/fuzz-stable.log 2>&1; then
      grep -h -E 'mutated inputs|objects refused|chains accepted' fuzz/target/fuzz-stable.log | sed 's/^/fuzz: /' || true
      echo "fuzz: stable sweeps passed (log: fuzz/target/fuzz-stable.log)"
      exit 0
    fi
    echo "fuzz: stable sweeps FAILED (log: fuzz/target/fuzz-stable.log)" >&2
    exit 1
  fi
  echo "fuzz: $1" >&2
  exit 2
}
[ -z "${VGPU_FUZZ_STABLE:-}" ] || unavailable "VGPU_FUZZ_STABLE is set"
cargo +nightly --version >/dev/null 2>&1 ||
  unavailable "no nightly toolchain (rustup toolchain install nightly)"
cargo fuzz --version >/dev/null 2>&1 ||
  unavailable "no cargo-fuzz (cargo install cargo-fuzz)"

# Expand snapshot_decode to migration/fuzz's targets; check names.
expanded=()
for t in "${targets[@]}"; do
  case "$t" in
    snapshot_decode) expanded+=(stream_reader stream_sealed state_decode) ;;
    protocol_decode|backend_dispatch|backend_chains|stream_reader|stream_sealed|state_decode) expanded+=("$t") ;;
    *) echo "fuzz: unknown target $t" >&2; exit 2 ;;
  esac
done

# Executions of a smoke run: about 10 s per target on the 2-core machine
# the project is developed on (the dispatcher runs OpenCL on PoCL).
smoke_runs() {
  case "$1" in
    backend_dispatch) echo 150 ;;
    backend_chains) echo 400 ;;
    protocol_decode) echo 30000 ;;
    *) echo 100000 ;;
  esac
}

crate_of() {
  case "$1" in
    protocol_decode|backend_dispatch|backend_chains) echo fuzz ;;
    *) echo migration/fuzz ;;
  esac
}

summary=$root/fuzz/target/fuzz-summary.txt
mkdir -p "$root/fuzz/target"
: > "$summary"
failed=()
# LeakSanitizer: PoCL, LLVM and the ICD loader keep allocations for the
# process's life; leaks with only those frames are not the backend's.
export LSAN_OPTIONS="suppressions=$root/fuzz/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

# One target's run; its summary line goes to $2, its exit status is 1 on
# a finding.
fuzz_one() {
  local t=$1 out=$2 crate seeds work regressions log limits plan status
  crate=$(crate_of "$t")
  seeds=$root/$crate/corpus/$t
  if [ ! -d "$seeds" ] || [ -z "$(ls -A "$seeds" 2>/dev/null)" ]; then
    echo "fuzz: writing seeds for $t"
    (cd "$root/$crate" && cargo run -q --bin make_seeds >/dev/null)
  fi
  work=$root/fuzz/target/corpus-work/$t
  regressions=$root/fuzz/regressions/$t
  log=$root/fuzz/target/fuzz-$t.log
  limits=(-max_total_time="$time_s")
  plan="random seed"
  if [ -n "$runs_n" ]; then
    limits+=(-runs="$runs_n")
  fi
  if [ -n "$fork" ] && [ "$smoke" = 0 ]; then
    limits+=(-fork="$fork")
    plan="$plan, $fork processes"
  fi
  if [ "$leaks_after" = 1 ] && [ "$smoke" = 0 ]; then
    limits+=(-detect_leaks=0)
    plan="$plan, leaks checked after"
  fi
  if [ "$smoke" = 1 ]; then
    # The smoke run starts from the committed inputs only, not a working
    # corpus left by earlier campaigns, so that it is the same everywhere.
    work=$work/smoke
    rm -rf "$work"
    limits+=(-seed=1 -runs="$(smoke_runs "$t")")
    plan="seed 1"
  fi
  mkdir -p "$work"
  local dirs=("$work" "$seeds")
  [ -d "$regressions" ] && dirs+=("$regressions")
  echo "fuzz: $t, ${time_s} s at most${runs_n:+, $runs_n executions at most}, $plan (log: $log)"
  status=0
  local started=$SECONDS
  local last=$root/fuzz/target/last
  mkdir -p "$last"
  export VGPU_FUZZ_LAST=$last
  # (cargo fuzz builds with optimizations, debug assertions and overflow
  # checks, and AddressSanitizer by default.)
  (cd "$root/$crate" && cargo +nightly fuzz run "$t" "${dirs[@]}" -- \
    "${limits[@]}" -timeout=30 -rss_limit_mb=4096 \
    -print_final_stats=1 -close_fd_mask=1) >"$log" 2>&1 || status=$?
  if [ "$status" = 0 ] && [ "$leaks_after" = 1 ] && [ "$smoke" = 0 ]; then
    # Every input kept, once, with LeakSanitizer (-runs=0: the corpus
    # only, no mutation). Its log follows the run's.
    (cd "$root/$crate" && cargo +nightly fuzz run "$t" "${dirs[@]}" -- \
      -runs=0 -detect_leaks=1 -timeout=30 -rss_limit_mb=4096 \
      -close_fd_mask=1) >"$log.leaks" 2>&1 || status=$?
    cat "$log.leaks" >>"$log"
  fi
  local took=$((SECONDS - started))
  local runs cov ft units rate line
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  # A crash ends the run before the final stats: take the last status line.
  # (Fork mode's status lines are "#N: cov: ...".)
  [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\)[:[:space:]].*/\1/p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
  units=$(find "$work" -type f | wc -l)
  rate=?
  [ -n "$runs" ] && [ "$took" -gt 0 ] && rate=$((runs / took))
  if [ "$status" = 0 ]; then
    line="$t: ${runs:-?} executions in ${took} s (${rate}/s, $plan), coverage ${cov:-?} edges, ${ft:-?} features, corpus $units, no finding"
  elif grep -q 'libFuzzer: run interrupted' "$log"; then
    line="$t: interrupted after ${runs:-?} executions in ${took} s (${rate}/s), coverage ${cov:-?} edges, ${ft:-?} features, corpus $units, no finding"
  else
    local artifact
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    if [ -z "$artifact" ] && [ -f "$last/$t" ]; then
      # libFuzzer's crash handler did not run (see fuzz/src/lib.rs
      # keep_last): the input it was running is the finding's.
      artifact=$root/$crate/artifacts/$t/crash-last-$(date +%s)
      mkdir -p "$(dirname "$artifact")"
      cp "$last/$t" "$artifact"
    fi
    line="$t: FINDING after ${runs:-?} executions in ${took} s: ${artifact:-see $log}"
    grep -m 1 -E 'ERROR: |panicked at|deadly signal|timeout after' "$log" >&2 || true
  fi
  echo "fuzz: $line"
  echo "$line" > "$out"
  [ "$status" = 0 ] || [[ "$line" == *interrupted* ]]
}

# Up to $jobs targets at once; each writes its line to its own file.
lines=$(mktemp -d "$root/fuzz/target/fuzz-lines.XXXXXX")
trap 'rm -rf "$lines"' EXIT
declare -A pids=()
for t in "${expanded[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
    wait -n || true
  done
  fuzz_one "$t" "$lines/$t" &
  pids[$t]=$!
done
for t in "${expanded[@]}"; do
  wait "${pids[$t]}" || failed+=("$t")
  cat "$lines/$t" >> "$summary" 2>/dev/null || echo "$t: no result" >> "$summary"
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]} (summary: $summary)" >&2
  exit 1
fi
echo "fuzz: no findings (summary: $summary)"
