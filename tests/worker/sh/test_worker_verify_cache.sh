#!/usr/bin/env bash
# test_worker_verify_cache.sh: the verify cache never serves a run that held
# credentials. Three `kiwi-worker --once` runs of one repository whose tests
# pass and print APP_TEST_TOKEN: run A is given the credential, runs B and C
# are not. Checked from outside: B's step 0 ran (not cached) and nothing of
# A's output reached it (neither the value nor its mask), no Redis verify
# entry holds the value, and C is served B's cached run (so the cache is
# on, and the test could see a leak).
set -euo pipefail
# shellcheck source=tests/worker/sh/lib.sh
. "$(dirname "$0")/lib.sh"
need_services

STATE="$TMP/state"
mkdir -p "$STATE"
SECRET="verify-cache-canary-$RUN_ID-$RANDOM$RANDOM"
src="$TMP/repo"
cp -a "$ROOT/tests/fixtures/examples/js-pass" "$src"
# a tree no earlier run has seen, whose test prints the credential
cat >"$src/print-token.js" <<EOF
console.log("run $RUN_ID: APP_TEST_TOKEN=[" + (process.env.APP_TEST_TOKEN || "") + "]");
EOF
git -C "$src" init -q -b main
git -C "$src" -c user.email=kiwi@test -c user.name=kiwi add -A
git -C "$src" -c user.email=kiwi@test -c user.name=kiwi commit -q -m "verify cache"
CMD="node print-token.js && npm test"

task_file() { # NAME CREDS_JSON
  cat >"$TMP/task-$1.json" <<EOF
{"id": "vc-$RUN_ID-$1", "repo": {"url": "$src", "ref": "main"}, "test_command": "$CMD",
 "goal": "make the tests pass", "test_credentials": $2}
EOF
}
run_once() { # NAME
  env KIWI_ONCE_EGRESS_UNCHECKED=true KIWI_STATE_DIR="$STATE" KIWI_WORKER_ID="$RUN_ID-$1" KIWI_ALLOW_LOCAL_REPOS=true \
    KIWI_TEST_CREDENTIALS=APP_TEST_TOKEN APP_TEST_TOKEN="$SECRET" \
    KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" \
    KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" \
    "$WORKER" --once "$TMP/task-$1.json" >"$TMP/once-$1.jsonl" 2>"$TMP/once-$1.log" || true
}
step0() { once_payload "$TMP/once-$1.jsonl" step0 "$2"; } # NAME KEY: the step-0 event's KEY

task_file a '["APP_TEST_TOKEN"]'
task_file b '[]'
task_file c '[]'
run_once a
[ "$(step0 a status)" = passed ] || fail "run A: step 0 '$(step0 a status)': $(tail -n 5 "$TMP/once-a.log")"
run_once b
run_once c
log "step 0: A cached $(step0 a cached), B cached $(step0 b cached), C cached $(step0 c cached)"
[ "$(step0 b cached)" = false ] || fail "run B (no credentials) was served the cached run of A, which held one"
step0 b output_tail | grep >/dev/null -F "APP_TEST_TOKEN=[]" || log "note: run B's step-0 event lacks its own output line"
if grep -qF "APP_TEST_TOKEN=[***]" "$TMP/once-b.jsonl"; then fail "run B carries A's (masked) output"; fi
if grep -qF "$SECRET" "$TMP/once-b.jsonl" "$TMP/once-c.jsonl"; then fail "the credential's value reached a run without it"; fi
[ "$(step0 c cached)" = true ] || fail "run C was not served B's cached run: the verify cache is off, nothing was shown"
rc=(redis-cli -h "${KIWI_REDIS_HOST:-127.0.0.1}" -p "${KIWI_REDIS_PORT:-16379}")
leaks=0
while read -r k; do
  [ -n "$k" ] || continue
  if "${rc[@]}" hget "$k" output | grep >/dev/null -F "$SECRET"; then leaks=$((leaks + 1)); fi
done < <("${rc[@]}" --scan --pattern 'kiwi:verify:*')
[ "$leaks" = 0 ] || fail "$leaks verify-cache entr(y/ies) in Redis hold the credential's value"
echo "1 passed, 0 failed"
