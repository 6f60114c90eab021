#!/usr/bin/env bash
# Kiwi machine set-up: Debian packages, the Kafka broker's jars, sandbox images.
# Idempotent; a second run with everything present takes seconds.
# Run as root on Debian 12. See ops/README.md.
set -Eeuo pipefail

KIWI_LOG_NAME=setup
# shellcheck source=ops/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
install_err_trap

usage() {
  cat <<EOF
Usage: ops/setup.sh [--no-kafka] [--no-images] [--images NAME,...] [--help]

Sets up this machine for Kiwi (Debian 12, as root):
  1. packages  apt-get install of the build, test and stack dependencies
               (skipped when every package is already installed)
  2. kafka     resolves the Apache Kafka broker from ops/pom.xml with Maven into
               \${KIWI_STATE_DIR}/kafka/lib (skipped when its stamp matches the
               pom's sha256)
  3. gvisor    builds runsc from the gVisor module pinned in ops/gvisor into
               \${KIWI_STATE_DIR}/bin/runsc with the machine's Go (skipped when
               that binary reports the pinned version); when it cannot be
               built, Debian's runsc is used instead, with a warning
  4. docker    brings up dockerd with runsc through ops/stack.sh up docker
  5. images    builds the sandbox images with ops/images/build.sh
  (after 1)    venv: the provider SDKs for the fixture check (ops/venv.sh)
  (after 1)    registries: the private registries the tests start, Verdaccio
               and pypiserver (ops/registries.sh)

Options:
  --no-kafka   skip step 2
  --no-images  skip steps 4 and 5
  --images NAME,...
               build only these images in step 5 (names as ops/images/build.sh
               --list shows them, e.g. base,node22); the others are left for a
               later ops/setup.sh or ops/images/build.sh
  --help       this text

Environment:
  KIWI_STATE_DIR   state root (default /var/lib/kiwi); now $KIWI_STATE_DIR
  KIWI_MVN_ARGS    extra arguments for mvn (e.g. -Dmaven.repo.local=/tmp/m2)
EOF
}

want_images=1 want_kafka=1 image_names=()
while (($#)); do
  case $1 in
    --no-images) want_images=0 ;;
    --images)
      [[ $# -ge 2 && -n $2 ]] || { usage >&2; die "--images needs a list of image names (e.g. base,node22)"; }
      IFS=, read -r -a image_names <<<"$2"; shift ;;
    --no-kafka) want_kafka=0 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  librdkafka-dev libcurl4-openssl-dev libmsgpack-dev libhiredis-dev libev-dev libcmocka-dev libjansson-dev libssl-dev
  libmicrohttpd-dev
  # the services a repository's Compose files declare (inspect/services.c)
  libyaml-dev
  # the egress rules' rejected packets, read by kiwi-worker (worker/egress/nflog.c)
  libnetfilter-log-dev
  # tar2sqfs: a dependency snapshot made into the squashfs image laid under
  # each sandbox (sandbox/deps.c)
  squashfs-tools-ng
  # the tar format (sandbox/archive/*.c); the static guest agent also needs
  # the .a files of what libarchive links (pkg-config --static --libs libarchive)
  libarchive-dev libacl1-dev libzstd-dev liblz4-dev libbz2-dev liblzma-dev libxml2-dev nettle-dev zlib1g-dev
  e2fsprogs mount util-linux findutils
  redis-server docker.io runsc debootstrap kcat tmux shellcheck
  # the metrics test scrapes kiwi-worker with a real Prometheus (and promtool)
  prometheus
  # the image-pull tests run a local registry (tests/worker/sh/test_worker_pull.sh)
  # ... and the snapshot store (CNCF Distribution, an OCI registry; docs/store.md)
  docker-registry
  iptables nftables iproute2 git python3-msgpack curl jq ca-certificates openssl
  # Phase A's egress proxy (ops/egress/proxy.sh): bookworm's `squid` is
  # built with GnuTLS and has no ssl_bump; squid-openssl peeks at the SNI
  squid-openssl
  # docker.io only recommends these, and we install without recommends:
  # with AppArmor enabled in the kernel (Debian's default) and no
  # apparmor_parser, dockerd cannot load the docker-default profile and no
  # container starts.
  apparmor xz-utils
)

# Packages that are not fully installed, one per line.
missing_packages() {
  local p status
  for p in "$@"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [[ $status == installed ]] || echo "$p"
  done
}

