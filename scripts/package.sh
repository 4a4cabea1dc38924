#!/usr/bin/env bash
# Builds the Debian packages with dpkg-deb (no debhelper needed):
#   vgpu-host   vgpu-backend, vgpu-ctl, the vgpu-backend@.service template,
#               tmpfiles.d and sysusers.d rules, libvirt's vhost-user.json,
#               examples (per-VM options, libvirt domain and hook)
#   vgpu-guest  the OpenCL ICD and its .icd file, libvgpu_cuda.so as a
#               libcuda.so.1 alternative, the kernel module's source for DKMS
#
#   scripts/package.sh [OUTDIR]        default OUTDIR: target/debian
#   VGPU_PROFILE=debug scripts/package.sh   package the debug build (tests)
#
# Prints the two .deb paths. The patched QEMU is not packaged: build it with
# qemu-configs/build-qemu.sh (see qemu-configs/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$(realpath -m "${1:-target/debian}")
profile=${VGPU_PROFILE:-release}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
[ -n "$version" ] || { echo "package: no version in Cargo.toml" >&2; exit 1; }

if [ "$profile" = release ]; then
  cargo build --release --quiet -p vgpu-backend -p vgpu-opencl -p vgpu-cuda
  bin=target/release
else
  cargo build --quiet -p vgpu-backend -p vgpu-opencl -p vgpu-cuda
  bin=target/debug
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-package.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"

# ---- vgpu-host ------------------------------------------------------------
h=$stage/vgpu-host
doc=$h/usr/share/doc/vgpu-host
# Stripped as dh_strip would (the release profile keeps line tables).
install -D -s -m 0755 "$bin/vgpu-backend" "$h/usr/bin/vgpu-backend"
install -D -s -m 0755 "$bin/vgpu-ctl" "$h/usr/bin/vgpu-ctl"
install -D -m 0644 backend/packaging/vgpu-backend@.service "$h/lib/systemd/system/vgpu-backend@.service"
install -D -m 0644 backend/packaging/tmpfiles.conf "$h/usr/lib/tmpfiles.d/vgpu.conf"
install -D -m 0644 backend/packaging/sysusers.conf "$h/usr/lib/sysusers.d/vgpu.conf"
install -d -m 0755 "$h/etc/vgpu"
# libvirt finds back-ends by these files; the binary is where this package puts it.
install -d "$h/usr/share/qemu/vhost-user"
sed 's|"binary": "[^"]*"|"binary": "/usr/bin/vgpu-backend"|' qemu-configs/vhost-user.json \
  > "$h/usr/share/qemu/vhost-user/50-vgpu.json"
install -D -m 0644 README.md "$doc/README.md"
install -D -m 0644 backend/CONTROL.md "$doc/CONTROL.md"
install -D -m 0644 SECURITY.md "$doc/SECURITY.md"
install -D -m 0644 backend/packaging/vm.conf "$doc/examples/vm.conf"
install -D -m 0755 backend/packaging/libvirt-hook-qemu "$doc/examples/libvirt-hook-qemu"
install -D -m 0644 qemu-configs/libvirt-domain.xml "$doc/examples/libvirt-domain.xml"
install -D -m 0644 qemu-configs/libvirt-migration.md "$doc/examples/libvirt-migration.md"
install -D -m 0644 qemu-configs/README.md "$doc/qemu-configs.md"
mkdir -p "$h/DEBIAN"
cat > "$h/DEBIAN/control" <<EOF
Package: vgpu-host
Version: $version
Architecture: $arch
Maintainer: vgpu maintainers <vgpu@localhost>
Section: admin
Priority: optional
Depends: libc6 (>= 2.36), libgcc-s1, ocl-icd-libopencl1 | libopencl1
Recommends: pocl-opencl-icd | opencl-icd
Suggests: libvirt-daemon-system
Installed-Size: $(du -sk "$h" | cut -f1)
Description: vhost-user vGPU back-end for QEMU (OpenCL and CUDA)
 vgpu-backend serves one VM's vGPU over vhost-user and runs the guest's
 OpenCL and CUDA calls on this host's device; vgpu-ctl checkpoints, restores,
 re-homes and inspects it. One systemd instance per VM:
 systemctl start vgpu-backend@vm1 (socket /run/vgpu/vm1.sock). Needs the
 patched QEMU built by qemu-configs/build-qemu.sh.
EOF
cat > "$h/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if command -v systemd-sysusers >/dev/null; then
    systemd-sysusers vgpu.conf
  elif ! getent group vgpu >/dev/null; then
    addgroup --system vgpu
  fi
  if command -v systemd-tmpfiles >/dev/null; then
    systemd-tmpfiles --create vgpu.conf || true
  fi
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
  fi
