# shellcheck shell=bash disable=SC2034
# Shared shell functions for Kiwi's ops scripts (setup.sh, stack.sh).
# Source it; it defines functions and a few variables and changes nothing else.
#
#   KIWI_LOG_NAME     prefix of every message ("setup", "stack"); set by the caller
#   KIWI_STATE_DIR    state root, default /var/lib/kiwi (made absolute here)

KIWI_OPS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KIWI_REPO_DIR=$(cd "$KIWI_OPS_DIR/.." && pwd)
KIWI_LOG_NAME=${KIWI_LOG_NAME:-kiwi}

KIWI_STATE_DIR=${KIWI_STATE_DIR:-/var/lib/kiwi}
case $KIWI_STATE_DIR in
  /*) ;;
  *) KIWI_STATE_DIR="$PWD/$KIWI_STATE_DIR" ;;
esac
KIWI_STATE_DIR=${KIWI_STATE_DIR%/}
KIWI_RUN_DIR=$KIWI_STATE_DIR/run
KIWI_LOG_DIR=$KIWI_STATE_DIR/logs
KIWI_ENV_FILE=$KIWI_STATE_DIR/stack.env
KIWI_KAFKA_LIB=$KIWI_STATE_DIR/kafka/lib

# ---------------------------------------------------------------- logging ---

log()  { printf '%s: %s\n' "$KIWI_LOG_NAME" "$*" >&2; }
warn() { printf '%s: warning: %s\n' "$KIWI_LOG_NAME" "$*" >&2; }
die() {
  if [[ -n ${KIWI_CURRENT_STEP:-} ]]; then
    printf '%s: FAILED at step "%s": %s\n' "$KIWI_LOG_NAME" "$KIWI_CURRENT_STEP" "$*" >&2
  else
    printf '%s: error: %s\n' "$KIWI_LOG_NAME" "$*" >&2
  fi
  exit 1
}

# now_ms: milliseconds since the epoch.
now_ms() { local ns; ns=$(date +%s%N); echo $((ns / 1000000)); }

# fmt_ms MS: "1.234s"-style duration, one decimal.
fmt_ms() {
  local ms=$1
  printf '%d.%ds' $((ms / 1000)) $(((ms % 1000) / 100))
}

# ------------------------------------------------------------- step runner ---
# run_step NAME CMD...: logs "<name>: NAME...", runs CMD, logs its duration.
# Callers run under "set -eEuo pipefail" with install_err_trap: a failing
# command inside the step reports 'FAILED at step "NAME"' and exits non-zero.

KIWI_CURRENT_STEP=""

install_err_trap() {
  set -E
  trap 'kiwi__on_err $? "$BASH_COMMAND" "${BASH_SOURCE[0]:-?}" "$LINENO"' ERR
}

kiwi__on_err() {
  local rc=$1 cmd=$2 src=$3 line=$4
  trap - ERR
  if [[ -n $KIWI_CURRENT_STEP ]]; then
    printf '%s: FAILED at step "%s" (exit %s): %s [%s:%s]\n' \
      "$KIWI_LOG_NAME" "$KIWI_CURRENT_STEP" "$rc" "$cmd" "${src##*/}" "$line" >&2
  else
    printf '%s: FAILED (exit %s): %s [%s:%s]\n' "$KIWI_LOG_NAME" "$rc" "$cmd" "${src##*/}" "$line" >&2
  fi
  exit "$rc"
}

run_step() {
  local name=$1; shift
  local t0
  KIWI_CURRENT_STEP=$name
  log "$name..."
  t0=$(now_ms)
  # Not inside "if" or "||": errexit and the ERR trap stay in force in CMD.
  "$@"
  log "$name done in $(fmt_ms $(($(now_ms) - t0)))"
  KIWI_CURRENT_STEP=""
}

# ------------------------------------------------------------------ ports ---

# port_in_use PORT: true when something listens on TCP PORT (any address).
port_in_use() {
  local out
  out=$(ss -Hltn "sport = :$1" 2>/dev/null) || return 1
  [[ -n $out ]]
}

