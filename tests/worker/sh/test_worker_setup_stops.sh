#!/usr/bin/env bash
# test_worker_setup_stops.sh: a setup failure stops at step 0 with its cause
# named, and no round runs. `kiwi-worker --once` runs in a Python image:
#   - the test command is `tox -e py` and the image has no tox: the step-0
#     event's stop is missing_tool, the result not_fixed after 0 rounds, its
#     reason names tox and what to do;
#   - a test connects to 127.0.0.1:5432, which the repository's
#     docker-compose.yml gives to service `db` (postgres:16): the stop is
#     needs_service and the reason names the port, the file and the service;
#   - a test needs 4 GB where the sandbox has 256 MB (KIWI_SANDBOX_MEMORY_MB):
#     the stop is out_of_memory, the reason names the ceiling and the setting;
#   - a test writes 200 MB where the sandbox's disk holds 64 MB
#     (KIWI_MAX_SANDBOX_DISK_MB): the stop is out_of_disk, the reason quotes
#     the system's line and names the ceiling and the setting;
# one whose install fails (requirements.txt names a local folder that is
# not there): the result is install_failed and its reason names the
# install's command and the error line of its output; and one whose test
# run prints its failure first and 90 KB of passes after it: the models
# get the failing line; and a setuptools-scm project tagged v3.1.4, one
# commit on: Phase B installs it as 3.1.5.dev1 (its tags' version).
# Decided from the worker's own output (its step-0 event and result), which
# the sandbox does not write.
set -euo pipefail
# shellcheck source=tests/worker/sh/lib.sh
. "$(dirname "$0")/lib.sh"
need_services
"${DOCKER[@]}" image inspect kiwi/python:3.11 >/dev/null 2>&1 \
  || { echo "SKIP: kiwi/python:3.11 is not built (ops/images/build.sh)"; exit 77; }

# run_once NAME TEST_COMMAND: one --once run of the repository $TMP/NAME
# (with the settings in ONCE_ENV, NAME=VALUE each, when set)
ONCE_ENV=()
run_once() {
  commit_dir "$TMP/$1" "$1"
  cat >"$TMP/$1.json" <<JSON
{"id": "$1-$RUN_ID", "repo": {"url": "$TMP/$1", "ref": "main"}, "test_command": "$2",
 "goal": "make the tests pass"}
JSON
  env "${ONCE_ENV[@]}" KIWI_ONCE_EGRESS_UNCHECKED=true KIWI_STATE_DIR="$TMP/state-$1" KIWI_WORKER_ID="$RUN_ID-$1" \
    KIWI_ALLOW_LOCAL_REPOS=true KIWI_IMAGE_REGISTRIES=none KIWI_CA_BUNDLE="${KIWI_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}" \
    KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" \
    KIWI_MODEL_BASE_URL="${ONCE_MODEL_URL:-http://127.0.0.1:9/}" ANTHROPIC_API_KEY=kiwi-test-anthropic-key-7f3a9c KIWI_MODEL=claude-sonnet-4-5 \
    "$WORKER" --once "$TMP/$1.json" >"$TMP/$1.jsonl" 2>"$TMP/$1.log" || true
  log "$1: step 0 $(once_payload "$TMP/$1.jsonl" step0 status) ($(once_payload "$TMP/$1.jsonl" step0 stop));" \
    "result $(once_payload "$TMP/$1.jsonl" result status) after $(once_payload "$TMP/$1.jsonl" result rounds) rounds:" \
    "$(once_payload "$TMP/$1.jsonl" result reason)"
}

# expect_stop NAME STOP REASON-GLOB (a pattern: no quotes inside)
expect_stop() {
  local out="$TMP/$1.jsonl" reason
  reason=$(once_payload "$out" result reason)
  [ "$(once_payload "$out" step0 status)" = stopped ] || fail "$1: step 0 did not stop"
  [ "$(once_payload "$out" step0 stop)" = "$2" ] || fail "$1: the step-0 event's stop is '$(once_payload "$out" step0 stop)', want $2"
  [ "$(once_payload "$out" result status)" = not_fixed ] || fail "$1: the result is '$(once_payload "$out" result status)'"
  [ "$(once_payload "$out" result rounds)" = 0 ] || fail "$1: rounds were spent on a setup failure"
  # shellcheck disable=SC2254
  case "$reason" in
    $3) ;;
    *) fail "$1: the result's reason does not name the cause: $reason" ;;
  esac
}

mkdir -p "$TMP/tool"
printf '[tox]\nenv_list = py\n\n[testenv]\ncommands = python -m unittest\n' >"$TMP/tool/tox.ini"
printf 'import unittest\n\n\nclass T(unittest.TestCase):\n    def test_one(self):\n        self.assertTrue(True)\n' \
  >"$TMP/tool/test_one.py"
echo "# run $RUN_ID" >>"$TMP/tool/test_one.py"
run_once tool "tox -e py"
expect_stop tool missing_tool '*missing_tool: the test command runs `tox`, which kiwi/python:* does not have*add it to the project?s test dependencies*'

mkdir -p "$TMP/service"
printf 'services:\n  db:\n    image: postgres:16\n    ports:\n      - "5432:5432"\n' >"$TMP/service/docker-compose.yml"
cat >"$TMP/service/test_db.py" <<'PY'
import socket


def test_database_answers():
    with socket.create_connection(("127.0.0.1", 5432), timeout=5) as s:
        s.sendall(b"\x00")
PY
echo "# run $RUN_ID" >>"$TMP/service/test_db.py"
run_once service "python3 -m pytest -q"
expect_stop service needs_service \
  '*needs_service: the tests connect to 127.0.0.1:5432, which docker-compose.yml gives to service `db` (postgres:16); Phase B starts no services*'
