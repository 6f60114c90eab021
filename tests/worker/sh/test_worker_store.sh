#!/usr/bin/env bash
# test_worker_store.sh: one install per fleet. Two hosts, each a kiwi-worker
# with its own state directory and its own dockerd (host B's is a second
# dockerd started here: its own data root, exec root, pidfile and socket, no
# bridge, no iptables of its own), sharing Redis and the snapshot store (an
# OCI registry, docker-registry, started here on loopback with its storage
# in the test's directory), under the runtime KIWI_SANDBOX_RUNTIME names
# (both dockerds register the stack's runsc). Host A installs a lockfile no earlier run has
# seen; host B then runs a task of the same repository and runs no Phase A:
# checked from outside by the sandbox containers each dockerd created
# (docker events, label org.kiwi.phase), by B's install event (cached and
# fetched from the store), by the Redis entry (a manifest digest, no path)
# and by B's snapshot being byte for byte A's. A store that refuses what it
# is sent is not this test's subject (tests/worker/task/test_store.c,
# test_store_registry).
set -euo pipefail
# shellcheck source=tests/worker/sh/lib.sh
. "$(dirname "$0")/lib.sh"
# --once runs: no broker; Redis and the shared dockerd are what it needs
if [ "$(redis-cli -h "${KIWI_REDIS_HOST:-127.0.0.1}" -p "${KIWI_REDIS_PORT:-16379}" ping 2>/dev/null)" != PONG ]; then
  [ "${KIWI_REQUIRE_SERVICES:-0}" = 1 ] && fail "redis is not answering"
  echo "SKIP: redis is not answering"; exit 77
fi
command -v docker-registry >/dev/null || { echo "SKIP: docker-registry is not installed (ops/setup.sh installs it)"; exit 77; }
command -v dockerd >/dev/null || { echo "SKIP: dockerd is not installed"; exit 77; }

CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt # the registries' proxy CA, for Phase A
RCLI=(redis-cli -h "${KIWI_REDIS_HOST:-127.0.0.1}" -p "${KIWI_REDIS_PORT:-16379}")

# ---- the store
STORE_PORT=$(free_port)
mkdir -p "$TMP/registry/data"
cat >"$TMP/registry/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $TMP/registry/data
http:
  addr: 127.0.0.1:$STORE_PORT
EOF
docker-registry serve "$TMP/registry/config.yml" >"$TMP/registry.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$STORE_PORT/v2/" 2>/dev/null && break; sleep 0.1; done
curl -fsS -o /dev/null "http://127.0.0.1:$STORE_PORT/v2/" || fail "docker-registry did not answer"
STORE_URL="http://127.0.0.1:$STORE_PORT/kiwi/snapshots"

# ---- host B's dockerd (the shared one stays untouched: no restart, its
# own sockets, data root and network namespace here)
DB="$TMP/dockerd-b"
mkdir -p "$DB/data" "$DB/exec"
# the runtimes of the stack's dockerd (runsc, runsc-net), so that host B
# runs its sandboxes under the same runtime as host A
python3 - "${KIWI_STATE_DIR:-/var/lib/kiwi}/run/daemon.json" "$DB/daemon.json" <<'PY'
import json, os, sys
src = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else {}
json.dump({"runtimes": src.get("runtimes", {})}, open(sys.argv[2], "w"))
PY
SOCK_B="$DB/docker.sock"
on_cleanup() {
  if [ -n "${DOCKERD_B:-}" ]; then
    # its sandboxes first (none should be left), then the daemon
    docker -H "unix://$SOCK_B" ps -aq 2>/dev/null | xargs -r docker -H "unix://$SOCK_B" rm -f >/dev/null 2>&1 || true
    kill "$DOCKERD_B" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$DOCKERD_B" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$DOCKERD_B" 2>/dev/null || true
    # what the daemon mounted under its own data root
    grep -o " ${DB}[^ ]*" /proc/self/mounts 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  fi
  [ -n "${NS_B:-}" ] && ip netns del "$NS_B" 2>/dev/null || true
  for s in "$TMP/state-a" "$TMP/state-b"; do
    grep -o " ${s}[^ ]*" /proc/self/mounts 2>/dev/null | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  done
  [ -n "${key:-}" ] && "${RCLI[@]}" del "kiwi:install:$key" >/dev/null 2>&1 || true
}
# in a network namespace of its own: the bridges it makes (the install
# network Kiwi's driver creates on every dockerd it opens) must not take the
# names and addresses of the shared dockerd's on this host
NS_B="kiwi-hostb-$$"
ip netns add "$NS_B" || fail "cannot create the network namespace $NS_B"
nsenter --net="/run/netns/$NS_B" dockerd --config-file "$DB/daemon.json" --data-root "$DB/data" \
  --exec-root "$DB/exec" --pidfile "$DB/dockerd.pid" --host "unix://$SOCK_B" --bridge=none --iptables=false \
  --ip6tables=false --ip-masq=false >"$TMP/dockerd-b.log" 2>&1 &
