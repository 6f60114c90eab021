#!/usr/bin/env bash
# test_worker_install_race.sh: concurrent identical installs racing for one
# snapshot. Three `kiwi-worker --once` runs of the same repository (a lockfile
# no earlier run has seen, so the install cache misses) start at the same
# moment on one state directory and one Redis. Checked from outside: every
# run ends with the repository's own verdict (its tests pass: not_fixed),
# the state directory holds exactly one snapshot for the key and no partial
# one, the Redis entry records the key as installed, and a fourth run afterwards takes
# the cached install without a Phase A.
set -euo pipefail
# shellcheck source=tests/worker/sh/lib.sh
. "$(dirname "$0")/lib.sh"
need_services

STATE="$TMP/state"
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt # the registries' proxy CA, for Phase A
mkdir -p "$STATE"
# a repository whose install input no earlier run has seen: the fixture with
# a run-unique description in its manifest
src="$TMP/repo"
fresh_npm_repo js-tiny-dep "$src" "install race"

task_file() { # N: a task on that repository
  cat >"$TMP/task-$1.json" <<EOF
{"id": "race-$RUN_ID-$1", "repo": {"url": "$src", "ref": "main"}, "test_command": "npm test",
 "goal": "make the tests pass"}
EOF
}

run_once() { # N
  env KIWI_ONCE_EGRESS_UNCHECKED=true KIWI_STATE_DIR="$STATE" KIWI_WORKER_ID="$RUN_ID-$1" KIWI_ALLOW_LOCAL_REPOS=true \
    KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" KIWI_CA_BUNDLE="${KIWI_CA_BUNDLE:-$CA_BUNDLE}" \
    KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" \
    "$WORKER" --once "$TMP/task-$1.json" >"$TMP/once-$1.jsonl" 2>"$TMP/once-$1.log" || true
}

for n in 1 2 3 4; do task_file "$n"; done
log "three runs of one new install at once"
run_once 1 & p1=$!
run_once 2 & p2=$!
run_once 3 & p3=$!
wait "$p1" "$p2" "$p3"

keys=()
raced=0
for n in 1 2 3; do
  st=$(once_payload "$TMP/once-$n.jsonl" result status)
  inst=$(once_payload "$TMP/once-$n.jsonl" install status)
  key=$(once_payload "$TMP/once-$n.jsonl" install key)
  cached=$(once_payload "$TMP/once-$n.jsonl" install cached)
  [ "$cached" = false ] && raced=$((raced + 1))
  log "run $n: install $inst (cached $cached, key ${key:0:16}), result $st"
  [ "$st" = not_fixed ] || fail "run $n ended '$st', not the repository's verdict (its tests pass): $(tail -n 5 "$TMP/once-$n.log")"
  [ "$inst" = ok ] || fail "run $n: install '$inst'"
  [ -n "$key" ] || fail "run $n: its install event has no key"
  keys+=("$key")
done
[ "${keys[0]}" = "${keys[1]}" ] && [ "${keys[1]}" = "${keys[2]}" ] || fail "the three runs computed different keys: ${keys[*]}"
key=${keys[0]}
# the race happened: at least two runs ran Phase A for the same key at once
[ "$raced" -ge 2 ] || fail "only $raced run(s) ran Phase A: the installs did not race"

# from outside: the state directory and Redis
snaps=$(find "$STATE/snapshots" -mindepth 1 -maxdepth 1 -name "$key*" 2>/dev/null | sort)
log "snapshots for the key: $(echo "$snaps" | sed "s|$STATE/||" | tr '\n' ' ')"
[ "$(echo "$snaps" | grep -c .)" = 1 ] || fail "expected exactly one snapshot for the key, found: $snaps"
[ "$snaps" = "$STATE/snapshots/$key" ] || fail "the one snapshot is not the key's own: $snaps"
partial=$(find "$STATE/snapshots" -name '*.partial' | head -n 5)
[ -z "$partial" ] || fail "partial snapshots left behind: $partial"
# the entry records the key's outcome (and, with a store, the manifest's
# digest), never a path on one machine: the snapshot is <state>/snapshots/<key>
entry=$(redis-cli -h "${KIWI_REDIS_HOST:-127.0.0.1}" -p "${KIWI_REDIS_PORT:-16379}" hget "kiwi:install:$key" status)
[ "$entry" = ok ] || fail "the Redis entry for the key says '$entry', not ok"

log "a fourth run afterwards"
run_once 4
[ "$(once_payload "$TMP/once-4.jsonl" install cached)" = true ] || fail "the fourth run did not take the cached install: $(grep '"install"' "$TMP/once-4.jsonl" | tail -n 1)"
[ "$(once_payload "$TMP/once-4.jsonl" result status)" = not_fixed ] || fail "the fourth run's verdict changed"
redis-cli -h "${KIWI_REDIS_HOST:-127.0.0.1}" -p "${KIWI_REDIS_PORT:-16379}" del "kiwi:install:$key" >/dev/null
echo "1 passed, 0 failed"
