#!/usr/bin/env bash
# Build Debian's QEMU 10.0.2 with the vhost-user-vgpu patch (x86_64-softmmu only)
# and install it into a cache directory keyed by what went into it.
#
#   QEMU=$(qemu-configs/build-qemu.sh | tail -1)
#
# The last line of stdout is always the path of a runnable qemu-system-x86_64
# (a wrapper that adds the firmware search paths -L /usr/share/seabios
# -L /usr/lib/ipxe/qemu -L /usr/share/qemu; the real binary sits beside it as
# qemu-system-x86_64.bin).
# Everything else (apt, pip, configure, ninja) goes to stderr.
#
# Cache:  ${XDG_CACHE_HOME:-$HOME/.cache}/vgpu/qemu-<hash>/
#   hash = first 16 hex digits of
#          sha256( orig tarball sha256 + "\n" + patch content + this script )
# When the cached binary exists the script prints its path and does nothing else;
# concurrent runs for the same hash wait for each other (flock).
#
# Environment:
#   VGPU_QEMU_JOBS      parallel build jobs (default: nproc)
#   VGPU_QEMU_KEEP_BUILD=1  keep the build tree under the cache (default: removed)
#
# Runs on a fresh Debian 12 (bookworm) machine as root (sudo is used if not root).
set -euo pipefail

ORIG_TARBALL=qemu_10.0.2+ds.orig.tar.xz
ORIG_SHA256=0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1
SRC_DIRNAME=qemu-10.0.2
SUITE=bookworm-backports

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PATCH="$HERE/vhost-user-vgpu.patch"
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"

log() { echo "build-qemu: $*" >&2; }
die() { echo "build-qemu: error: $*" >&2; exit 1; }

[[ -f $PATCH ]] || die "patch not found: $PATCH"

KEY=$( { printf '%s\n' "$ORIG_SHA256"; cat "$PATCH" "$SELF"; } | sha256sum | cut -c1-16)
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/vgpu"
PREFIX="$CACHE_ROOT/qemu-$KEY"
QEMU_BIN="$PREFIX/bin/qemu-system-x86_64"

if [[ -x $QEMU_BIN && -x $PREFIX/bin/qemu-system-x86_64.bin ]]; then
    echo "$QEMU_BIN"
    exit 0
fi

mkdir -p "$CACHE_ROOT"
# One build per key at a time: a second caller waits, then finds the binary.
exec 9>"$CACHE_ROOT/.qemu-$KEY.lock"
flock 9
if [[ -x $QEMU_BIN && -x $PREFIX/bin/qemu-system-x86_64.bin ]]; then
    echo "$QEMU_BIN"
    exit 0
fi

SUDO=
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || die "not root and no sudo"
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive

# --- 1. apt: enable bookworm-backports (deb + deb-src) ---------------------
# The entry is derived from the machine's own Debian sources (same URIs,
# same keyring), only the suite changes. No archive host is written here.
enable_backports() {
    local dst_sources=/etc/apt/sources.list.d/vgpu-backports.sources
    local dst_list=/etc/apt/sources.list.d/vgpu-backports.list
    local src=/etc/apt/sources.list.d/debian.sources
    if [[ -f $dst_sources || -f $dst_list ]]; then
        :   # written by an earlier run
    elif [[ -f $src ]]; then
        # First deb822 stanza whose Suites names the plain release (bookworm);
        # keep URIs/Components/Signed-By, rewrite Types and Suites.
        local stanza
        stanza=$(awk -v RS= '/(^|\n)Suites:[^\n]*(^|[ \t])bookworm([ \t]|\n|$)/ { print; exit }' "$src")
        [[ -n $stanza ]] || die "no bookworm stanza in $src"
        stanza=$(printf '%s\n' "$stanza" | grep -v '^#' \
            | sed -e 's/^Types:.*/Types: deb deb-src/' -e "s/^Suites:.*/Suites: $SUITE/")
        log "enabling $SUITE in $dst_sources"
        printf '%s\n' "$stanza" | $SUDO tee "$dst_sources" >/dev/null
    elif [[ -f /etc/apt/sources.list ]]; then
        local line
        line=$(grep -E '^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?[^[:space:]]+[[:space:]]+bookworm[[:space:]]' /etc/apt/sources.list | head -1)
        [[ -n $line ]] || die "no 'deb ... bookworm ...' line in /etc/apt/sources.list"
        line=$(printf '%s\n' "$line" | sed -E "s/[[:space:]]bookworm[[:space:]]/ $SUITE /")
        log "enabling $SUITE in $dst_list"
        { printf '%s\n' "$line"; printf '%s\n' "${line/#deb/deb-src}"; } | $SUDO tee "$dst_list" >/dev/null
    else
        die "found neither /etc/apt/sources.list.d/debian.sources nor /etc/apt/sources.list"
    fi
    # Refresh the lists unless they already know backports' qemu (binary and source).
    local madison
    madison=$(apt-cache madison qemu-system-data qemu 2>/dev/null || true)
    if ! grep -q "$SUITE/main amd64 Packages" <<<"$madison" \
        || ! grep -q "$SUITE/main Sources" <<<"$madison"; then
        $SUDO apt-get update >&2
    fi
}