step_packages() {
  local -a want missing
  want=("${PACKAGES[@]}")
  if (($(java_major java) < 17)); then
    log "no java >= 17 on PATH: adding default-jre-headless"
    want+=(default-jre-headless)
  fi
  command -v mvn >/dev/null 2>&1 || want+=(maven)
  mapfile -t missing < <(missing_packages "${want[@]}")
  if ((${#missing[@]} == 0)); then
    log "all ${#want[@]} packages already installed"
    return 0
  fi
  ((EUID == 0)) || die "packages missing (${missing[*]}) and not root: run as root"
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}" </dev/null
  mapfile -t missing < <(missing_packages "${want[@]}")
  ((${#missing[@]} == 0)) || die "still not installed after apt-get: ${missing[*]}"
  (($(java_major java) >= 17)) || die "java on PATH is older than 17 after install"
  # only the prometheus binary is used (the metrics test runs its own, on
  # loopback): the package's service would listen on every interface
  if [[ -d /run/systemd/system ]] && systemctl is-enabled --quiet prometheus 2>/dev/null; then
    log "disabling the prometheus package's service (tests start their own)"
    systemctl disable --now prometheus || true
  fi
}

step_kafka() {
  local pom=$KIWI_OPS_DIR/pom.xml lib=$KIWI_KAFKA_LIB sum stamp tmp n mvnlog
  sum=$(sha256_of "$pom")
  stamp=$lib/.pom.sha256
  if [[ -r $stamp && $(<"$stamp") == "$sum" ]] && compgen -G "$lib/kafka_2.13-*.jar" >/dev/null; then
    log "kafka lib up to date ($(find "$lib" -name '*.jar' | wc -l) jars in $lib)"
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found"
  mkdir -p "$(dirname "$lib")"
  tmp=$lib.new
  rm -rf "$tmp"
  # Resolve into a fresh directory, then swap: no stale jars from an older pom.
  mkdir -p "$KIWI_LOG_DIR"
  mvnlog=$KIWI_LOG_DIR/setup-maven.log
  # shellcheck disable=SC2086
  if ! mvn -B -q -Dstyle.color=never -f "$pom" ${KIWI_MVN_ARGS:-} dependency:copy-dependencies \
      -Dkiwi.kafka.lib="$tmp" </dev/null >"$mvnlog" 2>&1; then
    log_tail "$mvnlog" 40
    die "mvn dependency:copy-dependencies failed (log: $mvnlog)"
  fi
  n=$(find "$tmp" -maxdepth 1 -name '*.jar' | wc -l)
  compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null || die "maven produced no kafka_2.13 jar in $tmp"
  echo "$sum" >"$tmp/.pom.sha256"
  rm -rf "$lib.old"
  [[ -d $lib ]] && mv "$lib" "$lib.old"
  mv "$tmp" "$lib"
  rm -rf "$lib.old"
  # mvn may leave ops/target behind; it is not needed.
  rm -rf "$KIWI_OPS_DIR/target"
  log "kafka lib: $n jars in $lib"
}

# The loud fallback: Debian's runsc of 2022-12 mistakes every network
# namespace for the host's on this kernel (Phase A then runs under hostinet)
# and lacks syscalls that tools use (docs/gvisor-phase-a.md).
gvisor_fallback() {
  warn "gvisor: ==================================================================="
  warn "gvisor: runsc could not be built: $*"
  warn "gvisor: dockerd will run Debian's $KIWI_RUNSC_DEBIAN (0.0~20221219) instead:"
  warn "gvisor: Phase A under gVisor falls back to --network=host, and some tools"
  warn "gvisor: fail under it (docs/gvisor-phase-a.md)"
  warn "gvisor: ==================================================================="
}

step_gvisor() {
  local mod=$KIWI_OPS_DIR/gvisor out=$KIWI_RUNSC_BUILT want have blog
  want=$(gvisor_pinned_version)
  [[ -n $want ]] || die "gvisor: no gvisor.dev/gvisor version in $mod/go.mod"
  have=$(runsc_version "$out")
  if [[ $have == "$want" ]]; then
    log "gvisor: runsc $want already built ($out)"
    return 0
  fi
  if ! command -v go >/dev/null 2>&1; then
    gvisor_fallback "no go on PATH"
    return 0
  fi
  mkdir -p "$(dirname "$out")" "$KIWI_LOG_DIR"
  blog=$KIWI_LOG_DIR/setup-gvisor.log
  log "gvisor: building runsc $want with $(go version | cut -d' ' -f3) (${have:+replacing $have, }log: $blog)"
  # -mod=readonly: the modules and checksums are go.mod's and go.sum's, nothing
  # else. GOTOOLCHAIN local unless the caller names one (see ops/gvisor/README.md).
  if ! (cd "$mod" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=${GOTOOLCHAIN:-local} \
          go build -trimpath -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$want" \
          -o "$out.new" gvisor.dev/gvisor/runsc) </dev/null >"$blog" 2>&1; then
    log_tail "$blog" 30
    rm -f "$out.new"
    gvisor_fallback "go build failed (log: $blog)"
    return 0
  fi
  have=$(runsc_version "$out.new")
  if [[ $have != "$want" ]]; then
    rm -f "$out.new"
    gvisor_fallback "the built binary reports version '${have}', not $want"
    return 0
  fi
  mv -f "$out.new" "$out"
  log "gvisor: runsc $want built: $out ($(du -m "$out" | cut -f1) MB)"
}

step_docker() {
  "$KIWI_OPS_DIR/stack.sh" up docker >/dev/null   # stdout: the env file path
}

step_images() {
  local build=$KIWI_OPS_DIR/images/build.sh
  if [[ ! -f $build ]]; then
    log "ops/images/build.sh does not exist yet: no sandbox images built"
    return 0
  fi
  # DOCKER_HOST and friends of the dockerd that stack.sh brought up.
  set -a
  # shellcheck disable=SC1090
  . "$KIWI_ENV_FILE"
  set +a
  bash "$build" "${image_names[@]}"
}

t_all=$(now_ms)
run_step packages step_packages
# The Python venv with the model providers' SDKs (checks the scripted
# provider's fixtures): ops/venv.sh, idempotent.
run_step venv bash "$KIWI_OPS_DIR/venv.sh"
# The private registries the tests start (Verdaccio, pypiserver):
# ops/registries.sh, idempotent.
run_step registries bash "$KIWI_OPS_DIR/registries.sh"
if ((want_kafka)); then
  run_step kafka step_kafka
else
  log "kafka skipped (--no-kafka)"
fi
run_step gvisor step_gvisor
if ((want_images)); then
  run_step docker step_docker
  run_step images step_images
else
  log "images skipped (--no-images)"
fi
log "done in $(fmt_ms $(($(now_ms) - t_all)))"
