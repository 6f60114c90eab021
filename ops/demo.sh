#!/usr/bin/env bash
# ops/demo.sh: Kiwi's main job, end to end, on this machine.
#
#   1. set-up (packages, Kafka jars, the two sandbox images the demo needs:
#      kiwi/base and kiwi/node:22)                      ops/setup.sh --images
#      (the other images are built after the result, unless --no-rest)
#   2. the stack (Kafka, Redis, dockerd + runsc)          ops/stack.sh up
#   3. the build                                          build/
#   4. a worker, a task for an example repository with a really failing
#      test, its progress streamed, its result and diff printed
#
# Options: --no-rest (do not build the other sandbox images afterwards),
#          --help.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rest=1
case "${1:-}" in
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --no-rest) rest=0 ;;
  "") ;;
  *) echo "ops/demo.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac

say() { printf '\n== %s\n' "$*"; }

t_start=$SECONDS
say "set-up (the images this demo needs first: kiwi/base, kiwi/node:22)"
bash ops/setup.sh --images base,node22
say "stack"
bash ops/stack.sh up
set -a; . "${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env"; set +a
say "build"
cmake -S "$root" -B "$root/build" -G Ninja >/dev/null
ninja -C "$root/build" >/dev/null
echo "built: $root/build"

KIWI="$root/build/producer/kiwi"
WORKER="$root/build/worker/kiwi-worker"
run="$(mktemp -d /tmp/kiwi-demo-XXXXXX)"
pids=()
finish() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  sleep 0.5
  rm -rf "$run"
}
trap finish EXIT

# Topics of this demo run, so it never mixes with other traffic.
demo="demo-$(date +%s)"
topics=(--tasks-topic "kiwi.$demo.tasks" --progress-topic "kiwi.$demo.progress"
        --results-topic "kiwi.$demo.results" --heartbeats-topic "kiwi.$demo.heartbeats"
        --dlq-topic "kiwi.$demo.dlq")

say "example repository"
repo="$run/js-sum"
cp -a "$root/tests/fixtures/examples/js-sum" "$repo"
git -C "$repo" init -q -b main
git -C "$repo" -c user.email=demo@kiwi -c user.name=kiwi add -A
git -C "$repo" -c user.email=demo@kiwi -c user.name=kiwi commit -q -m "js-sum: sum() subtracts"
echo "$repo: npm test fails (sum(1, 2) should be 3)"

say "model provider"
provider_flags=()
worker_env=()
if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  provider_flags=(--provider anthropic --model "${KIWI_DEMO_MODEL:-claude-sonnet-4-5}")
  echo "using Anthropic (ANTHROPIC_API_KEY is set)"
elif [ -n "${OPENAI_API_KEY:-}" ]; then
  provider_flags=(--provider openai --model "${KIWI_DEMO_MODEL:-gpt-4.1}")
  echo "using OpenAI (OPENAI_API_KEY is set)"
elif [ -n "${GEMINI_API_KEY:-}" ]; then
  provider_flags=(--provider gemini --model "${KIWI_DEMO_MODEL:-gemini-2.5-pro}")
  echo "using Gemini (GEMINI_API_KEY is set)"
else
  python3 "$root/tests/scripted_provider/server.py" --scripts "$root/tests/fixtures/sessions" \
    --port-file "$run/provider.port" --parent-pid $$ >"$run/provider.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do [ -s "$run/provider.port" ] && break; sleep 0.1; done
  port=$(cat "$run/provider.port")
  provider_flags=(--provider anthropic --model claude-sonnet-4-5-20250929
                  --base-url "http://127.0.0.1:$port/script/js-sum-two-rounds")
  worker_env=(ANTHROPIC_API_KEY=kiwi-test-anthropic-key-7f3a9c KIWI_MODEL_BASE_URLS="http://127.0.0.1:$port/")
  echo "no provider key in the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY):"
  echo "using Kiwi's scripted provider on 127.0.0.1:$port, which replays a recorded two-round session"
fi

