#!/usr/bin/env bash
# bench/bench_evalset.sh: the evaluation set (bench/evalset/) through
# `kiwi-worker --once`, the model being a person in the scripted provider's
# seat or a recorded list of their answers. For each bug it reports: the
# task's status, fixed (the bug's check passes on a fresh copy plus the
# result's diff), at the root cause (the hidden tests pass too and no
# protected file changed), rounds, model requests, bytes sent, tokens
# (estimated from the bytes: the seat reports none) and wall time.
# Asserts nothing.
#
# Usage: bench/bench_evalset.sh (--seat | --answers DIR) [--only ID,ID...]
#                               [--out DIR] [--worker PATH] [--rounds N]
#                               [--grade-runner docker|host] [--agents two|one]
#        bench/bench_evalset.sh --out DIR --report
#   --seat          a person answers: for each bug the requests appear in
#                   OUT/<id>/seat/NNNN-request.txt and wait for
#                   NNNN-answer.json there (tests/scripted_provider/README.md);
#                   answer each within 5 minutes (the model client's timeout)
#   --answers DIR   replays DIR/<id>.json (a JSON list of answers in the
#                   seat's format, as tests/scripted_provider/seat-answers.py
#                   plays them); bugs without one are left out
#   --only LIST     those bugs only (their folder names)
#   --out DIR       keeps each bug's run (task.json, once.jsonl, worker.log,
#                   seat/, result.diff, grade.json) and report.txt; a
#                   temporary folder otherwise
#   --worker PATH   the kiwi-worker binary (build/worker/kiwi-worker), e.g.
#                   an older commit's, to compare
#   --rounds N      the task's max_rounds (4)
#   --grade-runner  where the checks run: docker (the default: the result's
#                   diff is the model's and is run only in a sandbox image
#                   with no network) or host (for your own answers only)
#   --agents        the session's KIWI_SESSION_AGENTS: two (the default: an
#                   Architect plans, the Implementer acts) or one (the
#                   Implementer alone)
#   --report        runs nothing: the report of DIR's runs
#
# The repositories are served by git daemon on loopback (git://); the bugs
# have no dependencies, so Phase A is skipped, and the runs say
# KIWI_ONCE_EGRESS_UNCHECKED=true (no host rules are applied or changed).
# The cache is empty (Redis at a port nobody answers). Needs the stack's
# dockerd: set -a; . /var/lib/kiwi/stack.env; set +a.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tests/worker/sh/lib.sh"
SET="$HERE/evalset"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
MODE="" ANSWERS="" ONLY="" OUT="" ROUNDS=4 REPORT=0 RUNNER=docker AGENTS=two
while [ $# -gt 0 ]; do
  case "$1" in
    --seat) MODE=seat; shift ;;
    --answers) MODE=answers; ANSWERS=${2:?--answers needs a folder}; shift 2 ;;
    --only) ONLY=${2:?--only needs a list}; shift 2 ;;
    --out) OUT=${2:?--out needs a folder}; shift 2 ;;
    --worker) WORKER=${2:?--worker needs a path}; shift 2 ;;
    --rounds) ROUNDS=${2:?--rounds needs a number}; shift 2 ;;
    --grade-runner) RUNNER=${2:?--grade-runner needs docker or host}; shift 2 ;;
    --agents) AGENTS=${2:?--agents needs two or one}; shift 2 ;;
    --report) REPORT=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench_evalset: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$REPORT" = 1 ]; then
  [ -n "$OUT" ] && [ -d "$OUT" ] || { echo "bench_evalset: --report needs --out DIR of a run" >&2; exit 2; }
  python3 "$SET/evalset.py" report "$OUT"
  exit $?
fi
[ -n "$MODE" ] || { echo "bench_evalset: say who answers: --seat (you) or --answers DIR (see --help)" >&2; exit 2; }
[ "$MODE" != answers ] || [ -d "$ANSWERS" ] || { echo "bench_evalset: --answers $ANSWERS is not a folder" >&2; exit 2; }
[ -x "$WORKER" ] || { echo "bench_evalset: $WORKER is not built (cmake --build build --target kiwi-worker)" >&2; exit 2; }
case "$ROUNDS" in '' | *[!0-9]* | 0) echo "bench_evalset: --rounds must be a positive number" >&2; exit 2 ;; esac
case "$RUNNER" in docker | host) ;; *) echo "bench_evalset: --grade-runner is docker or host" >&2; exit 2 ;; esac
case "$AGENTS" in two | one) ;; *) echo "bench_evalset: --agents is two or one" >&2; exit 2 ;; esac

