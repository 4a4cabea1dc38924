#!/bin/bash
# Builds the Khronos OpenCL-CTS from a fetched copy and runs its suites
# natively (PoCL through ocl-icd) and through vgpu (the guest ICD over the
# loopback transport, against a backend on a temporary socket), with a
# timeout per sub-test, and compares the two sides.
#
#   integration/cts/run.sh CTS_SRC [--headers DIR] [--spirv DIR]
#                          [--suites "test_api test_buffers ..."]
#                          [--build-only] [--out DIR]
#   integration/cts/run.sh --bin-dir DIR [--suites ...] [--out DIR]
#
# CTS_SRC  an OpenCL-CTS source tree (a git checkout, or `git archive`
#          output with a .cts-commit file holding the commit); also $CTS_SRC.
# --headers  OpenCL-Headers tree (the folder holding CL/); also
#          $CTS_HEADERS; default /usr/include (Debian's opencl-headers, too
#          old for a recent CTS).
# --spirv  SPIRV-Headers tree (the folder holding include/spirv/); also
#          $CTS_SPIRV; default: a folder linking /usr/include (Debian's
#          spirv-headers).
# --no-build  run the suites already built in the cache, build nothing
#          (ninja must not run twice at once in one build tree).
# --bin-dir  run suites built elsewhere: DIR holds test_conformance/ as a
#          build tree lays it out (the binaries and their data folders, such
#          as compiler/includeTestDirectory) and optionally .cts-commit;
#          no CTS_SRC, nothing built. Also $CTS_BIN_DIR. For a machine
#          without the CTS's build tools (the GPU machine).
# --suites the suites to run (default: $CTS_SUITES or DEFAULT_SUITES below);
#          an entry SUITE:PATTERN[,PATTERN...] runs only the sub-tests whose
#          names match one of the shell patterns and no !pattern (a
#          documented subset).
#
# Each side prints per suite passed / failed / skipped / hung / crashed
# sub-tests; then every sub-test that passes natively but not through vgpu.
# The results (per sub-test, both sides) go to $OUT/results.json and a
# Markdown table to $OUT/summary.md (see integration/cts/compare.py).
#
# Environment:
#   CTS_TIMEOUT   seconds per sub-test (default 300); a sub-test killed by
#                 it is recorded as "hung"
#   CTS_JOBS      build parallelism (default 2)
#   CTS_WIMPY     1: the CTS's wimpy mode (CL_WIMPY_MODE) for every suite:
#                 smaller sizes where a suite supports it
#   CTS_SIDES     "native vgpu" (default), or one of them
#   VGPU_PROFILE  release (default) or debug: which build to use
#   CTS_BACKEND_ARGS  more vgpu-backend options (split on spaces), e.g.
#                 "--memory 16G": the vGPU's memory decides the sizes some
#                 suites pick at random, or "--device opencl:NVIDIA"
#   CTS_NATIVE_ICD  the native side's .icd file (default: PoCL's in
#                 /etc/OpenCL/vendors), and CTS_NATIVE_PLATFORM the
#                 platform name it must show (default: PoCL's)
#   VGPU_BIN_DIR  a folder holding vgpu-backend and libvgpu_opencl.so built
#                 elsewhere (default: a cargo build of this checkout)
#   CTS_DEADLINE  a Unix time: sub-tests not finished by then are recorded
#                 as not run ("absent"), so a run with a hard time limit
#                 still reports what it did
#
# The build is cached under ~/.cache/vgpu/cts-<hash>, keyed by the CTS
# commit, the headers' commits (or contents) and this script's build
# options; suites are built on demand as targets of that one build tree.
# Exit status: 0 when both sides ran (differences are reported, not
# failed), 1 when a side could not run or used the wrong platform.
set -euo pipefail
# The whole script is one compound command, read before it runs: editing
# this file (a merge, a checkout) during a long run cannot change it.
{

DEFAULT_SUITES="test_api test_buffers test_events test_compiler test_mem_host_flags test_allocations test_profiling test_commonfns test_basic"
BUILD_OPTS="Release ninja v1"

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
src=${CTS_SRC:-}
headers=${CTS_HEADERS:-/usr/include}
spirv=${CTS_SPIRV:-}
suites=${CTS_SUITES:-$DEFAULT_SUITES}
build_only=0
no_build=0
out=${CTS_OUT:-}
bin_dir=${CTS_BIN_DIR:-}
while [ $# -gt 0 ]; do
    case $1 in
        --headers) headers=$2; shift 2 ;;
        --spirv) spirv=$2; shift 2 ;;
        --suites) suites=$2; shift 2 ;;
        --build-only) build_only=1; shift ;;
        --no-build) no_build=1; shift ;;
        --out) out=$2; shift 2 ;;
        --bin-dir) bin_dir=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 1 ;;
        *) src=$1; shift ;;
    esac
