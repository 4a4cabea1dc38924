#!/bin/bash
# Live-migrate a running guest from a backend on PoCL (CPU) to a backend on
# the NVIDIA GPU, mid-run; the guest's OpenCL program must finish with the
# native result. Everything lands in $OUT.
set -u
C=$PWD/.carry; B=$C/bin; V=$C/vm
[ -d /usr/local/nvidia ] || [ -e /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 ] && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
CPU=${CPU:-$($B/vgpu-backend --list-devices | grep -v NVIDIA | head -1 | cut -f1)}
GPU=${GPU:-$($B/vgpu-backend --list-devices | grep NVIDIA | head -1 | cut -f1)}
W=/tmp/m; rm -rf $W; mkdir -p $W
ARGS="-m 256 -i 40 -p 1"
$B/checkpoint_loop $ARGS > $W/native.out 2>&1; grep RESULT $W/native.out
$B/vgpu-backend --device $CPU --write-profile $W/cpu.prof
$B/vgpu-backend --device $GPU --write-profile $W/gpu.prof
$B/vgpu-ctl common-profile $W/cpu.prof $W/gpu.prof -o $W/pool.prof
$B/vgpu-backend --socket $W/src.sock --device $CPU --profile $W/pool.prof > /dev/null 2> $W/src-backend.log &
SB=$!
$B/vgpu-backend --socket $W/dst.sock --device $GPU --profile $W/pool.prof > /dev/null 2> $W/dst-backend.log &
DB=$!
sleep 1
QEMU() { LD_LIBRARY_PATH=$V/lib $V/qemu-system-x86_64.bin -L $V/fw -machine q35,accel=tcg -cpu max -m 1G \
  -display none -monitor none -nodefaults -no-reboot \
  -object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem \
  -kernel $V/bzImage -initrd $V/initramfs.gz \
  -append "console=ttyS0 quiet vgpu.run=/opt/vgpu/bin/checkpoint_loop,${ARGS// /,}" "$@"; }
QEMU -chardev socket,id=vgpu0,path=$W/src.sock -device vhost-user-vgpu-pci,chardev=vgpu0 \
  -serial file:$W/src-console.log -qmp unix:$W/src.qmp,server=on,wait=off > $W/src-qemu.log 2>&1 &
SQ=$!
QEMU -chardev socket,id=vgpu0,path=$W/dst.sock -device vhost-user-vgpu-pci,chardev=vgpu0 \
  -serial file:$W/dst-console.log -qmp unix:$W/dst.qmp,server=on,wait=off -incoming tcp:127.0.0.1:4444 > $W/dst-qemu.log 2>&1 &
DQ=$!
for i in $(seq 600); do grep -q "^PROGRESS 10" $W/src-console.log 2>/dev/null && break; sleep 0.1; done
echo "source at: $(grep -c PROGRESS $W/src-console.log) iterations"
python3 - "$W" <<'PY' | tee $W/migration.txt
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
src("migrate-set-parameters", **{"downtime-limit": 300})
t = time.time(); print(src("migrate", uri="tcp:127.0.0.1:4444"))
while True:
    r = src("query-migrate")["return"]
    if r.get("status") in ("completed", "failed", "cancelled"): break
    time.sleep(0.05)
print("status", r.get("status"), "total-time ms", r.get("total-time"), "downtime ms", r.get("downtime"),
      "setup ms", r.get("setup-time"), "ram MB", r.get("ram", {}).get("transferred", 0) / 1e6,
      "wall s", round(time.time() - t, 2))
PY
for i in $(seq 1200); do grep -q "VGPU-GUEST-EXIT" $W/dst-console.log 2>/dev/null && break; sleep 0.1; done
echo "== destination console tail"; tail -4 $W/dst-console.log
echo "== native: $(grep RESULT $W/native.out)"
echo "== migrated: $(grep RESULT $W/dst-console.log)"
grep "device state" $W/src-backend.log $W/dst-backend.log
kill $SQ $DQ $SB $DB 2>/dev/null; wait 2>/dev/null
cp $W/*.log $W/*.txt $W/*.out $OUT/ 2>/dev/null
