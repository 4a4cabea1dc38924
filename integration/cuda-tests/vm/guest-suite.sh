#!/bin/sh
# Runs inside the test guest (busybox sh): every CUDA program of the VM
# run, each output between "== NAME" and "== end NAME rc=N" on the console.
# The host side (run-vm.sh) runs the same binaries natively and compares.
cd /opt/vgpu/cuda || exit 1
run() {  # name, command...
	name=$1; shift
	echo "== $name"
	"$@" 2>&1
	echo "== end $name rc=$?"
}
. ./tests.sh
echo "== all done"
