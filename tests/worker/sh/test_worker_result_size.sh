#!/usr/bin/env bash
# test_worker_result_size.sh: a result too large for the results topic is
# still published, once, within the topic's limit, saying where the whole
# diff is, and the worker goes on to the next task. Real Kafka, Redis,
# Docker; the session is scripted (tests/fixtures/sessions/js-sum-big-diff:
# the fix plus a 100 KB generated file, so the diff is ~100 KB).
#
#   refused  the results topic is created with max.message.bytes=20000;
#            KIWI_RESULT_MAX_BYTES stays at its default (900000), so the
#            broker refuses the whole result: a minimal result (diff left
#            out, diff_truncated) goes at once instead of the same bytes
#            again every 60 s, and the next task's result follows.
#   cut      KIWI_RESULT_MAX_BYTES=16384: the worker cuts the diff to its
#            first whole lines that fit; the message on the topic is at most
#            16384 bytes and the whole diff is in Redis and on the worker.
#
# Every check reads the topic with the CLI and kcat, Redis with redis-cli,
# the worker's files from the host.
#
# Usage: test_worker_result_size.sh [refused] [cut]   (default: both)
. "$(dirname "$0")/lib.sh"
need_services

PARTS=${*:-refused cut}
BASE_RUN=$RUN_ID
: "${KIWI_REDIS_PORT:=6379}"
: "${KIWI_REDIS_HOST:=127.0.0.1}"
STATE="$TMP/state"
mkdir -p "$STATE"

git_serve js-sum js-pass
provider_serve

topic_config() { # topic_config TOPIC ConfigCommand-args...: alter a topic's config
  local t=$1; shift
  java -cp "${KIWI_STATE_DIR:-/var/lib/kiwi}/kafka/lib/*" kafka.admin.ConfigCommand \
    --bootstrap-server "$KIWI_KAFKA_BROKERS" --entity-type topics --entity-name "$t" --alter "$@" \
    >>"$TMP/topic-config.log" 2>&1 || fail "altering $t: $(tail -3 "$TMP/topic-config.log")"
}

# part NAME: this part's own topics and group (lib.sh names them after RUN_ID)
part() {
  RUN_ID="$BASE_RUN-$1"
  PART=$1
  log "==== part $1 (run $RUN_ID)"
  local t
  for t in "kiwi.itest.$RUN_ID.tasks" "kiwi.itest.$RUN_ID.results"; do
    for _ in $(seq 1 40); do
      kcat -b "$KIWI_KAFKA_BROKERS" -L -t "$t" 2>/dev/null | grep >/dev/null "topic \"$t\" with [1-9]" && break
      sleep 0.25
    done
  done
  curl -fsS -X POST "http://127.0.0.1:$PROVIDER_PORT/_control/reset?script=js-sum-big-diff" >/dev/null \
    || fail "cannot reset the scripted provider"
}

# wait_results DEADLINE_S ID...: until every id has a result on the topic
wait_results() {
  local deadline=$((SECONDS + $1)); shift
  while :; do
    kiwi_cli tail results >"$TMP/results-$PART.jsonl" 2>>"$TMP/cli.log" || : >"$TMP/results-$PART.jsonl"
    if python3 - "$TMP/results-$PART.jsonl" "$@" <<'PY'
import json, sys
got = {json.loads(l)["task_id"] for l in open(sys.argv[1]) if l.strip()}
sys.exit(0 if all(w in got for w in sys.argv[2:]) else 1)
PY
    then return 0; fi
    [ "$SECONDS" -lt "$deadline" ] || fail "no result for every one of $* within the time (see $TMP/results-$PART.jsonl)"
    sleep 1
  done
}

