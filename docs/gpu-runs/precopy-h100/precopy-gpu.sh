#!/bin/bash
# QEMU live migration with the vGPU pre-copied (precopy-socket) from a
# backend on PoCL (CPU) to one on the NVIDIA H100, mid-run, for a guest
# that computes on 1 GiB of buffers and writes a 4 KiB result
# (checkpoint_loop -r 1), against stop-and-copy; the guest must end with
# the native result. Downtime from QMP, the vGPU's load from the
# destination backend's log.
set -u
C=$PWD/.gpu-s7; B=$C/bin; V=$C/vm; O=${OUT:-/tmp/out}; mkdir -p $O
echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$B/lib
CPU=$($B/vgpu-backend --list-devices | grep -v NVIDIA | head -1 | cut -f1)
GPU=$($B/vgpu-backend --list-devices | grep NVIDIA | head -1 | cut -f1)
echo "from $CPU to $GPU"
MIB=${MIB:-1024}; ITERS=${ITERS:-300}
ARGS="-m $MIB -i $ITERS -p 1 -r 1"
W=/tmp/pm; rm -rf $W; mkdir -p $W
PLAT=${GPU#opencl:}; PLAT=${PLAT%%:*}
CLTEST_PLATFORM=$PLAT CLTEST_DEVICE=0 $B/checkpoint_loop $ARGS > $W/native.out 2>&1; echo "native: $(grep RESULT $W/native.out)"
$B/vgpu-backend --device $CPU --write-profile $W/cpu.prof
$B/vgpu-backend --device $GPU --write-profile $W/gpu.prof
$B/vgpu-ctl common-profile $W/cpu.prof $W/gpu.prof -o $W/pool.prof
one() { # mode: precopy or stop
  local mode=$1 D=$W/$1; mkdir -p $D
  local PA="" PS="" PD=""
  if [ $mode = precopy ]; then PS="--precopy-socket $D/src.pre"; PD="--precopy-socket $D/dst.pre"; fi
  RUST_LOG=info $B/vgpu-backend --socket $D/src.sock --device $CPU --profile $W/pool.prof $PS > /dev/null 2> $D/src-backend.log & local SB=$!
  RUST_LOG=info $B/vgpu-backend --socket $D/dst.sock --device $GPU --profile $W/pool.prof $PD > /dev/null 2> $D/dst-backend.log & local DB=$!
  sleep 1
  QEMU() { LD_LIBRARY_PATH=$V/lib $V/qemu-system-x86_64.bin -L $V/fw -machine q35,accel=tcg -cpu max -m 1024M \
    -display none -monitor none -nodefaults -no-reboot \
    -object memory-backend-memfd,id=mem,size=1024M,share=on -numa node,memdev=mem \
    -kernel $V/bzImage -initrd $V/initramfs.gz \
    -append "console=ttyS0 quiet vgpu.run=/opt/vgpu/bin/checkpoint_loop,${ARGS// /,}" "$@"; }
  local GS="" GD=""
  if [ $mode = precopy ]; then GS="-global vhost-user-vgpu.precopy-socket=$D/src.pre"; GD="-global vhost-user-vgpu.precopy-socket=$D/dst.pre"; fi
  QEMU -chardev socket,id=vgpu0,path=$D/src.sock -device vhost-user-vgpu-pci,chardev=vgpu0 $GS \
    -serial file:$D/src-console.log -qmp unix:$D/src.qmp,server=on,wait=off > $D/src-qemu.log 2>&1 & local SQ=$!
  QEMU -chardev socket,id=vgpu0,path=$D/dst.sock -device vhost-user-vgpu-pci,chardev=vgpu0 $GD \
    -serial file:$D/dst-console.log -qmp unix:$D/dst.qmp,server=on,wait=off -incoming tcp:127.0.0.1:4444 > $D/dst-qemu.log 2>&1 & local DQ=$!
  for i in $(seq 1800); do grep -q "^PROGRESS 2" $D/src-console.log 2>/dev/null && break; sleep 0.1; done
  echo "[$mode] source at: $(grep -c PROGRESS $D/src-console.log) iterations"
  python3 - "$D" <<'PY' | tee $D/migration.txt
import json, socket, sys, time
d = sys.argv[1]
def qmp(path):
    s = socket.socket(socket.AF_UNIX); s.connect(path); f = s.makefile("rw")
    json.loads(f.readline())
    def cmd(name, **args):
        f.write(json.dumps({"execute": name, "arguments": args}) + "\n"); f.flush()
        while True:
            r = json.loads(f.readline())
            if "return" in r or "error" in r: return r
    cmd("qmp_capabilities"); return cmd
src = qmp(d + "/src.qmp")
t = time.time(); print(src("migrate", uri="tcp:127.0.0.1:4444"))
while True:
    r = src("query-migrate")["return"]
    if r.get("status") in ("completed", "failed", "cancelled"): break
    time.sleep(0.05)
print("status", r.get("status"), "total-time ms", r.get("total-time"), "downtime ms", r.get("downtime"),
      "ram MB", round(r.get("ram", {}).get("transferred", 0) / 1e6, 1), "wall s", round(time.time() - t, 2))
PY
  for i in $(seq 1800); do grep -q "VGPU-GUEST-EXIT" $D/dst-console.log 2>/dev/null && break; sleep 0.1; done
  echo "[$mode] migrated: $(grep RESULT $D/dst-console.log)"
  grep -hE "device state|pre-copy|restore ahead|adopt" $D/src-backend.log $D/dst-backend.log | cut -c1-300
  kill $SQ $DQ $SB $DB 2>/dev/null; wait $SQ $DQ $SB $DB 2>/dev/null
}
one precopy 2>&1 | tee $O/precopy-summary.txt
one stop 2>&1 | tee $O/stop-summary.txt
cp $W/native.out $O/
tar czf $O/logs.tgz -C $W --exclude="*.sock" --exclude="*.pre" --exclude="*.qmp" . 2>/dev/null; ls -la $O
