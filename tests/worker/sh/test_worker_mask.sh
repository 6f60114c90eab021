#!/usr/bin/env bash
# test_worker_mask.sh: no secret leaves the worker, wherever it is printed.
#
# The repository js-print-secret prints its test credential APP_TEST_TOKEN
# (raw, in base64, in hex in both cases and spaced out) and leak.txt, which this test fills with the worker's
# own secrets (a model key of each kind: OPENAI_API_KEY, the ANTHROPIC_API_KEY
# every test worker has, a key named by KIWI_MODEL_KEY_VARS; the git token
# KIWI_GIT_TOKEN), as a test dumping its environment or a config file would;
# a symlink whose target is the token makes the worker log it. The scripted
# model reads leak.txt and writes the token into the fix. Every value is a
# fresh random canary (but the fixed Anthropic test key).
#
# The task runs twice: with `kiwi-worker --once` and through the pool (a
# worker on this run's topics); an undecodable message carrying the worker's
# secrets goes to the dead-letter topic. Then, read from outside: the --once
# stdout, the progress, results and dead-letter topics (kcat), the model's
# request log, both worker logs and Redis (kiwi:verify:* and the tasks'
# kiwi:done:*) must not hold any canary, raw, in base64, in hex or spaced
# out, and must show
# `***` where the test printed one (also where the output tail of the
# step-0 event was cut inside the token).
. "$(dirname "$0")/lib.sh"
need_services