done
cache=${XDG_CACHE_HOME:-$HOME/.cache}/vgpu
# source_build: checks the CTS tree and the headers, and names the cached
# build tree ($build) and the versions that key it.
source_build() {
    src=$(cd "$src" && pwd)
    if [ ! -f "$headers/CL/cl.h" ]; then
        echo "no CL/cl.h under $headers" >&2
        exit 1
    fi
    headers=$(cd "$headers" && pwd)
    mkdir -p "$cache"
    if [ -z "$spirv" ]; then
        # The CTS wants SPIRV_INCLUDE_DIR/include/spirv/...: wrap the system's.
        spirv=$cache/cts-spirv-system
        mkdir -p "$spirv"
        ln -sfn /usr/include "$spirv/include"
    fi
    if [ ! -f "$spirv/include/spirv/unified1/spirv.core.grammar.json" ]; then
        echo "no include/spirv/unified1/spirv.core.grammar.json under $spirv" >&2
        echo "(apt-get install spirv-headers, or pass a SPIRV-Headers tree)" >&2
        exit 1
    fi
    spirv=$(cd "$spirv" && pwd)

    # version DIR MARKER: a tree's identity: its git commit, a marker file
    # written by whoever exported it, or a hash of its contents.
    version() {
        local dir=$1 marker=$2
        if git -C "$dir" rev-parse --show-toplevel 2>/dev/null | grep -qx "$dir"; then
            git -C "$dir" rev-parse HEAD
        elif [ -f "$dir/$marker" ]; then
            head -1 "$dir/$marker"
        else
            (cd "$dir" && find . -path ./.git -prune -o -type f -print0 | sort -z |
                xargs -0 sha256sum | sha256sum | cut -c1-40)
        fi
    }
    cts_commit=$(version "$src" .cts-commit)
    headers_version=$(version "$headers" .commit)
    [ "$headers" = /usr/include ] && headers_version=$(dpkg-query -W -f '${Version}' opencl-c-headers 2>/dev/null || echo system)
    spirv_version=$(version "$spirv" .commit)
    [ "$spirv" = "$cache/cts-spirv-system" ] && spirv_version=$(dpkg-query -W -f '${Version}' spirv-headers 2>/dev/null || echo system)
    key=$(printf '%s\n' "$cts_commit" "$headers_version" "$spirv_version" "$BUILD_OPTS" | sha256sum | cut -c1-16)
    build=$cache/cts-$key
    echo "== CTS $cts_commit (headers $headers_version, SPIR-V headers $spirv_version)"
    echo "== build $build"
}
if [ -n "$bin_dir" ]; then
    # Built elsewhere: nothing to configure or build here.
    build=$(cd "$bin_dir" && pwd)
    no_build=1
    cts_commit=$(head -1 "$build/.cts-commit" 2>/dev/null || echo unknown)
    headers_version=prebuilt
    spirv_version=prebuilt
    echo "== CTS $cts_commit, prebuilt in $build"
elif [ -z "$src" ] || [ ! -f "$src/test_conformance/CMakeLists.txt" ]; then
    echo "usage: $0 CTS_SRC [--headers DIR] [--spirv DIR] [--suites LIST]" >&2
    echo "(CTS_SRC must be an OpenCL-CTS source tree)" >&2
    exit 1
else
    source_build
fi

# suite NAME[:PATTERNS] -> NAME
suite_names() {
    local s
    for s in $suites; do echo "${s%%:*}"; done
}
# A suite's source folder decides whether this CTS has it at all.
targets=()
for s in $(suite_names); do
    targets+=("$s")
