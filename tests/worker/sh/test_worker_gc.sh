#!/usr/bin/env bash
# test_worker_gc.sh: a starting kiwi-worker collects its state dir by
# itself (kiwi-worker --gc from its timer, at start): the workspace a task
# process killed with -9 left, a mirror unused for longer than
# KIWI_GC_MIRROR_IDLE and the snapshot of an interrupted install go; a
# recent mirror, a locked old mirror and a recent snapshot stay. The state
# dir is given as a flag (--state-dir), which the clean-up process must get
# too. Checked on the host's disk.
. "$(dirname "$0")/lib.sh"
need_services

STATE="$TMP/state"
mkdir -p "$STATE/work" "$STATE/mirrors" "$STATE/snapshots"
# a task process that died: its pid is gone
sh -c 'exit 0' &
dead=$!
wait "$dead"
mkdir -p "$STATE/work/task-killed-$dead/src"
echo left >"$STATE/work/task-killed-$dead/src/file"
mkdir -p "$STATE/mirrors/0ld0.git/objects" "$STATE/mirrors/10cked.git/objects" "$STATE/mirrors/fresh.git/objects"
touch "$STATE/mirrors/0ld0.lock" "$STATE/mirrors/10cked.lock" "$STATE/mirrors/fresh.lock"
touch -d '8 days ago' "$STATE/mirrors/0ld0.git" "$STATE/mirrors/0ld0.lock" "$STATE/mirrors/10cked.git" \
  "$STATE/mirrors/10cked.lock"
mkdir -p "$STATE/snapshots/key1.$dead.partial" "$STATE/snapshots/recent-key"
touch "$STATE/snapshots/recent-key/src.tar"
# a fetch in progress holds the old mirror's lock for the whole test
# (the holder is the sleep itself, so the clean-up's kill ends it: a
# `flock FILE sleep` child would outlive its flock parent and hold ctest's
# output pipe open)
(exec 9<"$STATE/mirrors/10cked.lock"; flock 9; exec sleep 600) &
PIDS+=($!)
sleep 0.5

# as lib.sh's worker_start, but the state dir comes as a flag only
env -u KIWI_STATE_DIR KIWI_WORKER_ID="$RUN_ID-b" KIWI_GROUP="kiwi-itest-$RUN_ID" KIWI_TOPIC_TASKS="kiwi.itest.$RUN_ID.tasks" \
  KIWI_TOPIC_PROGRESS="kiwi.itest.$RUN_ID.progress" KIWI_TOPIC_RESULTS="kiwi.itest.$RUN_ID.results" \
  KIWI_TOPIC_HEARTBEATS="kiwi.itest.$RUN_ID.heartbeats" KIWI_TOPIC_DLQ="kiwi.itest.$RUN_ID.dlq" \
  KIWI_EGRESS_STOP_WHEN_DEGRADED=false \
  "$WORKER" --state-dir "$STATE" >"$TMP/worker-b.log" 2>&1 &
PIDS+=($!)
pid_b=$!

for _ in $(seq 1 60); do
  [ ! -e "$STATE/work/task-killed-$dead" ] && [ ! -e "$STATE/mirrors/0ld0.git" ] && break
  sleep 0.5
done
[ ! -e "$STATE/work/task-killed-$dead" ] || fail "the dead task process's workspace is still there: $(grep clean-up "$TMP/worker-b.log")"
[ ! -e "$STATE/mirrors/0ld0.git" ] || fail "the idle mirror is still there"
[ ! -e "$STATE/snapshots/key1.$dead.partial" ] || fail "the interrupted install's snapshot is still there"
[ -d "$STATE/mirrors/10cked.git" ] || fail "a locked mirror was removed"
[ -d "$STATE/mirrors/fresh.git" ] || fail "a recent mirror was removed"
[ -f "$STATE/snapshots/recent-key/src.tar" ] || fail "a recent snapshot was removed"
kill -0 "$pid_b" 2>/dev/null || fail "the worker died"
log "$(grep -o 'clean-up: removed.*' "$TMP/worker-b.log" | head -1)"
kill "$pid_b"
for _ in $(seq 1 60); do kill -0 "$pid_b" 2>/dev/null || break; sleep 0.25; done
echo "1 passed, 0 failed"
