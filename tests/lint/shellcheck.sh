#!/usr/bin/env bash
# tests/lint/shellcheck.sh: shellcheck over every shell script in ops/ and
# tests/ (files named *.sh, and files whose first line is a sh, bash or dash
# shebang). Fails on any finding of severity warning or error; the info and
# style notes are left out: they flag idioms used on purpose here (single
# quotes around Python and remote shell code, `A && B || C` in clean-up
# loops), while warnings point at real faults (a variable never set or never
# read, an array split on spaces, `$?` of the wrong command, a sourced file
# not found). A check that is wrong for one line is disabled on that line
# with its reason (`# shellcheck disable=SCnnnn # why`); a directory whose
# files are data sourced by a script says so in its .shellcheckrc.
# Sourced files are followed (-x, paths relative to each script). Exits 77
# (skipped) when shellcheck is not installed; the full suite counts that.
# Also refused: a pipe into `grep -q` (see below).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v shellcheck >/dev/null 2>&1; then
  echo "SKIP: shellcheck is not installed (Debian package shellcheck, ops/setup.sh)"
  exit 77
fi

list() {
  local f
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -- ops tests
  else
    find ops tests -type f
  fi | while IFS= read -r f; do
    [ -f "$f" ] || continue
    case $f in
      *.sh) printf '%s\n' "$f" ;;
      *) head -n 1 "$f" 2>/dev/null | grep >/dev/null -E '^#!.*[/ ](ba|da)?sh([[:space:]]|$)' && printf '%s\n' "$f" ;;
    esac
  done
}

mapfile -t files < <(list | sort)
[ "${#files[@]}" -gt 0 ] || { echo "no shell scripts found under ops/ and tests/"; exit 1; }
echo "shellcheck $(shellcheck --version | sed -n 's/^version: //p'): ${#files[@]} scripts, severity warning and above"
if shellcheck -x -P SCRIPTDIR -S warning -f gcc "${files[@]}"; then
  echo "no findings"
else
  echo "FAIL: shellcheck findings above (fix them, or disable the check on that line with a reason)"
  exit 1
fi

# A pipe into `grep -q` fails now and then under `set -o pipefail`: grep
# ends at its first match, and a writer with more to write (bash's echo and
# printf write line by line) is killed by SIGPIPE, which makes the whole
# pipeline fail. `grep >/dev/null` reads to the end. The image recipes and
# lib/rootfs.sh are left as they are: they are hashed into every image's
# recipe, and a change there rebuilds them all.
if grep -nE '\|[[:space:]]*grep -[a-zA-Z]*q[a-zA-Z]*([[:space:];)"'"'"']|$)' "${files[@]}" |
  grep -vE '^ops/images/(recipes/|lib/rootfs\.sh:)' >"${TMPDIR:-/tmp}/kiwi-grepq.$$"; then
  cat "${TMPDIR:-/tmp}/kiwi-grepq.$$"
  rm -f "${TMPDIR:-/tmp}/kiwi-grepq.$$"
  echo "FAIL: a pipe into grep -q above (SIGPIPE under pipefail): use grep >/dev/null, or a here-string"
  exit 1
fi
rm -f "${TMPDIR:-/tmp}/kiwi-grepq.$$"
echo "no pipe into grep -q"
