#!/usr/bin/env bash
# Builds the Debian packages (scripts/package.sh) and checks them:
#   1. metadata and contents (dpkg-deb -I / -c);
#   2. the unit with `systemd-analyze verify` in a root holding the package
#      and this host's system units (works without systemd as PID 1);
#   3. the sysusers.d and tmpfiles.d rules applied to that root;
#   4. vgpu-backend started with the unit's ExecStart line, expanded for an
#      instance as systemd does (%i, ${VAR} as one word, $VAR split), with
#      the options of the example /etc/vgpu/<instance>.conf, under the parts
#      of the unit's confinement a plain root shell can reproduce (read-only
#      file system but /run/vgpu and the cache, hidden home, private /tmp,
#      no new privileges, the unit's capability bounding set, its umask);
#      then served: `vgpu-ctl --json status`, clinfo through the packaged
#      ICD, a metrics scrape, the demo guest booted in the patched QEMU
#      against it (where setup.sh built them), a clean stop on SIGTERM;
#   5. the kernel module built from the packaged source with dkms.conf's
#      own MAKE line (when kernel headers are installed).
# Exits non-zero on the first failure. VGPU_PROFILE=release packages the
# release build (default here: debug, which the tests already built).
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "test-package: FAIL: $*" >&2; exit 1; }
say() { echo "test-package: $*"; }

# The confined backend gets a private /tmp and no home: start.sh binds this
# folder under /run first, so the checkout may be anywhere.
mkdir -p target
work=$(mktemp -d "$PWD/target/pkgtest.XXXXXX")
backend_pid=""
cleanup() {
  if [ -n "$backend_pid" ] && kill -0 "$backend_pid" 2>/dev/null; then
    kill -KILL "$backend_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

mapfile -t debs < <(VGPU_PROFILE=${VGPU_PROFILE:-debug} scripts/package.sh "$work/debs")
host=${debs[0]:-} guest=${debs[1]:-}
[ -f "$host" ] && [ -f "$guest" ] || fail "package.sh made no packages: ${debs[*]}"
version=$(dpkg-deb -f "$host" Version)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)

# ---- 1. metadata and contents ----------------------------------------------
[ "$(dpkg-deb -f "$host" Package)" = vgpu-host ] || fail "vgpu-host: wrong Package field"
[ "$(dpkg-deb -f "$guest" Package)" = vgpu-guest ] || fail "vgpu-guest: wrong Package field"
dpkg-deb -I "$host" | grep "postinst" >/dev/null || fail "vgpu-host has no postinst"
dpkg-deb -I "$guest" | grep "conffiles" >/dev/null || fail "vgpu-guest has no conffiles"
has() { # package, path, mode prefix
  local line
  line=$(dpkg-deb -c "$1" | awk -v p="$2" '$6 == p')
  [ -n "$line" ] || fail "$(basename "$1") lacks $2"
  case "$line" in "$3"*) ;; *) fail "$(basename "$1"): $2 is not $3: $line" ;; esac
  case "$line" in *" root/root "*) ;; *) fail "$(basename "$1"): $2 not owned by root: $line" ;; esac
}
has "$host" ./usr/bin/vgpu-backend -rwxr-xr-x
has "$host" ./usr/bin/vgpu-ctl -rwxr-xr-x
has "$host" ./lib/systemd/system/vgpu-backend@.service -rw-r--r--
has "$host" ./usr/lib/tmpfiles.d/vgpu.conf -rw-r--r--
has "$host" ./usr/lib/sysusers.d/vgpu.conf -rw-r--r--
has "$host" ./usr/share/qemu/vhost-user/50-vgpu.json -rw-r--r--
has "$host" ./usr/share/doc/vgpu-host/CONTROL.md -rw-r--r--
has "$host" ./usr/share/doc/vgpu-host/examples/vm.conf -rw-r--r--
has "$host" ./usr/share/doc/vgpu-host/examples/libvirt-hook-qemu -rwxr-xr-x
has "$host" ./usr/share/doc/vgpu-host/examples/libvirt-domain.xml -rw-r--r--
has "$host" ./etc/vgpu/ drwxr-xr-x
has "$guest" "./usr/lib/$ma/libvgpu_opencl.so" -rw-r--r--
has "$guest" ./etc/OpenCL/vendors/vgpu.icd -rw-r--r--
has "$guest" "./usr/lib/$ma/vgpu/libcuda.so.1" -rw-r--r--
has "$guest" "./usr/lib/$ma/vgpu/libcuda.so" lrwxrwxrwx
has "$guest" "./usr/src/virtio-vgpu-$version/dkms.conf" -rw-r--r--
has "$guest" "./usr/src/virtio-vgpu-$version/virtio_vgpu.c" -rw-r--r--
has "$guest" "./usr/src/virtio-vgpu-$version/Kbuild" -rw-r--r--
has "$guest" ./usr/lib/modules-load.d/vgpu.conf -rw-r--r--
say "contents and metadata ok ($(basename "$host"), $(basename "$guest"))"