canary() { printf 'kiwi-canary-%s-%s' "$1" "$(head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
TOKEN=$(canary app-token)
OPENAI_KEY=$(canary openai-key)
EXTRA_KEY=$(canary extra-model-key)
GIT_TOKEN=$(canary git-token)
ANTHROPIC_KEY=kiwi-test-anthropic-key-7f3a9c # what worker_start gives every worker
REDIS=(redis-cli -h "${KIWI_REDIS_HOST:-127.0.0.1}" -p "${KIWI_REDIS_PORT:-16379}")
"${REDIS[@]}" PING >/dev/null 2>&1 || {
  [ "${KIWI_REQUIRE_SERVICES:-0}" = 1 ] && fail "redis is not answering"
  echo "SKIP: redis is not answering"; exit 77
}

# the repository, with the worker's secrets in leak.txt and a link whose
# target is the token, served on loopback
name=js-print-secret
work="$TMP/src-$name"
cp -a "$ROOT/tests/fixtures/examples/$name" "$work"
printf 'openai=%s\nanthropic=%s\nextra=%s\ngit=%s\n' "$OPENAI_KEY" "$ANTHROPIC_KEY" "$EXTRA_KEY" "$GIT_TOKEN" \
  >"$work/leak.txt"
ln -s "../$TOKEN" "$work/leak-link"
git -C "$work" init -q -b main
git -C "$work" -c user.email=kiwi@test -c user.name=kiwi add -A
git -C "$work" -c user.email=kiwi@test -c user.name=kiwi commit -q -m "$name: initial"
mkdir -p "$TMP/git"
git clone -q --bare "$work" "$TMP/git/$name.git"
gport=$(free_port)
git daemon --reuseaddr --base-path="$TMP/git" --export-all --listen=127.0.0.1 --port="$gport" "$TMP/git" \
  >"$TMP/git-daemon.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 50); do git ls-remote "git://127.0.0.1:$gport/$name.git" >/dev/null 2>&1 && break; sleep 0.1; done
GIT_URL="git://127.0.0.1:$gport/$name.git"

# the model (OpenAI wire format, the worker's OPENAI_API_KEY): the Architect
# answers; the Implementer reads leak.txt, then writes the token into
# fixed.txt and runs the tests (they pass: fixed)
mkdir -p "$TMP/scripts"
python3 - "$TMP/scripts" "$TOKEN" <<'PY'
import json, sys
out, token = sys.argv[1:3]
def turn(n, message, finish):
    return {"response": {
        "id": "chatcmpl-KiwiMask%04d" % n, "object": "chat.completion", "created": 1764451200,
        "model": "gpt-4.1-2025-04-14",
        "choices": [{"index": 0, "message": dict({"role": "assistant", "refusal": None, "annotations": []}, **message),
                     "logprobs": None, "finish_reason": finish}],
        "usage": {"prompt_tokens": 400, "completion_tokens": 40, "total_tokens": 440,
                  "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
        "service_tier": "default", "system_fingerprint": "fp_b3f1157249"}}
def call(i, name, args):
    return {"id": "call_KiwiMask%02d" % i, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}
turns = [
    turn(1, {"content": "Read leak.txt, then create fixed.txt."}, "stop"),
    turn(2, {"content": None, "tool_calls": [call(1, "read_file", {"path": "leak.txt"})]}, "tool_calls"),
    turn(3, {"content": None, "tool_calls": [call(2, "write_file", {"path": "fixed.txt", "content": "token=%s\n" % token}),
                                             call(3, "run_tests", {})]}, "tool_calls"),
]
for script in ("mask-once", "mask-pool"):
    json.dump({"provider": "openai", "turns": turns}, open("%s/%s.json" % (out, script), "w"), indent=1)
PY
pf="$TMP/provider.port"
python3 "$ROOT/tests/scripted_provider/server.py" --scripts "$TMP/scripts" --openai-key "$OPENAI_KEY" \
  --port-file "$pf" --log "$TMP/provider-requests.jsonl" --parent-pid $$ >"$TMP/provider.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.1; done
[ -s "$pf" ] || fail "the scripted provider did not start"
PROVIDER_PORT=$(cat "$pf")

secrets_env=(APP_TEST_TOKEN="$TOKEN" KIWI_TEST_CREDENTIALS=APP_TEST_TOKEN OPENAI_API_KEY="$OPENAI_KEY"
             KIWI_MODEL_KEY_VARS=APP_EXTRA_MODEL_KEY APP_EXTRA_MODEL_KEY="$EXTRA_KEY" KIWI_GIT_TOKEN="$GIT_TOKEN"
             KIWI_LOG_LEVEL=debug KIWI_EGRESS_STOP_WHEN_DEGRADED=false
             KIWI_MODEL_BASE_URLS="http://127.0.0.1:$PROVIDER_PORT/" KIWI_REPO_SCHEMES="https,ssh,git")

# 1. kiwi-worker --once
cat >"$TMP/task.json" <<EOF
{"id": "mask-once-$RUN_ID", "repo": {"url": "$GIT_URL", "ref": "main"}, "test_command": "npm test",
 "goal": "Make the tests pass.", "test_credentials": ["APP_TEST_TOKEN"], "limits": {"max_rounds": 1},
 "model": {"provider": "openai", "name": "gpt-4.1",
           "base_url": "http://127.0.0.1:$PROVIDER_PORT/script/mask-once/v1"}}
EOF
log "--once"
set +e
env KIWI_ONCE_EGRESS_UNCHECKED=true "${secrets_env[@]}" ANTHROPIC_API_KEY="$ANTHROPIC_KEY" KIWI_WORKER_ID="$RUN_ID-once" \
  KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" \
  timeout 600 "$WORKER" --once "$TMP/task.json" >"$TMP/once.out" 2>"$TMP/worker-once.log"
once_rc=$?
set -e
log "--once exited $once_rc"

# 2. the pool, and a dead letter carrying the worker's secrets
worker_start a "${secrets_env[@]}"
id=$(kiwi_cli submit --repo "$GIT_URL" --ref main --test "npm test" --goal "Make the tests pass." \
  --provider openai --model gpt-4.1 --base-url "http://127.0.0.1:$PROVIDER_PORT/script/mask-pool/v1" \
  --cred APP_TEST_TOKEN --max-rounds 1)
log "pool task $id"
printf 'not a task: %s %s' "$GIT_TOKEN" "$OPENAI_KEY" |
  kcat -P -b "$KIWI_KAFKA_BROKERS" -t "kiwi.itest.$RUN_ID.tasks" 2>>"$TMP/kcat.log" || fail "kcat: $(tail -3 "$TMP/kcat.log")"
set +e
kiwi_cli wait "$id" --timeout 300 >"$TMP/pool.result.json"
set -e
for t in progress results dlq; do
  for _ in $(seq 1 100); do
    kcat -C -b "$KIWI_KAFKA_BROKERS" -t "kiwi.itest.$RUN_ID.$t" -o beginning -e -q >"$TMP/topic-$t.bin" 2>/dev/null || true
    [ -s "$TMP/topic-$t.bin" ] && break
    sleep 0.2
  done
done

# Redis: every verify entry (any task's: one is served to all), and this
# run's results
: >"$TMP/redis.txt"
for k in $("${REDIS[@]}" --scan --pattern 'kiwi:verify:*') "kiwi:done:mask-once-$RUN_ID" "kiwi:done:$id"; do
  case $("${REDIS[@]}" TYPE "$k") in
    hash) { echo "== $k"; "${REDIS[@]}" HGETALL "$k"; } >>"$TMP/redis.txt" ;;
    string) { echo "== $k"; "${REDIS[@]}" GET "$k"; } >>"$TMP/redis.txt" ;;
  esac
