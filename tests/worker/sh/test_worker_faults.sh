#!/usr/bin/env bash
# test_worker_faults.sh: kiwi-worker against faults of the real stack. Each
# part counts the results per task id exactly and fails when one is missing
# or doubled:
#
#   kill    kill -9 of a worker mid-task with a second worker in the group:
#           the task process dies with it, its sandbox is removed (or reaped
#           by a worker restarted under the same id), the lease expires, the
#           partition moves on the rebalance and the other worker finishes
#           the task: exactly one result per task. The progress topic tells
#           the two runs apart (attempt), each with seq from 1.
#   kafka   the broker stopped and started again (ops/stack.sh down/up kafka)
#           while tasks run (checked from outside just before: a task's
#           accepted event on the progress topic and no result yet, both
#           read with kcat): the workers reconnect; every task, including
#           those submitted after the restart, gets exactly one result.
#   round   kill -9 of the worker whose task waits on a slow model round
#           (the scripted provider answers 15 s late): the other worker runs
#           the task again from the start; exactly one result, fixed, with a
#           diff equal to the clean run's (one worker, no fault).
#   revoke  a second worker joins the group while the only worker's task
#           waits on a slow model round: the partitions are revoked mid-task
#           and the task's partition moves to the newcomer; exactly one
#           result (the results topic counted again after the join), fixed,
#           with the clean run's diff.
#   redis   Redis stopped (ops/stack.sh down redis) while a leased task runs
#           and for longer than the lease: tasks still complete, uncached and
#           unleased, with a warning in their events and redis_ok false in
#           the heartbeat; the leased task is not stopped when Redis comes
#           back; tasks after it are leased again. Redis is restored on exit
#           whatever happens (so is Kafka).
#   dlq     1,000 malformed messages (random bytes, truncated msgpack,
#           trailing bytes, wrong types, JSON instead of msgpack, oversized
#           fields, empty and NULL values) mixed with valid tasks: every
#           valid task done, exactly 1,000 dead letters, each with a reason,
#           its source and its original bytes and key (all compared).
#   drain   SIGTERM while a task's Redis look-up is unanswered (Redis paused
#           with CLIENT PAUSE) and another task runs: the running one ends,
#           the looked-up one is not started by the draining worker, and the
#           next worker does it: exactly one result each.
#   noredis a worker whose Redis is not there at all (a closed port, the
#           shared Redis untouched): its task runs unleased and every event
#           says attempt 0 (unknown), seq from 1.
#   undelivered  the results topic refuses a result (max.message.bytes
#           lowered), one worker, no rebalance: the result is produced again
#           until the topic takes it, exactly once, and the offset is
#           committed (a worker joining afterwards does not run the task).
#
# Every result count is made twice: through `kiwi tail` and with kcat (the
# messages keyed by each task id on the results topic). A count waits first
# for the tasks' offsets to be committed (the workers' `offset committed`
# log lines, lib.sh wait_committed): a result is acknowledged before its
# offset is committed and Kafka delivers a committed task no more, so a late
# duplicate would be on the topic by then.
#
# Usage: test_worker_faults.sh [kill] [kafka] [round] [revoke] [redis] [noredis] [dlq] [drain] [undelivered]
# (default: all)
# Tasks run on tests/fixtures/examples/js-pass, whose tests already pass, so
# each task ends at step 0 (not_fixed, no model call); a `sleep N` before
# `npm test` makes one last long enough to be hit by the fault. The test
# commands carry the run id, so no verify result cached by an earlier run is
# reused.
. "$(dirname "$0")/lib.sh"
# A run killed before its clean-up could run (SIGKILL) may have left Kafka
# or Redis stopped: with the stack set up, start what is down first
# (ops/stack.sh up is idempotent).
if [ -f "$env_file" ]; then
  for s in kafka redis; do
    case $s in
      kafka) kcat -b "$KIWI_KAFKA_BROKERS" -L -m 5 >/dev/null 2>&1 && continue ;;
      redis) redis-cli -h "${KIWI_REDIS_HOST:-127.0.0.1}" -p "${KIWI_REDIS_PORT:-6379}" ping 2>/dev/null | grep >/dev/null PONG && continue ;;
    esac
    log "$s is down at the start (an earlier run killed mid-part?): ops/stack.sh up $s"
    bash "$ROOT/ops/stack.sh" up "$s" >&2 || log "WARNING: ops/stack.sh up $s failed"
  done
fi
need_services

PARTS=${*:-kill kafka round revoke redis noredis dlq drain undelivered}
BASE_RUN=$RUN_ID
STACK="$ROOT/ops/stack.sh"
STOPPED=" "   # services this test stopped; started again on exit

