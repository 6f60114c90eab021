#!/usr/bin/env bash
# ops/images/build.sh: builds Kiwi's sandbox images offline, from debootstrap,
# Debian packages and (for exact Node.js majors and a few tools) tarballs from
# the npm registry and PyPI. No container registry is used.
#
# Usage: ops/images/build.sh [--list] [--force] [IMAGE...]
#
#   IMAGE    a name (base node18 node20 node22 python3.11 python3.13 go1.19
#            go1.27 rust1.63 rust1.96 ruby3.1 php8.2 java17 java21) or a
#            reference (kiwi/node:20); default all
#   --list   show each image, its recipe hash and whether it is up to date
#   --force  rebuild even when the image's org.kiwi.recipe label matches,
#            starting again from a fresh debootstrap
#   --help   this text
#
# An image whose org.kiwi.recipe label equals the sha256 of its recipe inputs
# (lib/rootfs.sh, its base stage's recipe -- recipes/base.sh, or the recipe
# named by the image's BASE, such as base-trixie for a Debian 13 image --
# and recipes/IMAGE.sh) is skipped. Base stages are made first, one after
# another; the other images are then built KIWI_IMAGES_JOBS at a time
# (default 2; 1 builds one after another), each into a log of its own under
# images/work/ that is printed whole when it ends. Runs as root; needs
# debootstrap, unshare (util-linux)
# and a docker daemon (DOCKER_HOST, default unix:///var/lib/kiwi/run/docker.sock).
# Caches live in ${KIWI_STATE_DIR:-/var/lib/kiwi}/images/. See README.md.
set -eEuo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"
# shellcheck source=lib/rootfs.sh
. "$here/lib/rootfs.sh"
KIWI_IMAGES_LOG_NAME=images

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }

opt_list=0 opt_force=0 args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --list) opt_list=1 ;;
    --force) opt_force=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "build.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) args+=("$1") ;;
  esac
  shift
done
JOBS=${KIWI_IMAGES_JOBS:-2}
if ! [[ $JOBS =~ ^[1-9][0-9]{0,2}$ ]]; then
  echo "build.sh: KIWI_IMAGES_JOBS must be a number of images built at once, 1 to 999 (got '$JOBS')" >&2
  exit 2
fi

