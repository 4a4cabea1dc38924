#!/bin/bash
# Second run: the CUDA probe's cause of failure (error chain, the failing
# system calls of a confined run), and the same probe without Landlock's
# view differing (as nobody: --user nobody, sandbox default).
set -u
B=$PWD/.gpu-confine; O=${OUT:-/tmp/out}; mkdir -p $O
mkdir -p /tmp/ctl && chmod 777 /tmp/ctl
ST() { LD_LIBRARY_PATH=$B/lib $B/strace "$@"; }
{ echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; ls -la /usr/local/nvidia /usr/local/nvidia/lib64 | head -30; cat /etc/ld.so.conf.d/* 2>&1 | head; mount | grep -iE "nvidia|usr" | head; } > $O/env2.txt 2>&1
RUST_LOG=debug timeout 90 $B/vgpu-backend --probe-sandbox --device cuda:0 --control /tmp/ctl/c.sock > $O/probe-cuda.json 2> $O/probe-cuda.log
echo "probe cuda rc=$?" >> $O/env2.txt
ST -f -qq -Z -o /tmp/den.txt timeout 90 $B/vgpu-backend --probe-sandbox --device cuda:0 --control /tmp/ctl/c.sock > $O/probe-cuda-strace.json 2>/dev/null
echo "probe cuda under strace rc=$?" >> $O/env2.txt
grep -vE "ENOENT|EAGAIN|ETIMEDOUT|resumed>|ECHILD" /tmp/den.txt | head -300 > $O/denied2.txt
cat $O/env2.txt; head -c 600 $O/probe-cuda.json; echo; grep -iE "cuda|landlock|error|warn" $O/probe-cuda.log | head; head -40 $O/denied2.txt | cut -c1-200