# --- 2. build dependencies -------------------------------------------------
install_deps() {
    local pkgs=(build-essential pkg-config ninja-build libglib2.0-dev libpixman-1-dev
                libfdt-dev libslirp-dev flex bison python3 python3-venv xz-utils
                dpkg-dev seabios ipxe-qemu)
    local missing=()
    local p
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    # qemu-system-data (keymaps, vgabios, pxe roms for the pc machines) comes
    # from backports to match 10.0.2; it is architecture-independent.
    dpkg-query -W -f='${Status}' qemu-system-data 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("qemu-system-data/$SUITE")
    if ((${#missing[@]})); then
        log "installing: ${missing[*]}"
        $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2
    fi
}

enable_backports
install_deps

WORK=$(mktemp -d "$CACHE_ROOT/build-$KEY.XXXXXX")
cleanup() {
    if [[ ${VGPU_QEMU_KEEP_BUILD:-0} != 1 ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

# --- 3. source: Debian's orig tarball --------------------------------------
TARBALL="$CACHE_ROOT/$ORIG_TARBALL"
if [[ ! -f $TARBALL ]] || ! echo "$ORIG_SHA256  $TARBALL" | sha256sum -c --quiet - >/dev/null 2>&1; then
    log "downloading $ORIG_TARBALL (apt-get source qemu/$SUITE)"
    dl=$(mktemp -d "$CACHE_ROOT/dl.XXXXXX")
    # apt may 404 on the .dsc / debian tarball; the orig tarball is all we need.
    (cd "$dl" && apt-get source --download-only "qemu/$SUITE" >&2) || true
    [[ -f $dl/$ORIG_TARBALL ]] || die "apt-get source did not fetch $ORIG_TARBALL"
    mv "$dl/$ORIG_TARBALL" "$TARBALL"
    rm -rf "$dl"
fi
echo "$ORIG_SHA256  $TARBALL" | sha256sum -c --quiet - >&2 \
    || { rm -f "$TARBALL"; die "sha256 mismatch for $ORIG_TARBALL (removed; run again)"; }

log "extracting into $WORK"
tar -C "$WORK" --no-same-owner -xf "$TARBALL"
SRC="$WORK/$SRC_DIRNAME"
[[ -d $SRC ]] || die "tarball did not contain $SRC_DIRNAME/"
(cd "$SRC" && patch -p1 --forward --batch < "$PATCH" >&2)

# --- 4. python: meson 1.5.0 + pycotap in a venv ----------------------------
# The +ds tarball drops QEMU's bundled python wheels; configure's own venv
# (mkvenv) inherits the packages of the python it is given.
VENV="$WORK/venv"
python3 -m venv "$VENV" >&2
"$VENV/bin/pip" install --quiet --disable-pip-version-check 'meson==1.5.0' 'pycotap==1.3.1' >&2

# --- 5. configure + build --------------------------------------------------
# The +ds tarball has no firmware blobs, yet meson unpacks the edk2 images
# (edk2-*.fd.bz2, absent here) whenever bzip2 is installed: switch that off.
sed -i 's/^    unpack_edk2_blobs = bzip2.found()$/    unpack_edk2_blobs = false/' "$SRC/meson.build"
grep -q '^    unpack_edk2_blobs = false$' "$SRC/meson.build" || die "could not disable edk2 unpacking in meson.build"

BUILD="$SRC/build"
mkdir -p "$BUILD"
cd "$BUILD"
log "configuring"
# Minimal: x86_64 system emulator, TCG + KVM, slirp, vhost-user; no UI, no
# tools, no docs, no blobs (firmware comes from the system's packages).
../configure \
    --prefix="$PREFIX" \
    --python="$VENV/bin/python3" \
    --target-list=x86_64-softmmu \
    --without-default-features \
    --disable-download \
    --disable-install-blobs \
    --disable-docs \
    --disable-tools \
    --disable-guest-agent \
    --disable-werror \
    --disable-debug-info \
    --enable-tcg \
    --enable-kvm \
    --enable-slirp \
    --enable-fdt=system \
    --enable-vhost-user \
    --enable-vhost-kernel \
    --enable-vhost-net >&2

JOBS=${VGPU_QEMU_JOBS:-$(nproc)}
log "building with $JOBS jobs"
ninja -j "$JOBS" qemu-system-x86_64 >&2
./qemu-system-x86_64 -device help 2>/dev/null | grep -q '"vhost-user-vgpu-pci"' \
    || die "built QEMU does not list vhost-user-vgpu-pci"

# --- 6. install into the cache ---------------------------------------------
STAGE="$PREFIX.tmp.$$"
rm -rf "$STAGE"
mkdir -p "$STAGE/bin"
install -m 0755 qemu-system-x86_64 "$STAGE/bin/qemu-system-x86_64.bin"
cp "$PATCH" "$STAGE/vhost-user-vgpu.patch"
cat > "$STAGE/bin/qemu-system-x86_64" <<'EOF'
#!/bin/sh
# QEMU 10.0.2 (Debian's source) + qemu-configs/vhost-user-vgpu.patch, built
# without firmware blobs: the system's firmware directories are searched:
#   /usr/share/seabios   bios.bin, bios-256k.bin, vgabios-*.bin  (seabios)
#   /usr/lib/ipxe/qemu   efi-*.rom / pxe-*.rom NIC option roms    (ipxe-qemu)
#   /usr/share/qemu      linuxboot_dma.bin, pvh.bin, kvmvapic.bin (qemu-system-data)
here=$(dirname "$(readlink -f "$0")")
exec "$here/qemu-system-x86_64.bin" \
    -L /usr/share/seabios -L /usr/lib/ipxe/qemu -L /usr/share/qemu "$@"
EOF
chmod 0755 "$STAGE/bin/qemu-system-x86_64"
"$STAGE/bin/qemu-system-x86_64" --version >&2
rm -rf "$PREFIX"
mv "$STAGE" "$PREFIX"
log "installed into $PREFIX"
echo "$QEMU_BIN"
