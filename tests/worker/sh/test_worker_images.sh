#!/usr/bin/env bash
# test_worker_images.sh: the images a repository names come from the
# operator's policy, and the images Kiwi pulled do not stay for ever.
# Two registries of our own (Debian's docker-registry on free loopback
# ports, registry_serve in lib.sh): REG is open, AREG wants a password
# (htpasswd). Small images (kiwi/base:bookworm and one file naming the
# image, so that each has an Id of its own) are built here and pushed. `kiwi-worker --once` runs of a repository
# whose devcontainer names
#   held      an image dockerd holds that no policy allows:
#             another-registry.example/x (a registry not on
#             KIWI_IMAGE_REGISTRIES) and REG/kiwi/local-only (an allowed
#             registry that does not have it): each refused with the
#             setting to change, the marker's image runs instead, and no
#             container was ever made of it (docker events), while the
#             image itself stays (it is not Kiwi's);
#   wide      AREG/kiwi/app with credentials for AREG as a whole: refused,
#             the registry got no Authorization (a registry-wide entry is
#             the catalogue's only);
#   outside   AREG/other/app with credentials scoped to AREG/kiwi: the same;
#   inside    AREG/kiwi/app with them: pulled, with the credentials;
#   used, young   two images of REG, pulled.
# Then the clean-up (kiwi-worker --gc): with the records of inside and used
# a month old, inside goes, used (a container of it runs) stays, young
# (just used) stays; above the watermark (KIWI_GC_DISK_HIGH=1, young's
# record an hour old) young goes too; the catalogue's images, an image the
# operator holds and the image in use stay throughout. Decided from
# outside: docker image inspect, docker events, the registries' own logs.
set -euo pipefail
# shellcheck source=tests/worker/sh/lib.sh
. "$(dirname "$0")/lib.sh"
need_services
need_registry

REG="127.0.0.1:$(free_port)"
AREG="127.0.0.1:$(free_port)"
PASS=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
python3 -c 'import crypt, sys; print("kiwi:" + crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))' \
  "$PASS" 2>/dev/null >"$TMP/htpasswd"
registry_serve registry "$REG"
registry_serve registry-auth "$AREG" "$TMP/htpasswd"

ELSEWHERE="another-registry.example/x-$RUN_ID:1"
LOCAL_ONLY="$REG/kiwi/local-only:1"
INSIDE="$AREG/kiwi/app:1"
OUTSIDE="$AREG/other/app:1"
USED="$REG/kiwi/gc-used:1"
YOUNG="$REG/kiwi/gc-young:1"
OPERATOR="$REG/kiwi/gc-operator:1" # the operator's own: never pulled by Kiwi
USED_BY="kiwi-itest-images-$RUN_ID"
on_cleanup() {
  "${DOCKER[@]}" rm -f "$USED_BY" >/dev/null 2>&1 || true
  "${DOCKER[@]}" rmi -f "$ELSEWHERE" >/dev/null 2>&1 || true
  registry_images_remove "$REG" "$AREG"
}
push() { # REF [DOCKER_CONFIG]: an image of its own pushed as REF, then only in the registry
  own_image "$1"
  DOCKER_CONFIG="${2:-$TMP/no-config}" "${DOCKER[@]}" push -q "$1" >"$TMP/push.log" 2>&1 \
    || fail "push $1: $(tail -n 3 "$TMP/push.log")"
  "${DOCKER[@]}" rmi "$1" >/dev/null
}
push "$USED"
push "$YOUNG"
mkdir -p "$TMP/docker-config"
printf '%s\n' "$PASS" | DOCKER_CONFIG="$TMP/docker-config" "${DOCKER[@]}" login -u kiwi --password-stdin "$AREG" \
  >"$TMP/login.log" 2>&1 || fail "docker login $AREG: $(tail -n 3 "$TMP/login.log")"
push "$INSIDE" "$TMP/docker-config"
push "$OUTSIDE" "$TMP/docker-config"
DOCKER_CONFIG="$TMP/docker-config" "${DOCKER[@]}" logout "$AREG" >/dev/null
# held by dockerd, allowed by nobody
own_image "$ELSEWHERE"
own_image "$LOCAL_ONLY"
own_image "$OPERATOR"