restore_services() {
  local s
  for s in $STOPPED; do
    log "restoring $s"
    bash "$STACK" up "$s" >>"$TMP/stack.log" 2>&1 || log "WARNING: ops/stack.sh up $s failed (see $TMP/stack.log)"
  done
  STOPPED=" "
}
on_exit() {
  local rc=$?
  set +e
  restore_services
  # KIWI_KEEP_LOGS=DIR: the run's logs and topic dumps are kept there
  if [ -n "${KIWI_KEEP_LOGS:-}" ]; then
    mkdir -p "$KIWI_KEEP_LOGS" && cp "$TMP"/*.log "$TMP"/*.jsonl "$KIWI_KEEP_LOGS/" 2>/dev/null
  fi
  (exit "$rc")
  cleanup
}
trap on_exit EXIT

stack() { # stack down|up SERVICE
  local t0=$SECONDS
  [ "$1" = down ] && STOPPED="$STOPPED$2 "
  bash "$STACK" "$1" "$2" >>"$TMP/stack.log" 2>&1 || fail "ops/stack.sh $1 $2 failed: $(tail -5 "$TMP/stack.log")"
  [ "$1" = up ] && STOPPED=${STOPPED// $2 / }
  log "ops/stack.sh $1 $2: $((SECONDS - t0)) s"
}

# part NAME: its own topics, group and worker ids (lib.sh names them after
# RUN_ID).
part() {
  RUN_ID="$BASE_RUN-$1"
  PART=$1
  log "==== part $1 (run $RUN_ID)"
  # the tasks topic exists before the workers subscribe (a metadata request
  # creates it), so the group settles at once
  local t="kiwi.itest.$RUN_ID.tasks"
  for _ in $(seq 1 40); do
    kcat -b "$KIWI_KAFKA_BROKERS" -L -t "$t" 2>/dev/null | grep >/dev/null "topic \"$t\" with [1-9]" && return 0
    sleep 0.25
  done
  fail "cannot create topic $t"
}

# serve_copies NAME N: N more copies of an already served repository, named
# NAME-1..NAME-N: tasks are keyed by repository URL, so copies spread them
# over the partitions.
serve_copies() {
  local k
  for k in $(seq 1 "$2"); do
    [ -d "$TMP/git/$1-$k.git" ] || cp -a "$TMP/git/$1.git" "$TMP/git/$1-$k.git"
  done
}

# submit_task REPO TEST_COMMAND: prints the task id. The model points at a
# closed loopback port: these tasks are not meant to reach one.
submit_task() {
  kiwi_cli submit --repo "$GIT_URL_BASE/$1.git" --ref main --test "$2" --goal "Make the tests pass." \
    --provider anthropic --model claude-sonnet-4-5-20250929 --base-url "http://127.0.0.1:9/" \
    --max-rounds 1 --timeout 600 2>>"$TMP/cli.log"
}

# wait_assigned TOTAL NAME...: until the workers' last rebalance left them
# all assigned, TOTAL partitions between them.
wait_assigned() {
  local total=$1 name sum last ok; shift
  for _ in $(seq 1 120); do
    sum=0 ok=1
    for name in "$@"; do
      last=$(grep -E 'assigned [0-9]+ partition|revoked [0-9]+ partition' "$TMP/worker-$name.log" | tail -n 1 || true)
      case "$last" in
        *"assigned "*) sum=$((sum + $(sed -E 's/.*assigned ([0-9]+) partition.*/\1/' <<<"$last"))) ;;
        *) ok=0 ;;
      esac
    done
    [ "$ok" = 1 ] && [ "$sum" = "$total" ] && { log "group settled: $total partition(s) over $*"; return 0; }
    sleep 0.5
  done
  fail "the group of $* did not settle on $total partitions"
}

# count_grows TRIES PATTERN FILE BASE: polls (every 0.25 s, TRIES times)
# until FILE has more lines matching PATTERN than BASE; prints the last count.
count_grows() {
  local n=0
  for _ in $(seq 1 "$1"); do
    n=$(grep -c -- "$2" "$3" || true)
    [ "$n" -gt "$4" ] && break
    sleep 0.25
  done
  echo "$n"
}

tail_topic() { # tail_topic KIND OUT: the topic from the beginning to its end now
  kiwi_cli tail "$1" >"$2" 2>>"$TMP/cli.log" || : >"$2"
}

# kcat_keys KIND: the key of every message on this part's KIND topic, a
# line each, read with kcat (not through kiwi).
kcat_keys() {
  kcat -C -b "$KIWI_KAFKA_BROKERS" -t "kiwi.itest.$RUN_ID.$1" -e -q -f '%k\n' 2>>"$TMP/kcat.log" || true
}

# in_flight ID...: the ids (a line each) that have an accepted event on the
# progress topic and no result on the results topic, both read with kcat:
# the raw messages, framed as key, size, payload (an accepted event's
# msgpack holds the strings "kind" and "accepted").
in_flight() {
  kcat_raw progress "$TMP/progress-raw-$PART.bin"
  kcat_keys results >"$TMP/results-keys-$PART.txt"
  python3 - "$TMP/progress-raw-$PART.bin" "$TMP/results-keys-$PART.txt" "$@" <<'PY'
import os, sys
sys.path.insert(0, os.environ["KIWI_SH_LIB"])
from kcat_frames import frames
done, want = {l.strip() for l in open(sys.argv[2]) if l.strip()}, sys.argv[3:]
accepted = {key for key, payload in frames(sys.argv[1]) if b"\xa4kind\xa8accepted" in payload}
for w in want:
    if w in accepted and w not in done:
        print(w)
PY
}

# wait_in_flight ID: until ID is in flight (in_flight), for up to 10 s (its
# accepted event may still be on its way to the broker).
wait_in_flight() {
  for _ in $(seq 1 20); do
    [ -n "$(in_flight "$1")" ] && return 0
    sleep 0.5
  done
  return 1
}

# accepted_by ID: the worker that accepted the task last, or nothing.
accepted_by() {
  kiwi_cli tail progress --task "$1" 2>>"$TMP/cli.log" \
    | python3 -c '
import json, sys
w = ""
for l in sys.stdin:
    e = json.loads(l)
    if e.get("kind") == "accepted":
        w = e["worker_id"]
print(w)' || true
}

# wait_results DEADLINE_S ID...: until every id has a result on the results
# topic.
wait_results() {
  local deadline=$((SECONDS + $1)); shift
  printf '%s\n' "$@" >"$TMP/want-$PART.txt"
  while :; do
    tail_topic results "$TMP/results-$PART.jsonl"
    if python3 - "$TMP/results-$PART.jsonl" "$TMP/want-$PART.txt" <<'PY'
import json, sys
got = {json.loads(l)["task_id"] for l in open(sys.argv[1]) if l.strip()}
want = [l.strip() for l in open(sys.argv[2]) if l.strip()]
sys.exit(0 if all(w in got for w in want) else 1)
PY
    then return 0; fi
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 1
  done
  fail "not every task has a result: $(python3 -c '
import json, sys
got = {json.loads(l)["task_id"] for l in open(sys.argv[1]) if l.strip()}
print("missing", [w.strip() for w in open(sys.argv[2]) if w.strip() not in got])' "$TMP/results-$PART.jsonl" "$TMP/want-$PART.txt")"
}