selected=()
if [[ ${#args[@]} -eq 0 ]]; then
  selected=("${KIWI_IMAGE_NAMES[@]}")
else
  for a in "${args[@]}"; do
    n=$(img_resolve "$a") || { echo "build.sh: unknown image '$a' (known: ${KIWI_IMAGE_NAMES[*]})" >&2; exit 2; }
    selected+=("$n")
  done
fi

# ------------------------------------------------------------------ --list ---

if [[ $opt_list == 1 ]]; then
  printf '%-11s %-20s %-8s %-7s %-14s %-12s %s\n' NAME REFERENCE RUNTIME VERSION RECIPE STATUS SIZE
  for n in "${selected[@]}"; do
    ref=$(recipe_get "$n" REF); h=$(recipe_hash "$n")
    label=$(image_label "$ref" org.kiwi.recipe || true)
    size=-
    if [[ -z $label ]] && ! dk image inspect "$ref" >/dev/null 2>&1; then st=missing
    elif [[ $label == "$h" ]]; then st=up-to-date
    else st=stale
    fi
    [[ $st != missing ]] && size=$(dk image inspect -f '{{.Size}}' "$ref" | awk '{printf "%.0fMB", $1/1000000}')
    printf '%-11s %-20s %-8s %-7s %-14s %-12s %s\n' "$n" "$ref" "$(recipe_get "$n" RUNTIME)" \
      "$(recipe_get "$n" VERSION)" "${h:0:12}" "$st" "$size"
  done
  exit 0
fi

# ------------------------------------------------------ steps and failures ---

CUR_IMAGE=- CUR_STEP=preflight
now_ms() { local ns; ns=$(date +%s%N); echo $((ns / 1000000)); }
fmt_ms() { printf '%d.%ds' $(($1 / 1000)) $((($1 % 1000) / 100)); }
step() { CUR_STEP=$1; img_log "[$CUR_IMAGE] $1"; }

on_err() {
  local rc=$1 cmd=$2 where=$3
  trap - ERR
  # In a subshell: leave the report to the parent, which fails in turn (the
  # parent of a build of its own, build_job, is that job's shell).
  [[ $BASHPID != "${JOB_SHELL:-$$}" ]] && exit "$rc"
  printf '%s images: FAILED: image %s, step "%s" (exit %s): %s [%s]\n' \
    "$(img_ts)" "$CUR_IMAGE" "$CUR_STEP" "$rc" "$cmd" "$where" >&2
  exit "$rc"
}
trap 'on_err $? "$BASH_COMMAND" "${BASH_SOURCE[0]##*/}:$LINENO"' ERR

WORK_DIRS=()
RM_PIDS=()   # work trees being removed in the background (remove_later)
declare -A JOB_OF=() # builds in the background (build_job): pid -> image
on_exit() {
  local rc=$? d
  # builds still running when this shell stops early: each cleans up after
  # itself (its own on_exit) once stopped
  if [[ ${#JOB_OF[@]} -gt 0 ]]; then
    kill "${!JOB_OF[@]}" 2>/dev/null || true
    wait "${!JOB_OF[@]}" 2>/dev/null || true
  fi
  [[ ${#RM_PIDS[@]} -eq 0 ]] || wait "${RM_PIDS[@]}" 2>/dev/null || true
  for d in "${WORK_DIRS[@]}"; do
    [[ -e $d ]] || continue
    if rootfs_assert_unmounted "$d"; then rm -rf --one-file-system "$d"
    else img_warn "left $d in place: something is still mounted below it"; rc=1
    fi
  done
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --------------------------------------------------------------- preflight ---

[[ $(id -u) == 0 ]] || img_die "must run as root (debootstrap, chroot, mounts)"
for c in debootstrap unshare chroot findmnt flock tar sha256sum sha512sum; do
  command -v "$c" >/dev/null 2>&1 || img_die "missing command: $c"
done
dk version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
  img_die "no docker daemon at DOCKER_HOST=$DOCKER_HOST (docker CLI: $KIWI_DOCKER)"

CACHE=$KIWI_IMAGES_STATE/cache
WORK=$KIWI_IMAGES_STATE/work
KIWI_DL=$KIWI_IMAGES_STATE/downloads
mkdir -p "$CACHE" "$WORK" "$KIWI_DL"
exec 9>"$KIWI_IMAGES_STATE/build.lock"
if ! flock -n 9; then
  img_log "another build.sh holds $KIWI_IMAGES_STATE/build.lock; waiting"
  flock 9
fi
img_log "docker $DOCKER_HOST; state $KIWI_IMAGES_STATE; images: ${selected[*]}$([[ $opt_force == 1 ]] && echo ' (--force)')"

# ------------------------------------------------------------------ builds ---

declare -A BASE_FRESH   # base stages rebuilt during this run (for --force)

# use_base BASE: selects a base stage (base, base-trixie): its suite becomes
# KIWI_DEBIAN_SUITE (read by lib/rootfs.sh) and BASE_TAR, MINBASE_TAR its
# caches (images/cache/BASE-<hash>.tar, images/cache/minbase-<suite>.tar).
use_base() {
  BASE_NAME=$1
  KIWI_DEBIAN_SUITE=$(recipe_suite "$BASE_NAME")
  BASE_HASH=$(recipe_hash "$BASE_NAME")
  BASE_TAR=$CACHE/$BASE_NAME-$BASE_HASH.tar
  MINBASE_TAR=$CACHE/minbase-$KIWI_DEBIAN_SUITE.tar
}

# ensure_base_tar: the base root file system of the selected base stage
# (use_base) as a tar (and its versions file), built unless cached (or
# --force and not yet rebuilt in this run).
ensure_base_tar() {
  if [[ -f $BASE_TAR && -f $BASE_TAR.versions ]] && ! [[ $opt_force == 1 && -z ${BASE_FRESH[$BASE_NAME]:-} ]]; then
    return 0
  fi
  local saved_image=$CUR_IMAGE t0 r=$WORK/$BASE_NAME
  CUR_IMAGE=$BASE_NAME-rootfs
  t0=$(now_ms)
  recipe_load "$BASE_NAME"
  rootfs_remove "$r"
  WORK_DIRS+=("$r")
  if [[ -f $MINBASE_TAR && $opt_force == 0 ]]; then
    step "unpack cached debootstrap ($MINBASE_TAR)"
    mkdir -p "$r"; tar --numeric-owner -xpf "$MINBASE_TAR" -C "$r"
  else
    step "debootstrap --variant=minbase $KIWI_DEBIAN_SUITE $KIWI_DEBIAN_MIRROR"
    local log=$WORK/debootstrap.log
    if ! rootfs_debootstrap "$r" >"$log" 2>&1; then
      tail -n 30 "$log" >&2
      [[ -f $r/debootstrap/debootstrap.log ]] && tail -n 30 "$r/debootstrap/debootstrap.log" >&2
      false
    fi
    step "save debootstrap cache"
    tar --numeric-owner -C "$r" -cf "$MINBASE_TAR.tmp" . && mv "$MINBASE_TAR.tmp" "$MINBASE_TAR"
  fi
  step "configure apt, dpkg (no docs), policy-rc.d"
  rootfs_configure "$r"
  step "apt-get install ${APT_PACKAGES[*]}"
  rootfs_apt "$r" "${APT_PACKAGES[@]}"
  step "add user kiwi (1000) and /workspace"
  rootfs_add_user "$r"
  step "clean up (apt caches and lists, docs, logs)"
  rootfs_cleanup "$r"
  step "verify trust store (Debian ca-certificates only)"
  rootfs_verify_ca "$r" | sed 's/^/    /'
  step "checks (as kiwi, no network)"
  local versions
  versions=$(rootfs_checks "$r" "" "$(printf '%s\n' "${KIWI_COMMON_CHECKS[@]}" "${CHECKS[@]}")")
  sed 's/^/    /' <<<"$versions" >&2
  step "save base rootfs ($BASE_TAR)"
  tar --numeric-owner --xattrs -C "$r" -cf "$BASE_TAR.tmp" .
  printf '%s\n' "$versions" >"$BASE_TAR.versions"
  mv "$BASE_TAR.tmp" "$BASE_TAR"
  # Older builds of this base stage (BASE-<64 hex>.tar*; not another stage's).
  find "$CACHE" -maxdepth 1 -regextype posix-extended -regex ".*/$BASE_NAME-[0-9a-f]{64}\.tar.*" \
    ! -name "$BASE_NAME-$BASE_HASH.tar*" -delete
  rootfs_remove "$r"
  BASE_FRESH[$BASE_NAME]=1
  img_log "[$BASE_NAME-rootfs] done in $(fmt_ms $(($(now_ms) - t0)))"
  CUR_IMAGE=$saved_image
}

# import_image SOURCE NAME HASH VERSIONS: docker import of a directory or a tar.
import_image() {
  local src=$1 name=$2 hash=$3 versions=$4 old e changes=() has_path=0 vlabel
  for e in "${IMAGE_ENV[@]}"; do
    changes+=(--change "ENV $e")
    [[ $e == PATH=* ]] && has_path=1
  done
  [[ $has_path == 1 ]] || changes+=(--change "ENV PATH=$KIWI_DEFAULT_PATH")
  vlabel=$(tr '\n' ';' <<<"$versions" | tr -d '"\\$' | sed 's/;$//')
  changes+=(--change "ENV LANG=C.UTF-8"
    --change "WORKDIR /workspace"
    --change "USER kiwi"
    --change 'CMD ["bash"]'
    --change "LABEL org.kiwi.recipe=$hash org.kiwi.image=$name org.kiwi.runtime=$RUNTIME org.kiwi.version=\"$VERSION\""
    --change "LABEL org.kiwi.versions=\"$vlabel\" org.kiwi.built=$(date -u +%Y-%m-%dT%H:%M:%SZ) org.kiwi.base=debian:$KIWI_DEBIAN_SUITE-minbase")
  old=$(dk image inspect -f '{{.Id}}' "$REF" 2>/dev/null || true)
  if [[ -d $src ]]; then
    tar --numeric-owner --xattrs -C "$src" -cf - . | dk import "${changes[@]}" -m "kiwi images: $name recipe $hash" - "$REF" >/dev/null
  else
    dk import "${changes[@]}" -m "kiwi images: $name recipe $hash" "$src" "$REF" >/dev/null
  fi
  local new
  new=$(dk image inspect -f '{{.Id}}' "$REF")
  if [[ -n $old && $old != "$new" ]]; then
    # The previous build of this image, now untagged; kept if still in use.
    dk rmi "$old" >/dev/null 2>&1 || true
  fi
  img_log "[$name] $REF $(dk image inspect -f '{{.Size}}' "$REF" | awk '{printf "%.0f MB", $1/1000000}') ${new:7:12}"
}

# skipped_up_to_date NAME: when NAME's image carries its recipe's hash (and
# no --force), says so, records it as skipped and returns 0.
skipped_up_to_date() {
  local ref hash
  ref=$(recipe_get "$1" REF)
  hash=$(recipe_hash "$1")
  [[ $opt_force == 0 && $(image_label "$ref" org.kiwi.recipe || true) == "$hash" ]] || return 1
  img_log "[$1] $ref up to date (recipe ${hash:0:12}), skipped"
  RESULT[$1]="skipped (up to date)"
}

# build_image NAME
build_image() {
  local name=$1 hash r versions t0
  hash=$(recipe_hash "$name")
  use_base "$(recipe_base "$name")"
  recipe_load "$name"
  CUR_IMAGE=$name
  if skipped_up_to_date "$name"; then
    return 0
  fi
  t0=$(now_ms)
  img_log "[$name] building $REF (recipe ${hash:0:12})"
  ensure_base_tar
  recipe_load "$name"
  CUR_IMAGE=$name
  if [[ $name == "$BASE_NAME" ]]; then
    step "docker import $REF"
    import_image "$BASE_TAR" "$name" "$hash" "$(cat "$BASE_TAR.versions")"
  else
    r=$WORK/$name
    KIWI_ROOTFS=$r
    rootfs_remove "$r"
    WORK_DIRS+=("$r")
    step "unpack base rootfs"
    mkdir -p "$r"; tar --numeric-owner --xattrs -xpf "$BASE_TAR" -C "$r"
    rootfs_configure "$r"
    local dl file sum url
    for dl in "${DOWNLOADS[@]}"; do
      read -r file sum url <<<"$dl"
      step "download $url"
      # builds side by side may want the same file: one fetches it, the
      # other then finds it cached
      (
        flock 8
        rootfs_fetch "$r" "$KIWI_DL" "$file" "$sum" "$url" | sed 's/^/    /'
      ) 8>"$KIWI_DL/.$file.lock"
    done
    step "apt-get install ${APT_PACKAGES[*]}"
    rootfs_apt "$r" "${APT_PACKAGES[@]}"
    if declare -F recipe_install >/dev/null; then
      step "recipe install (recipes/$name.sh)"
      recipe_install
    fi
    step "clean up (apt caches and lists, docs, logs)"
    rootfs_cleanup "$r"
    step "verify trust store (Debian ca-certificates only)"
    rootfs_verify_ca "$r" | sed 's/^/    /'
    step "checks (as kiwi, no network)"
    versions=$(rootfs_checks "$r" "$(printf '%s\n' "${IMAGE_ENV[@]}")" "$(printf '%s\n' "${KIWI_COMMON_CHECKS[@]}" "${CHECKS[@]}")")
    sed 's/^/    /' <<<"$versions" >&2
    step "docker import $REF"
    import_image "$r" "$name" "$hash" "$versions"
    step "remove work tree (in the background)"
    remove_later "$r"
  fi
  RESULT[$name]="built in $(fmt_ms $(($(now_ms) - t0)))"
  img_log "[$name] ${RESULT[$name]}"
}

# remove_later DIR: DIR, checked unmounted, renamed aside and removed in the
# background while the next image builds (a work tree is a whole Debian:
# removing one takes seconds to a minute); on_exit waits for them, and
# sweeps what a killed run left.
remove_later() {
  [[ -e $1 ]] || return 0
  rootfs_assert_unmounted "$1"
  local trash
  trash=$(mktemp -d "$WORK/.trash-XXXXXX")
  mv "$1" "$trash/"
  WORK_DIRS+=("$trash")
  rm -rf --one-file-system "$trash" &
  RM_PIDS+=($!)
}
for d in "$WORK"/.trash-*; do
  [[ -e $d ]] && WORK_DIRS+=("$d")
done

# build_job NAME: build_image NAME in a shell of its own, its output in
# $WORK/NAME.log and its result line in $WORK/NAME.result.
build_job() {
  local n=$1
  (
    JOB_SHELL=$BASHPID WORK_DIRS=() RM_PIDS=() JOB_OF=()
    trap on_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    build_image "$n"
    printf '%s\n' "${RESULT[$n]}" >"$WORK/$n.result"
  ) >"$WORK/$n.log" 2>&1 &
  JOB_OF[$!]=$n
  img_log "[$n] building in the background (log: $WORK/$n.log)"
}

# build_side_by_side NAME...: JOBS builds at a time; each one's log printed
# whole when it ends. After a failure no new build starts; the others end.
build_side_by_side() {
  local queue=("$@") pid n failed=()
  while [[ ${#queue[@]} -gt 0 || ${#JOB_OF[@]} -gt 0 ]]; do
    while [[ ${#queue[@]} -gt 0 && ${#JOB_OF[@]} -lt $JOBS && ${#failed[@]} -eq 0 ]]; do
      rm -f "$WORK/${queue[0]}.result"
      build_job "${queue[0]}"
      queue=("${queue[@]:1}")
    done
    [[ ${#JOB_OF[@]} -gt 0 ]] || break
    pid=
    wait -n -p pid "${!JOB_OF[@]}" || true
    n=${JOB_OF[$pid]}
    unset "JOB_OF[$pid]"
    sed "s/^/  [$n] /" "$WORK/$n.log" >&2
    if [[ -s $WORK/$n.result ]]; then
      RESULT[$n]=$(cat "$WORK/$n.result")
      rm -f "$WORK/$n.log" "$WORK/$n.result"
    else
      RESULT[$n]="FAILED (log above, kept in $WORK/$n.log)"
      failed+=("$n")
    fi
  done
  for n in "${queue[@]}"; do RESULT[$n]="not built: an earlier build failed"; done
  [[ ${#failed[@]} -eq 0 ]] || img_die "image(s) failed: ${failed[*]} (each one's log is above)"
}

declare -A RESULT
t_all=$(now_ms)
# Base stages first, in this shell (every other image unpacks one); then
# the others, JOBS at a time.
later=()
for n in "${selected[@]}"; do
  if [[ $JOBS == 1 || $(recipe_base "$n") == "$n" ]]; then
    build_image "$n"
  elif ! skipped_up_to_date "$n"; then
    later+=("$n")
  fi
done
if [[ ${#later[@]} -gt 0 ]]; then
  for n in "${later[@]}"; do
    use_base "$(recipe_base "$n")"
    ensure_base_tar
  done
  build_side_by_side "${later[@]}"
fi
CUR_IMAGE=- CUR_STEP=summary
img_log "summary ($(fmt_ms $(($(now_ms) - t_all))) in all):"
for n in "${selected[@]}"; do
  printf '  %-11s %-20s %s\n' "$n" "$(recipe_get "$n" REF)" "${RESULT[$n]}" >&2
done
