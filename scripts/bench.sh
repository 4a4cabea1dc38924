#!/usr/bin/env bash
# The benchmark command: OpenCL natively and through vgpu (loopback), side
# by side, in one run (see BENCHMARKS.md).
#
#   scripts/bench.sh                full run: BENCHMARKS.md, docs/bench/ (bench.json, *.png)
#   scripts/bench.sh --quick        tiny sizes, 2 repetitions (< 1 min): target/bench-quick/
#   scripts/bench.sh --out DIR      bench.json, BENCHMARKS.md and the plots into DIR instead
#   scripts/bench.sh --vm           also the in-guest figures (builds the patched QEMU and guest image)
#   scripts/bench.sh -- ARGS...     further vgpu-bench arguments (e.g. -- --only bandwidth:
#                                   a subset goes to target/bench-only/ unless --out says where)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0 vm=0 out=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --vm) vm=1 ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --out=*) out=${1#--out=} ;;
    --) shift; extra+=("$@"); break ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$vm" = 1 ]; then
  scripts/setup.sh
else
  VGPU_SKIP_VM=1 scripts/setup.sh
fi

# Plot labels are drawn with a TrueType font file (no fontconfig needed).
font=${VGPU_BENCH_FONT:-/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf}
if [ ! -r "$font" ] && ! dpkg-query -W -f='${Status}' fonts-dejavu-core 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  echo "bench: installing fonts-dejavu-core (plot labels)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq fonts-dejavu-core >/dev/null
fi

echo "bench: building release"
cargo build --workspace --release --quiet

args=(--root . --bin-dir target/release)
# The loopback backends move a program's bulk data in place (cross-memory
# attach), which needs the program to run as the backend's workers: those
# of a root-started backend run as nobody, so then the programs do too
# (native ones as well, so both sides run alike).
args+=(--backend-arg=--peer-memory)
if [ "$(id -u)" = 0 ]; then
  args+=(--program-user nobody)
fi
# A subset's report would hold only the subset's figures: it never
# replaces BENCHMARKS.md and docs/bench/bench.json of the full run.
subset=0
for a in "${extra[@]}"; do
  case "$a" in --only|--only=*) subset=1 ;; esac
done
if [ "$quick" = 1 ]; then
  args+=(--quick --out "${out:-target/bench-quick}")
elif [ "$subset" = 1 ] && [ -z "$out" ]; then
  echo "bench: --only: a subset, written to target/bench-only/ (BENCHMARKS.md is left as it is)"
  args+=(--out target/bench-only)
elif [ -n "$out" ]; then
  args+=(--out "$out")
else
  args+=(--out docs/bench --markdown BENCHMARKS.md --plots docs/bench)
fi
if [ "$vm" = 1 ]; then
  args+=(--vm)
fi
start=$(date +%s)
status=0
target/release/vgpu-bench "${args[@]}" "${extra[@]}" || status=$?
echo "bench: finished in $(( $(date +%s) - start )) s (exit $status)"
exit "$status"