say "worker"
# the demo's repository is a local path: the worker's policy must allow it
env "${worker_env[@]}" KIWI_ALLOW_LOCAL_REPOS=true KIWI_WORKER_ID="$demo" KIWI_GROUP="kiwi-$demo" \
  KIWI_TOPIC_TASKS="kiwi.$demo.tasks" KIWI_TOPIC_PROGRESS="kiwi.$demo.progress" \
  KIWI_TOPIC_RESULTS="kiwi.$demo.results" KIWI_TOPIC_HEARTBEATS="kiwi.$demo.heartbeats" \
  KIWI_TOPIC_DLQ="kiwi.$demo.dlq" KIWI_IMAGE_CATALOG="$root/ops/images/catalog.local.tsv" \
  KIWI_CA_BUNDLE="${KIWI_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}" \
  KIWI_EGRESS_STOP_WHEN_DEGRADED="${KIWI_EGRESS_STOP_WHEN_DEGRADED:-false}" \
  "$WORKER" >"$run/worker.log" 2>&1 &
pids+=($!)
echo "kiwi-worker $demo started (log: $run/worker.log)"

say "task"
id=$("$KIWI" submit "${topics[@]}" --repo "$repo" --ref main --test "npm test" \
     --goal "Make the tests pass: sum() should add its arguments." --max-rounds 4 "${provider_flags[@]}")
echo "submitted $id"

say "progress (kiwi tail progress --follow)"
"$KIWI" tail "${topics[@]}" progress --follow --from-beginning --task "$id" >"$run/progress.jsonl" &
pids+=($!)
cat >"$run/render.py" <<'PY'
import json, sys, time
# follows the progress lines as kiwi tail writes them, until the task finishes
path, deadline = sys.argv[1], time.time() + float(sys.argv[2])
def what(e):
    p = e.get("payload") or {}
    ph = e["phase"]
    if ph == "accepted":
        return p.get("status") or "worker " + str(p.get("worker", ""))
    if ph == "install":
        return p.get("status", "") + (" (cached)" if p.get("cached") else "") + \
            (f": {p.get('command')}" if p.get("command") else f": {p.get('reason', '')}")
    if ph == "step0":
        c = p.get("classification") or {}
        cls = c.get("class", "") if isinstance(c, dict) else str(c)
        return (f"{p.get('status')}: exit {p.get('exit_code')} in {p.get('image')}"
                + (f", classified {cls}" if cls and cls != "none" else ", an honest test failure")
                + (" (image swapped)" if p.get("swapped") else ""))
    if ph == "round":
        v = "passed" if (p.get("verify") or {}).get("passed") else "failed"
        return (f"round {p.get('round')}: {', '.join(p.get('actions', []))} -> verify {v}; "
                f"tokens {p.get('tokens_in', 0)}+{p.get('tokens_out', 0)}")
    if ph == "finished":
        return f"{p.get('status')}: {p.get('reason')}"
    return ""
with open(path) as f:
    while time.time() < deadline:
        line = f.readline()
        if not line:
            time.sleep(0.1)
            continue
        e = json.loads(line)
        print(f"  #{e['seq']:<3} {e['phase']:<9} {e['kind']:<9} {what(e)}", flush=True)
        if e["phase"] == "finished":
            break
PY
python3 -u "$run/render.py" "$run/progress.jsonl" 900 &
renderer=$!

set +e
"$KIWI" wait "${topics[@]}" "$id" --timeout 900 >"$run/result.json"
status=$?
set -e
wait "$renderer" 2>/dev/null || true

say "result"
python3 - "$run/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"status: {r['status']}  rounds: {r['rounds']}  tokens: {r['tokens_in']}+{r['tokens_out']}  "
      f"duration: {r['duration_ms']} ms")
if r.get("reason"):
    print(f"reason: {r['reason']}")
if r.get("diff"):
    print("\ndiff:\n" + r["diff"])
PY
echo
echo "demo: $((SECONDS - t_start)) s from the start to the result"
if [ "$rest" = 1 ]; then
  say "the other sandbox images (for Python, Go, Rust, Ruby, PHP, Java and other Node versions)"
  echo "the demo is done; building the rest now (ops/images/build.sh; an interrupted build is finished by ops/setup.sh)"
  set -a; . "${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env"; set +a
  bash ops/images/build.sh || echo "ops/demo.sh: some images did not build; ops/setup.sh builds them" >&2
fi
exit "$status"