done
if [ "$no_build" = 0 ] && [ ! -f "$build/build.ninja" ]; then
    command -v cmake > /dev/null || { echo "cmake is missing (apt-get install cmake)" >&2; exit 1; }
    command -v ninja > /dev/null || { echo "ninja is missing (apt-get install ninja-build)" >&2; exit 1; }
    # test_compiler (and test_api's SPIR-V cases) assemble .spvasm files.
    command -v spirv-as > /dev/null || echo "spirv-as is missing: test_compiler will not build (apt-get install spirv-tools)" >&2
    mkdir -p "$build"
    cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCL_INCLUDE_DIR="$headers" -DCL_LIB_DIR=/usr/lib/x86_64-linux-gnu \
        -DOPENCL_LIBRARIES=OpenCL -DSPIRV_INCLUDE_DIR="$spirv" \
        > "$build/configure.log" 2>&1 || {
        tail -30 "$build/configure.log" >&2
        rm -f "$build/build.ninja"
        exit 1
    }
fi
# Build suite by suite so one that does not build does not stop the rest.
declare -A binary=()
all_targets=
[ "$no_build" = 0 ] && all_targets=$(ninja -C "$build" -t targets all 2>/dev/null | sed -n 's/: .*//p')
for t in "${targets[@]}"; do
    if [ "$no_build" = 1 ]; then
        binary[$t]=$(find "$build/test_conformance" -type f -name "$t" -perm -u+x | head -1)
        [ -n "${binary[$t]}" ] || echo "$t: not built" >&2
    elif grep -qx "$t" <<< "$all_targets"; then
        if ninja -C "$build" -j "${CTS_JOBS:-2}" "$t" > "$build/build-$t.log" 2>&1; then
            binary[$t]=$(find "$build/test_conformance" -type f -name "$t" -perm -u+x | head -1)
        else
            echo "$t: does not build (see $build/build-$t.log)" >&2
        fi
    else
        echo "$t: no such target in this CTS" >&2
    fi
done
[ "$build_only" = 1 ] && exit 0

profile=${VGPU_PROFILE:-release}
release=()
[ "$profile" = release ] && release=(--release)
sides=${CTS_SIDES:-native vgpu}
vgpu_bin=$root/target/$profile
if [ -n "${VGPU_BIN_DIR:-}" ]; then
    vgpu_bin=$(cd "$VGPU_BIN_DIR" && pwd)
elif [[ " $sides " == *" vgpu "* ]]; then
    (cd "$root" && cargo build -q "${release[@]}" -p vgpu-opencl -p vgpu-backend)
fi
library=$vgpu_bin/libvgpu_opencl.so
backend=$vgpu_bin/vgpu-backend