# exactly_one_result STATUS ID...: the results topic holds exactly one
# result per id, with that status, and none for any other task. Prints
# "id status worker" lines.
exactly_one_result() {
  local status=$1; shift
  tail_topic results "$TMP/results-$PART.jsonl"
  kcat_keys results >"$TMP/results-keys-$PART.txt"
  printf '%s\n' "$@" >"$TMP/want-$PART.txt"
  python3 - "$TMP/results-$PART.jsonl" "$TMP/want-$PART.txt" "$status" "$TMP/results-keys-$PART.txt" <<'PY' || fail "results are not exactly one per task"
import collections, json, sys
res = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want = [l.strip() for l in open(sys.argv[2]) if l.strip()]
keys = collections.Counter(l.rstrip("\n") for l in open(sys.argv[4]) if l.strip())
by = collections.defaultdict(list)
for r in res:
    by[r["task_id"]].append(r)
bad = []
for w in want:
    n = len(by.get(w, []))
    if n != 1:
        bad.append(f"{w}: {n} results {[(r['status'], r['worker_id'], r.get('reason', '')) for r in by.get(w, [])]}")
    elif by[w][0]["status"] != sys.argv[3]:
        r = by[w][0]
        bad.append(f"{w}: status {r['status']} (want {sys.argv[3]}): {r.get('reason', '')}")
extra = set(by) - set(want)
if extra:
    bad.append(f"results for tasks never submitted: {sorted(extra)}")
# the same count from outside: kcat, the raw messages keyed by task id
for w in want:
    if keys.get(w, 0) != 1:
        bad.append(f"{w}: kcat counts {keys.get(w, 0)} messages keyed {w} on the results topic")
if sum(keys.values()) != len(want):
    bad.append(f"kcat counts {sum(keys.values())} messages on the results topic for {len(want)} task(s): {dict(keys)}")
for w in want:
    for r in by.get(w, []):
        print(f"  result {w} {r['status']} by {r['worker_id']} after {r['duration_ms']} ms")
if bad:
    print("\n".join("  BAD " + b for b in bad))
    sys.exit(1)
print(f"  {len(want)} task(s), {len(res)} result(s), {sum(keys.values())} message(s) by kcat: exactly one each")
PY
}

WORKER_ENV=(KIWI_LEASE_TTL=5 KIWI_EGRESS_STOP_WHEN_DEGRADED=false KIWI_DRAIN_TIMEOUT=10)

git_serve js-pass js-sum
serve_copies js-pass 6
case " $PARTS " in *" round "* | *" revoke "*) provider_serve ;; esac
passed=0

# ---------------------------------------------------------------- kill -9
part_kill() {
  part kill
  worker_start a KIWI_SLOTS=2 "${WORKER_ENV[@]}"
  worker_start b KIWI_SLOTS=2 "${WORKER_ENV[@]}"
  wait_assigned 4 a b
  local ids=() k id victim="" vtask="" vname vpid tpid survivor
  # one repository, so one partition: the worker that owns it runs two and
  # holds two back; the survivor gets all four at once for its two slots
  for k in 1 2 3 4; do
    ids+=("$(submit_task js-pass-1 "KIWI_FAULT=$RUN_ID-$k sleep 10 && npm test")")
  done
  log "submitted ${ids[*]}"
  # the first task seen running in a sandbox: its worker is the victim
  for _ in $(seq 1 120); do
    for id in "${ids[@]}"; do
      if [ -n "$(container_ids "org.kiwi.task=$id")" ]; then
        victim=$(accepted_by "$id")
        [ -n "$victim" ] && { vtask=$id; break 2; }
      fi
    done
    sleep 0.5
  done
  [ -n "$vtask" ] || fail "no task reached its sandbox"
  vname=${victim##*-}
  vpid=$(eval echo "\$WORKER_PID_$vname")
  tpid=$(sed -nE "s/.*task $vtask: started in slot [0-9]+ \(pid ([0-9]+)\).*/\1/p" "$TMP/worker-$vname.log" | tail -n 1)
  [ -n "$tpid" ] || fail "no task process of $vtask in the log of $victim"
  survivor="$RUN_ID-$([ "$vname" = a ] && echo b || echo a)"
  { kill -9 "$vpid"; wait "$vpid"; } 2>/dev/null || true
  log "killed -9 worker $victim (pid $vpid) while its task $vtask ran in a sandbox (task process $tpid)"

  # its task process dies with it
  for _ in $(seq 1 60); do kill -0 "$tpid" 2>/dev/null || break; sleep 0.25; done
  kill -0 "$tpid" 2>/dev/null && fail "task process $tpid of the killed worker still runs 15 s later"
  log "task process $tpid is gone"
  reaped "$victim" "$vname"

  wait_results 150 "${ids[@]}"
  # once their offsets are committed Kafka delivers none of them again: a
  # duplicate would be on the topic by then (a result is acknowledged before
  # its offset is committed)
  wait_committed 120 "${ids[@]}"
  exactly_one_result not_fixed "${ids[@]}"
  python3 - "$TMP/results-$PART.jsonl" "$vtask" "$victim" <<'PY' || fail "the killed worker's task was not finished by the other"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip() and json.loads(l)["task_id"] == sys.argv[2]][0]
assert r["worker_id"] != sys.argv[3], r
print(f"  {sys.argv[2]} (killed on {sys.argv[3]}) finished by {r['worker_id']}")
PY
  grep -q "task $vtask: started" "$TMP/worker-${survivor##*-}.log" || fail "$survivor never started $vtask"
  [ -z "$(container_ids "org.kiwi.worker=$victim")" ] || fail "containers of $victim left at the end"
  redelivery_visible "$vtask" "$victim" "$survivor"
  passed=$((passed + 1))
  stop_workers
}

# reaped VICTIM NAME: the sandboxes of the killed worker VICTIM are removed
# (by its task process), or a worker restarted under its id (NAME) reaps them.
reaped() {
  local victim=$1 vname=$2 left=""
  for _ in $(seq 1 60); do
    left=$(container_ids "org.kiwi.worker=$victim")
    [ -z "$left" ] && break
    sleep 0.25
  done
  if [ -z "$left" ]; then
    log "no sandbox container of $victim is left (removed by its task process)"
  else
    log "sandbox container(s) of $victim left 15 s after the kill: $(echo "$left" | tr '\n' ' '); restarting a worker as $victim"
    worker_start "$vname" KIWI_SLOTS=1 "${WORKER_ENV[@]}"
    for _ in $(seq 1 60); do
      grep -q "removed [0-9]* sandbox part" "$TMP/worker-$vname.log" && break
      sleep 0.5
    done
    [ -z "$(container_ids "org.kiwi.worker=$victim")" ] || fail "the restarted $victim did not reap its containers"
    log "the restarted worker reaped them: $(grep -o 'removed [0-9]* sandbox part.*' "$TMP/worker-$vname.log" | head -1)"
  fi
}

