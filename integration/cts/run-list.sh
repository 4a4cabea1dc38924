#!/bin/sh
# Runs a list of CTS sub-tests, one process each, and prints one line per
# sub-test: VGPU-CTS <tab> suite <tab> sub-test <tab> result <tab> seconds.
# POSIX sh and busybox applets only: the same script runs inside the test
# guest (busybox, no Python) and natively on the host, so both sides run
# the same sub-tests the same way.
#
#   run-list.sh LIST CTS_DIR TIMEOUT_S
#
# LIST: lines "suite sub-test" (suite as test_api; '#' starts a comment).
# CTS_DIR: a build tree's test_conformance/ (or a copy of it); each suite
# runs in its own folder there, where its data folders are.
# result: pass, fail or skip (the harness's results file), hung (over
# TIMEOUT_S seconds, killed) or crashed (no results file). A sub-test that
# does not pass prints its log's last lines, prefixed, for the record.
list=$1 cts=$2 timeout_s=$3
scratch=${TMPDIR:-/tmp}/vgpu-cts-$$
mkdir -p "$scratch"

# The folder of a suite's binary: test_api is api/test_api, but
# test_image_streams lives in images/kernel_read_write/.
suite_dir() {
    for d in "$cts"/*/ "$cts"/*/*/; do
        if [ -x "$d$1" ]; then
            echo "${d%/}"
            return
        fi
    done
}

uptime_s() { cut -d' ' -f1 /proc/uptime; }

grep -v '^[[:space:]]*#' "$list" | while read -r suite sub; do
    [ -n "$sub" ] || continue
    dir=$(suite_dir "$suite")
    if [ -z "$dir" ]; then
        printf 'VGPU-CTS\t%s\t%s\tabsent\t0\n' "$suite" "$sub"
        continue
    fi
    json=$scratch/result.json log=$scratch/log
    rm -f "$json"
    start=$(uptime_s)
    (cd "$dir" && CL_CONFORMANCE_RESULTS_FILENAME=$json \
        timeout -s KILL "$timeout_s" "./$suite" "$sub" > "$log" 2>&1)
    rc=$?
    end=$(uptime_s)
    result=$(sed -n "s/.*\"$sub\": *\"\([a-z]*\)\".*/\1/p" "$json" 2>/dev/null | head -n 1)
    if [ -z "$result" ]; then
        # SIGKILL from timeout: 137 (busybox and coreutils alike).
        if [ "$rc" = 137 ] || [ "$rc" = 124 ]; then result=hung; else result=crashed; fi
    fi
    secs=$(echo "$start $end" | awk '{printf "%.1f", $2 - $1}')
    printf 'VGPU-CTS\t%s\t%s\t%s\t%s\n' "$suite" "$sub" "$result" "$secs"
    if [ "$result" != pass ]; then
        # awk ends every line, also a last one the sub-test left open.
        tail -n 8 "$log" | awk -v p="VGPU-CTS-LOG $suite $sub: " '{ print p $0 }'
    fi
done
rm -rf "$scratch"
