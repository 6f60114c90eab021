# shellcheck shell=bash
# tests/worker/sh/lib.sh: shared pieces of the shell integration tests
# that drive the real binaries (kiwi-worker, kiwi) against the real stack.
#
# Everything a test starts is recorded and stopped on exit, whatever the
# exit path. Topics, groups and state are unique per run, so tests never see
# each other's messages.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
BUILD=${KIWI_BUILD_DIR:-$ROOT/build}
KIWI="$BUILD/producer/kiwi"
WORKER="$BUILD/worker/kiwi-worker"
env_file="${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env"
# shellcheck source=/dev/null # written by ops/stack.sh when the stack is up
[ -f "$env_file" ] && { set -a; . "$env_file"; set +a; }
: "${KIWI_KAFKA_BROKERS:=127.0.0.1:19092}"
RUN_ID="t$$-$(date +%s)"
TMP=$(mktemp -d "/tmp/kiwi-itest-$RUN_ID-XXXX")
# A worker's egress proxy (KIWI_INSTALL_EGRESS=registries, the default)
# keeps its files under the state dir, which tests put in TMP, and Squid
# drops to the user proxy, which must reach them.
chmod 755 "$TMP"
# `kiwi-worker --once` refuses Phase A where the host's egress rules do not
# hold for its settings. The suites run side by side without them (only the
# exclusive tests apply them), so their --once runs say
# KIWI_ONCE_EGRESS_UNCHECKED=true; test_worker_own_faults_rules tests the
# refusal itself.
PIDS=()

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