# redelivery_visible ID VICTIM SURVIVOR: the progress topic shows the two
# runs of ID apart: attempt N on the killed worker, a later attempt on the
# survivor, each with seq from 1 and no gap, and a consumer that
# de-duplicates by (task_id, attempt, seq) keeps every event of both. The
# events are counted twice from outside: kcat counts the messages keyed ID
# on the topic, and `kiwi tail` must have decoded that many.
redelivery_visible() {
  local id=$1 topic="kiwi.itest.$RUN_ID.progress" raw
  kiwi_cli tail progress --task "$id" >"$TMP/ev-$id.jsonl" 2>>"$TMP/cli.log" || fail "kiwi tail progress --task $id"
  raw=$(kcat -C -b "$KIWI_KAFKA_BROKERS" -t "$topic" -e -q -f '%k\n' 2>>"$TMP/kcat.log" | grep -cxF "$id" || true)
  python3 - "$TMP/ev-$id.jsonl" "$raw" "$2" "$3" <<'PY' || fail "the two runs of $id are not told apart in its progress events"
import collections, json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
raw, victim, survivor = int(sys.argv[2]), sys.argv[3], sys.argv[4]
assert len(evs) == raw, f"kiwi tail decoded {len(evs)} events, kcat counts {raw} messages keyed {evs[0]['task_id']}"
runs = collections.defaultdict(list)
for e in evs:
    assert "attempt" in e, f"an event without attempt: {e}"
    runs[e["attempt"]].append(e)
assert 0 not in runs, f"attempt 0 (unknown) with redis up: {[e['kind'] for e in runs[0]]}"
assert len(runs) >= 2, f"one attempt only ({sorted(runs)}) for a task run twice"
for a, es in sorted(runs.items()):
    seqs = sorted(e["seq"] for e in es)
    assert seqs == list(range(1, len(seqs) + 1)), f"attempt {a}: seq {seqs}"
    assert len({e["worker_id"] for e in es}) == 1, f"attempt {a} from several workers"
    print(f"  attempt {a}: {es[0]['worker_id']}, seq 1..{len(seqs)}, {es[0]['kind']} .. {es[-1]['kind']}")
first, last = min(runs), max(runs)
assert runs[first][0]["worker_id"] == victim, f"attempt {first} not on {victim}"
assert runs[last][0]["worker_id"] == survivor, f"attempt {last} not on {survivor}"
assert runs[last][-1]["kind"] == "finished" or any(e["phase"] == "finished" for e in runs[last]), "the last run did not finish"
kept = {(e["task_id"], e["attempt"], e["seq"]) for e in evs}
assert len(kept) == len(evs), f"(task_id, attempt, seq) repeats: {len(evs) - len(kept)} duplicates"
old = {(e["task_id"], e["seq"]) for e in evs}
print(f"  {raw} messages (kcat), {len(evs)} events: de-duplicated by (task_id, attempt, seq) {len(kept)} kept;"
      f" by (task_id, seq) {len(old)} would be")
PY
}

# events_in_order ID: each run (attempt) of ID has its events with seq 1..n,
# no gap and no repeat, in the order they are on the topic.
events_in_order() {
  kiwi_cli tail progress --task "$1" >"$TMP/ev-$1.jsonl" 2>>"$TMP/cli.log" || fail "kiwi tail progress --task $1"
  python3 - "$TMP/ev-$1.jsonl" <<'PY' || fail "the progress events of $1 are out of order or have a gap"
import collections, json, sys
runs = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.strip():
        e = json.loads(l)
        runs[e["attempt"]].append(e["seq"])
assert runs, "no events"
for a, seqs in runs.items():
    assert seqs == list(range(1, len(seqs) + 1)), f"attempt {a}: seq {seqs}"
print(" ".join(f"attempt {a}: seq 1..{len(s)} in order" for a, s in sorted(runs.items())))
PY
}

# stop_workers: SIGTERM every worker of the part, wait for them.
stop_workers() {
  local v pid
  for v in $(compgen -v | grep '^WORKER_PID_'); do
    pid=${!v}
    kill "$pid" 2>/dev/null || true
  done
  for v in $(compgen -v | grep '^WORKER_PID_'); do
    pid=${!v}
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
    unset "$v"
  done
}

# ---------------------------------------------------------- kafka restart
part_kafka() {
  part kafka
  # worker a's producer holds 2 messages at most: while the broker is away
  # its queue is full and the daemon's outbox holds the rest, in order,
  # without stopping its loop (the lease renewals every 1.7 s go on)
  worker_start a KIWI_SLOTS=2 "${WORKER_ENV[@]}" KIWI_KAFKA_PROPERTIES=queue.buffering.max.messages=2
  worker_start b KIWI_SLOTS=2 "${WORKER_ENV[@]}"
  wait_assigned 4 a b
  local ids=() k id n
  for k in 1 2 3 4; do
    ids+=("$(submit_task "js-pass-$k" "KIWI_FAULT=$RUN_ID-$k sleep 8 && npm test")")
  done
  log "submitted ${ids[*]}"
  for _ in $(seq 1 120); do
    n=0
    for id in "${ids[@]}"; do [ -n "$(container_ids "org.kiwi.task=$id")" ] && n=$((n + 1)); done
    [ "$n" -ge 2 ] && break
    sleep 0.5
  done
  # from outside, immediately before the restart: a task is accepted and
  # has no result yet (else the restart hit no task in flight); its accepted
  # event may still be on its way to the broker: up to 10 s (the tasks run
  # for 8 s and more)
  local inflight=
  for _ in $(seq 1 20); do
    inflight=$(in_flight "${ids[@]}")
    [ -n "$inflight" ] && break
    sleep 0.5
  done
  [ -n "$inflight" ] || fail "no task in flight at the broker restart (kcat: none accepted without a result)"
  log "$n task(s) in their sandboxes; in flight by kcat: $(echo "$inflight" | tr '\n' ' '); restarting the broker"
  local full0 full
  full0=$(grep -c "producer queue full" "$TMP/worker-a.log" || true)
  stack down kafka
  # the broker stays away until worker a's producer queue (2 messages) is
  # full: its heartbeats and events have nowhere to go
  full=$(count_grows 240 "producer queue full" "$TMP/worker-a.log" "$full0")
  [ "$full" -gt "$full0" ] || fail "worker a's producer queue (2 messages) did not fill within 60 s of the broker going away"
  log "worker a's producer queue is full; starting the broker again"
  stack up kafka
  # tasks submitted after the restart are taken too
  for k in 5 6; do
    ids+=("$(submit_task "js-pass-$k" "KIWI_FAULT=$RUN_ID-$k sleep 1 && npm test")")
  done
  log "submitted after the restart: ${ids[*]:4}"
  wait_results 180 "${ids[@]}"
  wait_committed 180 "${ids[@]}" # no late duplicate after this (see part_kill)
  for v in a b; do
    kill -0 "$(eval echo "\$WORKER_PID_$v")" 2>/dev/null || fail "worker $v died"
  done
  exactly_one_result not_fixed "${ids[@]}"
  grep -q "producer queue full" "$TMP/worker-a.log" \
    || fail "worker a's producer queue (2 messages) never filled while the broker was away"
  grep -q "every held message handed over" "$TMP/worker-a.log" \
    || fail "worker a never handed its held messages over after the broker came back"
  if grep -qE "delivery to .* failed" "$TMP/worker-a.log"; then
    log "worker a gave up a delivery: its events' seq may have a gap, not checked"
  else
    for id in "${ids[@]}"; do events_in_order "$id"; done
  fi
  # what the workers went through
  local what
  for what in "revoked [0-9]+ partition" "assigned [0-9]+ partition" "delivery to .* failed" \
    "publishing it again" "its result stands" "commit .*: "; do
    log "  workers' log lines matching '$what': $(cat "$TMP/worker-a.log" "$TMP/worker-b.log" | grep -cE "$what" || true)"
  done
  passed=$((passed + 1))
  stop_workers
}