# pick_port START [EXCLUDED...]: first port >= START that nothing listens on
# and that is not in EXCLUDED. Tries 200 ports.
pick_port() {
  local p=$1 ex; shift
  local i
  for ((i = 0; i < 200; i++, p++)); do
    for ex in "$@"; do [[ $p == "$ex" ]] && continue 2; done
    port_in_use "$p" || { echo "$p"; return 0; }
  done
  return 1
}

# --------------------------------------------------------------- processes ---

# pid_alive PID: process exists (and is not a zombie).
pid_alive() {
  local pid=$1 state
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/stat ]] || return 1
  state=$(sed -E 's/^[0-9]+ \(.*\) (.) .*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $state != Z ]]
}

# pid_cmdline PID: its command line, arguments separated by spaces.
pid_cmdline() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null; }

# pid_matches PID PATTERN: alive and its command line contains PATTERN
# (protects against a recycled pid).
pid_matches() {
  pid_alive "$1" || return 1
  [[ $(pid_cmdline "$1") == *"$2"* ]]
}

# read_pidfile FILE: prints the pid in FILE, or nothing.
read_pidfile() {
  local pid=""
  if [[ -r $1 ]]; then read -r pid <"$1" 2>/dev/null || true; fi
  [[ $pid =~ ^[0-9]+$ ]] && echo "$pid"
  return 0
}

# stop_pid PID NAME [TIMEOUT]: SIGTERM, wait up to TIMEOUT seconds (default
# 30), then SIGKILL and wait 10 s more. Returns non-zero if it never exits.
stop_pid() {
  local pid=$1 name=$2 timeout=${3:-30} deadline
  pid_alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$(($(now_ms) + timeout * 1000))
  while pid_alive "$pid" && (($(now_ms) < deadline)); do sleep 0.2; done
  if pid_alive "$pid"; then
    warn "$name (pid $pid) did not exit within ${timeout}s of SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$(($(now_ms) + 10000))
    while pid_alive "$pid" && (($(now_ms) < deadline)); do sleep 0.2; done
  fi
  ! pid_alive "$pid"
}

# ---------------------------------------------------------------- waiting ---

# wait_for TIMEOUT_S WATCH_PID CMD...: run CMD every 0.5 s until it succeeds.
# Returns 1 on timeout, 2 if WATCH_PID (when not empty) dies meanwhile.
wait_for() {
  local timeout=$1 watch=$2 deadline; shift 2
  deadline=$(($(now_ms) + timeout * 1000))
  while :; do
    "$@" >/dev/null 2>&1 && return 0
    if [[ -n $watch ]] && ! pid_alive "$watch"; then
      "$@" >/dev/null 2>&1 && return 0
      return 2
    fi
    (($(now_ms) >= deadline)) && return 1
    sleep 0.5
  done
}

# log_tail FILE [LINES]: print the last lines of a log, framed, to stderr.
log_tail() {
  local f=$1 n=${2:-40}
  if [[ -s $f ]]; then
    printf -- '----- last %s lines of %s -----\n' "$n" "$f" >&2
    tail -n "$n" "$f" >&2
    printf -- '----- end of %s -----\n' "$f" >&2
  else
    printf -- '----- %s is empty or missing -----\n' "$f" >&2
  fi
}

# ------------------------------------------------------------------- misc ---

# java_major [JAVA]: major version of the given (default: PATH) java, or 0.
java_major() {
  local j=${1:-java} v
  command -v "$j" >/dev/null 2>&1 || { echo 0; return 0; }
  v=$("$j" -version 2>&1 | sed -nE 's/.*version "([0-9]+)(\.([0-9]+))?.*/\1 \3/p' | head -n1)
  # shellcheck disable=SC2086
  set -- $v
  if [[ ${1:-0} == 1 ]]; then echo "${2:-0}"; else echo "${1:-0}"; fi
}