DOCKERD_B=$!
for _ in $(seq 1 150); do docker -H "unix://$SOCK_B" version >/dev/null 2>&1 && break; sleep 0.2; done
docker -H "unix://$SOCK_B" version >/dev/null 2>&1 || fail "the second dockerd did not answer"
DA=(docker -H "unix://${KIWI_DOCKER_SOCKET:-/var/run/docker.sock}")
DBK=(docker -H "unix://$SOCK_B")

# sandbox containers created on each dockerd, by phase, from outside
"${DA[@]}" events --filter type=container --filter event=create --filter "label=org.kiwi.worker=$RUN_ID-a" \
  --format '{{index .Actor.Attributes "org.kiwi.phase"}}' >"$TMP/events-a.txt" 2>/dev/null &
PIDS+=($!)
"${DBK[@]}" events --filter type=container --filter event=create --filter "label=org.kiwi.worker=$RUN_ID-b" \
  --format '{{index .Actor.Attributes "org.kiwi.phase"}}' >"$TMP/events-b.txt" 2>/dev/null &
PIDS+=($!)

# ---- a repository whose install input no earlier run has seen (its one
# dependency vendored as a tarball: the install needs no network)
src="$TMP/repo"
fresh_npm_repo js-local-dep "$src" "one install per fleet"
# host B's test command differs, so its verify is not the one host A cached
# (the verify cache is keyed by the command too) and runs on host B's
# dockerd; the install key, which the command is not part of, is the same
for h in a b; do
  cmd="npm test"
  [ "$h" = b ] && cmd="npm test --silent"
  cat >"$TMP/task-$h.json" <<EOF
{"id": "store-$RUN_ID-$h", "repo": {"url": "$src", "ref": "main"}, "test_command": "$cmd",
 "goal": "make the tests pass"}
EOF
done

# Host B's dockerd is in a network namespace of its own while its worker
# runs here, and that worker's Phase A proxy listens on its install
# bridge's gateway on this side: the shared dockerd's network of the same
# name gives it that address. A machine that ran the suite before has every
# such network; a fresh one has only those its workers made so far, and
# host B failed there when it leased a bridge not yet made. So host B is
# given a bridge: the highest free one now (workers lease the lowest; the
# lease is the worker's own flock, released here), made on the shared
# dockerd when missing, as the driver makes it.
BRIDGE_LOCKS=/run/kiwi/install-bridges
mkdir -p "$BRIDGE_LOCKS"
BRIDGE_B=
for n in $(seq 14 -1 1); do
  exec {lk}>>"$BRIDGE_LOCKS/kiwi-install$n.lock"
  if flock -n "$lk"; then BRIDGE_B=kiwi-install$n; fi
  exec {lk}>&-
  [ -n "$BRIDGE_B" ] && break
done
[ -n "$BRIDGE_B" ] || fail "no install bridge free for host B"
"${DA[@]}" network inspect "$BRIDGE_B" >/dev/null 2>&1 \
  || "${DA[@]}" network create --driver bridge -o com.docker.network.bridge.name="$BRIDGE_B" \
    -o com.docker.network.bridge.enable_icc=false -o com.docker.network.bridge.enable_ip_masquerade=true \
    --label org.kiwi.network=install "$BRIDGE_B" >/dev/null \
  || "${DA[@]}" network inspect "$BRIDGE_B" >/dev/null 2>&1 || fail "could not make the $BRIDGE_B network"

run_once() { # HOST SOCKET [VAR=VALUE...]
  mkdir -p "$TMP/state-$1"
  local h=$1 sock=$2
  shift 2
  env KIWI_ONCE_EGRESS_UNCHECKED=true KIWI_STATE_DIR="$TMP/state-$h" KIWI_WORKER_ID="$RUN_ID-$h" KIWI_ALLOW_LOCAL_REPOS=true "$@" \
    KIWI_DOCKER_SOCKET="$sock" KIWI_STORE_URL="$STORE_URL" \
    KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" KIWI_CA_BUNDLE="${KIWI_CA_BUNDLE:-$CA_BUNDLE}" \
    KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" \
    "$WORKER" --once "$TMP/task-$h.json" >"$TMP/once-$h.jsonl" 2>"$TMP/once-$h.log" || true
}

