#!/usr/bin/env bash
# Build a bootable test guest for QEMU (TCG or KVM): Debian 12's kernel as an
# uncompressed vmlinux (PVH boot with -kernel) and a busybox initramfs holding
# the virtio modules, virtio_vgpu.ko, the OpenCL ICD loader, clinfo and the
# files of EXTRA_FILES_DIR.
#
#   build-guest-image.sh OUTDIR [EXTRA_FILES_DIR]
#
# Prints the absolute paths of OUTDIR/vmlinux and OUTDIR/initramfs.gz on
# stdout (one per line, nothing else); progress goes to stderr. Results are
# cached by content hash under ${XDG_CACHE_HOME:-$HOME/.cache}/vgpu/.
# Environment: VGPU_GUEST_KVER=6.1.0-NN-amd64 overrides the kernel version
# (default: the one Debian's linux-image-amd64 depends on).
set -euo pipefail

usage() { echo "usage: $0 OUTDIR [EXTRA_FILES_DIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
log() { echo "build-guest-image: $*" >&2; }
die() { log "error: $*"; exit 1; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
KSRC=$REPO/guest-driver/kernel
OUTDIR=$1
EXTRA=${2:-}
if [ -n "$EXTRA" ]; then
	[ -d "$EXTRA" ] || die "EXTRA_FILES_DIR $EXTRA is not a directory"
	EXTRA=$(cd "$EXTRA" && pwd)
fi
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/vgpu
mkdir -p "$CACHE/debs" "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)

export DEBIAN_FRONTEND=noninteractive
apt_updated=
APT_OPTS=(-o DPkg::Lock::Timeout=600)	# other builds may hold the apt/dpkg locks
apt_update() { [ -n "$apt_updated" ] || { log "apt-get update"; apt-get "${APT_OPTS[@]}" update -qq >&2; apt_updated=1; }; }

# --- versions -----------------------------------------------------------
KVER=${VGPU_GUEST_KVER:-}
if [ -z "$KVER" ]; then
	dep() { apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: linux-image-\(6\.1\.0-[0-9]*-amd64\)$/\1/p' | head -n1 || true; }
	KVER=$(dep)
	[ -n "$KVER" ] || { apt_update; KVER=$(dep); }
	[ -n "$KVER" ] || die "apt-cache depends linux-image-amd64 names no linux-image-6.1.0-*-amd64"
fi
PKGS=("linux-image-$KVER" busybox-static ocl-icd-libopencl1 clinfo)
candidate() { apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p' || true; }
declare -A VER
for p in "${PKGS[@]}"; do
	v=$(candidate "$p")
	if [ -z "$v" ] || [ "$v" = "(none)" ]; then apt_update; v=$(candidate "$p"); fi
	[ -n "$v" ] && [ "$v" != "(none)" ] || die "no Debian package $p"
	VER[$p]=$v
done
log "kernel $KVER (${VER[linux-image-$KVER]})"

# --- cache key ------------------------------------------------------------
key_input() {
	sha256sum "$0"
	echo "kver $KVER"
	for p in "${PKGS[@]}"; do echo "$p ${VER[$p]}"; done
	echo "libc6 $(dpkg-query -W -f='${Version}' libc6 2>/dev/null)"
	(cd "$KSRC" && sha256sum Kbuild Makefile ./*.c ./*.h)
	if [ -n "$EXTRA" ]; then
		tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
			-C "$EXTRA" -cf - . | sha256sum
	fi
}
KEY=$(key_input | sha256sum | cut -c1-16)
IMG=$CACHE/guest-$KEY
KDIR_CACHE=$CACHE/kernel-$KVER-${VER[linux-image-$KVER]}

publish() {
	for f in vmlinux initramfs.gz; do
		src=$([ $f = vmlinux ] && echo "$KDIR_CACHE/vmlinux" || echo "$IMG/initramfs.gz")
		rm -f "$OUTDIR/$f"
		ln "$src" "$OUTDIR/$f" 2>/dev/null || cp "$src" "$OUTDIR/$f"
	done
	echo "$OUTDIR/vmlinux"
	echo "$OUTDIR/initramfs.gz"
}

if [ -f "$IMG/initramfs.gz" ] && [ -f "$KDIR_CACHE/vmlinux" ]; then
	log "cached: $IMG"
	publish
	exit 0
fi

WORK=$(mktemp -d "$CACHE/.build-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# --- packages (downloaded and unpacked, never installed) -----------------
deb_of() { # package -> cached .deb path
	local p=$1 v=${VER[$1]} f
	f=$CACHE/debs/${p}_${v//:/%3a}_amd64.deb
	if [ ! -f "$f" ]; then
		log "apt-get download $p=$v"
		(cd "$WORK" && apt-get download -q "$p=$v" >&2 2>/dev/null) ||
			{ apt_update; (cd "$WORK" && apt-get download -q "$p=$v" >&2); }
		mv "$WORK"/"${p}"_*.deb "$f"
	fi
	echo "$f"
}
for p in "${PKGS[@]}"; do
	mkdir -p "$WORK/pkg/$p"
	dpkg -x "$(deb_of "$p")" "$WORK/pkg/$p"
done
KPKG=$WORK/pkg/linux-image-$KVER

# --- vmlinux: the xz payload of the bzImage --------------------------------
if [ ! -f "$KDIR_CACHE/vmlinux" ]; then
	log "extracting vmlinux"
	mkdir -p "$KDIR_CACHE"
	python3 - "$KPKG/boot/vmlinuz-$KVER" "$WORK/vmlinux" <<'EOF'
import lzma, sys
data = open(sys.argv[1], "rb").read()
pos = data.find(b"\xfd7zXZ\x00")
while pos >= 0:
    try:
        out = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[pos:])
    except lzma.LZMAError:
        out = b""
    if out[:4] == b"\x7fELF":
        open(sys.argv[2], "wb").write(out)
        sys.exit(0)
    pos = data.find(b"\xfd7zXZ\x00", pos + 1)
sys.exit("no xz-compressed ELF found in " + sys.argv[1])
EOF
	mv "$WORK/vmlinux" "$KDIR_CACHE/vmlinux"
fi

# --- virtio_vgpu.ko and the ioctl test, against this kernel's headers ------
if [ ! -e "/lib/modules/$KVER/build/Makefile" ]; then
	log "installing linux-headers-$KVER"
	apt-get "${APT_OPTS[@]}" install -y -qq "linux-headers-$KVER" >&2 ||
		{ apt_update; apt-get "${APT_OPTS[@]}" install -y -qq "linux-headers-$KVER" >&2; }
fi
command -v cc >/dev/null || die "no C compiler (apt-get install gcc libc6-dev)"
mkdir -p "$WORK/kbuild"
cp "$KSRC"/Kbuild "$KSRC"/Makefile "$KSRC"/*.c "$KSRC"/*.h "$WORK/kbuild/"
log "building virtio_vgpu.ko for $KVER"
make -s -C "$WORK/kbuild" KVER="$KVER" all 2>&1 | { grep -v "Skipping BTF" || true; } >&2

# --- root file system -------------------------------------------------------
R=$WORK/root
mkdir -p "$R"/{bin,dev,proc,sys,tmp,run,etc,root} "$R/usr/bin" "$R/usr/lib/x86_64-linux-gnu" \
	"$R/usr/lib64" "$R/opt/vgpu/bin" "$R/lib/modules"
ln -s usr/lib64 "$R/lib64"
ln -s ../usr/lib/x86_64-linux-gnu "$R/lib/x86_64-linux-gnu"
cp "$WORK/pkg/busybox-static/bin/busybox" "$R/bin/busybox"
M=$R/lib/modules/$KVER
mkdir -p "$M"
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci; do
	cp "$KPKG/lib/modules/$KVER/kernel/drivers/virtio/$m.ko" "$M/"
done
cp "$WORK/kbuild/virtio_vgpu.ko" "$M/"
cp "$WORK/kbuild/vgpu-ioctl-test" "$R/opt/vgpu/bin/"
cp -a "$WORK/pkg/ocl-icd-libopencl1/usr/lib/x86_64-linux-gnu/." "$R/usr/lib/x86_64-linux-gnu/"
cp "$WORK/pkg/clinfo/usr/bin/clinfo" "$R/usr/bin/"
mkdir -p "$R/etc/OpenCL/vendors"
[ -z "$EXTRA" ] || cp -a "$EXTRA/." "$R/"
echo "$KVER" >"$R/etc/vgpu-kernel-version"
printf '/usr/lib/x86_64-linux-gnu\n/usr/lib\n/usr/local/lib\n' >"$R/etc/ld.so.conf"
echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"
echo 'root:x:0:' >"$R/etc/group"

# Shared libraries every ELF in the tree needs, from the host (Debian 12 too).
copy_lib() { # host path -> same real path in the tree, plus the name asked for
	local want=$1 real
	real=$(readlink -f "$want")
	[ -e "$R$real" ] || { mkdir -p "$R$(dirname "$real")"; cp "$real" "$R$real"; }
	if [ "$want" != "$real" ] && [ ! -e "$R$want" ] && [ ! -L "$R$want" ]; then
		mkdir -p "$R$(dirname "$want")"
		ln -s "$real" "$R$want"
	fi
}
LIBPATH=$R/usr/lib/x86_64-linux-gnu:$R/usr/lib:$R/usr/local/lib
while IFS= read -r -d '' f; do	# ldd lists the whole closure at once
	[ "$(head -c4 "$f" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] || continue
	{ LD_LIBRARY_PATH=$LIBPATH ldd "$f" 2>/dev/null || true; } | while read -r a b c _; do
		case "$b $c" in
		"=> not") log "warning: ${f#"$R"} needs $a, not found"; continue ;;
		"=> /"*) p=$c ;;
		*) case "$a" in /*) p=$a ;; *) continue ;; esac ;;
		esac
		case "$p" in "$R"/*) continue ;; esac
		copy_lib "$p"
	done
done < <(find "$R" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
[ -e "$R/usr/lib64/ld-linux-x86-64.so.2" ] ||
	ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$R/usr/lib64/ld-linux-x86-64.so.2"
ldconfig -r "$R" 2>/dev/null || log "warning: ldconfig -r failed (the loader still searches the default paths)"

cat >"$R/init" <<EOF
#!/bin/busybox sh
KVER=$KVER
EOF
cat >>"$R/init" <<'EOF'
/bin/busybox --install -s /bin
export PATH=/opt/vgpu/bin:/usr/local/bin:/usr/bin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
hostname vgpu-guest
ip link set lo up 2>/dev/null
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_vgpu; do
	insmod /lib/modules/$KVER/$m.ko || echo "VGPU-GUEST: insmod $m failed"
done
RUN=
HAVE_RUN=
for a in $(cat /proc/cmdline); do
	case "$a" in vgpu.run=*) RUN=${a#vgpu.run=}; HAVE_RUN=1 ;; esac
done
echo "VGPU-GUEST: devices: $(ls /dev | grep "^vgpu" | tr "\n" " ")"
echo VGPU-GUEST-READY
if [ -n "$HAVE_RUN" ]; then
	# commas separate arguments: vgpu.run=/opt/vgpu/bin/test,--quick
	if [ -z "$RUN" ] || [ "$RUN" = none ]; then rc=0; else
		set -- $(echo "$RUN" | tr ',' ' ')
		"$@"
		rc=$?
	fi
else
	echo "VGPU-GUEST: no vgpu.run= on the kernel command line: shell on the console (exit to power off)"
	setsid cttyhack sh -l
	rc=$?
fi
echo "VGPU-GUEST-EXIT $rc"
sync
poweroff -f
echo o >/proc/sysrq-trigger
sleep 5
EOF
chmod 755 "$R/init"

# --- pack -------------------------------------------------------------------
log "packing initramfs"
if command -v cpio >/dev/null; then
	CPIO=(cpio --quiet -o -H newc -R 0:0)
else
	CPIO=("$R/bin/busybox" cpio -o -H newc -R 0:0)
fi
(cd "$R" && find . -mindepth 1 | LC_ALL=C sort | "${CPIO[@]}") | gzip -6n >"$WORK/initramfs.gz"
mkdir -p "$WORK/img"
mv "$WORK/initramfs.gz" "$WORK/img/"
rm -rf "$IMG"
mv "$WORK/img" "$IMG"
# keep the newest 8 images
ls -dt "$CACHE"/guest-* 2>/dev/null | tail -n +9 | xargs -r rm -rf
log "initramfs $(du -h "$IMG/initramfs.gz" | cut -f1), vmlinux $(du -h "$KDIR_CACHE/vmlinux" | cut -f1)"
publish
