#!/usr/bin/env bash
# On the GPU machine: the CUDA programs of build-carry.sh natively, then the
# same binaries inside a TCG guest whose libcuda.so.1 is vgpu's, served by
# vgpu-backend on cuda:0 through the patched QEMU's vhost-user-vgpu device.
# Every program's output must be identical.
#
#   bash run-vm.sh CARRY_DIR OUT_DIR
set -u
carry=$(cd "${1:?CARRY_DIR}" && pwd)
out=$(mkdir -p "${2:?OUT_DIR}" && cd "$2" && pwd)
w=/tmp/vgpu-cuda-vm
rm -rf $w && mkdir -p $w && tar -C $w -xJf "$carry/vm.tar.xz"
v=$w/vm
nvidia-smi -L; nproc
# Natively: the host's own libcuda.so.1.
cd $v/cuda
run() { local name=$1; shift; echo "== $name"; timeout 120 "$@" 2>&1; echo "== end $name rc=$?"; }
export LD_LIBRARY_PATH=$v/cudart
. ./tests.sh > $out/native.txt
unset LD_LIBRARY_PATH
echo "== all done" >> $out/native.txt
# Through vgpu in the guest.
$v/vgpu-backend --socket $w/vgpu.sock --device ${VGPU_VM_DEVICE:-cuda:0} > $out/backend.log 2>&1 &
backend=$!
for _ in $(seq 100); do [ -S $w/vgpu.sock ] && break; sleep 0.1; done
start=$(date +%s)
timeout 900 bash "$carry/guest-qemu.sh" $v 2G /opt/vgpu/cuda/guest-suite.sh $w/vgpu.sock $out/console.txt \
	-smp 2 > $out/qemu.log 2>&1
echo "qemu rc=$? after $(( $(date +%s) - start )) s (boot, the programs, power-off)"
kill $backend; wait $backend 2>/dev/null
# The guest's console, from the first test's header to the end marker.
tr -d '\r' < $out/console.txt | sed -n '/^== /,/^== all done/p' > $out/vm.txt
pass=0; fail=0
for name in $(sed -n 's/^== end \([^ ]*\) rc=.*/\1/p' $out/native.txt); do
	section() { sed -n "/^== $name\$/,/^== end $name /p" "$1"; }
	if [ -n "$(section $out/native.txt)" ] && [ "$(section $out/native.txt)" == "$(section $out/vm.txt)" ] &&
		section $out/native.txt | grep -q "^== end $name rc=0"; then
		echo "PASS $name"; pass=$((pass + 1))
	else
		echo "FAIL $name"; fail=$((fail + 1))
		diff <(section $out/native.txt) <(section $out/vm.txt) | head -20
	fi
done
echo "$pass passed, $fail failed"
grep -E "panick|ERROR" $out/backend.log | head -5
