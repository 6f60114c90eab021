#!/usr/bin/env bash
# ops/firecracker/kernel.sh: the guest kernel for the firecracker driver,
# from Debian's cloud kernel package (linux-image-cloud-amd64).
#
#   <out>/vmlinux      the uncompressed ELF kernel (Firecracker on x86_64 loads
#                      ELF, booting it through PVH), taken out of vmlinuz
#   <out>/initrd.img   kiwi-fc-agent as /init and the virtio-mmio, virtio-blk,
#                      vsock (and virtio-net) modules, which Debian builds as
#                      modules; the agent loads them, mounts the root drive and
#                      goes on from the root filesystem's /sbin/kiwi-fc-agent
#
# Settings for the worker: KIWI_FC_KERNEL=<out>/vmlinux KIWI_FC_INITRD=<out>/initrd.img
#
# Usage: kernel.sh [--out DIR] [--agent PATH] [--package NAME]
#   --out      where to put them (default $KIWI_STATE_DIR/firecracker, i.e.
#              /var/lib/kiwi/firecracker)
#   --agent    the static kiwi-fc-agent (default build/sandbox/firecracker/agent/kiwi-fc-agent)
#   --package  the Debian kernel package or metapackage (default linux-image-cloud-amd64)
# Needs root, apt (Debian's archive) and lz4, cpio (installed when missing).
set -euo pipefail
KIWI_LOG_NAME=fc-kernel
. "$(dirname "$0")/../lib.sh"

out=$KIWI_STATE_DIR/firecracker
agent=$KIWI_REPO_DIR/build/sandbox/firecracker/agent/kiwi-fc-agent
pkg=linux-image-cloud-amd64
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --agent) agent=$2; shift ;;
    --package) pkg=$2; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || die "needs root (device nodes in the initrd)"
[ -x "$agent" ] || die "no agent at $agent: build it first (ninja -C build kiwi-fc-agent)"
file -b "$agent" 2>/dev/null | grep >/dev/null 'statically linked' || warn "$agent is not statically linked"
missing=()
for t in lz4:lz4 cpio:cpio xz:xz-utils zstd:zstd; do
  command -v "${t%%:*}" >/dev/null || missing+=("${t#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || die "apt-get install ${missing[*]} failed"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# the metapackage depends on the versioned image package
real=$pkg
dep=$(apt-cache depends "$pkg" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$dep" ] && real=$dep
log "downloading $real (Debian)"
apt-get download "$real" >/dev/null 2>&1 || die "apt-get download $real failed (apt-get update first?)"
dpkg-deb -x ./*.deb x
vmlinuz=$(ls x/boot/vmlinuz-* | head -1)
kver=${vmlinuz##*/vmlinuz-}
config=x/boot/config-$kver

# vmlinuz (bzImage) carries the kernel compressed; find the payload and
# unpack it (the same idea as the kernel's scripts/extract-vmlinux)
try_unpack() { # MAGIC-as-printf CMD...
  local magic=$1; shift
  local off
  for off in $(LC_ALL=C grep -obUaP "$magic" "$vmlinuz" | cut -d: -f1); do
    tail -c +$((off + 1)) "$vmlinuz" | "$@" > vmlinux 2>/dev/null || true
    if [ "$(head -c 4 vmlinux | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then
      return 0
    fi
  done
  return 1
}
try_unpack '\x02\x21\x4c\x18' lz4 -dc ||
  try_unpack '\xfd\x37\x7a\x58\x5a\x00' xz -dc ||
  try_unpack '\x28\xb5\x2f\xfd' zstd -dc ||
  try_unpack '\x1f\x8b\x08' gzip -dc ||
  die "could not find an ELF kernel inside $vmlinuz"
grep -q '^CONFIG_PVH=y' "$config" || warn "$kver has no CONFIG_PVH: Firecracker may not boot it"
log "vmlinux $kver: $(du -h vmlinux | cut -f1)"

# the initrd: the agent as /init, the modules in load order
mods=x/lib/modules/$kver/kernel
order=(
  drivers/virtio/virtio.ko drivers/virtio/virtio_ring.ko drivers/virtio/virtio_mmio.ko
  drivers/block/virtio_blk.ko
  net/vmw_vsock/vsock.ko net/vmw_vsock/vmw_vsock_virtio_transport_common.ko
  net/vmw_vsock/vmw_vsock_virtio_transport.ko
  net/core/failover.ko drivers/net/net_failover.ko drivers/net/virtio_net.ko
)
mkdir -p initrd/lib/kiwi initrd/proc initrd/sys initrd/dev initrd/newroot
install -m 0755 "$agent" initrd/init
touch initrd/kiwi-initrd
mknod -m 600 initrd/dev/console c 5 1
: > initrd/lib/kiwi/modules.order
for m in "${order[@]}"; do
  f=$mods/$m
  for c in "$f" "$f.xz" "$f.zst"; do
    [ -f "$c" ] || continue
    case $c in
      *.xz) xz -dc "$c" > "initrd/lib/kiwi/$(basename "$f")" ;;
      *.zst) zstd -qdc "$c" > "initrd/lib/kiwi/$(basename "$f")" ;;
      *) cp "$c" initrd/lib/kiwi/ ;;
    esac
    basename "$f" >> initrd/lib/kiwi/modules.order
    break
  done
done
log "initrd modules: $(tr '\n' ' ' < initrd/lib/kiwi/modules.order)"
(cd initrd && find . | cpio -o -H newc --quiet -R 0:0) > initrd.img

mkdir -p "$out"
install -m 0644 vmlinux "$out/vmlinux.new" && mv "$out/vmlinux.new" "$out/vmlinux"
install -m 0644 initrd.img "$out/initrd.img.new" && mv "$out/initrd.img.new" "$out/initrd.img"
echo "$real $kver" > "$out/kernel.version"
log "done: KIWI_FC_KERNEL=$out/vmlinux KIWI_FC_INITRD=$out/initrd.img ($real)"