# ----------------------------------------------------- slow model rounds
# The tasks of these parts fix js-sum through the scripted provider's
# js-sum-slow-round script, whose first turn is answered 15 s late: a fault
# made while a provider request of that turn is open hits the task in the
# middle of a model round.
SLOW=js-sum-slow-round

provider_reset() { # the script back to its first turn
  curl -fsS -X POST "http://127.0.0.1:$PROVIDER_PORT/_control/reset?script=$SLOW" >/dev/null \
    || fail "cannot reset the scripted provider's $SLOW"
}
slow_requests() { # how many requests of the slow turn the provider has taken
  local n
  n=$(grep -c '"fault": "delay"' "$TMP/provider-requests.jsonl" 2>/dev/null) || true
  echo "${n:-0}"
}
wait_slow_request() { # wait_slow_request N: until more than N were taken
  for _ in $(seq 1 480); do
    [ "$(slow_requests)" -gt "$1" ] && { log "the slow model round is open (request $(($1 + 1)) of its turn)"; return 0; }
    sleep 0.25
  done
  fail "no request of the slow model round in 120 s"
}
submit_slow() { submit_fix "${1:-js-sum}" "$SLOW" --max-rounds 3 --timeout 600 2>>"$TMP/cli.log"; }

# clean_run: once per test run, the diff of a clean run (one worker, no
# fault) into $TMP/clean.diff.
clean_run() {
  [ -s "$TMP/clean.diff" ] && return 0
  part clean
  worker_start a KIWI_SLOTS=1 "${WORKER_ENV[@]}"
  wait_assigned 4 a
  provider_reset
  local id
  id=$(submit_slow)
  wait_results 300 "$id"
  exactly_one_result fixed "$id"
  python3 - "$TMP/results-$PART.jsonl" "$TMP/clean.diff" <<'PY' || fail "the clean run has no diff"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][0]
assert r.get("diff"), r
open(sys.argv[2], "w").write(r["diff"])
print(f"  clean run: {len(r['diff'])} bytes of diff")
PY
  stop_workers
}

# same_diff ID: the result of ID carries the clean run's diff, to the byte.
same_diff() {
  python3 - "$TMP/results-$PART.jsonl" "$1" "$TMP/clean.diff" <<'PY' || fail "the diff of $1 is not the clean run's"
import difflib, json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip() and json.loads(l)["task_id"] == sys.argv[2]][0]
clean = open(sys.argv[3]).read()
got = r.get("diff") or ""
if got != clean:
    print("".join(difflib.unified_diff(clean.splitlines(True), got.splitlines(True), "clean run", sys.argv[2])))
    sys.exit(1)
print(f"  {sys.argv[2]}: its diff is the clean run's ({len(got)} bytes)")
PY
}