done
"${REDIS[@]}" --scan --pattern 'kiwi:verify:*' >"$TMP/redis-verify-keys.txt"

python3 - "$TMP" "$once_rc" "$TOKEN" "$OPENAI_KEY" "$EXTRA_KEY" "$GIT_TOKEN" "$ANTHROPIC_KEY" <<'PY'
import base64, json, sys
tmp, once_rc = sys.argv[1], int(sys.argv[2])
token, openai, extra, git, anthropic = sys.argv[3:8]
def forms(v):
    b = v.encode()
    return [b, base64.b64encode(b), base64.b64encode(b + b"\n"), base64.b64encode(b"x-access-token:" + b),
            b.hex().encode(), b.hex().upper().encode(), b" ".join(b"%02X" % c for c in b), b" ".join(bytes([c]) for c in b)]
# the fixed Anthropic test key may sit in verify entries other runs left;
# it is looked for everywhere else
random_canaries = [token, openai, extra, git]
def read(name):
    return open("%s/%s" % (tmp, name), "rb").read()
failures = []
def clean(name, data, canaries):
    for c in canaries:
        for f in forms(c):
            if f in data:
                at = data.index(f)
                failures.append("%s holds %s (as %r): ...%r..." % (name, c, f[:24], data[max(0, at - 60):at + 40]))
def shows(name, data, what):
    if what.encode() not in data:
        failures.append("%s lacks %r" % (name, what))

everything = random_canaries + [anthropic]
once = read("once.out")
clean("--once stdout", once, everything)
lines = [json.loads(l) for l in once.splitlines() if l.strip()]
result = [l["result"] for l in lines if l["type"] == "result"]
step0 = [l["event"] for l in lines if l["type"] == "progress" and l["event"]["kind"] == "step0"]
if once_rc != 0:
    failures.append("--once exited %d, not 0 (fixed)" % once_rc)
if not result:
    failures.append("--once printed no result (exit %d)" % once_rc)
else:
    r = result[0]
    if r["status"] != "fixed":
        failures.append("--once: status %s: %s" % (r["status"], r.get("reason")))
    elif "+token=***" not in r.get("diff", ""):
        failures.append("--once: the diff does not show the masked token: %r" % r.get("diff"))
# the step-0 event's output tail is the last 2000 bytes: the test prints its
# token last, then 1987 dots and a newline, so the tail is cut inside the
# token; what is left of it must be masked too
tail = step0[0]["payload"].get("output_tail", "") if step0 else ""
if not tail.startswith("***" + "." * 1987 + "\n") or tail.startswith(token[-12:]):
    failures.append("--once: the step-0 output tail, cut inside the token, begins %r" % tail[:40])

for t in ("progress", "results", "dlq"):
    data = read("topic-%s.bin" % t)
    if not data:
        failures.append("topic %s is empty" % t)
    clean("topic " + t, data, everything)
shows("topic progress", read("topic-progress.bin"), "APP_TEST_TOKEN=***")
for printed in ("hex: ***", "HEX: *** ", "spaced: ***"):
    shows("topic progress", read("topic-progress.bin"), printed)
shows("topic results", read("topic-results.bin"), "+token=***")
shows("topic dlq", read("topic-dlq.bin"), "not a task: *** ***")
try:
    pool = json.load(open("%s/pool.result.json" % tmp))
    if pool.get("status") != "fixed":
        failures.append("pool: status %s: %s" % (pool.get("status"), pool.get("reason")))
except Exception as e:
    failures.append("pool: no result (%s)" % e)

requests = read("provider-requests.jsonl")
clean("the model's requests", requests, everything)
entries = [json.loads(l) for l in requests.splitlines() if l.strip()]
if len(entries) < 6:
    failures.append("the model got %d requests, not 6" % len(entries))
if any(e.get("violations") for e in entries):
    failures.append("the model saw violations: %r" % [e["violations"] for e in entries if e.get("violations")])
shows("the model's requests", requests, "APP_TEST_TOKEN=***")   # the Architect's prompt
for want in ("openai=***", "anthropic=***", "extra=***", "git=***"):  # read_file's result
    shows("the model's requests", requests, want)

for log in ("worker-once.log", "worker-a.log"):
    data = read(log)
    clean(log, data, everything)
    shows(log, data, "a symlink to ../***")

redis = read("redis.txt")
clean("redis", redis, random_canaries)
# a run that holds credentials is never kept in the verify cache (its output
# is that task's alone), so what Redis holds of these tasks is the pool
# task's finished record: its result, the diff masked
shows("redis", redis, "+token=***")
for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print("no canary in stdout, topics, model requests, logs or redis; *** where they were printed")
PY
echo "1 passed, 0 failed"