AUTH=$(printf 'kiwi:%s' "$PASS" | base64 -w0)
printf '{"auths": {"%s": {"auth": "%s"}}}\n' "$AREG" "$AUTH" >"$TMP/auths-wide.json"
printf '{"auths": {"%s/kiwi": {"auth": "%s"}}}\n' "$AREG" "$AUTH" >"$TMP/auths-scoped.json"
chmod 600 "$TMP/auths-wide.json" "$TMP/auths-scoped.json"

STATE="$TMP/state"
mkdir -p "$STATE"
settings() { # the worker's settings, as `env` assignments
  printf '%s\n' KIWI_STATE_DIR="$STATE" KIWI_ALLOW_LOCAL_REPOS=true \
    KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" KIWI_IMAGE_REGISTRIES="$REG $AREG" \
    KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}"
}
run_once() { # NAME IMAGE [ASSIGNMENT...]
  local name=$1 image=$2; shift 2
  devcontainer_task "$name" "$image"
  mapfile -t set < <(settings)
  env "${set[@]}" KIWI_WORKER_ID="$RUN_ID-$name" "$@" \
    "$WORKER" --once "$TMP/task-$name.json" >"$TMP/once-$name.jsonl" 2>"$TMP/once-$name.log" || true
}
field() { once_payload "$TMP/once-$1.jsonl" "$2" "$3"; } # NAME KIND KEY
passed=0

refused() { # NAME IMAGE WHY [CAUSE]: image_refused, the step-0 event's image_unavailable says
  # CAUSE (default unavailable), and the result's reason names the image and why
  image_refused "$1" "$2" "$3"
  local typed
  typed=$(field "$1" step0 image_unavailable)
  [ "$typed" = "{\"cause\": \"${4:-unavailable}\", \"image\": \"$2\"}" ] \
    || fail "$1: the step-0 event's image_unavailable is '$typed'"
  case "$(field "$1" result reason)" in
    *"$2"*"$3"*) ;;
    *) fail "$1: the result's reason does not name the image and why: $(field "$1" result reason)" ;;
  esac
}

# 1. Held by dockerd, allowed by nobody: refused, and no container of it.
T0=$(date +%s)
run_once elsewhere "$ELSEWHERE"
refused elsewhere "$ELSEWHERE" \
  "its registry another-registry.example is not on the allow-list, nor is its repository ${ELSEWHERE%:1} (KIWI_IMAGE_REGISTRIES: $REG $AREG) and the image catalogue (KIWI_IMAGE_CATALOG) does not name it" refused
run_once local-only "$LOCAL_ONLY"
refused local-only "$LOCAL_ONLY" "not found"
T1=$(($(date +%s) + 1))
"${DOCKER[@]}" events --since "$T0" --until "$T1" --filter type=container --filter event=create \
  --format '{{index .Actor.Attributes "image"}}' >"$TMP/creates.txt"
log "held: $(wc -l <"$TMP/creates.txt") container(s) made during the two runs: $(sort -u "$TMP/creates.txt" | tr '\n' ' ')"
[ -s "$TMP/creates.txt" ] || fail "held: docker events shows no container made at all (the runs did not run)"
for ref in "$ELSEWHERE" "$LOCAL_ONLY"; do
  id=$("${DOCKER[@]}" image inspect --format '{{.Id}}' "$ref")
  if grep -qxF -e "$ref" -e "$id" "$TMP/creates.txt"; then fail "held: a container was made of $ref ($id)"; fi
  if [ -n "$("${DOCKER[@]}" ps -aq --filter "ancestor=$ref")" ]; then fail "held: a container of $ref is on the machine"; fi
  "${DOCKER[@]}" image inspect "$ref" >/dev/null 2>&1 || fail "held: $ref, not Kiwi's, was removed"
done
passed=$((passed + 1))

