#!/usr/bin/env bash
# On the GPU machine: live-migrates a TCG guest whose CUDA program
# (checkpoint_loop: buffers, a module global, a non-blocking stream, events)
# is mid-run, from one vgpu-backend on cuda:0 to another (QEMU's own
# migration stream carries the vGPU). The destination's RESULT line must be
# the native run's.
#
#   bash migrate-vm.sh CARRY_DIR OUT_DIR    (after build-carry.sh)
set -u
carry=$(cd "${1:?CARRY_DIR}" && pwd)
out=$(mkdir -p "${2:?OUT_DIR}" && cd "$2" && pwd)
w=/tmp/vgpu-cuda-migrate
rm -rf $w && mkdir -p $w && tar -C $w -xJf "$carry/vm.tar.xz"
v=$w/vm
args="kernels.ptx ${MIGRATE_ITERATIONS:-40} ${MIGRATE_PAUSE_MS:-100}"
(cd $v/cuda && timeout 120 ./checkpoint_loop $args) > $out/native.txt 2>&1
grep RESULT $out/native.txt
device=${VGPU_VM_DEVICE:-cuda:0}
$v/vgpu-backend --socket $w/src.sock --device $device > $out/src-backend.log 2>&1 &
sb=$!
$v/vgpu-backend --socket $w/dst.sock --device $device > $out/dst-backend.log 2>&1 &
db=$!
for _ in $(seq 100); do [ -S $w/src.sock ] && [ -S $w/dst.sock ] && break; sleep 0.1; done
qemu() {  # socket, qmp, console, extra...
	local sock=$1 qmp=$2 console=$3; shift 3
	bash "$carry/guest-qemu.sh" $v 1G "/opt/vgpu/cuda/loop.sh,${args// /,}" $sock $console \
		-qmp unix:$qmp,server=on,wait=off "$@" > $console.qemu 2>&1
}
qemu $w/src.sock $w/src.qmp $out/src-console.txt &
sq=$!
qemu $w/dst.sock $w/dst.qmp $out/dst-console.txt -incoming tcp:127.0.0.1:4444 &
dq=$!
for _ in $(seq 300); do [ -S $w/src.qmp ] && [ -S $w/dst.qmp ] && break; sleep 0.1; done
for _ in $(seq 1200); do grep -q "^PROGRESS ${MIGRATE_AT:-10}" $out/src-console.txt 2>/dev/null && break; sleep 0.1; done
echo "source at iteration $(grep -c '^PROGRESS' $out/src-console.txt)"
python3 - $w <<'PY' | tee $out/migration.txt
import json, socket, sys, time
w = sys.argv[1]
def qmp(path):
    s = socket.socket(socket.AF_UNIX); s.connect(path); f = s.makefile("rw")
    json.loads(f.readline())
    def cmd(name, **args):
        f.write(json.dumps({"execute": name, "arguments": args}) + "\n"); f.flush()
        while True:
            r = json.loads(f.readline())
            if "return" in r or "error" in r: return r
    cmd("qmp_capabilities"); return cmd
src = qmp(w + "/src.qmp")
t = time.time(); print(src("migrate", uri="tcp:127.0.0.1:4444"))
while True:
    r = src("query-migrate")["return"]
    if r.get("status") in ("completed", "failed", "cancelled"): break
    time.sleep(0.05)
print("status", r.get("status"), "total-time ms", r.get("total-time"), "downtime ms", r.get("downtime"),
      "ram MB", round(r.get("ram", {}).get("transferred", 0) / 1e6, 1), "wall s", round(time.time() - t, 2))
PY
for _ in $(seq 1800); do grep -q "VGPU-GUEST-EXIT" $out/dst-console.txt 2>/dev/null && break; sleep 0.1; done
# The source stays paused after a completed migration (QEMU's
# "postmigrate"): it ends here.
kill $sq 2>/dev/null
native=$(grep RESULT $out/native.txt)
migrated=$(tr -d '\r' < $out/dst-console.txt | grep RESULT)
echo "native:   $native"
echo "migrated: $migrated (destination, from iteration $(tr -d '\r' < $out/dst-console.txt | grep -m1 '^PROGRESS' | cut -d' ' -f2))"
kill $dq $sb $db 2>/dev/null; wait 2>/dev/null
grep -h "device state" $out/src-backend.log $out/dst-backend.log | tail -4
if [ -n "$native" ] && [ "$native" == "$migrated" ]; then echo "PASS cuda-vm-migration"; else echo "FAIL cuda-vm-migration"; exit 1; fi