# tests that need more memory than the sandbox has: the ceiling's kill is
# a stop that names it and the setting, not an honest failure for a model
mkdir -p "$TMP/memory"
cat >"$TMP/memory/test_memory.py" <<'PY'
def test_needs_four_gigabytes():
    chunks = []
    for _ in range(64):
        chunks.append(b"x" * (64 << 20))
    assert len(chunks) == 64
PY
echo "# run $RUN_ID" >>"$TMP/memory/test_memory.py"
ONCE_ENV=(KIWI_SANDBOX_MEMORY_MB=256)
run_once memory "python3 -m pytest -q"
ONCE_ENV=()
expect_stop memory out_of_memory \
  '*out_of_memory: `python3 -m pytest -q` was killed in kiwi/python:* on reaching its memory ceiling, 256 MB (KIWI_SANDBOX_MEMORY_MB*'
# tests that write more than the sandbox's disk holds (a build's output
# past the ceiling): a stop that quotes the system's line and names the
# ceiling and the setting, not an honest failure for a model
mkdir -p "$TMP/disk"
cat >"$TMP/disk/test_disk.py" <<'PY'
def test_writes_two_hundred_megabytes():
    with open("build-output.bin", "wb") as f:
        for _ in range(25):
            f.write(b"x" * (8 << 20))
PY
echo "# run $RUN_ID" >>"$TMP/disk/test_disk.py"
ONCE_ENV=(KIWI_MAX_SANDBOX_DISK_MB=64)
run_once disk "python3 -m pytest -q"
ONCE_ENV=()
expect_stop disk out_of_disk \
  '*out_of_disk: `python3 -m pytest -q` ran out of disk in kiwi/python:*: its output says "*No space left on device*"; the sandbox has its disk ceiling, 64 MB (KIWI_MAX_SANDBOX_DISK_MB raises it)*'
# an install that fails: the result says why, with the install's own
# command and its output's error line, not only an exit status
mkdir -p "$TMP/install"
printf -- '-e ./not-here\n# run %s\n' "$RUN_ID" >"$TMP/install/requirements.txt"
printf 'def test_one():\n    assert True\n' >"$TMP/install/test_one.py"
echo "# run $RUN_ID" >>"$TMP/install/test_one.py"
run_once install "python3 -m pytest -q"
out="$TMP/install.jsonl"
[ "$(once_payload "$out" result status)" = install_failed ] || fail "install: the result is '$(once_payload "$out" result status)'"
reason=$(once_payload "$out" result reason)
case "$reason" in
  *"exited with status "[0-9]*": \""*"not-here"*) ;;
  *) fail "install: the result's reason does not say why: $reason" ;;
esac
case "$reason" in
  "install \`/bin/sh\`"*) fail "install: the reason names /bin/sh, not the install's command: $reason" ;;
esac
# a failure printed early in a long run (a TAP `not ok` above 1,200 passing
# lines, 90 KB): step 0 keeps the run, so the models' first messages carry
# the failing line (the scripted provider's early-failure script refuses a
# request without it, and then gives up); before, step 0 kept the last 16
# KiB and the session ended in a provider error
provider_serve
mkdir -p "$TMP/early"
cat >"$TMP/early/run_tests.py" <<'PY'
import sys

print("not ok 1 - early_marker_Kq7: expected 3, got 4")
for i in range(2, 1202):
    print("ok %d - a test that passes, with a line long enough to push the failure out of a tail" % i)
sys.exit(1)
PY
echo "# run $RUN_ID" >>"$TMP/early/run_tests.py"
ONCE_MODEL_URL="http://127.0.0.1:$PROVIDER_PORT/script/early-failure" run_once early "python3 run_tests.py"
out="$TMP/early.jsonl"
[ "$(once_payload "$out" step0 status)" = failed ] || fail "early: step 0 is '$(once_payload "$out" step0 status)', want failed"
[ "$(once_payload "$out" result status)" = gave_up ] \
  || fail "early: the result is '$(once_payload "$out" result status)' ($(once_payload "$out" result reason)); the models did not get the early failure"
case "$(once_payload "$out" result reason)" in
  *"saw the early failure"*) ;;
  *) fail "early: the result's reason is not the model's: $(once_payload "$out" result reason)" ;;
esac
# a setuptools-scm project (no .git in the sandbox): Phase B installs it
# with the version its tags give the commit, one commit past v3.1.4
# (3.1.5.dev1, as setuptools-scm itself would say), not 0.0.0; its test
# asserts that version, so step 0 passes only with it
mkdir -p "$TMP/scm"
cp -a "$ROOT/tests/fixtures/repos/python-src-scm/." "$TMP/scm/"
rm -f "$TMP/scm/expect.json"
cat >"$TMP/scm/tests/test_version.py" <<'PY'
from importlib.metadata import version


def test_version_from_the_tags():
    assert version("tally") == "3.1.5.dev1"
PY
commit_dir "$TMP/scm" "tagged"
git -C "$TMP/scm" tag v3.1.4
echo "# run $RUN_ID" >>"$TMP/scm/tests/test_version.py"
run_once scm "pytest -q"
out="$TMP/scm.jsonl"
[ "$(once_payload "$out" step0 status)" = passed ] \
  || fail "scm: step 0 is '$(once_payload "$out" step0 status)' ($(once_payload "$out" result reason)); the project did not get its version from the tags"
grep -q "the project's version from its tags: 3.1.5.dev1" "$TMP/scm.log" || fail "scm: the worker's log does not say the version"
echo "5 passed, 0 failed"