# 2. Credentials go only where the operator scoped them: the registry's
# own log says which requests came with a valid Authorization
# (msg="authorized request").
authed() { # FROM-LINE REPOSITORY: the authorized requests for it in the registry's log since FROM-LINE
  tail -n +"$1" "$TMP/registry-auth.log" | grep -F 'msg="authorized request"' | grep -cF "/v2/$2/" || true
}
lines() { wc -l <"$TMP/registry-auth.log"; }
from=$(($(lines) + 1))
run_once wide "$INSIDE" KIWI_REGISTRY_AUTH_FILE="$TMP/auths-wide.json"
refused wide "$INSIDE" "no basic auth credentials"
[ "$(authed "$from" kiwi/app)" = 0 ] || fail "wide: the registry-wide credentials were sent for $INSIDE"
from=$(($(lines) + 1))
run_once outside "$OUTSIDE" KIWI_REGISTRY_AUTH_FILE="$TMP/auths-scoped.json"
refused outside "$OUTSIDE" "no basic auth credentials"
[ "$(authed "$from" other/app)" = 0 ] || fail "outside: the credentials for $AREG/kiwi were sent for $OUTSIDE"
from=$(($(lines) + 1))
run_once inside "$INSIDE" KIWI_REGISTRY_AUTH_FILE="$TMP/auths-scoped.json"
log "inside: step 0 $(field inside step0 status) in $(field inside step0 image), pulled $(field inside step0 pulled)"
[ "$(field inside step0 image)" = "$INSIDE" ] || fail "inside: step 0 ran in '$(field inside step0 image)': $(field inside step0 image_note)"
[ "$(authed "$from" kiwi/app)" -gt 0 ] || fail "inside: the registry saw no authenticated request for $INSIDE"
for f in "$TMP"/once-*.jsonl "$TMP"/once-*.log; do
  if grep -qF -e "$PASS" -e "$AUTH" "$f"; then fail "the password is in $f"; fi
done
passed=$((passed + 1))

# 3. The clean-up.
run_once used "$USED"
run_once young "$YOUNG"
for ref in "$INSIDE" "$USED" "$YOUNG"; do
  "${DOCKER[@]}" image inspect "$ref" >/dev/null 2>&1 || fail "$ref was not pulled"
done
record() { printf '%s/images/%s' "$STATE" "$(printf '%s' "$1" | sha256sum | cut -d' ' -f1)"; }
for ref in "$INSIDE" "$USED" "$YOUNG"; do [ -f "$(record "$ref")" ] || fail "no record of the pull of $ref"; done
for ref in "$ELSEWHERE" "$LOCAL_ONLY" "$OPERATOR"; do
  if [ -f "$(record "$ref")" ]; then fail "$ref, not pulled by Kiwi, is recorded as pulled"; fi
done
"${DOCKER[@]}" run -d --name "$USED_BY" --network none "$USED" sleep 600 >/dev/null
touch -d '30 days ago' "$(record "$INSIDE")" "$(record "$USED")"
# a record of a catalogue image (as if the catalogue had come to name one
# Kiwi pulled) is never acted on
printf '{"ref":"kiwi/node:22","ids":[]}' >"$(record kiwi/node:22)"
touch -d '30 days ago' "$(record kiwi/node:22)"
gc() { # NAME [ASSIGNMENT...]
  local name=$1; shift
  mapfile -t set < <(settings)
  env "${set[@]}" "$@" "$WORKER" --gc >"$TMP/gc-$name.log" 2>&1 || fail "kiwi-worker --gc: $(tail -n 5 "$TMP/gc-$name.log")"
  log "gc $name: $(grep 'image clean-up: removed [0-9]' "$TMP/gc-$name.log" | tail -n 1)"
}
present() { "${DOCKER[@]}" image inspect "$1" >/dev/null 2>&1; }
stays() { # NAME REF...
  local name=$1; shift
  for ref in "$@"; do present "$ref" || fail "gc $name: $ref was removed"; done
}
gc age
if present "$INSIDE"; then fail "gc age: $INSIDE, unused for a month, is still there"; fi
[ ! -f "$(record "$INSIDE")" ] || fail "gc age: the record of $INSIDE is still there"
stays age "$USED" "$YOUNG" "$OPERATOR" "$ELSEWHERE" kiwi/node:22 kiwi/base:bookworm
passed=$((passed + 1))

touch -d '1 hour ago' "$(record "$YOUNG")"
gc watermark KIWI_GC_DISK_HIGH=1 KIWI_GC_DISK_LOW=0
if present "$YOUNG"; then fail "gc watermark: $YOUNG is still there above the watermark: $(grep image "$TMP/gc-watermark.log" | tail -n 3)"; fi
stays watermark "$USED" "$OPERATOR" "$ELSEWHERE" kiwi/node:22 kiwi/base:bookworm
[ -f "$(record "$USED")" ] || fail "gc watermark: the record of $USED, in use, was dropped"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