# sha256_of FILE
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# stamp_current DIR WANT: DIR/.kiwi-stamp holds exactly WANT (what an
# idempotent install wrote last, once it had succeeded)
stamp_current() { [[ -r $1/.kiwi-stamp && $(<"$1/.kiwi-stamp") == "$2" ]]; }

# pinned_venv DIR REQUIREMENTS LOG MODULE...: a Python venv at DIR with the
# pinned packages of REQUIREMENTS, built afresh unless DIR/.kiwi-stamp
# matches the requirements' sha256 and the Python version (the stamp is
# written last, so a failed install is redone on the next run); pip's
# output in LOG, its tail printed on failure; each MODULE must import after.
# Uses Debian's /usr/bin/python3 (python3-venv, installed when missing and
# root). pip trusts the system bundle (a TLS-intercepting proxy's CA is
# there) even when the environment does not say so.
pinned_venv() {
  local venv=$1 req=$2 piplog=$3 py=/usr/bin/python3
  shift 3
  [[ -x $py ]] || py=$(command -v python3) || die "no python3 on this machine"
  local want
  want="$(sha256_of "$req") $("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
  if [[ -x $venv/bin/python3 ]] && stamp_current "$venv" "$want"; then
    log "venv up to date ($venv)"
    return 0
  fi
  if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
    ((EUID == 0)) || die "$py has no venv/ensurepip module (Debian: python3-venv) and not root to install it"
    log "installing python3-venv"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv </dev/null
  fi
  local pip_args=(--disable-pip-version-check --no-input -q)
  if [[ -z ${PIP_CERT:-} && -r /etc/ssl/certs/ca-certificates.crt ]]; then
    pip_args+=(--cert /etc/ssl/certs/ca-certificates.crt)
  fi
  mkdir -p "$(dirname "$venv")" "$(dirname "$piplog")"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  log "installing $(grep -c '^[A-Za-z]' "$req") pinned packages into $venv"
  if ! "$venv/bin/python3" -m pip install "${pip_args[@]}" -r "$req" >"$piplog" 2>&1; then
    log_tail "$piplog" 30
    die "pip install -r $req failed (log: $piplog)"
  fi
  local m
  for m in "$@"; do
    "$venv/bin/python3" -c "import $m" || die "$m does not import after pip install -r $req"
  done
  echo "$want" >"$venv/.kiwi-stamp"
  log "venv ready: $venv"
}

# env_get FILE KEY: value of KEY=VALUE in a shell env file (last wins), or "".
env_get() {
  [[ -r $1 ]] || return 0
  sed -n "s/^$2=//p" "$1" | tail -n1
}

# ----------------------------------------------------------------- gVisor ---
# runsc built by ops/setup.sh from the gVisor module pinned in ops/gvisor
# (go.mod, its checksums in go.sum), its version stamped into the binary;
# Debian's /usr/bin/runsc is the fallback when that build is impossible.

KIWI_RUNSC_BUILT=$KIWI_STATE_DIR/bin/runsc
KIWI_RUNSC_DEBIAN=/usr/bin/runsc

# gvisor_pinned_version: the gvisor.dev/gvisor version ops/gvisor/go.mod requires.
gvisor_pinned_version() {
  sed -nE 's/^[[:space:]]*(require[[:space:]]+)?gvisor\.dev\/gvisor[[:space:]]+(v[^[:space:]]+).*/\2/p' \
    "$KIWI_OPS_DIR/gvisor/go.mod" | head -n1
}

# runsc_version BIN: the version BIN reports ("runsc version V"), or "".
runsc_version() {
  [[ -x $1 ]] || return 0
  "$1" --version 2>/dev/null | sed -n 's/^runsc version //p' | head -n1
}

# runsc_path: the runsc that dockerd runs: the built one when it carries the
# pinned version, else Debian's.
runsc_path() {
  if [[ -n $(gvisor_pinned_version) && $(runsc_version "$KIWI_RUNSC_BUILT") == "$(gvisor_pinned_version)" ]]; then
    echo "$KIWI_RUNSC_BUILT"
  else
    echo "$KIWI_RUNSC_DEBIAN"
  fi
}
