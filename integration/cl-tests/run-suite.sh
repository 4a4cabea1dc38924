#!/bin/sh
# Runs the OpenCL test programs and collects their RESULT lines, or compares
# the RESULT checksums of two runs.
#
#   run-suite.sh [BUILD_DIR]                   run every program (default sizes)
#   run-suite.sh --compare NATIVE_LOG VGPU_LOG compare two runs' checksums
#
# POSIX sh: it also runs under busybox in the guest image.
#
# Environment:
#   CLTEST_PROGRAMS  programs to run, space-separated (default: all)
#   CLTEST_LOGDIR    keep each program's full output there as NAME.log
#   CLTEST_TIMEOUT   seconds per program when timeout(1) exists (default 600)
#   CLTEST_QUICK=1   small default sizes (TCG guests); passed through
#   CLTEST_PLATFORM, CLTEST_DEVICE, CLTEST_RELEASED_HANDLES: passed through
#
# Output: for each program its TIME and RESULT lines (all of its output when
# it fails), a "WALL <name> <seconds>" line, then "SUITE <passed> passed
# <failed> failed". A program that dies without a RESULT line gets
# "RESULT <name> - FAIL exit <status>". Exit status: 0 only if all passed.

ALL_PROGRAMS="vector_add reduction_local api_coverage bad_args matmul nbody transpose smith_waterman checkpoint_loop images svm"

usage() {
    echo "usage: $0 [BUILD_DIR] | --compare NATIVE_LOG VGPU_LOG" >&2
    exit 2
}

# Prints a table of the RESULT lines of two logs; exit 1 unless every
# program passed in both with the same checksum.
compare() {
    [ -r "$1" ] && [ -r "$2" ] || { echo "cannot read $1 or $2" >&2; exit 2; }
    awk -v A="$1" -v B="$2" '
        function load(file, sum, st, order,    line, f, n) {
            n = 0
            while ((getline line < file) > 0) {
                split(line, f, " ")
                if (f[1] != "RESULT" || f[2] == "")
                    continue
                if (!(f[2] in sum))
                    order[++n] = f[2]
                sum[f[2]] = f[3]
                st[f[2]] = f[4]
            }
            close(file)
            return n
        }
        BEGIN {
            na = load(A, sa, ta, oa)
            nb = load(B, sb, tb, ob)
            n = 0
            for (i = 1; i <= na; i++) { names[++n] = oa[i]; seen[oa[i]] = 1 }
            for (i = 1; i <= nb; i++) if (!(ob[i] in seen)) names[++n] = ob[i]
            printf "%-18s %-18s %-18s %s\n", "program", "native", "vgpu", "same?"
            bad = 0
            for (i = 1; i <= n; i++) {
                p = names[i]
                a = (p in sa) ? (ta[p] == "PASS" ? sa[p] : "FAIL") : "missing"
                b = (p in sb) ? (tb[p] == "PASS" ? sb[p] : "FAIL") : "missing"
                same = (a == b && ta[p] == "PASS") ? "yes" : "NO"
                if (same != "yes") bad++
                printf "%-18s %-18s %-18s %s\n", p, a, b, same
            }
            if (n == 0) { print "no RESULT lines found"; bad = 1 }
            printf "COMPARE %d programs, %d differ\n", n, bad
            exit bad ? 1 : 0
        }'
}

now() {
    t=$(date +%s.%N 2>/dev/null)
    case "$t" in
        *N*|"") date +%s ;;
        *) echo "$t" ;;
    esac
}

case "$1" in
    --compare)
        [ $# -eq 3 ] || usage
        compare "$2" "$3"
        exit $?
        ;;
    -h|--help)
        usage
        ;;
esac
[ $# -le 1 ] || usage

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/build}
programs=${CLTEST_PROGRAMS:-$ALL_PROGRAMS}
limit=${CLTEST_TIMEOUT:-600}
tmp=$(mktemp -d 2>/dev/null || echo "/tmp/cltest.$$")
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT INT TERM
[ -n "$CLTEST_LOGDIR" ] && mkdir -p "$CLTEST_LOGDIR"

runner=""
if command -v timeout >/dev/null 2>&1; then
    runner="timeout $limit"
fi

passed=0
failed=0
start=$(now)
for p in $programs; do
    exe="$build/$p"
    out="$tmp/$p.log"
    if [ ! -x "$exe" ]; then
        echo "RESULT $p - FAIL not built ($exe)"
        failed=$((failed + 1))
        continue
    fi
    t0=$(now)
    $runner "$exe" >"$out" 2>&1
    rc=$?
    t1=$(now)
    [ -n "$CLTEST_LOGDIR" ] && cp "$out" "$CLTEST_LOGDIR/$p.log"
    result=$(grep "^RESULT $p " "$out" | tail -n 1)
    if [ $rc -eq 0 ] && echo "$result" | grep -q " PASS\$"; then
        grep "^TIME " "$out"
        echo "$result"
        passed=$((passed + 1))
    else
        echo "---- $p failed (exit $rc), its output:"
        sed 's/^RESULT /result /' "$out"
        echo "----"
        if [ -n "$result" ] && ! echo "$result" | grep -q " PASS\$"; then
            echo "$result"
        else
            echo "RESULT $p - FAIL exit $rc"
        fi
        failed=$((failed + 1))
    fi
    echo "WALL $p $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"
done
end=$(now)
echo "SUITE $passed passed $failed failed ($(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s)"
[ $failed -eq 0 ]
