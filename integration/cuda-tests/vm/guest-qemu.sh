#!/usr/bin/env bash
# The test guest under TCG with the vhost-user-vgpu device, from an
# unpacked carry (run-vm.sh, migrate-vm.sh and snapshot-vm.sh start it so):
#   guest-qemu.sh VM_DIR MEMORY VGPU_RUN VHOST_SOCKET CONSOLE [QEMU ARGS...]
# VGPU_RUN is the guest's vgpu.run= (arguments separated by commas).
v=$1 mem=$2 run=$3 sock=$4 console=$5
shift 5
LD_LIBRARY_PATH=$v/lib exec $v/qemu-system-x86_64.bin -L $v/fw -machine q35,accel=tcg -cpu max -m $mem \
	-display none -monitor none -nodefaults -no-reboot \
	-object memory-backend-memfd,id=mem,size=$mem,share=on -numa node,memdev=mem \
	-kernel $v/bzImage -initrd $v/initramfs.gz \
	-append "console=ttyS0 quiet vgpu.run=$run" \
	-chardev socket,id=vgpu0,path=$sock -device vhost-user-vgpu-pci,chardev=vgpu0 \
	-serial file:$console "$@"
