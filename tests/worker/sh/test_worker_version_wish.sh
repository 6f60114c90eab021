#!/usr/bin/env bash
# test_worker_version_wish.sh: a version the catalogue lacks is answered.
# One `kiwi-worker --once` run of tests/fixtures/repos/python-version-wish
# (.python-version 3.14, the local catalogue's newest Python is 3.13, the
# code uses 3.14's os.reload_environ): the step-0 event names the version
# asked, the file that asked and the image that ran; step 0 stops on the
# version mismatch, so no round runs; the result is not_fixed (neither
# needs_network nor the repository's bug) and its reason says the same.
set -euo pipefail
# shellcheck source=tests/worker/sh/lib.sh
. "$(dirname "$0")/lib.sh"
need_services
"${DOCKER[@]}" image inspect kiwi/python:3.13 >/dev/null 2>&1 \
  || { echo "SKIP: kiwi/python:3.13 is not built (ops/images/build.sh)"; exit 77; }

src="$TMP/repo"
cp -a "$ROOT/tests/fixtures/repos/python-version-wish" "$src"
rm -f "$src/expect.json"
# a tree no earlier run has seen (the verify cache keeps honest results)
echo "# run $RUN_ID" >>"$src/test_app.py"
commit_dir "$src" "version wish"
cat >"$TMP/task.json" <<JSON
{"id": "wish-$RUN_ID", "repo": {"url": "$src", "ref": "main"}, "test_command": "python3 -m pytest -q",
 "goal": "make the tests pass"}
JSON
env KIWI_ONCE_EGRESS_UNCHECKED=true KIWI_STATE_DIR="$TMP/state" KIWI_WORKER_ID="$RUN_ID-wish" KIWI_ALLOW_LOCAL_REPOS=true KIWI_IMAGE_REGISTRIES=none \
  KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" \
  KIWI_MODEL_BASE_URL=http://127.0.0.1:9/ \
  "$WORKER" --once "$TMP/task.json" >"$TMP/once.jsonl" 2>"$TMP/once.log" || true
out="$TMP/once.jsonl"
version=$(once_payload "$out" step0 version)
reason=$(once_payload "$out" result reason)
log "step 0 $(once_payload "$out" step0 status): version $version"
log "result $(once_payload "$out" result status) after $(once_payload "$out" result rounds) rounds: $reason"
want='{"asked": "3.14", "from": ".python-version", "runtime": "python", "satisfied": false, "used": "kiwi/python:3.13"}'
[ "$version" = "$want" ] || fail "the step-0 event's version is '$version', want '$want'"
[ "$(once_payload "$out" step0 status)" = stopped ] || fail "step 0 did not stop on the version mismatch"
case "$(once_payload "$out" step0 note)" in
  *".python-version asks for python 3.14, which no image in the catalogue has; kiwi/python:3.13 ran instead"*) ;;
  *) fail "the step-0 event's note is '$(once_payload "$out" step0 note)'" ;;
esac
[ "$(once_payload "$out" result status)" = not_fixed ] || fail "the result is '$(once_payload "$out" result status)'"
[ "$(once_payload "$out" result rounds)" = 0 ] || fail "rounds were spent on a version mismatch"
case "$reason" in
  *"python-stdlib-name"*".python-version asks for python 3.14"*"kiwi/python:3.13 ran instead"*) ;;
  *) fail "the result's reason does not answer the version wish: $reason" ;;
esac
echo "1 passed, 0 failed"