root=$work/root groot=$work/guest
dpkg -x "$host" "$root"
dpkg -x "$guest" "$groot"
jq -e '.binary == "/usr/bin/vgpu-backend" and .type == "rpmsg"' \
  "$root/usr/share/qemu/vhost-user/50-vgpu.json" >/dev/null || fail "vhost-user.json"
[ "$(cat "$groot/etc/OpenCL/vendors/vgpu.icd")" = "/usr/lib/$ma/libvgpu_opencl.so" ] || fail "vgpu.icd"
nm -D --defined-only "$groot/usr/lib/$ma/libvgpu_opencl.so" | grep -w clIcdGetPlatformIDsKHR >/dev/null \
  || fail "the ICD does not export clIcdGetPlatformIDsKHR"
nm -D --defined-only "$groot/usr/lib/$ma/vgpu/libcuda.so.1" | grep -w cuGetProcAddress_v2 >/dev/null \
  || fail "libcuda.so.1 does not export cuGetProcAddress_v2"
"$root/usr/bin/vgpu-backend" --print-capabilities | jq -e .type >/dev/null || fail "--print-capabilities"

# ---- 2. systemd-analyze verify --------------------------------------------
unit=$root/lib/systemd/system/vgpu-backend@.service
# The root needs the units the template refers to (sysinit.target, ...).
cp -an /lib/systemd/system/. "$root/lib/systemd/system/"
verify=$(systemd-analyze verify --root="$root" vgpu-backend@vm1.service 2>&1) \
  || fail "systemd-analyze verify: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify warns: $verify"
say "systemd-analyze verify ok"

# ---- 3. sysusers.d and tmpfiles.d -----------------------------------------
mkdir -p "$root/etc"
cp /etc/passwd /etc/group "$root/etc/"
systemd-sysusers --root="$root" vgpu.conf || fail "systemd-sysusers"
grep -q '^vgpu:' "$root/etc/group" || fail "sysusers.d made no vgpu group"
systemd-tmpfiles --root="$root" --create vgpu.conf || fail "systemd-tmpfiles"
gid=$(awk -F: '$1 == "vgpu" {print $3}' "$root/etc/group")
[ "$(stat -c '%a %g' "$root/run/vgpu")" = "750 $gid" ] || fail "/run/vgpu: $(stat -c '%a %g' "$root/run/vgpu")"
say "sysusers.d and tmpfiles.d ok (/run/vgpu 0750 root:vgpu)"

# ---- 4. the unit's ExecStart, confined as far as a shell can --------------
instance=pkgtest$$
# Environment= lines, then the EnvironmentFile (here: the packaged example,
# its metrics socket renamed for this instance), as systemd applies them.
env_lines=$(sed -n 's/^Environment=//p' "$unit")
conf=$work/$instance.conf
sed "s|/run/vgpu/vm1.metrics|/run/vgpu/$instance.metrics|" \
  "$root/usr/share/doc/vgpu-host/examples/vm.conf" > "$conf"
