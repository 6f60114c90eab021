#!/usr/bin/env bash
# test_worker_pull.sh: a devcontainer image that is not on the machine is
# pulled, and one that cannot be had is reported while resolution goes on.
# A registry of our own (Debian's docker-registry, on a free loopback port,
# its config and storage in the test's directory; dockerd treats 127.0.0.0/8
# registries as insecure, so plain HTTP works) holds kiwi/base:bookworm as
# 127.0.0.1:PORT/kiwi/test:1, whose local tag is then removed. Three
# `kiwi-worker --once` runs of a repository whose devcontainer names
#   pulled   that image: it is pulled (seen from outside with docker image
#            inspect), image_pull events are sent, and step 0 runs in it;
#   refused  an image of a registry not on KIWI_IMAGE_REGISTRIES: the step-0
#            event says so and the marker (package.json: Node.js) decides;
#   absent   an image the allowed registry does not have: the same;
#   big      an image over KIWI_IMAGE_PULL_MAX_MB: the same, and it is not
#            left on the machine;
#   private  an image of a second registry that wants a password
#            (htpasswd): refused without KIWI_REGISTRY_AUTH_FILE (the same
#            fallback), pulled with an entry scoped to its repositories;
#            the password is in no event, no line of the worker's log and
#            no container's configuration.
set -euo pipefail
# shellcheck source=tests/worker/sh/lib.sh
. "$(dirname "$0")/lib.sh"
need_services
need_registry

PORT=$(free_port)
REG="127.0.0.1:$PORT"
IMAGE="$REG/kiwi/test:1"
registry_serve registry "$REG"

BIG="$REG/kiwi/big:1"
AREG="127.0.0.1:$(free_port)" # the registry that wants a password
PRIVATE="$AREG/kiwi/private:1"
on_cleanup() { registry_images_remove "$REG" "$AREG"; }
for ref in "$IMAGE" "$BIG"; do
  "${DOCKER[@]}" tag kiwi/base:bookworm "$ref"
  "${DOCKER[@]}" push -q "$ref" >"$TMP/push.log" 2>&1 || fail "push to $REG: $(tail -n 3 "$TMP/push.log")"
  "${DOCKER[@]}" rmi "$ref" >/dev/null
  if "${DOCKER[@]}" image inspect "$ref" >/dev/null 2>&1; then fail "$ref is still on the machine before the run"; fi
done

STATE="$TMP/state"
mkdir -p "$STATE"
repo() { devcontainer_task "$@"; } # NAME IMAGE
run_once() { # NAME [ASSIGNMENT...]
  local name=$1; shift
  env KIWI_ONCE_EGRESS_UNCHECKED=true KIWI_STATE_DIR="$STATE" KIWI_WORKER_ID="$RUN_ID-$name" KIWI_ALLOW_LOCAL_REPOS=true \
    KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" KIWI_IMAGE_REGISTRIES="$REG" \
    KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" "$@" \
    "$WORKER" --once "$TMP/task-$name.json" >"$TMP/once-$name.jsonl" 2>"$TMP/once-$name.log" || true
}
field() { once_payload "$TMP/once-$1.jsonl" "$2" "$3"; } # NAME KIND KEY
count() { grep -c "\"kind\": *\"$2\"" "$TMP/once-$1.jsonl" || true; }

passed=0
repo pulled "$IMAGE"
run_once pulled
log "pulled: step 0 $(field pulled step0 status) in $(field pulled step0 image); result $(field pulled result status): $(field pulled result reason)"
"${DOCKER[@]}" image inspect "$IMAGE" >/dev/null 2>&1 || fail "pulled: $IMAGE is not on the machine after the run"
[ "$(field pulled step0 image)" = "$IMAGE" ] || fail "pulled: step 0 ran in '$(field pulled step0 image)', not $IMAGE"
[ "$(field pulled step0 status)" = passed ] || fail "pulled: step 0 '$(field pulled step0 status)': $(tail -n 5 "$TMP/once-pulled.log")"
[ "$(field pulled step0 pulled)" = true ] || fail "pulled: the step-0 event does not say the image was pulled"
[ "$(count pulled image_pull)" -ge 1 ] || fail "pulled: no image_pull event"
[ "$(field pulled image_pull image)" = "$IMAGE" ] || fail "pulled: image_pull names '$(field pulled image_pull image)'"
[ "$(field pulled image_pull bytes)" -gt 0 ] || fail "pulled: the last image_pull event has no bytes"
passed=$((passed + 1))

# The verify cache keys a run by the image's digest, which is known only
# once the image is here: the run that pulled it is kept under that digest
# (a second run, the image now present, is answered from the cache), and a
# new image pushed under the same tag is pulled and run, never answered
# with the old image's result.
cp "$TMP/task-pulled.json" "$TMP/task-again.json"
run_once again
[ "$(field again step0 cached)" = true ] \
  || fail "again: the same task on the image just pulled was not answered from the verify cache (cached: $(field again step0 cached)); the pulling run was kept under another key"
# the new image: one of this run's own (only its small layer is pushed and
# pulled again)
own_image "$IMAGE"
[ "$("${DOCKER[@]}" image inspect -f '{{.Id}}' "$IMAGE")" != "$("${DOCKER[@]}" image inspect -f '{{.Id}}' kiwi/base:bookworm)" ] \
  || fail "the new $IMAGE has kiwi/base:bookworm's Id"