# -------------------------------------------------- kill -9 mid-round
part_round() {
  clean_run
  part round
  worker_start a KIWI_SLOTS=1 "${WORKER_ENV[@]}"
  worker_start b KIWI_SLOTS=1 "${WORKER_ENV[@]}"
  wait_assigned 4 a b
  provider_reset
  local id n0 victim vname vpid survivor
  n0=$(slow_requests)
  id=$(submit_slow)
  wait_slow_request "$n0"
  for _ in $(seq 1 40); do # (kiwi tail may meet a topic still electing its leader)
    victim=$(accepted_by "$id")
    [ -n "$victim" ] && break
    sleep 0.5
  done
  [ -n "$victim" ] || fail "no worker accepted $id"
  wait_in_flight "$id" || fail "$id is not in flight (kcat) while its model round is open"
  vname=${victim##*-}
  vpid=$(eval echo "\$WORKER_PID_$vname")
  survivor="$RUN_ID-$([ "$vname" = a ] && echo b || echo a)"
  { kill -9 "$vpid"; wait "$vpid"; } 2>/dev/null || true
  log "killed -9 worker $victim (pid $vpid) while $id waited on its model round"
  # the run after the redelivery starts its session again: the first turn
  provider_reset
  reaped "$victim" "$vname"
  wait_results 300 "$id"
  wait_committed 120 "$id" # no late duplicate after this (see part_kill)
  exactly_one_result fixed "$id"
  grep -q "task $id: started" "$TMP/worker-${survivor##*-}.log" || fail "$survivor never ran $id"
  [ "$(slow_requests)" -gt $((n0 + 1)) ] || fail "the slow round was not asked again after the kill"
  same_diff "$id"
  passed=$((passed + 1))
  stop_workers
}

# --------------------------------------------- partition revoked mid-task
part_revoke() {
  clean_run
  part revoke
  worker_start a KIWI_SLOTS=1 "${WORKER_ENV[@]}"
  wait_assigned 4 a
  provider_reset
  # a copy of js-sum whose tasks land on partition 2 or 3 (keyed by URL:
  # librdkafka's CRC-32 of it, modulo 4): when b joins, the range assignor
  # gives those to b (client ids ...-a < ...-b), so the task's partition
  # moves to b while a runs it
  local id n0 revoked0 repo
  repo=$(python3 -c 'import sys, zlib
print(next(f"js-sum-{k}" for k in range(1, 100) if zlib.crc32(f"{sys.argv[1]}/js-sum-{k}.git".encode()) % 4 >= 2))' \
    "$GIT_URL_BASE")
  [ -d "$TMP/git/$repo.git" ] || cp -a "$TMP/git/js-sum.git" "$TMP/git/$repo.git"
  n0=$(slow_requests)
  id=$(submit_slow "$repo")
  wait_slow_request "$n0"
  wait_in_flight "$id" || fail "$id is not in flight (kcat) while its model round is open"
  revoked0=$(grep -cE "revoked [0-9]+ partition" "$TMP/worker-a.log" || true)
  worker_start b KIWI_SLOTS=1 "${WORKER_ENV[@]}"
  wait_assigned 4 a b
  [ "$(grep -cE "revoked [0-9]+ partition" "$TMP/worker-a.log" || true)" -gt "$revoked0" ] \
    || fail "worker a's partitions were not revoked when b joined"
  [ -n "$(in_flight "$id")" ] || fail "$id has a result at the rebalance (finished before it, or run a second time): the revoke did not hit it mid-task"
  log "worker b joined; a's partitions were revoked while $id was in its model round"
  wait_results 300 "$id"
  # a never commits it (revoked); b commits it once it finds the result
  # published, or after running it again, whose result would be on the
  # topic by then
  wait_committed 120 "$id"
  exactly_one_result fixed "$id"
  same_diff "$id"
  grep -q "task $id: received" "$TMP/worker-b.log" || fail "$id's partition did not move to b: the revoke moved no task"
  log "  $id, revoked from a mid-task, was delivered to b: $(grep -o "task $id: [a-z].*" "$TMP/worker-b.log" | grep -v ": offset committed" | tail -n 1)"
  passed=$((passed + 1))
  stop_workers
}

# ------------------------------------------------------------ redis down
part_redis() {
  part redis
  HB=1 worker_start a KIWI_SLOTS=3 "${WORKER_ENV[@]}"
  wait_assigned 4 a
  local t1 t2 t3 t4 id down_at
  t1=$(submit_task js-pass-1 "KIWI_FAULT=$RUN_ID-1 sleep 20 && npm test")
  for _ in $(seq 1 120); do
    [ -n "$(container_ids "org.kiwi.task=$t1")" ] && break
    sleep 0.5
  done
  [ -n "$(container_ids "org.kiwi.task=$t1")" ] || fail "$t1 did not reach its sandbox"
  log "$t1 runs (leased); stopping redis"
  stack down redis
  down_at=$SECONDS
  t2=$(submit_task js-pass-2 "KIWI_FAULT=$RUN_ID-2 sleep 1 && npm test")
  t3=$(submit_task js-pass-3 "KIWI_FAULT=$RUN_ID-3 npm test")
  wait_results 90 "$t2" "$t3"
  log "$t2 and $t3 finished with redis down"
  # their events: unleased, with the cache warning
  local tid
  for tid in "$t2" "$t3"; do
    kiwi_cli tail progress --task "$tid" >"$TMP/ev-$tid.jsonl" 2>>"$TMP/cli.log"
    python3 - "$TMP/ev-$tid.jsonl" <<'PY' || fail "events of $tid lack the redis warning"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
acc = [e for e in evs if e["kind"] == "accepted"][0]
assert acc["payload"]["leased"] is False, acc
warn = [e for e in evs if e["kind"] == "warning"]
assert warn and "cache unavailable" in warn[0]["payload"]["warning"], [e["kind"] for e in evs]
print(f"  {evs[0]['task_id']}: leased false; warning: {warn[0]['payload']['warning']} ({warn[0]['payload'].get('reason', '')})")
PY
  done
  # the heartbeat says so
  tail_topic heartbeats "$TMP/hb-$PART.jsonl"
  python3 - "$TMP/hb-$PART.jsonl" <<'PY' || fail "no heartbeat with redis_ok false"
import json, sys
hbs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
down = [h for h in hbs if h["redis_ok"] is False]
assert down, [h["redis_ok"] for h in hbs]
h = down[-1]
assert h["degraded"] is True and "redis unreachable" in h["degraded_reason"], h
why = [p for p in h["degraded_reason"].split("; ") if "redis" in p][0]
print(f"  heartbeat: redis_ok false, degraded: ...{why}")
PY
  # down for longer than the lease (5 s) while t1 runs
  while [ $((SECONDS - down_at)) -lt 8 ]; do sleep 0.5; done
  stack up redis
  for _ in $(seq 1 40); do
    tail_topic heartbeats "$TMP/hb-$PART.jsonl"
    tail -n 1 "$TMP/hb-$PART.jsonl" | grep >/dev/null '"redis_ok": *true' && break
    sleep 0.5
  done
  tail -n 1 "$TMP/hb-$PART.jsonl" | grep >/dev/null '"redis_ok": *true' || fail "the heartbeat does not show redis back"
  log "the heartbeat shows redis back"
  t4=$(submit_task js-pass-4 "KIWI_FAULT=$RUN_ID-4 npm test")
  wait_results 90 "$t1" "$t4"
  wait_committed 120 "$t1" "$t2" "$t3" "$t4" # no late duplicate after this (see part_kill)
  exactly_one_result not_fixed "$t1" "$t2" "$t3" "$t4"
  ! grep -q "lost its lease" "$TMP/worker-a.log" || fail "$t1 was stopped when redis came back"
  log "  $t1 ran through the outage (longer than its lease) and was not stopped when redis came back"
  kiwi_cli tail progress --task "$t4" 2>>"$TMP/cli.log" | grep >/dev/null '"leased": *true' \
    || fail "$t4, after redis came back, was not leased"
  log "  $t4 (after redis came back) was leased"
  passed=$((passed + 1))
  stop_workers
}

# ------------------------------------------------------- no redis at all
part_noredis() {
  part noredis
  worker_start a KIWI_SLOTS=1 KIWI_REDIS_PORT="$(free_port)" "${WORKER_ENV[@]}"
  wait_assigned 4 a
  local id
  id=$(submit_task js-pass-1 "KIWI_FAULT=$RUN_ID-1 npm test")
  wait_results 120 "$id"
  exactly_one_result not_fixed "$id"
  kiwi_cli tail progress --task "$id" >"$TMP/ev-$id.jsonl" 2>>"$TMP/cli.log"
  python3 - "$TMP/ev-$id.jsonl" <<'PY' || fail "the events of $id, run without redis, do not say attempt 0"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert evs, "no events"
assert [e["attempt"] for e in evs] == [0] * len(evs), [e.get("attempt") for e in evs]
assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1)), [e["seq"] for e in evs]
acc = [e for e in evs if e["kind"] == "accepted"][0]
assert acc["payload"]["leased"] is False, acc
print(f"  {len(evs)} events, unleased, attempt 0 (unknown), seq 1..{len(evs)}")
PY
  passed=$((passed + 1))
  stop_workers
}