# check_result MODE ID NEXT_ID WORKER_LOG: one result each; the big one as MODE says
check_result() {
  local mode=$1 id=$2 next=$3 wlog=$4 sizes="$TMP/sizes-$PART.txt"
  # the message sizes as the broker holds them, with their keys
  kcat -b "$KIWI_KAFKA_BROKERS" -C -t "kiwi.itest.$RUN_ID.results" -o beginning -e -q -f '%k %S\n' >"$sizes" \
    2>>"$TMP/kcat.log" || fail "kcat could not read the results topic"
  # the shared Redis may be stopped by another suite's fault test: then the
  # worker keeps the whole diff on its disk only, and says so
  local redis_down=0
  redis-cli -h "$KIWI_REDIS_HOST" -p "$KIWI_REDIS_PORT" --raw GET "kiwi:diff:$id" >"$TMP/redis-diff-$PART.txt" \
    || { : >"$TMP/redis-diff-$PART.txt"; redis_down=1; }
  grep -qE "redis disconnected|redis [0-9.:]+: Connection refused" "$wlog" && redis_down=1
  python3 - "$mode" "$id" "$next" "$TMP/results-$PART.jsonl" "$sizes" "$TMP/redis-diff-$PART.txt" "$redis_down" <<'PY' || fail "part $PART: the results are wrong"
import collections, hashlib, json, os, socket, sys
mode, big, nxt, rpath, spath, redis_path, redis_down = sys.argv[1:8]
res = [json.loads(l) for l in open(rpath) if l.strip()]
by = collections.defaultdict(list)
for r in res:
    by[r["task_id"]].append(r)
assert len(by[big]) == 1, f"{big}: {len(by[big])} results"
assert len(by[nxt]) == 1, f"{nxt}: {len(by[nxt])} results"
assert set(by) == {big, nxt}, f"results for other tasks: {set(by) - {big, nxt}}"
r = by[big][0]
assert r["status"] == "fixed", r
assert r.get("diff_truncated") is True, r
loc = r["diff_location"].split(" ")
in_redis = f"redis:kiwi:diff:{big}" in loc
assert in_redis or redis_down == "1", loc
files = [l[len("file://"):] for l in loc if l.startswith("file://")]
assert len(files) == 1, loc
host, path = files[0].split("/", 1)
assert host == socket.gethostname(), (host, socket.gethostname())
whole_file = open("/" + path, "rb").read()
whole_redis = open(redis_path, "rb").read()[:-1]  # redis-cli --raw adds a newline
if in_redis and not (redis_down == "1" and not whole_redis):
    assert whole_redis == whole_file, "the diff in Redis and on the worker differ"
else:
    print("  (Redis was down meanwhile: the whole diff checked on the worker only)")
assert len(whole_file) == r["diff_bytes"] and r["diff_bytes"] > 100000, (len(whole_file), r["diff_bytes"])
assert hashlib.sha256(whole_file).hexdigest() == r["diff_sha256"]
assert b"+line 01699: a large generated file" in whole_file and b"+  return a + b;" in whole_file
sizes = {}
for l in open(spath):
    k, n = l.split()
    sizes.setdefault(k, []).append(int(n))
assert len(sizes[big]) == 1, sizes
if mode == "refused":
    assert r["diff"] == "", r["diff"][:200]
    assert r["reason"].startswith("result too large for the topic ("), r["reason"]
    assert "diff left out; whole diff at " + r["diff_location"] in r["reason"], r["reason"]
    assert sizes[big][0] < 20000, sizes
else:
    d = r["diff"].encode()
    assert 0 < len(d) < len(whole_file) and whole_file.startswith(d) and d.endswith(b"\n"), len(d)
    assert "diff cut to its first" in r["reason"] and "KIWI_RESULT_MAX_BYTES 16384" in r["reason"], r["reason"]
    assert sizes[big][0] <= 16384, sizes
assert by[nxt][0]["status"] == "not_fixed", by[nxt][0]
print(f"  {big}: {mode}, {sizes[big][0]} bytes on the topic, whole diff {len(whole_file)} bytes "
      f"(sha256 {r['diff_sha256'][:12]}...) at {r['diff_location']}; next task {nxt}: {by[nxt][0]['status']}")
PY
  # the oversized bytes were produced once, never again
  local again
  again=$(grep -c "task $id: result not delivered.*producing it again" "$wlog" || true)
  [ "$again" = 0 ] || fail "the worker retried $id's result $again time(s)"
}

passed=0
for p in $PARTS; do
  part "$p"
  results="kiwi.itest.$RUN_ID.results"
  topic_config "$results" --add-config max.message.bytes=20000
  extra=()
  [ "$p" = cut ] && extra=(KIWI_RESULT_MAX_BYTES=16384)
  worker_start "$p" KIWI_SLOTS=1 KIWI_EGRESS_STOP_WHEN_DEGRADED=false KIWI_STATE_DIR="$STATE" "${extra[@]}"
  big=$(submit_fix js-sum js-sum-big-diff --max-rounds 2)
  next=$(kiwi_cli submit --repo "$GIT_URL_BASE/js-pass.git" --ref main --test "echo $RUN_ID >/dev/null && npm test" \
    --goal "Make the tests pass." --provider anthropic --model claude-sonnet-4-5-20250929 \
    --base-url "http://127.0.0.1:9/" --max-rounds 1 2>>"$TMP/cli.log")
  log "big diff: $big, next task: $next"
  t0=$SECONDS
  wait_results 300 "$big" "$next"
  log "both results in $((SECONDS - t0)) s"
  # once both offsets are committed Kafka delivers neither again and the
  # worker is done with their results (acknowledged before the commit): a
  # late duplicate or a retry of the big one would be on the topic by then
  wait_committed 60 "$big" "$next"
  wait_results 10 "$big" "$next"
  check_result "$p" "$big" "$next" "$TMP/worker-$p.log"
  if [ "$p" = refused ]; then
    grep -q "task $big: result not delivered (Broker: Message size too large: [0-9]* bytes); publishing a minimal result" \
      "$TMP/worker-$p.log" || fail "the worker did not say it published a minimal result"
  else
    grep -q "task $big: result of [0-9]* bytes is over KIWI_RESULT_MAX_BYTES (16384)" "$TMP/worker-$p.log" \
      || fail "the worker did not say it cut the result"
  fi
  kill -0 "$(eval echo "\$WORKER_PID_$p")" 2>/dev/null || fail "the worker died"
  kill "$(eval echo "\$WORKER_PID_$p")"
  passed=$((passed + 1))
done
log "PASS: $passed part(s)"