"${DOCKER[@]}" push -q "$IMAGE" >"$TMP/push.log" 2>&1 || fail "push of the new $IMAGE: $(tail -n 3 "$TMP/push.log")"
"${DOCKER[@]}" rmi "$IMAGE" >/dev/null
cp "$TMP/task-pulled.json" "$TMP/task-moved.json"
run_once moved
log "moved: the tag now names a new image: step 0 $(field moved step0 status), pulled $(field moved step0 pulled), cached $(field moved step0 cached)"
[ "$(field moved step0 pulled)" = true ] || fail "moved: the new image under $IMAGE was not pulled"
[ "$(field moved step0 cached)" = false ] \
  || fail "moved: the run on the new image under $IMAGE was answered from the old image's cached result"
[ "$(field moved step0 status)" = passed ] || fail "moved: step 0 '$(field moved step0 status)'"
passed=$((passed + 1))

check_fallback() { # NAME IMAGE WHY
  image_refused "$@"
  [ "$(field "$1" step0 status)" = passed ] || fail "$1: step 0 '$(field "$1" step0 status)'"
  [ "$(field "$1" result status)" != error ] || fail "$1: the result is an error: $(field "$1" result reason)"
  passed=$((passed + 1))
}
repo refused "quay.io/kiwi/none:1"
run_once refused
check_fallback refused "quay.io/kiwi/none:1" "its registry quay.io is not on the allow-list"
repo absent "$REG/kiwi/absent:1"
run_once absent
check_fallback absent "$REG/kiwi/absent:1" "not found"
repo big "$BIG"
run_once big KIWI_IMAGE_PULL_MAX_MB=1
check_fallback big "$BIG" "over 1 MB (KIWI_IMAGE_PULL_MAX_MB"
if "${DOCKER[@]}" image inspect "$BIG" >/dev/null 2>&1; then fail "big: $BIG is on the machine after a refused pull"; fi

# A registry that wants credentials. The test's pushes log in with a
# DOCKER_CONFIG of its own; the worker gets the same credentials only in
# KIWI_REGISTRY_AUTH_FILE (a config.json of "auths"), never in its
# environment.
PASS=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
python3 -c 'import crypt, sys; print("kiwi:" + crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))' \
  "$PASS" 2>/dev/null >"$TMP/htpasswd"
registry_serve registry-auth "$AREG" "$TMP/htpasswd"
export DOCKER_CONFIG="$TMP/docker-config"
printf '%s\n' "$PASS" | "${DOCKER[@]}" login -u kiwi --password-stdin "$AREG" >"$TMP/login.log" 2>&1 \
  || fail "docker login $AREG: $(tail -n 3 "$TMP/login.log")"
"${DOCKER[@]}" tag kiwi/base:bookworm "$PRIVATE"
"${DOCKER[@]}" push -q "$PRIVATE" >"$TMP/push.log" 2>&1 || fail "push to $AREG: $(tail -n 3 "$TMP/push.log")"
"${DOCKER[@]}" logout "$AREG" >/dev/null
"${DOCKER[@]}" rmi "$PRIVATE" >/dev/null
unset DOCKER_CONFIG
if "${DOCKER[@]}" pull -q "$PRIVATE" >/dev/null 2>&1; then fail "$PRIVATE can be pulled without the password"; fi
AUTH=$(printf 'kiwi:%s' "$PASS" | base64 -w0)
# scoped to the repositories under kiwi/: a registry-wide entry is the
# catalogue's only (test_worker_images covers the scope)
printf '{"auths": {"%s/kiwi": {"auth": "%s"}}}\n' "$AREG" "$AUTH" >"$TMP/auths.json"
chmod 600 "$TMP/auths.json"

repo anonymous "$PRIVATE"
run_once anonymous KIWI_IMAGE_REGISTRIES="$REG $AREG"
check_fallback anonymous "$PRIVATE" "no basic auth credentials"
repo private "$PRIVATE"
run_once private KIWI_IMAGE_REGISTRIES="$REG $AREG" KIWI_REGISTRY_AUTH_FILE="$TMP/auths.json"
log "private: step 0 $(field private step0 status) in $(field private step0 image), pulled $(field private step0 pulled)"
[ "$(field private step0 image)" = "$PRIVATE" ] || fail "private: step 0 ran in '$(field private step0 image)': $(field private step0 image_note)"
[ "$(field private step0 pulled)" = true ] || fail "private: the step-0 event does not say the image was pulled"
[ "$(field private step0 status)" = passed ] || fail "private: step 0 '$(field private step0 status)'"
"${DOCKER[@]}" image inspect "$PRIVATE" >/dev/null 2>&1 || fail "private: $PRIVATE is not on the machine after the run"
grep -q 'kiwi/private' "$TMP/registry-auth.log" || fail "private: the registry saw no request for the image"
for f in "$TMP/once-private.jsonl" "$TMP/once-private.log" "$TMP/once-anonymous.jsonl" "$TMP/once-anonymous.log"; do
  if grep -qF -e "$PASS" -e "$AUTH" "$f"; then fail "private: the password is in $f"; fi
done
# every container the runs left (none should be left) and dockerd's own view of them
for c in $("${DOCKER[@]}" ps -aq); do
  if "${DOCKER[@]}" inspect "$c" | grep >/dev/null -F -e "$PASS" -e "$AUTH"; then fail "private: the password is in container $c"; fi
done
passed=$((passed + 1))
echo "$passed passed, 0 failed"
