#!/usr/bin/env bash
# ops/firecracker/mkrootfs.sh: a sandbox image as a root filesystem for the
# firecracker driver: the image's files (exported from dockerd, the same
# images the docker and gvisor drivers run) in an ext4 file, with
# kiwi-fc-agent as /sbin/kiwi-fc-agent (the guest's init, see
# sandbox/firecracker/agent/main.c) and the mount points it uses.
#
# The file is named as the driver looks for it: <out>/<image>.ext4 with '/'
# as '+', ':' as '@' and anything outside [A-Za-z0-9._-] as '_'
# (kiwi/base:bookworm -> kiwi+base@bookworm.ext4). The driver attaches it
# read-only to every microVM of that image; nothing writes to it.
#
# Usage: mkrootfs.sh IMAGE [IMAGE...] [--out DIR] [--agent PATH] [--docker SOCKET] [--extra-mb N]
#   --out       default $KIWI_STATE_DIR/firecracker/images (/var/lib/kiwi/firecracker/images)
#   --agent     the static kiwi-fc-agent (default build/sandbox/firecracker/agent/kiwi-fc-agent)
#   --docker    dockerd's socket (default unix://$KIWI_STATE_DIR/run/docker.sock)
#   --extra-mb  free room in the filesystem beyond the files (default 64)
# Needs root (the files keep their owners) and mkfs.ext4 (e2fsprogs).
set -euo pipefail
KIWI_LOG_NAME=fc-rootfs
. "$(dirname "$0")/../lib.sh"

out=$KIWI_STATE_DIR/firecracker/images
agent=$KIWI_REPO_DIR/build/sandbox/firecracker/agent/kiwi-fc-agent
docker_sock=unix://$KIWI_STATE_DIR/run/docker.sock
extra=64
images=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --agent) agent=$2; shift ;;
    --docker) docker_sock=$2; shift ;;
    --extra-mb) extra=$2; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) images+=("$1") ;;
  esac
  shift
done
[ ${#images[@]} -gt 0 ] || die "name an image (e.g. kiwi/base:bookworm)"
[ "$(id -u)" = 0 ] || die "needs root (the image's files keep their owners)"
[ -x "$agent" ] || die "no agent at $agent: build it first (ninja -C build kiwi-fc-agent)"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 missing (apt-get install e2fsprogs)"
case $docker_sock in unix://*) ;; /*) docker_sock=unix://$docker_sock ;; esac

# rootfs_name IMAGE: the file name the driver expects (kiwi__fc_rootfs_path)
rootfs_name() {
  local ref=$1 name='' c i
  for ((i = 0; i < ${#ref}; i++)); do
    c=${ref:i:1}
    case $c in
      /) name+='+' ;;
      :) name+='@' ;;
      [A-Za-z0-9._-]) name+=$c ;;
      *) name+='_' ;;
    esac
  done
  printf '%s.ext4' "$name"
}

mkdir -p "$out"
for image in "${images[@]}"; do
  t0=$(now_ms)
  work=$(mktemp -d "$out/.build.XXXXXX")
  trap 'rm -rf "$work"; [ -n "${cid:-}" ] && docker -H "$docker_sock" rm -f "$cid" >/dev/null 2>&1 || true' EXIT
  cid=$(docker -H "$docker_sock" create "$image" /bin/true) || die "cannot create a container from $image at $docker_sock"
  mkdir "$work/root"
  docker -H "$docker_sock" export "$cid" | tar -x -C "$work/root" --numeric-owner -p -f - ||
    die "exporting $image failed"
  docker -H "$docker_sock" rm "$cid" >/dev/null
  cid=
  r=$work/root
  install -D -m 0755 "$agent" "$r/sbin/kiwi-fc-agent"
  mkdir -p "$r/kiwi" "$r/proc" "$r/sys" "$r/dev" "$r/tmp" "$r/run" "$r/etc"
  chmod 1777 "$r/tmp"
  # bind-mount targets for the guest's resolver and names
  for f in resolv.conf hosts hostname; do
    [ -e "$r/etc/$f" ] || [ -L "$r/etc/$f" ] || : > "$r/etc/$f"
  done
  [ -s "$r/etc/hostname" ] || echo sandbox > "$r/etc/hostname"
  grep -q sandbox "$r/etc/hosts" 2>/dev/null || printf '127.0.0.1 localhost\n127.0.1.1 sandbox\n' >> "$r/etc/hosts"
  used=$(du -sm "$r" | cut -f1)
  size=$((used + used / 5 + extra))
  name=$(rootfs_name "$image")
  truncate -s "${size}M" "$work/$name"
  mkfs.ext4 -q -F -m 0 -O ^has_journal -L kiwi-root -d "$r" "$work/$name" ||
    die "mkfs.ext4 for $image failed"
  mv "$work/$name" "$out/$name"
  rm -rf "$work"
  trap - EXIT
  log "$image -> $out/$name (${size} MB, $(fmt_ms $(($(now_ms) - t0))))"
done