ids=()
for d in "$SET"/*/bug.json; do
  id=$(basename "$(dirname "$d")")
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$id,"* ]]; then continue; fi
  if [ "$MODE" = answers ] && [ ! -f "$ANSWERS/$id.json" ]; then continue; fi
  ids+=("$id")
done
if [ -n "$ONLY" ]; then
  for want in ${ONLY//,/ }; do
    [ -f "$SET/$want/bug.json" ] || { echo "bench_evalset: no bug $want in $SET" >&2; exit 2; }
  done
fi
[ "${#ids[@]}" -gt 0 ] || { echo "bench_evalset: no bug to run (--only, or no answers in $ANSWERS)" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d /tmp/kiwi-evalset-XXXXXX)}
mkdir -p "$OUT" "$TMP/git"
chmod 755 "$OUT"
for id in "${ids[@]}"; do
  work="$TMP/src-$id"
  cp -a "$SET/$id/repo" "$work"
  commit_dir "$work" "$id"
  git clone -q --bare "$work" "$TMP/git/$id.git"
done
gport=$(free_port)
git daemon --reuseaddr --base-path="$TMP/git" --export-all --listen=127.0.0.1 --port="$gport" "$TMP/git" \
  >"$TMP/git-daemon.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 50); do git ls-remote "git://127.0.0.1:$gport/${ids[0]}.git" >/dev/null 2>&1 && break; sleep 0.1; done
dead_port=$(free_port) # Redis nobody answers: an empty cache
log "worker: $WORKER; ${#ids[@]} bugs; agents: $AGENTS; answers: ${ANSWERS:-the seat (you)}"

for id in "${ids[@]}"; do
  run="$OUT/$id"
  rm -rf "$run"
  mkdir -p "$run/seat"
  pf="$TMP/provider-$id.port"
  python3 "$ROOT/tests/scripted_provider/server.py" --seat "$run/seat" --port-file "$pf" \
    --log "$run/provider.jsonl" --parent-pid $$ --max-seconds 86400 >"$TMP/provider-$id.log" 2>&1 &
  sp_pid=$!
  PIDS+=("$sp_pid")
  for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.1; done
  [ -s "$pf" ] || fail "the scripted provider did not start (see $TMP/provider-$id.log)"
  port=$(cat "$pf")
  helper=""
  if [ "$MODE" = answers ]; then
    python3 "$ROOT/tests/scripted_provider/seat-answers.py" "$run/seat" "$ANSWERS/$id.json" --max-seconds 900 \
      >"$run/seat-answers.log" 2>&1 &
    helper=$!
    PIDS+=("$helper")
  fi
  python3 - "$SET/$id/bug.json" "$run/task.json" "git://127.0.0.1:$gport/$id.git" "$ROUNDS" "$port" "$$" <<'PY'
import json, sys
bug, out, url, rounds, port, pid = sys.argv[1:7]
b = json.load(open(bug))
json.dump({"id": "evalset-%s-%s" % (b["id"], pid), "repo": {"url": url, "ref": "main"},
           "test_command": b["test_command"], "goal": b["goal"], "limits": {"max_rounds": int(rounds)},
           "model": {"provider": "anthropic", "name": "claude-sonnet-4-5",
                     "base_url": "http://127.0.0.1:%s/" % port}}, open(out, "w"), indent=1)
PY
  if [ "$MODE" = seat ]; then
    log "$id: answer the requests in $run/seat (NNNN-request.txt -> NNNN-answer.json)"
  else
    log "$id: replaying $ANSWERS/$id.json"
  fi
  start=$(date +%s%3N)
  set +e
  # only when asked: an older worker (--worker) refuses a variable it does not know
  agents_env=()
  [ "$AGENTS" = two ] || agents_env=(KIWI_SESSION_AGENTS="$AGENTS")
  env -u KIWI_STORE_URL KIWI_EGRESS_APPLY=false KIWI_ONCE_EGRESS_UNCHECKED=true "${agents_env[@]}" \
    KIWI_STATE_DIR="$run/state" KIWI_WORKER_ID="evalset-$$-$id" \
    KIWI_REDIS_HOST=127.0.0.1 KIWI_REDIS_PORT="$dead_port" KIWI_TASK_TIMEOUT=7200 \
    KIWI_REPO_SCHEMES=https,ssh,git KIWI_IMAGE_REGISTRIES=none KIWI_MODEL_BASE_URLS="http://127.0.0.1:$port/" \
    ANTHROPIC_API_KEY=kiwi-test-anthropic-key-7f3a9c \
    KIWI_IMAGE_CATALOG="${KIWI_IMAGE_CATALOG:-$ROOT/ops/images/catalog.local.tsv}" \
    timeout 7300 "$WORKER" --once "$run/task.json" >"$run/once.jsonl" 2>"$run/worker.log"
  rc=$?
  set -e
  printf '{"type":"bench","exit":%d,"wall_ms":%d}\n' "$rc" "$(($(date +%s%3N) - start))" >>"$run/once.jsonl"
  kill "$sp_pid" 2>/dev/null || true
  [ -z "$helper" ] || kill "$helper" 2>/dev/null || true
  rm -rf "$run/state"
  python3 - "$run/once.jsonl" "$run/result.diff" <<'PY'
import json, sys
diff = ""
for line in open(sys.argv[1], errors="replace"):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if j.get("type") == "result":
        diff = j["result"].get("diff") or ""
open(sys.argv[2], "w").write(diff)
PY
  python3 "$SET/evalset.py" grade "$id" "$run/result.diff" --runner "$RUNNER" --json "$run/grade.json" >/dev/null \
    || log "$id: grading failed (see above)"
  log "$id: $(python3 -c 'import json,sys; g=json.load(open(sys.argv[1])); print("fixed" if g["fixed"] else "not fixed", "/", "root cause" if g["root_cause"] else "not the root cause", g["note"])' "$run/grade.json" 2>/dev/null || echo "no grade")"
done

python3 "$SET/evalset.py" report "$OUT"
log "report: $OUT/report.txt"
