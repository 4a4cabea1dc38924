#!/usr/bin/env bash
# A complete QEMU command line for a VM with a vGPU, booted directly from a
# kernel and an initramfs under TCG.
#
#   vgpu-backend --socket /tmp/vgpu0.sock &          # start the back-end first
#   KERNEL=vmlinux INITRD=initrd.cpio.gz qemu-configs/example-cmdline.sh
#
# Extra arguments are appended to QEMU's, e.g. for the destination of a
# migration:   qemu-configs/example-cmdline.sh -incoming tcp:127.0.0.1:4444
# Set DRY_RUN=1 to print the command instead of running it.
#
# Environment (defaults in brackets):
#   QEMU    patched qemu-system-x86_64 [built/cached by build-qemu.sh]
#   KERNEL  guest kernel: bzImage, or an uncompressed vmlinux (PVH) [vmlinux]
#   INITRD  initramfs [initrd.cpio.gz]
#   APPEND  kernel command line [console=ttyS0 panic=-1 quiet]
#   SOCKET  vgpu-backend's vhost-user socket [/tmp/vgpu0.sock]
#   QMP     QMP socket (for migrate/stop/cont) [/tmp/vgpu-qmp.sock]
#   MEM     guest RAM; the same memfd is shared with the back-end [1G]
#   SMP     vCPUs [2]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

QEMU=${QEMU:-$("$here/build-qemu.sh" | tail -1)}
KERNEL=${KERNEL:-vmlinux}
INITRD=${INITRD:-initrd.cpio.gz}
APPEND=${APPEND:-console=ttyS0 panic=-1 quiet}
SOCKET=${SOCKET:-/tmp/vgpu0.sock}
QMP=${QMP:-/tmp/vgpu-qmp.sock}
MEM=${MEM:-1G}
SMP=${SMP:-2}

cmd=(
    "$QEMU"
    # TCG: the nested KVM on the project's machines cannot run ordinary
    # guests; use accel=kvm where a real KVM answers.
    -machine q35,accel=tcg,memory-backend=mem
    -cpu max
    -smp "$SMP"
    -m "$MEM"
    # vhost-user: guest RAM must be a shared, fd-backed object so that the
    # back-end can map it (memfd; hugetlbfs or a file work too).
    -object "memory-backend-memfd,id=mem,size=$MEM,share=on"
    # the vGPU: a vhost-user socket to vgpu-backend, and the device
    # (virtio id 60, PCI 1af4:107c, 2 queues: 0 submit, 1 event);
    # reconnect-ms: a restarted back-end is reconnected (qemu-configs/README.md)
    -chardev "socket,id=vgpu0,path=$SOCKET,reconnect-ms=1000"
    -device vhost-user-vgpu-pci,chardev=vgpu0
    # direct kernel boot, serial console on stdio
    -kernel "$KERNEL"
    -initrd "$INITRD"
    -append "$APPEND"
    -nodefaults
    -display none
    -serial mon:stdio
    -no-reboot
    -qmp "unix:$QMP,server=on,wait=off"
    "$@"
)

if [[ ${DRY_RUN:-0} == 1 ]]; then
    for a in "${cmd[@]}"; do
        if [[ $a =~ ^[][A-Za-z0-9_,.=:/+@-]+$ ]]; then printf '%s ' "$a"; else printf "'%s' " "$a"; fi
    done
    echo
else
    exec "${cmd[@]}"
fi