# ------------------------------------------------------ malformed messages
part_dlq() {
  part dlq
  worker_start a KIWI_SLOTS=2 "${WORKER_ENV[@]}"
  wait_assigned 4 a
  local mal="$TMP/malformed" ids=() chunk topic="kiwi.itest.$RUN_ID.tasks" k=0 files
  python3 "$(dirname "$0")/test_worker_faults_malformed.py" "$mal" 1000 >"$TMP/malformed.txt"
  log "1000 malformed messages: $(cat "$TMP/malformed.txt")"
  mapfile -t files < <(ls "$mal/files"/*.bin)
  # four slices of the unkeyed ones, a valid task or two between them, the
  # keyed and NULL ones in the middle
  for chunk in 0 1 2 3; do
    kcat -P -b "$KIWI_KAFKA_BROKERS" -t "$topic" "${files[@]:$((chunk * ${#files[@]} / 4)):$(((chunk + 1) * ${#files[@]} / 4 - chunk * ${#files[@]} / 4))}" \
      2>>"$TMP/kcat.log" || fail "kcat: $(tail -3 "$TMP/kcat.log")"
    k=$((k + 1))
    ids+=("$(submit_task "js-pass-$((chunk + 1))" "KIWI_FAULT=$RUN_ID-$k npm test")")
    if [ "$chunk" = 1 ]; then
      # (line mode, from stdin: a file argument would be one message)
      kcat -P -K '\t' -b "$KIWI_KAFKA_BROKERS" -t "$topic" <"$mal/keyed.txt" 2>>"$TMP/kcat.log" || fail "kcat keyed"
      kcat -P -Z -K '\t' -b "$KIWI_KAFKA_BROKERS" -t "$topic" <"$mal/null.txt" 2>>"$TMP/kcat.log" || fail "kcat null"
      k=$((k + 1))
      ids+=("$(submit_task js-pass-5 "KIWI_FAULT=$RUN_ID-$k npm test")")
    fi
  done
  log "produced; valid tasks: ${ids[*]}"
  wait_results 150 "${ids[@]}"
  local deadline=$((SECONDS + 120)) n=0
  while [ "$SECONDS" -lt "$deadline" ]; do
    tail_topic dlq "$TMP/dlq.jsonl"
    n=$(wc -l <"$TMP/dlq.jsonl")
    [ "$n" -ge 1000 ] && break
    sleep 1
  done
  # every message of the tasks topic committed: no task or dead letter comes
  # again (each is acknowledged before its offset is committed)
  wait_topic_committed 120
  exactly_one_result not_fixed "${ids[@]}"
  tail_topic dlq "$TMP/dlq.jsonl"
  python3 - "$TMP/dlq.jsonl" "$mal/manifest.json" "$topic" "$RUN_ID-a" <<'PY' || fail "the dead letters do not match the malformed messages"
import base64, collections, hashlib, json, sys
dls = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
man = json.load(open(sys.argv[2]))
topic, worker = sys.argv[3], sys.argv[4]
assert len(dls) == len(man) == 1000, f"{len(dls)} dead letters for {len(man)} malformed messages"
sent = collections.Counter((m["sha256"], m["key"]) for m in man)
kind = {(m["sha256"], m["key"]): m["kind"] for m in man}
got = collections.Counter()
where = set()
by_kind = collections.defaultdict(list)
for d in dls:
    assert d.get("reason"), d
    assert d["topic"] == topic and d["worker_id"] == worker, d
    assert d["partition"] >= 0 and d["offset"] >= 0, d
    where.add((d["partition"], d["offset"]))
    orig = base64.b64decode(d.get("original") or "")
    key = base64.b64decode(d["key"]).decode() if d.get("key") is not None else None
    k = (hashlib.sha256(orig).hexdigest(), key)
    got[k] += 1
    by_kind[kind.get(k, "?")].append(d["reason"])
assert len(where) == 1000, "two dead letters for one message"
missing, unexpected = sent - got, got - sent
assert not missing and not unexpected, f"{sum(missing.values())} missing, e.g. {list(missing)[:3]}; {sum(unexpected.values())} unexpected, e.g. {list(unexpected)[:3]}"
print("  1000 dead letters, one per malformed message (partition, offset), each with a reason, the")
print("  original bytes and key equal to what was sent (all compared by sha256); by kind:")
for k in sorted(by_kind):
    rs = by_kind[k]
    print(f"    {k:7s} {len(rs):4d}  e.g. {collections.Counter(rs).most_common(1)[0][0][:90]}")
PY
  # shellcheck disable=SC2154 # WORKER_PID_<name> is set by worker_start (lib.sh), through eval
  kill -0 "$WORKER_PID_a" 2>/dev/null || fail "the worker died"
  passed=$((passed + 1))
  stop_workers
}

# ------------------------------------------------------------ undelivered
# The results topic refuses the result (its max.message.bytes lowered
# below the result's size), one worker, no rebalance: the worker produces
# the result again until the topic takes it (the limit lifted), exactly
# once, and commits the task's offset (a worker joining afterwards does not
# run the task).
topic_config() { # topic_config TOPIC ConfigCommand-args...: alter a topic's config
  local t=$1; shift
  java -cp "${KIWI_STATE_DIR:-/var/lib/kiwi}/kafka/lib/*" kafka.admin.ConfigCommand \
    --bootstrap-server "$KIWI_KAFKA_BROKERS" --entity-type topics --entity-name "$t" --alter "$@" \
    >>"$TMP/topic-config.log" 2>&1 || fail "altering $t: $(tail -3 "$TMP/topic-config.log")"
}

part_undelivered() {
  part undelivered
  local results="kiwi.itest.$RUN_ID.results" id
  kcat -b "$KIWI_KAFKA_BROKERS" -L -t "$results" >/dev/null 2>&1 || true # creates it
  worker_start a KIWI_SLOTS=1 "${WORKER_ENV[@]}"
  wait_assigned 4 a
  topic_config "$results" --add-config max.message.bytes=64
  id=$(submit_task js-pass-1 "KIWI_FAULT=$RUN_ID-1 sleep 2 && npm test")
  for _ in $(seq 1 240); do grep -q "task $id: result not delivered" "$TMP/worker-a.log" && break; sleep 0.25; done
  grep -q "task $id: result not delivered" "$TMP/worker-a.log" || fail "no refused delivery of $id's result in 60 s"
  log "$(grep -o "task $id: result not delivered.*" "$TMP/worker-a.log" | head -1)"
  # at least one more refused attempt: the count of those lines grows
  local refused0 refused
  refused0=$(grep -c "task $id: result not delivered" "$TMP/worker-a.log" || true)
  refused=$(count_grows 240 "task $id: result not delivered" "$TMP/worker-a.log" "$refused0")
  [ "$refused" -gt "$refused0" ] || fail "no further refused delivery of $id's result within 60 s of the first"
  topic_config "$results" --delete-config max.message.bytes
  log "the results topic takes messages again"
  wait_results 120 "$id"
  wait_committed 60 "$id" # no late duplicate after this (see part_kill)
  exactly_one_result not_fixed "$id"
  log "$(grep -c "task $id: result not delivered" "$TMP/worker-a.log") refused deliveries, then published"
  ! grep -qE "revoked [0-9]+ partition" "$TMP/worker-a.log" || fail "a rebalance happened: this part is about its absence"
  kill -0 "$WORKER_PID_a" 2>/dev/null || fail "worker a died"
  # its offset was committed: a worker joining the group does not run it
  stop_workers
  worker_start b KIWI_SLOTS=1 "${WORKER_ENV[@]}"
  wait_assigned 4 b
  # a later task of the same repository (the same key, so the same
  # partition): b receives the partition's messages in order, so once it
  # has received this one it would have received $id before, had $id's
  # offset not been committed
  local later where later_where
  later=$(submit_task js-pass-1 "KIWI_FAULT=$RUN_ID-2 npm test")
  for _ in $(seq 1 240); do grep -q "task $later: received" "$TMP/worker-b.log" && break; sleep 0.25; done
  grep -q "task $later: received" "$TMP/worker-b.log" || fail "worker b did not receive $later, submitted after it joined, within 60 s"
  where=$(sed -nE "s/.*task $id: received from ([^ ]+)@[0-9]+.*/\1/p" "$TMP/worker-a.log" | head -n 1)
  later_where=$(sed -nE "s/.*task $later: received from ([^ ]+)@[0-9]+.*/\1/p" "$TMP/worker-b.log" | head -n 1)
  [ -n "$where" ] && [ "$where" = "$later_where" ] \
    || fail "$later came from '$later_where', $id from '$where': not one partition, so b not getting $id would prove nothing"
  ! grep -q "task $id: received" "$TMP/worker-b.log" || fail "worker b got $id again: its offset was not committed"
  log "worker b, joining afterwards, did not get $id: the offset was committed"
  passed=$((passed + 1))
  stop_workers
}

# ------------------------------------------------------------------ drain
# A task whose Redis look-up is still unanswered when the worker is told to
# stop is not started by the draining worker: it stays uncommitted, its
# lease is given back, and the next worker does it.
part_drain() {
  part drain
  worker_start a KIWI_SLOTS=2 "${WORKER_ENV[@]}"
  wait_assigned 4 a
  local long quick
  long=$(submit_task js-pass-1 "KIWI_FAULT=$RUN_ID-long sleep 4 && npm test")
  for _ in $(seq 1 240); do grep -q "task $long: started" "$TMP/worker-a.log" && break; sleep 0.25; done
  grep -q "task $long: started" "$TMP/worker-a.log" || fail "$long was not started"
  # Redis holds every reply for 5 s: the next task's look-up stays in flight
  redis-cli -h "${KIWI_REDIS_HOST:-127.0.0.1}" -p "${KIWI_REDIS_PORT:-6379}" CLIENT PAUSE 5000 ALL >/dev/null
  quick=$(submit_task js-pass-2 "KIWI_FAULT=$RUN_ID-quick npm test")
  for _ in $(seq 1 40); do grep -q "task $quick: received" "$TMP/worker-a.log" && break; sleep 0.1; done
  grep -q "task $quick: received" "$TMP/worker-a.log" || fail "$quick was not received within 4 s of Redis pausing"
  kill "$WORKER_PID_a"
  log "SIGTERM to worker a while the look-up of $quick waits for Redis; $long runs"
  for _ in $(seq 1 240); do kill -0 "$WORKER_PID_a" 2>/dev/null || break; sleep 0.25; done
  kill -0 "$WORKER_PID_a" 2>/dev/null && fail "worker a still runs 60 s after SIGTERM"
  unset WORKER_PID_a
  ! grep -q "task $quick: started" "$TMP/worker-a.log" || fail "the draining worker started $quick"
  grep -q "task $quick: not started: the worker is draining" "$TMP/worker-a.log" \
    || fail "no word of $quick in the draining worker's log"
  log "$(grep -o "task $quick: not started.*" "$TMP/worker-a.log")"
  worker_start b KIWI_SLOTS=2 "${WORKER_ENV[@]}"
  wait_results 150 "$long" "$quick"
  wait_committed 120 "$long" "$quick" # no late duplicate after this (see part_kill)
  exactly_one_result not_fixed "$long" "$quick"
  grep -q "task $quick: started" "$TMP/worker-b.log" || fail "worker b never started $quick"
  passed=$((passed + 1))
  stop_workers
}

for p in $PARTS; do
  case "$p" in
    kill | kafka | round | revoke | redis | noredis | dlq | drain | undelivered) "part_$p" ;;
    *) fail "unknown part $p (kill kafka round revoke redis noredis dlq drain undelivered)" ;;
  esac
done
echo "$passed passed, 0 failed"
