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

pinned_venv "$venv" "$KIWI_OPS_DIR/python-requirements.txt" "$KIWI_LOG_DIR/venv-pip.log" anthropic openai google.genai