fi
EOF
cat > "$h/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
EOF
chmod 0755 "$h/DEBIAN/postinst" "$h/DEBIAN/postrm"
dpkg-deb --root-owner-group -Zxz --build "$h" "$out/vgpu-host_${version}_${arch}.deb" >/dev/null

# ---- vgpu-guest -----------------------------------------------------------
g=$stage/vgpu-guest
lib=/usr/lib/$multiarch
src=/usr/src/virtio-vgpu-$version
gdoc=$g/usr/share/doc/vgpu-guest
install -D -m 0644 "$bin/libvgpu_opencl.so" "$g$lib/libvgpu_opencl.so"
strip --strip-unneeded "$g$lib/libvgpu_opencl.so"
install -d "$g/etc/OpenCL/vendors"
echo "$lib/libvgpu_opencl.so" > "$g/etc/OpenCL/vendors/vgpu.icd"
# In a directory of its own: selected with update-alternatives (postinst
# registers it) or per program with LD_LIBRARY_PATH=$lib/vgpu.
install -D -m 0644 "$bin/libvgpu_cuda.so" "$g$lib/vgpu/libcuda.so.1"
strip --strip-unneeded "$g$lib/vgpu/libcuda.so.1"
ln -s libcuda.so.1 "$g$lib/vgpu/libcuda.so"
for f in virtio_vgpu.c vgpu_uapi.h Kbuild Makefile README.md; do
  install -D -m 0644 "guest-driver/kernel/$f" "$g$src/$f"
done
sed "s/@VERSION@/$version/g" guest-driver/packaging/dkms.conf > "$g$src/dkms.conf"
install -D -m 0644 guest-driver/packaging/modules-load.conf "$g/usr/lib/modules-load.d/vgpu.conf"
install -D -m 0644 guest-driver/opencl/README.md "$gdoc/opencl.md"
install -D -m 0644 guest-driver/cuda/README.md "$gdoc/cuda.md"
install -D -m 0644 guest-driver/kernel/README.md "$gdoc/kernel.md"
mkdir -p "$g/DEBIAN"
echo /etc/OpenCL/vendors/vgpu.icd > "$g/DEBIAN/conffiles"
cat > "$g/DEBIAN/control" <<EOF
Package: vgpu-guest
Version: $version
Architecture: $arch
Maintainer: vgpu maintainers <vgpu@localhost>
Section: libs
Priority: optional
Depends: libc6 (>= 2.36), libgcc-s1, ocl-icd-libopencl1 | libopencl1
Recommends: dkms, linux-headers-amd64
Provides: opencl-icd
Installed-Size: $(du -sk "$g" | cut -f1)
Description: vGPU guest drivers: OpenCL ICD, libcuda.so.1, virtio_vgpu module
 Inside a VM with a vhost-user-vgpu-pci device: the OpenCL ICD
 (/etc/OpenCL/vendors/vgpu.icd), a CUDA driver-API libcuda.so.1 (an
 alternative: update-alternatives --config libcuda.so.1) and the source of
 the virtio_vgpu kernel module, built by DKMS.
EOF
cat > "$g/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
  # Refused (and left alone) where a real file, e.g. NVIDIA's, holds the path.
  update-alternatives --install $lib/libcuda.so.1 libcuda.so.1 $lib/vgpu/libcuda.so.1 20 \\
    --slave $lib/libcuda.so libcuda.so $lib/vgpu/libcuda.so \\
    || echo "vgpu-guest: libcuda.so.1 not registered; use LD_LIBRARY_PATH=$lib/vgpu" >&2
  ldconfig
  if command -v dkms >/dev/null; then
    dkms add -m virtio-vgpu -v $version >/dev/null 2>&1 || true
    dkms install -m virtio-vgpu -v $version \\
      || echo "vgpu-guest: virtio_vgpu not built; install the kernel's headers, then: dkms install virtio-vgpu/$version" >&2
  fi
fi
EOF
cat > "$g/DEBIAN/prerm" <<EOF
#!/bin/sh
set -e
if [ "\$1" = remove ] || [ "\$1" = deconfigure ]; then
  update-alternatives --remove libcuda.so.1 $lib/vgpu/libcuda.so.1 || true
  if command -v dkms >/dev/null; then
    dkms remove -m virtio-vgpu -v $version --all >/dev/null 2>&1 || true
  fi
fi
EOF
chmod 0755 "$g/DEBIAN/postinst" "$g/DEBIAN/prerm"
dpkg-deb --root-owner-group -Zxz --build "$g" "$out/vgpu-guest_${version}_${arch}.deb" >/dev/null

echo "$out/vgpu-host_${version}_${arch}.deb"
echo "$out/vgpu-guest_${version}_${arch}.deb"
