#!/bin/bash
# Runs pyopencl's own tests natively (PoCL through ocl-icd) and through
# vgpu (the guest ICD over the loopback transport, against a backend on a
# temporary socket), and compares them.
#
#   integration/pyopencl/run.sh [TEST_FILE...]
#
# TEST_FILE: files of pyopencl's test/ folder (default: $PYOPENCL_TESTS, or
# the quick set below). Prints each side's platform name and its passed /
# failed / skipped counts, then every test that passes natively but not
# through vgpu. Exit status: 0 when both sides ran (differences are
# reported, not failed), 1 when a side could not run or used the wrong
# platform, 3 when $PYOPENCL_MAX_LOST is set and more tests than that pass
# natively only.
#
# Environment:
#   PYOPENCL_TESTS     default test files (space-separated)
#   PYOPENCL_K         a pytest -k expression for both sides
#   PYOPENCL_MAX_LOST  fail (exit 3) above this many native-only passes
#   PYOPENCL_KNOWN     a file of tests allowed to pass natively only, one
#                      id per line with its reason after '#': fail (exit 3)
#                      when any other test passes natively only
#   PYOPENCL_OUT       folder for the logs, JUnit reports and figures.json
#                      (default: target/pyopencl; each run replaces them)
#   VGPU_PROFILE       debug (default) or release: which build to use
#
# pyopencl, pytest and numpy come from PyPI at the pinned versions into a
# venv cached under ~/.cache/vgpu/ keyed by them; the sdist (for test/) is
# cached beside it. The wheel bundles its own ocl-icd loader, which reads
# OCL_ICD_VENDORS like the system's: each side gets a folder holding only
# its .icd file, and the platform name is checked.
set -euo pipefail

PINS="pyopencl==2026.1.4 pytools==2026.1.1 numpy==2.4.6 mako==1.4.3 markupsafe==3.0.4 pytest==8.3.4 platformdirs==4.14.7 siphash24==1.9"
QUICK="test_wrapper.py test_enqueue_copy.py test_arrays_in_structs.py test_clrandom.py"

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
profile=${VGPU_PROFILE:-debug}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/vgpu
key=$(echo "$PINS" | sha256sum | cut -c1-12)
venv=$cache/pyopencl-venv-$key
version=$(echo "$PINS" | tr ' ' '\n' | sed -n 's/^pyopencl==//p')
sdist=$cache/pyopencl-sdist-$version

if [ ! -x "$venv/bin/python" ]; then
    echo "== venv $venv"
    rm -rf "$venv.tmp"
    python3 -m venv "$venv.tmp"
    # shellcheck disable=SC2086
    "$venv.tmp/bin/python" -m pip install -q $PINS
    mv "$venv.tmp" "$venv"
fi
if [ ! -d "$sdist/test" ]; then
    echo "== pyopencl $version sdist (for its tests)"
    rm -rf "$sdist.tmp"
    mkdir -p "$sdist.tmp"
    # Only pyopencl from source; its build tools may be wheels (pip needs
    # them for the metadata).
    "$venv/bin/python" -m pip download -q --no-deps --no-binary pyopencl \
        "pyopencl==$version" -d "$sdist.tmp"
    tar -xzf "$sdist.tmp"/pyopencl-"$version".tar.gz -C "$sdist.tmp"
    mv "$sdist.tmp/pyopencl-$version" "$sdist"
    rm -rf "$sdist.tmp"
fi

release=()
[ "$profile" = release ] && release=(--release)
(cd "$root" && cargo build -q "${release[@]}" -p vgpu-opencl -p vgpu-backend)
library=$root/target/$profile/libvgpu_opencl.so
backend=$root/target/$profile/vgpu-backend

work=$(mktemp -d /tmp/vgpu-pyopencl.XXXXXX)
out=${PYOPENCL_OUT:-$root/target/pyopencl}
mkdir -p "$out"
rm -f "$out"/native.* "$out"/vgpu.* "$out"/backend.log "$out"/figures.json "$out"/summary.txt
mkdir -p "$work/native-icd" "$work/vgpu-icd"
pocl=$(grep -l -i pocl /etc/OpenCL/vendors/*.icd | head -1 || true)
if [ -z "$pocl" ]; then
    echo "no PoCL ICD in /etc/OpenCL/vendors" >&2
    exit 1
fi
cp "$pocl" "$work/native-icd/"
echo "$library" > "$work/vgpu-icd/vgpu.icd"
socket=$work/vgpu.sock
"$backend" --socket "$socket" --log-level warn > "$out/backend.log" 2>&1 &
backend_pid=$!
cleanup() {
    kill "$backend_pid" 2>/dev/null || true
    wait "$backend_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 200); do
    [ -S "$socket" ] && break
    sleep 0.1
done

# shellcheck disable=SC2206
tests=(${*:-${PYOPENCL_TESTS:-$QUICK}})
k=()
[ -n "${PYOPENCL_K:-}" ] && k=(-k "$PYOPENCL_K")

# side NAME ICD_DIR EXPECTED_PLATFORM [ENV...]: one pytest run.
side() {
    local name=$1 icd=$2 expected=$3
    shift 3
    local platform
    platform=$(env OCL_ICD_VENDORS="$icd" "$@" "$venv/bin/python" -c \
        'import pyopencl as cl; print(",".join(p.name for p in cl.get_platforms()))')
    echo "== $name: platform $platform"
    if [ "$platform" != "$expected" ]; then
        echo "$name: expected only the platform '$expected'" >&2
        exit 1
    fi
    # A fresh cache per side: pyopencl's binary cache and PoCL's kernel
    # cache would otherwise carry one side's builds into the other.
    (cd "$sdist/test" && env OCL_ICD_VENDORS="$icd" XDG_CACHE_HOME="$work/cache-$name" "$@" \
        timeout 1800 "$venv/bin/python" -m pytest -q -p no:cacheprovider "${k[@]}" \
        --junitxml="$out/$name.xml" "${tests[@]}" > "$out/$name.log" 2>&1) || true
    tail -1 "$out/$name.log"
}

side native "$work/native-icd" "Portable Computing Language"
side vgpu "$work/vgpu-icd" vgpu VGPU_SOCKET="$socket"
echo "== ${tests[*]}"
python3 "$here/compare.py" "$out/native.xml" "$out/vgpu.xml" "$out/figures.json" | tee "$out/summary.txt"
echo "reports: $out"
if [ -n "${PYOPENCL_KNOWN:-}" ]; then
    unexpected=$(sed -n '/^passing natively but not through vgpu/,$p' "$out/summary.txt" |
        awk 'NR > 1 { print $2 }' |
        grep -v -x -F -f <(sed 's/#.*//; s/[[:space:]]*$//; /^$/d' "$PYOPENCL_KNOWN") || true)
    if [ -n "$unexpected" ]; then
        echo "passing natively only, and not in $PYOPENCL_KNOWN:" >&2
        echo "$unexpected" | sed 's/^/  /' >&2
        exit 3
    fi
fi
if [ -n "${PYOPENCL_MAX_LOST:-}" ]; then
    lost=$(sed -n 's/^passing natively but not through vgpu: //p' "$out/summary.txt")
    [ "$lost" -le "$PYOPENCL_MAX_LOST" ] || exit 3
fi
