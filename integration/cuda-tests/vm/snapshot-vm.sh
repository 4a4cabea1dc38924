#!/usr/bin/env bash
# Moves a VM computing with CUDA to another GPU machine through a file:
# `save` (on the first machine) stops the guest's checkpoint_loop mid-run
# into a migration file (QEMU's stream: guest RAM and the vGPU), compressed
# and cut into parts of at most 15 MiB (what a run's output may bring
# back); `resume` (on the second machine, with the parts carried) starts a
# backend on its GPU and QEMU -incoming from the file, and the guest must
# finish with the native RESULT line.
#
#   bash snapshot-vm.sh save CARRY_DIR OUT_DIR
#   bash snapshot-vm.sh resume CARRY_DIR PARTS_DIR OUT_DIR
set -u
mode=${1:?save or resume}
carry=$(cd "${2:?CARRY_DIR}" && pwd)
w=/tmp/vgpu-cuda-snapshot
rm -rf $w && mkdir -p $w && tar -C $w -xJf "$carry/vm.tar.xz"
v=$w/vm
args="kernels.ptx ${SNAPSHOT_ITERATIONS:-40} ${SNAPSHOT_PAUSE_MS:-100}"
nvidia-smi -L
qemu() {  # console, extra...
	local console=$1; shift
	bash "$carry/guest-qemu.sh" $v 256M "/opt/vgpu/cuda/loop.sh,${args// /,}" $w/vgpu.sock $console \
		-qmp unix:$w/qmp,server=on,wait=off "$@" > $console.qemu 2>&1
}
qmp() {  # command [json-arguments]
	python3 - "$w/qmp" "$@" <<'PY'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
json.loads(f.readline())
def cmd(name, args=None):
    f.write(json.dumps({"execute": name, "arguments": args or {}}) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "return" in r or "error" in r: return r
cmd("qmp_capabilities")
print(cmd(sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else None))
if sys.argv[2] == "migrate":
    while True:
        r = cmd("query-migrate")["return"]
        if r.get("status") in ("completed", "failed", "cancelled"): break
        time.sleep(0.05)
    print("status", r.get("status"), "total-time ms", r.get("total-time"), "downtime ms", r.get("downtime"))
PY
}
$v/vgpu-backend --socket $w/vgpu.sock --device cuda:0 > $w/backend.log 2>&1 &
backend=$!
for _ in $(seq 100); do [ -S $w/vgpu.sock ] && break; sleep 0.1; done
case $mode in
save)
	out=$(mkdir -p "${3:?OUT_DIR}" && cd "$3" && pwd)
	(cd $v/cuda && timeout 120 ./checkpoint_loop $args) > $out/native.txt 2>&1
	qemu $out/source-console.txt &
	q=$!
	for _ in $(seq 300); do [ -S $w/qmp ] && break; sleep 0.1; done
	for _ in $(seq 1200); do grep -q "^PROGRESS ${SNAPSHOT_AT:-10}" $out/source-console.txt 2>/dev/null && break; sleep 0.1; done
	qmp migrate "{\"uri\": \"exec:cat > $w/vm.stream\"}" | tee $out/save.txt
	kill $q; wait $q 2>/dev/null
	ls -l $w/vm.stream | tee -a $out/save.txt
	xz -T0 -6 < $w/vm.stream | split -b 15m -d - $out/vm.stream.xz.
	ls -l $out/vm.stream.xz.* | tee -a $out/save.txt
	cp $w/backend.log $out/source-backend.log
	;;
resume)
	parts=$(cd "${3:?PARTS_DIR}" && pwd)
	out=$(mkdir -p "${4:?OUT_DIR}" && cd "$4" && pwd)
	(cd $v/cuda && timeout 120 ./checkpoint_loop $args) > $out/native.txt 2>&1
	cat $parts/vm.stream.xz.* | xz -dc > $w/vm.stream
	qemu $out/destination-console.txt -incoming "exec:cat $w/vm.stream" &
	q=$!
	for _ in $(seq 1800); do grep -q "VGPU-GUEST-EXIT" $out/destination-console.txt 2>/dev/null && break; sleep 0.1; done
	kill $q 2>/dev/null; wait $q 2>/dev/null
	cp $w/backend.log $out/destination-backend.log
	native=$(grep RESULT $out/native.txt)
	resumed=$(tr -d '\r' < $out/destination-console.txt | grep RESULT)
	echo "native:  $native"
	echo "resumed: $resumed (from iteration $(tr -d '\r' < $out/destination-console.txt | grep -m1 '^PROGRESS' | cut -d' ' -f2))"
	grep -h "device state\|profile\|refus" $out/destination-backend.log | tail -5
	if [ -n "$native" ] && [ "$native" == "$resumed" ]; then echo "PASS cuda-vm-other-gpu"; else echo "FAIL cuda-vm-other-gpu"; fi
	;;
esac
kill $backend 2>/dev/null; wait $backend 2>/dev/null