log "host A: installs and shares the snapshot"
run_once a "${KIWI_DOCKER_SOCKET:-/var/run/docker.sock}"
[ "$(once_payload "$TMP/once-a.jsonl" install status)" = ok ] || fail "host A's install: $(tail -n 5 "$TMP/once-a.log")"
[ "$(once_payload "$TMP/once-a.jsonl" install cached)" = false ] || fail "host A did not install (the key was seen before)"
[ "$(once_payload "$TMP/once-a.jsonl" result status)" = not_fixed ] || fail "host A's verdict: $(once_payload "$TMP/once-a.jsonl" result status)"
key=$(once_payload "$TMP/once-a.jsonl" install key)
image=$(once_payload "$TMP/once-a.jsonl" install image)
[ -n "$key" ] && [ -n "$image" ] || fail "host A's install event has no key or image"
digest=$("${RCLI[@]}" hget "kiwi:install:$key" digest)
case $digest in sha256:????????????????????????????????????????????????????????????????) ;;
  *) fail "the Redis entry holds '$digest', not a manifest digest: $(grep -i warning "$TMP/once-a.jsonl" | tail -n 2)" ;;
esac
"${RCLI[@]}" hget "kiwi:install:$key" snapshot | grep >/dev/null . && fail "the Redis entry still names a path on host A"
# the store has the manifest, tagged with the key, under that digest
got=$(curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
  "http://127.0.0.1:$STORE_PORT/v2/kiwi/snapshots/manifests/$key" | sha256sum | cut -c1-64)
[ "sha256:$got" = "$digest" ] || fail "the store's manifest for the key hashes to $got, Redis says $digest"

log "host B: a fresh host gets the image ($image) the way it would from a registry"
"${DA[@]}" save "$image" | "${DBK[@]}" load -q >/dev/null || fail "could not load $image into host B's dockerd"

log "host B: the same repository"
run_once b "$SOCK_B" KIWI_INSTALL_BRIDGE="$BRIDGE_B"
st=$(once_payload "$TMP/once-b.jsonl" result status)
[ "$st" = not_fixed ] || fail "host B's verdict '$st' ($(once_payload "$TMP/once-b.jsonl" result reason)): $(tail -n 5 "$TMP/once-b.log")"
[ "$(once_payload "$TMP/once-b.jsonl" install key)" = "$key" ] || fail "host B computed another key"
[ "$(once_payload "$TMP/once-b.jsonl" install cached)" = true ] || fail "host B installed again: $(grep '"install"' "$TMP/once-b.jsonl" | tail -n 1)"
[ "$(once_payload "$TMP/once-b.jsonl" install fetched)" = true ] || fail "host B's snapshot did not come from the store"
cmp -s "$TMP/state-a/snapshots/$key/src.tar" "$TMP/state-b/snapshots/$key/src.tar" || fail "host B's src.tar differs from host A's"
cmp -s "$TMP/state-a/snapshots/$key/home.tar" "$TMP/state-b/snapshots/$key/home.tar" || fail "host B's home.tar differs from host A's"

# the event streams catch up: host A's install and host B's verify are in
# them (a dockerd reports its containers' creation in order, so a Phase A
# container of host B's, created before its verify, would be there too);
# up to 15 s, then the checks below say what is missing
for _ in $(seq 1 60); do
  grep -qx install "$TMP/events-a.txt" && grep -qx verify "$TMP/events-b.txt" && break
  sleep 0.25
done
a_install=$(grep -cx install "$TMP/events-a.txt" || true)
b_install=$(grep -cx install "$TMP/events-b.txt" || true)
b_verify=$(grep -cx verify "$TMP/events-b.txt" || true)
log "sandboxes created: host A install=$a_install; host B install=$b_install verify=$b_verify"
[ "$a_install" -ge 1 ] || fail "host A's dockerd saw no Phase A container (the watch is blind?)"
[ "$b_install" = 0 ] || fail "host B ran Phase A $b_install time(s) for a key host A installed"
[ "$b_verify" -ge 1 ] || fail "host B's dockerd ran no verify: the task did not run there"
echo "1 passed, 0 failed"
