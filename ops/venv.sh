#!/usr/bin/env bash
# ops/venv.sh: the Python venv for Kiwi's test tooling (the provider SDKs that
# check the scripted provider's fixtures), at ${KIWI_STATE_DIR}/venv, with
# the pinned packages of ops/python-requirements.txt.
#
# Idempotent: when the venv's stamp matches the requirements' sha256 and the
# Python version, it does nothing. Otherwise it builds the venv afresh; the
# stamp is written last, so a failed install is redone on the next run.
# Uses Debian's /usr/bin/python3 (python3-venv) when present.
#
# Usage: ops/venv.sh [--print]   (--print: only print the venv's python path)
set -Eeuo pipefail

KIWI_LOG_NAME=venv
# shellcheck source=ops/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
install_err_trap

venv=$KIWI_STATE_DIR/venv
if [[ ${1:-} == --print ]]; then
  echo "$venv/bin/python3"
  exit 0
fi

req=$KIWI_OPS_DIR/python-requirements.txt
py=/usr/bin/python3
[[ -x $py ]] || py=$(command -v python3) || die "no python3 on this machine"
stamp_want="$(sha256_of "$req") $("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
if [[ -x $venv/bin/python3 && -r $venv/.kiwi-stamp && $(<"$venv/.kiwi-stamp") == "$stamp_want" ]]; then
  log "venv up to date ($venv)"
  exit 0
fi

if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
  ((EUID == 0)) || die "$py has no venv/ensurepip module (Debian: python3-venv) and not root to install it"
  log "installing python3-venv"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv </dev/null
fi

# pip trusts the system bundle (a TLS-intercepting proxy's CA is there) even
# when the environment does not say so.
pip_args=(--disable-pip-version-check --no-input -q)
if [[ -z ${PIP_CERT:-} && -r /etc/ssl/certs/ca-certificates.crt ]]; then
  pip_args+=(--cert /etc/ssl/certs/ca-certificates.crt)
fi

mkdir -p "$KIWI_STATE_DIR" "$KIWI_LOG_DIR"
rm -rf "$venv"
"$py" -m venv "$venv"
piplog=$KIWI_LOG_DIR/venv-pip.log
log "installing $(grep -c '^[A-Za-z]' "$req") pinned packages into $venv"
if ! "$venv/bin/python3" -m pip install "${pip_args[@]}" -r "$req" >"$piplog" 2>&1; then
  log_tail "$piplog" 30
  die "pip install -r $req failed (log: $piplog)"
fi
"$venv/bin/python3" -c 'import anthropic, openai, google.genai' || die "the SDKs do not import after install"
echo "$stamp_want" >"$venv/.kiwi-stamp"
log "venv ready: $venv"