grep -q "^VGPU_OPTIONS=.*--metrics unix:/run/vgpu/$instance.metrics" "$conf" \
  || fail "the example vm.conf has no metrics option to rename"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[ "$(grep -c '^ExecStart=' "$unit")" = 1 ] || fail "not one ExecStart"
umask_unit=$(sed -n 's/^UMask=//p' "$unit")
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit")
bounding=-all
for c in $caps; do bounding="$bounding,+$(echo "${c#CAP_}" | tr A-Z a-z)"; done
# systemd: %i is the instance, ${VAR} one word, $VAR split at white space.
command=$(echo "$exec_start" | sed -e "s/%i/$instance/g" -e 's/\${\([A-Z_]*\)}/"${\1}"/g')
# The package's binary, from the extracted root as start.sh sees it.
inside=/run/vgpu-pkgtest
command=${command/#\/usr\/bin\//$inside/root/usr/bin/}
cat > "$work/start.sh" <<EOF
#!/bin/bash
# Inside a private mount namespace: ProtectSystem=strict with
# ReadWritePaths=/run/vgpu, CacheDirectory=vgpu, PrivateTmp, ProtectHome.
set -euo pipefail
mount --make-rprivate /
mount -t tmpfs tmpfs /run && mkdir -p /run/vgpu && mount --bind "$root/run/vgpu" /run/vgpu
# This test's files, before /tmp and the homes (where a checkout may be) go.
mkdir -p $inside && mount --bind "$work" $inside
mount -t tmpfs tmpfs /var/cache && mkdir -p /var/cache/vgpu
mount -t tmpfs tmpfs /tmp
for home in /root /home; do [ -d \$home ] && mount -t tmpfs -o ro tmpfs \$home; done
# Every other mount read-only.
awk '{print \$5}' /proc/self/mountinfo | sort -u | while read -r m; do
  case "\$m" in /proc*|/sys*|/dev*|/run/vgpu|/var/cache|/var/cache/*|/tmp) continue ;; esac
  mount -o remount,bind,ro "\$m" 2>/dev/null || true
done
touch /var/cache/vgpu/.w && ! touch /usr/.w 2>/dev/null && ! touch /etc/.w 2>/dev/null \
  || { echo "the read-only file system is not in place" >&2; exit 1; }
umask $umask_unit
set -a
$env_lines
set +a
# EnvironmentFile: KEY=VALUE lines, the value the rest of the line.
while IFS= read -r line; do
  case "\$line" in ''|'#'*|';'*) continue ;; esac
  value=\${line#*=}; value=\${value#\"}; value=\${value%\"}
  export "\${line%%=*}=\$value"
done < "$inside/$instance.conf"
exec setpriv --no-new-privs --bounding-set "$bounding" -- $command
EOF
chmod +x "$work/start.sh"
unshare -m "$work/start.sh" 2> "$work/backend.log" &
backend_pid=$!
sock=$root/run/vgpu/$instance.sock ctl=$root/run/vgpu/$instance.ctl
for _ in $(seq 200); do [ -S "$sock" ] && [ -S "$ctl" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "the backend did not create its socket: $(cat "$work/backend.log")"
[ "$(stat -c %a "$sock")" = 770 ] || fail "socket mode $(stat -c %a "$sock"), want 770 (UMask)"
proc=$(cat "/proc/$backend_pid/status")
grep -x "NoNewPrivs:[[:space:]]*1" <<<"$proc" >/dev/null || fail "the backend runs without no_new_privs"
# CAP_SYS_ADMIN (21), CAP_SETUID (7), CAP_SETGID (6), CAP_KILL (5),
# CAP_CHOWN (0): the unit's bounding set.
grep -x "CapBnd:[[:space:]]*00000000002000e1" <<<"$proc" >/dev/null \
  || fail "the backend's capability bounding set: $(grep CapBnd <<<"$proc")"
grep -x "Name:[[:space:]]*vgpu-backend" <<<"$proc" >/dev/null || fail "pid $backend_pid is not the backend"
status=$("$root/usr/bin/vgpu-ctl" --control "$ctl" --json status) || fail "vgpu-ctl status: $status"
echo "$status" | jq -e '.vms == [] and (.devices | length) >= 1' >/dev/null || fail "status: $status"
grep -q "sandbox: seccomp filter of" "$work/backend.log" \
  || fail "the backend's own sandbox did not come up: $(cat "$work/backend.log")"
grep -q "no private network namespace" "$work/backend.log" \
  && fail "the backend could not enter its network namespace under the unit's capabilities"
# A guest program through the packaged ICD (loopback).
echo "$groot/usr/lib/$ma/libvgpu_opencl.so" > "$work/vgpu.icd"
clinfo_out=$(OCL_ICD_VENDORS=$work/vgpu.icd VGPU_SOCKET=$sock clinfo 2>&1) \
  || fail "clinfo through the packaged ICD: $clinfo_out"
echo "$clinfo_out" | grep "Number of devices *1" >/dev/null || fail "clinfo: $clinfo_out"
metrics=$(curl -sS --fail --max-time 10 --unix-socket "$root/run/vgpu/$instance.metrics" http://vgpu/metrics) \
  || fail "metrics scrape"
echo "$metrics" | grep '^vgpu_device_calls_total{api="opencl"' >/dev/null || fail "metrics: $metrics"
# The demo guest in the patched QEMU against the packaged backend, where
# setup.sh built them (VGPU_SKIP_VM=1 leaves them out).
if [ "${VGPU_SKIP_VM:-0}" != 1 ] && [ -s target/qemu-path ] && [ -f target/guest-image/vmlinux ]; then
  console=$(timeout 300 "$(cat target/qemu-path)" -machine q35,accel=tcg -cpu max -m 1G \
      -display none -monitor none -nodefaults -no-reboot \
      -object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem \
      -chardev socket,id=vgpu0,path="$sock" -device vhost-user-vgpu-pci,chardev=vgpu0 \
      -kernel target/guest-image/vmlinux -initrd target/guest-image/initramfs.gz \
      -append "console=ttyS0 quiet vgpu.run=/opt/vgpu/bin/vgpu-demo" -serial stdio 2>&1 |
    tr -d '\r') || true
  echo "$console" | grep -q "VGPU-GUEST-EXIT 0" ||
    fail "the demo guest against the packaged backend: $(echo "$console" | tail -n 20)"
  say "the demo guest ran its OpenCL program in QEMU through the packaged backend"
fi
kill -TERM "$backend_pid"
for _ in $(seq 100); do kill -0 "$backend_pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$backend_pid" 2>/dev/null && fail "the backend ignored SIGTERM"
wait "$backend_pid" || fail "the backend exited non-zero on SIGTERM: $(tail -n 5 "$work/backend.log")"
backend_pid=""
[ -e "$sock" ] || [ -e "$ctl" ] && fail "sockets left behind after SIGTERM"
say "the unit's ExecStart serves (instance $instance: status, clinfo, metrics, clean stop)"

# ---- 5. the kernel module from the packaged source ------------------------
kdir=$(ls -d /lib/modules/*/build 2>/dev/null | head -n 1 || true)
if [ -n "$kdir" ] && [ -e "$kdir/Makefile" ]; then
  dkms_tree=$work/dkms
  build=$dkms_tree/virtio-vgpu/$version/build
  mkdir -p "$build"
  cp -r "$groot/usr/src/virtio-vgpu-$version/." "$build/"
  (
    # What dkms sets before it evaluates dkms.conf.
    kernel_source_dir=$kdir
    # shellcheck disable=SC1090
    . "$build/dkms.conf"
    [ "$BUILT_MODULE_NAME" = virtio_vgpu ] || exit 1
    eval "${MAKE[0]}" >"$work/dkms.log" 2>&1
  ) || fail "dkms.conf's MAKE failed: $(tail -n 20 "$work/dkms.log" 2>/dev/null)"
  [ -f "$build/virtio_vgpu.ko" ] || fail "no virtio_vgpu.ko"
  say "kernel module builds from the packaged source with dkms.conf ($kdir)"
else
  say "no kernel headers: the module build is skipped"
fi
say "all ok"