work=$(mktemp -d /tmp/vgpu-cts.XXXXXX)
out=${out:-$work/out}
mkdir -p "$out" "$work/native-icd" "$work/vgpu-icd"
out=$(cd "$out" && pwd)
native_icd=${CTS_NATIVE_ICD:-$(grep -l -i pocl /etc/OpenCL/vendors/*.icd 2>/dev/null | head -1 || true)}
native_platform=${CTS_NATIVE_PLATFORM:-Portable Computing Language}
if [ -z "$native_icd" ] || [ ! -f "$native_icd" ]; then
    echo "no native .icd (no PoCL ICD in /etc/OpenCL/vendors; set CTS_NATIVE_ICD)" >&2
    exit 1
fi
cp "$native_icd" "$work/native-icd/"
echo "$library" > "$work/vgpu-icd/vgpu.icd"
socket=$work/vgpu.sock
backend_pid=
start_backend() {
    rm -f "$socket"
    POCL_CACHE_DIR="$work/cache-vgpu/pocl-backend" \
        # shellcheck disable=SC2086
        "$backend" --socket "$socket" --log-level warn ${CTS_BACKEND_ARGS:-} >> "$out/backend.log" 2>&1 &
    backend_pid=$!
    for _ in $(seq 200); do
        [ -S "$socket" ] && return 0
        sleep 0.1
    done
    echo "the backend did not open $socket" >&2
    return 1
}
stop_backend() {
    if [ -n "$backend_pid" ]; then
        kill "$backend_pid" 2>/dev/null || true
        wait "$backend_pid" 2>/dev/null || true
        backend_pid=
    fi
}
cleanup() {
    stop_backend
    rm -rf "$work/native-icd" "$work/vgpu-icd" "$work"/cache-* "$socket"
}
trap cleanup EXIT

timeout_s=${CTS_TIMEOUT:-300}
[ "${CTS_WIMPY:-0}" = 1 ] && export CL_WIMPY_MODE=1
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cts: $cts_commit"
    echo "headers: $headers_version"
    echo "spirv_headers: $spirv_version"
    echo "timeout_s: $timeout_s"
    echo "wimpy: ${CTS_WIMPY:-0}"
    echo "suites: $suites"
    echo "vgpu: ${VGPU_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)} ($profile)"
} > "$out/meta.txt"

# wanted TEST PATTERNS: whether a comma-separated list of shell patterns
# takes TEST: some pattern matches it (or none is an include) and no
# !pattern does.
wanted() {
    local -
    set -f
    local t=$1 p includes=0 included=0
    for p in ${2//,/ }; do
        if [[ $p == !* ]]; then
            # shellcheck disable=SC2053
            [[ $t == ${p#!} ]] && return 1
        else
            includes=1
            # shellcheck disable=SC2053
            [[ $t == $p ]] && included=1
        fi
    done
    [ "$includes" = 0 ] || [ "$included" = 1 ]
}

# side NAME ICD_DIR EXPECTED_PLATFORM [ENV...]: every sub-test of every
# suite (see runsuite.py); results in $out/NAME/SUITE.tsv (name, result,
# seconds) and logs in $out/NAME/SUITE/TEST.log.
side() {
    local name=$1 icd=$2 expected=$3
    shift 3
    local -
    set -f
    local platform
    platform=$(env OCL_ICD_VENDORS="$icd" "$@" clinfo --raw 2>/dev/null |
        sed -n 's/^\[[^]]*\] *CL_PLATFORM_NAME *//p' | sort -u | paste -sd, || true)
    echo "== $name: platform $platform"
    if [ "$platform" != "$expected" ]; then
        echo "$name: expected only the platform '$expected'" >&2
        exit 1
    fi
    mkdir -p "$out/$name"
    local entry suite patterns bin tests t
    for entry in $suites; do
        suite=${entry%%:*}
        patterns=
        [ "$entry" != "$suite" ] && patterns=${entry#*:}
        bin=${binary[$suite]:-}
        [ -n "$bin" ] || continue
        mkdir -p "$out/$name/$suite"
        : > "$out/$name/$suite.tsv"
        # --list needs no device; names are one per line, tab-indented.
        tests=$(cd "$(dirname "$bin")" && "$bin" --list 2>/dev/null | sed -n 's/^\t//p')
        local selected=()
        for t in $tests; do
            if [ -n "$patterns" ] && ! wanted "$t" "$patterns"; then
                continue
            fi
            selected+=("$t")
        done
        # One process for the suite's sub-tests, watched: a sub-test over
        # the timeout is recorded as hung, one that kills the process as
        # crashed, and the rest run in a new process. A fresh PoCL kernel
        # cache per side.
        env OCL_ICD_VENDORS="$icd" XDG_CACHE_HOME="$work/cache-$name" \
            POCL_CACHE_DIR="$work/cache-$name/pocl" "$@" \
            python3 "$here/runsuite.py" "$timeout_s" "$out/$name/$suite" \
            "$out/$name/$suite.tsv" "$bin" "${selected[@]}"
        if [ "$name" = vgpu ] && grep -q $'\thung\t' "$out/$name/$suite.tsv"; then
            # A hung sub-test may leave the backend busy: start afresh.
            stop_backend
            start_backend
        fi
        printf '%-22s %s\n' "$suite" "$(cut -f2 "$out/$name/$suite.tsv" | sort | uniq -c | awk '{printf "%s %s  ", $2, $1}')"
    done
}

for s in $sides; do
    case $s in
        native) side native "$work/native-icd" "$native_platform" ;;
        vgpu)
            start_backend
            side vgpu "$work/vgpu-icd" vgpu VGPU_SOCKET="$socket"
            stop_backend
            ;;
    esac
done
python3 "$here/compare.py" "$out" | tee "$out/summary.md"
echo "results: $out"
exit
}
