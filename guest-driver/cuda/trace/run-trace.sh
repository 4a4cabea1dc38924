#!/bin/bash
# On the GPU machine: build cutrace against the real driver, dump what its
# cuGetProcAddress answers, and trace the client programs in clients/.
# usage: bash run-trace.sh OUT_DIR     (writes OUT_DIR/cutrace.tgz)
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$1
work=/tmp/cutrace-out
rm -rf "$work" /tmp/cutrace && mkdir -p "$work/traces" && cp -r "$here" /tmp/cutrace
exec > >(tee "$work/log.txt") 2>&1
finish() { sleep 1; tar czf "$out/cutrace.tgz" -C "$work" .; }
trap finish EXIT
date
nvidia-smi -L
nvcc --version | tail -2
gcc --version | head -1
PYTHONUNBUFFERED=1 python3 -c 'import torch, cupy; print("torch", torch.__version__, "cupy", cupy.__version__)'
real=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
for c in "$real" /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib64/libcuda.so.1; do
	[ -n "$c" ] && [ -e "$c" ] && real=$(readlink -f "$c") && break
done
echo "real driver: $real"
cd /tmp/cutrace && make clean >/dev/null && make REAL="$real" 2>&1 | grep -v note: | tail -3
[ -e libcuda.so.1 ] || exit 1
mkdir -p lib && cp libcuda.so.1 lib/
cp names.txt "$work/exported-names.txt"
sed -E 's/_(ptds|ptsz)$//; s/_v[0-9]+$//' names.txt | cat - names.txt | sort -u >allnames.txt
if [ -z "${CUTRACE_SKIP_DUMP:-}" ]; then
echo "== procdump ($(wc -l <allnames.txt) names)"
time timeout 150 ./procdump "$real" allnames.txt >"$work/procaddr-dump.txt"; echo "procdump rc=$?"
timeout 20 ./procdump "$real" --null >"$work/procaddr-null.txt" 2>&1; echo "procdump --null rc=$?"
grep ^probe "$work/procaddr-dump.txt"
fi
echo "== build clients"
nvcc -o vecadd_static clients/vecadd.cu && nvcc -cudart shared -o vecadd_shared clients/vecadd.cu
export CUTRACE_HASH=${CUTRACE_HASH-1}
traced() { # name limit command...
	local name=$1 limit=$2; shift 2
	echo "== $name traced"
	CUTRACE_REAL=$real CUTRACE_OUT=$work/traces/$name LD_LIBRARY_PATH=/tmp/cutrace/lib:${LD_LIBRARY_PATH:-} \
		PYTHONUNBUFFERED=1 timeout "$limit" "$@"
	local rc=$?
	echo "$name traced rc=$rc"
	if ! ls "$work/traces/$name".* >/dev/null 2>&1; then
		echo "== $name traced with LD_PRELOAD (no trace file)"
		CUTRACE_REAL=$real CUTRACE_OUT=$work/traces/$name LD_PRELOAD=/tmp/cutrace/lib/libcuda.so.1 \
			PYTHONUNBUFFERED=1 timeout "$limit" "$@"
		echo "$name preload rc=$?"
	fi
	if [ $rc -ne 0 ]; then
		echo "== $name native"
		PYTHONUNBUFFERED=1 timeout "$limit" "$@"
		echo "$name native rc=$?"
		echo "== $name traced, tables unwrapped"
		CUTRACE_NOWRAP=1 CUTRACE_REAL=$real CUTRACE_OUT=$work/traces/$name-nowrap \
			LD_LIBRARY_PATH=/tmp/cutrace/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1 timeout "$limit" "$@"
		echo "$name nowrap rc=$?"
	fi
}
traced vecadd-static 60 ./vecadd_static
traced vecadd-shared 60 ./vecadd_shared
traced cupy 150 python3 clients/cupy_client.py
traced torch 150 python3 clients/torch_client.py
ls -la "$work/traces"
date
