#!/usr/bin/env bash
# ops/registries.sh: the private package registries the tests start, real
# servers of each ecosystem, installed under ${KIWI_STATE_DIR}/registries:
#
#   verdaccio/  Verdaccio (npm, pnpm and Yarn), npm ci of
#               ops/registries/package-lock.json (node 18 or later: Debian's
#               nodejs and npm when the machine has none)
#   pypi/       pypiserver (pip and uv), a venv with the pinned packages of
#               ops/registries/requirements.txt
#
# Idempotent: each is rebuilt only when its stamp (the pinned file's sha256
# and the runtime's version) differs; the stamp is written last, so a failed
# install is redone on the next run. Nothing here runs a server: the tests
# start them in network namespaces of their own.
#
# Usage: ops/registries.sh [--print verdaccio|pypi] [--help]
#   --print NAME   only print what runs the server, installing nothing: Verdaccio's
#                  script (for node), the venv's python (pypiserver's app)
set -Eeuo pipefail

KIWI_LOG_NAME=registries
# shellcheck source=ops/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
install_err_trap

dir=$KIWI_STATE_DIR/registries
pins=$KIWI_OPS_DIR/registries
verdaccio_bin=$dir/verdaccio/node_modules/verdaccio/bin/verdaccio
pypi_python=$dir/pypi/bin/python3

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
case ${1:-} in
  --print)
    case ${2:-} in
      verdaccio) echo "$verdaccio_bin" ;;
      pypi) echo "$pypi_python" ;;
      *) die "--print takes verdaccio or pypi (got '${2:-}')" ;;
    esac
    exit 0 ;;
  -h|--help) usage; exit 0 ;;
  '') ;;
  *) usage >&2; die "unknown argument: $1" ;;
esac

mkdir -p "$dir" "$KIWI_LOG_DIR"

# node_major: the major version of the machine's node, or nothing
node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || true; }

install_verdaccio() {
  local major
  major=$(node_major)
  if [[ -z $major ]] || ! command -v npm >/dev/null; then
    ((EUID == 0)) || die "no node and npm on this machine (Debian: nodejs npm) and not root to install them"
    log "installing Debian's nodejs and npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm </dev/null
    major=$(node_major)
  fi
  ((major >= 18)) || die "Verdaccio needs node 18 or later; this machine's is $(node --version)"
  local want
  want="$(sha256_of "$pins/package-lock.json") node$major"
  if [[ -r $verdaccio_bin ]] && stamp_current "$dir/verdaccio" "$want"; then
    log "verdaccio up to date ($dir/verdaccio)"
    return 0
  fi
  rm -rf "$dir/verdaccio"
  mkdir -p "$dir/verdaccio"
  cp "$pins/package.json" "$pins/package-lock.json" "$dir/verdaccio/"
  # npm trusts the system bundle (a TLS-intercepting proxy's CA is there)
  local args=(ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  if [[ -z ${npm_config_cafile:-}${NPM_CONFIG_CAFILE:-} && -r /etc/ssl/certs/ca-certificates.crt ]]; then
    args+=(--cafile /etc/ssl/certs/ca-certificates.crt)
  fi
  local npmlog=$KIWI_LOG_DIR/registries-npm.log
  log "installing Verdaccio ($(grep -c '"resolved"\|"integrity"' "$pins/package-lock.json") pinned entries) into $dir/verdaccio"
  if ! (cd "$dir/verdaccio" && npm "${args[@]}") >"$npmlog" 2>&1; then
    log_tail "$npmlog" 30
    die "npm ci of Verdaccio failed (log: $npmlog)"
  fi
  [[ -r $verdaccio_bin ]] || die "npm ci left no $verdaccio_bin"
  echo "$want" >"$dir/verdaccio/.kiwi-stamp"
  log "verdaccio ready: $verdaccio_bin"
}

install_pypiserver() {
  pinned_venv "$dir/pypi" "$pins/requirements.txt" "$KIWI_LOG_DIR/registries-pip.log" pypiserver passlib
}

install_verdaccio
install_pypiserver