cleanup() {
  local rc=$?
  # a test's own clean-up first (restoring host state it changed)
  if declare -F on_cleanup >/dev/null; then on_cleanup || true; fi
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  sleep 0.5
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  done
  # the worker id locks of this run's workers (ids are the run's own)
  rm -f /run/kiwi/workers/"$RUN_ID"-*.lock 2>/dev/null || true
  if [ "$rc" -ne 0 ] && [ -d "$TMP" ]; then
    for f in "$TMP"/*.log; do [ -f "$f" ] && { echo "---- $f (tail)"; tail -n 40 "$f"; }; done >&2
  fi
  [ -n "${KIWI_KEEP_TMP:-}" ] || rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
# SIGTERM (timeout(1) at the end of the test's budget, see
# tests/CMakeLists.txt) and SIGINT end the test through the
# EXIT trap with a failing status, so its clean-up runs.
trap 'log "FAIL: terminated by SIGTERM (over its time budget?)"; exit 143' TERM
trap 'exit 130' INT

need_services() {
  if ! kcat -b "$KIWI_KAFKA_BROKERS" -L -m 5 >/dev/null 2>&1; then
    if [ "${KIWI_REQUIRE_SERVICES:-0}" = 1 ]; then fail "kafka at $KIWI_KAFKA_BROKERS is not answering"; fi
    echo "SKIP: kafka at $KIWI_KAFKA_BROKERS is not answering"; exit 77
  fi
}

DOCKER=(docker -H "unix://${KIWI_DOCKER_SOCKET:-/var/run/docker.sock}")
# container_ids LABEL=VALUE...: sandbox containers with every label, running or not
container_ids() {
  local f=() l
  for l in "$@"; do f+=(--filter "label=$l"); done
  "${DOCKER[@]}" ps -aq "${f[@]}" 2>/dev/null || true
}

# free_port: an unused loopback port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# need_registry: what a test of image pulls needs besides the services:
# Debian's docker-registry and kiwi/base:bookworm (the images it pushes
# are made of it); a skip naming the missing one otherwise.
need_registry() {
  command -v docker-registry >/dev/null || { echo "SKIP: docker-registry is not installed (ops/setup.sh)"; exit 77; }
  "${DOCKER[@]}" image inspect kiwi/base:bookworm >/dev/null 2>&1 \
    || { echo "SKIP: kiwi/base:bookworm is not built (ops/images/build.sh)"; exit 77; }
}

# registry_serve NAME ADDR [HTPASSWD]: Debian's docker-registry on ADDR
# (a loopback address and port; dockerd treats 127.0.0.0/8 registries as
# insecure, so plain HTTP works), its config, storage and log
# ($TMP/NAME.log, every request at info level) in the test's directory;
# with HTPASSWD it wants those passwords. Waits until it answers.
registry_serve() {
  local name=$1 addr=$2 want=200
  mkdir -p "$TMP/$name"
  printf 'version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n' \
    "$TMP/$name" "$addr" >"$TMP/$name.yml"
  if [ -n "${3:-}" ]; then
    printf 'auth:\n  htpasswd:\n    realm: kiwi-test\n    path: %s\n' "$3" >>"$TMP/$name.yml"
    want=401
  fi
  docker-registry serve "$TMP/$name.yml" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/v2/")" = "$want" ] && return 0
    sleep 0.1
  done
  fail "docker-registry $name did not start on $addr"
}

# own_image REF: an image of this run's own, tagged REF: kiwi/base:bookworm
# and a file naming the run and REF (an Id of its own; pushed where the base
# already is, only that small layer travels).
own_image() {
  local d
  d=$(mktemp -d "$TMP/image.XXXXXX")
  printf '%s %s\n' "$RUN_ID" "$1" >"$d/stamp"
  printf 'FROM kiwi/base:bookworm\nCOPY stamp /kiwi-itest-stamp\n' >"$d/Dockerfile"
  "${DOCKER[@]}" build -q -t "$1" "$d" >"$d/build.log" 2>&1 || fail "docker build of $1: $(tail -n 3 "$d/build.log")"
}

# registry_images_remove ADDR...: removes every reference dockerd keeps of
# images from the test registries at ADDR (tags and the repo@digest
# references a pull leaves after its tag is gone), so no run leaves images
# named after its registry behind. The images themselves may be shared
# (kiwi/base:bookworm pushed and pulled back): only the references go.
registry_images_remove() {
  local addr ref
  for addr in "$@"; do
    while read -r ref; do
      "${DOCKER[@]}" rmi "$ref" >/dev/null 2>&1 || true
    done < <("${DOCKER[@]}" images --digests --format '{{.Repository}} {{.Tag}} {{.Digest}}' 2>/dev/null |
      awk -v a="$addr/" 'index($1, a) == 1 { if ($2 != "<none>") print $1 ":" $2; if ($3 != "<none>") print $1 "@" $3 }')
  done
}

# git_serve NAME...: each tests/fixtures/examples/NAME as a bare repository
# served by git daemon on loopback; sets GIT_URL_BASE.
git_serve() {
  local base="$TMP/git" port
  mkdir -p "$base"
  for name in "$@"; do
    local work="$TMP/src-$name"
    cp -a "$ROOT/tests/fixtures/examples/$name" "$work"
    # GIT_SERVE_LINK="NAME:LINK:TARGET" plants a symlink in that repository
    if [ -n "${GIT_SERVE_LINK:-}" ] && [ "${GIT_SERVE_LINK%%:*}" = "$name" ]; then
      local rest=${GIT_SERVE_LINK#*:}
      ln -s "${rest#*:}" "$work/${rest%%:*}"
    fi
    git -C "$work" init -q -b main
    git -C "$work" -c user.email=kiwi@test -c user.name=kiwi add -A
    git -C "$work" -c user.email=kiwi@test -c user.name=kiwi commit -q -m "$name: initial"
    git clone -q --bare "$work" "$base/$name.git"
  done
  port=$(free_port)
  git daemon --reuseaddr --base-path="$base" --export-all --listen=127.0.0.1 --port="$port" \
    "$base" >"$TMP/git-daemon.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 50); do
    git ls-remote "git://127.0.0.1:$port/$1.git" >/dev/null 2>&1 && break
    sleep 0.1
  done
  GIT_URL_BASE="git://127.0.0.1:$port"
}

# provider_serve: the scripted provider with the session fixtures; sets
# PROVIDER_PORT.
provider_serve() {
  local pf="$TMP/provider.port"
  python3 "$ROOT/tests/scripted_provider/server.py" --scripts "$ROOT/tests/fixtures/sessions" \
    --port-file "$pf" --log "$TMP/provider-requests.jsonl" --parent-pid $$ >"$TMP/provider.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.1; done
  [ -s "$pf" ] || fail "the scripted provider did not start"
  PROVIDER_PORT=$(cat "$pf")
}

# worker_start NAME [extra env assignments...]: a kiwi-worker on this run's
# topics; its pid in WORKER_PID_<NAME>. Its policy lets tasks use local and
# git:// repositories (git_serve) and the scripted provider (provider_serve,
# and the unreachable http://127.0.0.1:9/ of tasks that never reach the
# model) as their base URL; the extra assignments may override that.
worker_start() {
  local name=$1; shift
  # env's own options (-u NAME) lead, before any assignment
  local envopts=()
  while [ "${1:-}" = -u ]; do envopts+=("$1" "$2"); shift 2; done
  # KIWI_IMAGE_REGISTRIES=none: the local catalogue's images are never
  # pulled (kiwi/... would be docker.io's)
  env "${envopts[@]}" KIWI_ALLOW_LOCAL_REPOS=true KIWI_REPO_SCHEMES=https,ssh,git KIWI_IMAGE_REGISTRIES=none \
    KIWI_MODEL_BASE_URLS="http://127.0.0.1:9/${PROVIDER_PORT:+,http://127.0.0.1:$PROVIDER_PORT/}" \
    "$@" \
    KIWI_WORKER_ID="$RUN_ID-$name" KIWI_GROUP="kiwi-itest-$RUN_ID" \
    KIWI_TOPIC_TASKS="kiwi.itest.$RUN_ID.tasks" KIWI_TOPIC_PROGRESS="kiwi.itest.$RUN_ID.progress" \
    KIWI_TOPIC_RESULTS="kiwi.itest.$RUN_ID.results" KIWI_TOPIC_HEARTBEATS="kiwi.itest.$RUN_ID.heartbeats" \
    KIWI_TOPIC_DLQ="kiwi.itest.$RUN_ID.dlq" KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" \
    KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" \
    ANTHROPIC_API_KEY="kiwi-test-anthropic-key-7f3a9c" KIWI_HEARTBEAT_INTERVAL="${HB:-2}" \
    "$WORKER" >"$TMP/worker-$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  eval "WORKER_PID_$name=$pid"
}

# hb_of WORKER PYEXPR: PYEXPR evaluated on the newest heartbeat of worker
# NAME (worker_start's name), with h the heartbeat and checks its egress
# checks by name; exit 1 when that worker sent none yet.
hb_of() {
  kiwi_cli tail heartbeats >"$TMP/hb.jsonl" 2>/dev/null || true
  python3 - "$TMP/hb.jsonl" "$RUN_ID-$1" "$2" <<'PY'
import json, sys
hbs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
hbs = [h for h in hbs if h.get("worker_id") == sys.argv[2]]
if not hbs:
    sys.exit(1)
h = hbs[-1]
checks = {c["name"]: c for c in h.get("egress", [])}
print(eval(sys.argv[3]))
PY
}
# wait_hb WORKER PYEXPR SECONDS: until PYEXPR is True on its newest heartbeat
wait_hb() {
  for _ in $(seq 1 "$3"); do [ "$(hb_of "$1" "$2" 2>/dev/null)" = True ] && return 0; sleep 1; done
  return 1
}

# kcat_raw KIND FILE: every message of this run's KIND topic read with kcat
# into FILE, framed for kcat_frames.py (KIWI_SH_LIB on a heredoc's
# sys.path: `from kcat_frames import frames`).
export KIWI_SH_LIB="$ROOT/tests/worker/sh"
kcat_raw() {
  kcat -C -b "$KIWI_KAFKA_BROKERS" -t "kiwi.itest.$RUN_ID.$1" -e -q -f '%k\t%S\t%s' >"$2" 2>>"$TMP/kcat.log" || true
}

# commits_missing ID...: of the ids, those whose offset no worker has
# committed yet, a line each with why. A task's place is its `task ID:
# received from TOPIC[P]@O` line in a worker's log; it is committed once a
# worker's log says `offset committed (TOPIC[P]@C)` with C > O (C is the
# next offset to read, so the commit covers O whichever task it names).
# Every $TMP/worker-*.log is read: topics are unique per run.
commits_missing() {
  python3 - "$TMP" "$@" <<'PY'
import glob, re, sys
recv, committed = {}, {}
rx_recv = re.compile(r"task (\S+): received from ([^\s\[]+)\[(\d+)\]@(\d+)")
rx_commit = re.compile(r"offset committed \(([^\s\[]+)\[(\d+)\]@(\d+)\)")
for f in glob.glob(sys.argv[1] + "/worker-*.log"):
    for line in open(f, errors="replace"):
        m = rx_recv.search(line)
        if m:
            recv[m[1]] = (m[2], int(m[3]), int(m[4]))
        m = rx_commit.search(line)
        if m:
            k = (m[1], int(m[2]))
            committed[k] = max(committed.get(k, -1), int(m[3]))
for i in sys.argv[2:]:
    if i not in recv:
        print(f"{i} (no worker log says it was received)")
        continue
    t, p, o = recv[i]
    c = committed.get((t, p))
    if c is None or c <= o:
        print(f"{i} (at {t}[{p}]@{o}; committed: {'none' if c is None else '@' + str(c)})")
PY
}

# wait_committed SECONDS ID...: until a worker has committed each task's
# offset (commits_missing): after that Kafka delivers none of them again,
# so no late result of theirs can come. Fails after SECONDS.
wait_committed() {
  local deadline=$((SECONDS + $1)) secs=$1 left; shift
  while :; do
    left=$(commits_missing "$@")
    [ -z "$left" ] && { log "offsets committed: $*"; return 0; }
    [ "$SECONDS" -lt "$deadline" ] || fail "no worker committed the offset of $(echo "$left" | tr '\n' ' ')within $secs s"
    sleep 0.5
  done
}

# wait_topic_committed SECONDS: until the workers have committed every
# partition of this run's tasks topic to its end as it is now (read with
# kcat): every message on it, task or not, is done with and none is
# delivered again. Fails after SECONDS.
wait_topic_committed() {
  local topic="kiwi.itest.$RUN_ID.tasks" deadline=$((SECONDS + $1)) secs=$1 left
  kcat -C -b "$KIWI_KAFKA_BROKERS" -t "$topic" -e -q -f '%p %o\n' >"$TMP/task-offsets.txt" 2>>"$TMP/kcat.log" \
    || fail "kcat could not read $topic"
  while :; do
    left=$(python3 - "$TMP" "$topic" "$TMP/task-offsets.txt" <<'PY'
import glob, re, sys
tmp, topic, offsets = sys.argv[1:4]
end = {}
for l in open(offsets):
    if l.strip():
        p, o = map(int, l.split())
        end[p] = max(end.get(p, 0), o + 1)
committed = {}
rx = re.compile(r"offset committed \(" + re.escape(topic) + r"\[(\d+)\]@(\d+)\)")
for f in glob.glob(tmp + "/worker-*.log"):
    for line in open(f, errors="replace"):
        m = rx.search(line)
        if m:
            committed[int(m[1])] = max(committed.get(int(m[1]), -1), int(m[2]))
for p in sorted(end):
    c = committed.get(p)
    if c is None or c < end[p]:
        print(f"[{p}] committed {'nothing' if c is None else '@' + str(c)} of @{end[p]}")
PY
)
    [ -z "$left" ] && { log "every partition of $topic committed to its end"; return 0; }
    [ "$SECONDS" -lt "$deadline" ] || fail "$topic is not committed to its end within $secs s: $(echo "$left" | tr '\n' ' ')"
    sleep 0.5
  done
}

kiwi_cli() {
  local cmd=$1; shift
  "$KIWI" "$cmd" --brokers "$KIWI_KAFKA_BROKERS" \
    --tasks-topic "kiwi.itest.$RUN_ID.tasks" --progress-topic "kiwi.itest.$RUN_ID.progress" \
    --results-topic "kiwi.itest.$RUN_ID.results" --heartbeats-topic "kiwi.itest.$RUN_ID.heartbeats" \
    --dlq-topic "kiwi.itest.$RUN_ID.dlq" "$@"
}

# submit_fix REPO SCRIPT [extra kiwi submit flags]: prints the task id.
submit_fix() {
  local repo=$1 script=$2; shift 2
  kiwi_cli submit --repo "$GIT_URL_BASE/$repo.git" --ref main --test "npm test" \
    --goal "Make the tests pass." --provider anthropic --model claude-sonnet-4-5-20250929 \
    --base-url "http://127.0.0.1:$PROVIDER_PORT/script/$script" "$@"
}

# once_payload FILE KIND KEY: from a `kiwi-worker --once` output, the last
# KIND progress event's payload KEY (booleans as true/false, maps and lists
# as JSON with sorted keys), or with KIND
# "result" the result's KEY; "" when absent.
once_payload() {
  python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
val = ""
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if sys.argv[2] == "result" and j.get("type") == "result":
        val = j["result"].get(sys.argv[3], "")
    elif j.get("type") == "progress" and j["event"].get("kind") == sys.argv[2]:
        val = (j["event"].get("payload") or {}).get(sys.argv[3], "")
    else:
        continue
    val = str(val).lower() if isinstance(val, bool) else json.dumps(val, sort_keys=True) if isinstance(val, (dict, list)) else val
print(val)
EOF
}

# devcontainer_task NAME IMAGE: $TMP/task-NAME.json, a task on a repository
# whose .devcontainer/devcontainer.json (JSON with a comment and a trailing
# comma) names IMAGE and whose package.json (a marker: Node.js) is new to
# this run; its test command passes in any Debian image.
devcontainer_task() {
  local src="$TMP/repo-$1" prefix
  prefix=$(basename "$0" .sh)
  mkdir -p "$src/.devcontainer"
  printf '{\n  // the image\n  "image": "%s",\n}\n' "$2" >"$src/.devcontainer/devcontainer.json"
  printf '{"name": "%s-%s", "version": "1.0.0", "private": true, "description": "run %s"}\n' "${prefix#test_}" "$1" \
    "$RUN_ID" >"$src/package.json"
  commit_dir "$src" "$prefix $1"
  cat >"$TMP/task-$1.json" <<EOF
{"id": "$prefix-$RUN_ID-$1", "repo": {"url": "$src", "ref": "main"}, "test_command": "test -f /etc/debian_version",
 "goal": "make the tests pass"}
EOF
}

# image_refused NAME IMAGE WHY: the `kiwi-worker --once` run NAME
# ($TMP/once-NAME.jsonl) of a devcontainer_task could not have IMAGE, for
# WHY: its step-0 event's image_note and its result's reason say so, and
# the marker's image (kiwi/node:22) ran instead.
image_refused() {
  local out="$TMP/once-$1.jsonl" note reason
  note=$(once_payload "$out" step0 image_note)
  log "$1: step 0 $(once_payload "$out" step0 status) in $(once_payload "$out" step0 image); note: $note"
  case "$note" in
    *"devcontainer image $2 could not be pulled: "*"$3"*"; using kiwi/node:22 from marker package.json (node)"*) ;;
    *) fail "$1: the step-0 event's image_note is '$note'" ;;
  esac
  [ "$(once_payload "$out" step0 image)" = kiwi/node:22 ] || fail "$1: step 0 ran in '$(once_payload "$out" step0 image)'"
  reason=$(once_payload "$out" result reason)
  case "$reason" in
    *"could not be pulled"*) ;;
    *) fail "$1: the result's reason does not say the image could not be had: $reason" ;;
  esac
}

# commit_dir DIR MESSAGE: DIR as a git repository with one commit on main.
commit_dir() {
  git -C "$1" init -q -b main
  git -C "$1" -c user.email=kiwi@test -c user.name=kiwi add -A
  git -C "$1" -c user.email=kiwi@test -c user.name=kiwi commit -q -m "$2"
}

# fresh_npm_repo FIXTURE DIR WHAT: tests/fixtures/examples/FIXTURE copied to
# DIR as a repository whose install input no earlier run has seen: its
# package.json's description is "WHAT $RUN_ID"; committed on main as WHAT.
fresh_npm_repo() {
  cp -a "$ROOT/tests/fixtures/examples/$1" "$2"
  python3 - "$2/package.json" "$3 $RUN_ID" <<'EOF'
import json, sys
p, description = sys.argv[1], sys.argv[2]
d = json.load(open(p))
d["description"] = description
json.dump(d, open(p, "w"), indent=2)
EOF
  commit_dir "$2" "$3"
}
