#!/usr/bin/env bash
# bench/bench_worker.sh: kiwi-worker through the real stack (Kafka, Redis,
# dockerd on loopback). Prints figures and ratios; asserts no timing.
#
#   1. tasks per second through one worker at 1, 2 and 4 slots, on
#      tests/fixtures/examples/js-tiny-dep (one npm dependency with a
#      lockfile, tests passing: each task ends at step 0, no model call),
#      the install cached (a warm-up task installs it once, or finds it
#      cached from an earlier run):
#        - "verify run": every task has its own test command, so step 0
#          really runs the tests in a Phase B sandbox on the cached install;
#        - "verify cached": the same test command as the warm-up, so step 0
#          is answered by the verify cache: the worker's own overhead
#          (Kafka, fetch of the repository mirror, plan, Redis).
#      Wall clock from just before `kiwi batch` to the last result's
#      finished_at.
#   2. progress event latency, p50 and p99: the event's ts field (stamped
#      where it is made: the task process, or the daemon for "accepted") to
#      the moment its line arrives from `kiwi tail progress --follow`, for
#      every event of the measured tasks.
#   3. memory: VmRSS of the idle kiwi-worker (after start, the group settled
#      and the first egress check done), and per busy slot (the task
#      process's VmRSS, and the daemon's growth, sampled every 200 ms while
#      every slot is busy). The sandboxes' own processes run under dockerd
#      and are not counted.
#
# The worker runs as in production: KIWI_EGRESS_APPLY=true (it applies the
# host's egress rules: run as root), Phase A through its egress proxy, and
# it takes nothing while degraded (the bench stops then, saying why).
#
# Settings (environment): KIWI_BENCH_SLOTS ("1 2 4"), KIWI_BENCH_TASKS (8,
# tasks per slot count with the verify run), KIWI_BENCH_CACHED_TASKS (24),
# KIWI_BUILD_DIR (build/). Needs the stack: set -a; . /var/lib/kiwi/stack.env.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tests/worker/sh/lib.sh"
need_services

SLOTS_LIST=${KIWI_BENCH_SLOTS:-1 2 4}
N_RUN=${KIWI_BENCH_TASKS:-8}
N_CACHED=${KIWI_BENCH_CACHED_TASKS:-24}
BASE_RUN=$RUN_ID
REPO=js-tiny-dep
now_ms() { date +%s%3N; }

topic_ready() { # topic_ready TOPIC: created (a metadata request makes it)
  for _ in $(seq 1 40); do
    kcat -b "$KIWI_KAFKA_BROKERS" -L -t "$1" 2>/dev/null | grep -q "topic \"$1\" with [1-9]" && return 0
    sleep 0.25
  done
  fail "cannot create topic $1"
}

# wait_settled NAME PID: assigned, its egress checks all reported in a
# heartbeat, and no egress check running. A degraded worker takes no task
# (as in production): the bench stops, with its reason.
wait_settled() {
  local name=$1 pid=$2
  for _ in $(seq 1 240); do
    if grep -q "assigned [1-9]" "$TMP/worker-$name.log" \
      && [ "$(hb_of "$name" 'len(checks) >= 4' 2>/dev/null)" = True ] \
      && ! pgrep -P "$pid" -f -- --egress-check >/dev/null; then
      [ "$(hb_of "$name" 'h["degraded"]')" = False ] \
        || fail "worker $name is degraded: $(hb_of "$name" 'h.get("degraded_reason")')"
      return 0
    fi
    sleep 0.5
  done
  fail "worker $name did not settle (log: $TMP/worker-$name.log)"
}

# wait_n_results N IDS_FILE DEADLINE_S: until the results topic has a result
# for each id in the file; prints the last finished_at (ms).
wait_n_results() {
  local deadline=$((SECONDS + $3))
  while :; do
    kiwi_cli tail results >"$TMP/results.jsonl" 2>>"$TMP/cli.log" || : >"$TMP/results.jsonl"
    if python3 - "$TMP/results.jsonl" "$2" <<'PY'
import json, sys
want = {l.strip() for l in open(sys.argv[2]) if l.strip()}
res = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
got = [r for r in res if r["task_id"] in want]
bad = [r for r in got if r["status"] != "not_fixed"]
if bad:
    sys.exit(2)
if {r["task_id"] for r in got} != want:
    sys.exit(1)
print(max(r["finished_at"] for r in got))
PY
    then return 0; else [ $? = 2 ] && fail "$(python3 - "$TMP/results.jsonl" "$2" <<'PY'
import json, sys
want = {l.strip() for l in open(sys.argv[2]) if l.strip()}
bad = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = [r for r in bad if r["task_id"] in want and r["status"] != "not_fixed"]
print(f"{len(bad)} task(s) did not end at step 0, e.g. {bad[0]['status']}: {bad[0].get('reason', '')[:300]}")
PY
)"; fi
    [ "$SECONDS" -lt "$deadline" ] || fail "results missing after $3 s"
    sleep 0.3
  done
}

# batch NAME N TEST_PREFIX: N tasks on the repository through `kiwi batch`
# (test command "TEST_PREFIX npm test", with $i in the prefix expanded per
# task); their ids in $TMP/ids-NAME.txt; prints the start ms.
batch() {
  local name=$1 n=$2 prefix=$3 i
  : >"$TMP/batch-$name.tsv"
  for i in $(seq 1 "$n"); do
    printf '%s\t%s\t%s\t%s\n' "$GIT_URL_BASE/$REPO.git" main "${prefix//\$i/$i} npm test" "Make the tests pass." \
      >>"$TMP/batch-$name.tsv"
  done
  local t0
  t0=$(now_ms)
  kiwi_cli batch --max-rounds 1 --timeout 600 --provider anthropic --model claude-sonnet-4-5-20250929 \
    --base-url "http://127.0.0.1:9/" "$TMP/batch-$name.tsv" 2>>"$TMP/cli.log" \
    | sed -nE 's/^line [0-9]+: accepted: (.*)$/\1/p' >"$TMP/ids-$name.txt"
  [ "$(wc -l <"$TMP/ids-$name.txt")" = "$n" ] || fail "kiwi batch accepted $(wc -l <"$TMP/ids-$name.txt") of $n"
  echo "$t0"
}

# stamp OUT: stdin lines to OUT, each prefixed with its arrival time (ms).
stamp() {
  python3 -c '
import sys, time
out = open(sys.argv[1], "w")
while True:
    l = sys.stdin.readline()
    if not l:
        break
    out.write(f"{time.time() * 1000:.3f}\t{l}")
    out.flush()' "$1"
}

# The baseline: Kafka alone, at the same time. A small message every 25 ms
# for 6 s, produced by kcat with the worker's producer settings (idempotent,
# acks=all, linger 2 ms), read by `kiwi tail --follow --meta` like the
# events; measured from its Kafka timestamp (set when kcat produces it: kcat
# reads its input in blocks, so the line's own send time would count that).
baseline_send() {
  python3 -c '
import sys, time
for i in range(240):
    print("{\"ts\": %.3f, \"i\": %d}" % (time.time() * 1000, i), flush=True)
    time.sleep(0.025)' \
    | kcat -P -b "$KIWI_KAFKA_BROKERS" -t "$1" -X enable.idempotence=true -X acks=all -X linger.ms=2 2>>"$TMP/kcat.log"
}

# The memory sampler: every 200 ms, the daemon's VmRSS and its task
# processes' (count, VmRSS sum, Pss sum: Pss shares the pages of the
# executable and libraries they map with the daemon instead of counting them
# in full for each), as "ms n daemon_kb children_kb children_pss_kb" lines.
sampler() {
  python3 - "$1" "$2" "$3" <<'PY'
import os, sys, time
pid, out, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def rss(p):
    try:
        for l in open(f"/proc/{p}/status"):
            if l.startswith("VmRSS:"):
                return int(l.split()[1])
    except OSError:
        pass
    return 0
def pss(p):
    try:
        for l in open(f"/proc/{p}/smaps_rollup"):
            if l.startswith("Pss:"):
                return int(l.split()[1])
    except OSError:
        pass
    return 0
def children(p):
    kids = []
    try:
        for t in os.listdir(f"/proc/{p}/task"):
            kids += open(f"/proc/{p}/task/{t}/children").read().split()
    except OSError:
        pass
    return [int(k) for k in kids]
with open(out, "w") as f:
    while not os.path.exists(stop):
        ks = []
        for k in children(pid):
            try:
                if b"--task-child" in open(f"/proc/{k}/cmdline", "rb").read():
                    ks.append(k)
            except OSError:
                pass
        f.write(f"{int(time.time()*1000)} {len(ks)} {rss(pid)} {sum(rss(k) for k in ks)} {sum(pss(k) for k in ks)}\n")
        f.flush()
        time.sleep(0.2)
PY
}

git_serve "$REPO"
: >"$TMP/summary.tsv"

for s in $SLOTS_LIST; do
  RUN_ID="$BASE_RUN-s$s"
  log "==== $s slot(s) (run $RUN_ID)"
  topic_ready "kiwi.itest.$RUN_ID.tasks"
  topic_ready "kiwi.itest.$RUN_ID.progress"
  topic_ready "kiwi.itest.$RUN_ID.results"
  # production's configuration: the worker applies the host's egress rules
  # and runs Phase A through its proxy (KIWI_INSTALL_EGRESS's default)
  HB=10 worker_start "w$s" KIWI_SLOTS="$s" KIWI_EGRESS_APPLY=true KIWI_EGRESS_INTERVAL=86400 \
    KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
  pid=$(eval echo "\$WORKER_PID_w$s")
  wait_settled "w$s" "$pid"
  sleep 1
  idle_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
  log "idle VmRSS $idle_kb kB"

  # every progress line, stamped as it arrives (kiwi itself in the
  # background, so that stopping it ends the stamper too)
  "$KIWI" tail progress --follow --meta --brokers "$KIWI_KAFKA_BROKERS" --progress-topic "kiwi.itest.$RUN_ID.progress" \
    2>>"$TMP/cli.log" > >(stamp "$TMP/events-s$s.tsv") &
  tail_pid=$!
  PIDS+=($tail_pid)
  topic_ready "kiwi.itest.$RUN_ID.base"
  "$KIWI" tail "kiwi.itest.$RUN_ID.base" --type raw --follow --meta --brokers "$KIWI_KAFKA_BROKERS" \
    2>>"$TMP/cli.log" > >(stamp "$TMP/base-s$s.tsv") &
  base_pid=$!
  PIDS+=($base_pid)
  sleep 2

  # warm-up: the install (cached by an earlier run, or made now) and the
  # verify cache entry of the "cached" command
  t0=$(batch "warm-s$s" 1 "KIWI_BENCH=$BASE_RUN-cached")
  wait_n_results 1 "$TMP/ids-warm-s$s.txt" 600 >/dev/null
  kiwi_cli tail progress --task "$(cat "$TMP/ids-warm-s$s.txt")" 2>>"$TMP/cli.log" >"$TMP/warm-s$s.jsonl"
  warm_install=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["kind"] == "install":
        p = e["payload"]
        print("cached" if p.get("cached") else "installed in %s ms (%s)" % (p.get("duration_ms"), p.get("status")))' \
    "$TMP/warm-s$s.jsonl")
  log "warm-up done: install $warm_install"

  # verify run, sampling memory
  rm -f "$TMP/stop"
  sampler "$pid" "$TMP/mem-s$s.txt" "$TMP/stop" &
  PIDS+=($!)
  baseline_send "kiwi.itest.$RUN_ID.base" &
  PIDS+=($!)
  t0=$(batch "run-s$s" "$N_RUN" "KIWI_BENCH=$RUN_ID-\$i")
  t1=$(wait_n_results "$N_RUN" "$TMP/ids-run-s$s.txt" 900)
  touch "$TMP/stop"
  sleep 0.5
  log "verify run: $N_RUN tasks in $((t1 - t0)) ms"

  # verify cached
  t2=$(batch "cached-s$s" "$N_CACHED" "KIWI_BENCH=$BASE_RUN-cached")
  t3=$(wait_n_results "$N_CACHED" "$TMP/ids-cached-s$s.txt" 900)
  log "verify cached: $N_CACHED tasks in $((t3 - t2)) ms"
  hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
  sleep 1
  kill "$tail_pid" "$base_pid" 2>/dev/null || true
  kill "$pid"
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done

  # every measured task's install was cached
  cat "$TMP/ids-run-s$s.txt" "$TMP/ids-cached-s$s.txt" >"$TMP/ids-measured-s$s.txt"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$N_RUN" "$((t1 - t0))" "$N_CACHED" "$((t3 - t2))" \
    "$idle_kb" "$hwm_kb" "$TMP/mem-s$s.txt" "$TMP/events-s$s.tsv" >>"$TMP/summary.tsv"
  echo "$s $TMP/base-s$s.tsv" >>"$TMP/base.txt"
done

python3 - "$TMP/summary.tsv" "$TMP" <<'PY'
import json, os, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
tmp = sys.argv[2]

def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100
    f = int(k)
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)

print()
print(f"kiwi-worker benchmark: {os.cpu_count()} CPUs (load average {open('/proc/loadavg').read().split()[0]} at the end),"
      " Kafka, Redis and dockerd on loopback, sandbox docker (runc);")
print("repository js-tiny-dep (one npm dependency, lockfile; tests pass: step 0 only, no model call)")
print()
print("1. throughput through one worker, install cached (kiwi batch -> last result's finished_at)")
print(f"   {'slots':>5}  {'verify run':>26}  {'vs 1 slot':>9}  {'verify cached':>26}  {'vs 1 slot':>9}")
base_run = base_cached = None
for s, nr, msr, nc, msc, idle, hwm, mem, ev in rows:
    tr = int(nr) / (int(msr) / 1000)
    tc = int(nc) / (int(msc) / 1000)
    base_run = base_run or tr
    base_cached = base_cached or tc
    print(f"   {s:>5}  {tr:6.2f} tasks/s ({nr} in {int(msr)/1000:5.1f} s)  {tr/base_run:8.2f}x"
          f"  {tc:6.2f} tasks/s ({nc} in {int(msc)/1000:5.1f} s)  {tc/base_cached:8.2f}x")

print()
print("2. progress event latency: event ts -> line read from `kiwi tail progress --follow`; split at the")
print("   message's Kafka timestamp (set when kiwi-worker produces it): ts -> produce is the pipe from the")
print("   task process and the daemon's loop; produce -> tail is librdkafka, the broker and the consumer")
print(f"   {'slots':>5}  {'events':>6}  {'p50 ms':>7}  {'p99 ms':>7}  {'max ms':>7}  {'ts->produce p50/p99':>20}  {'produce->tail p50/p99':>22}")
alll, alla, allb = [], [], []
p99_by_slots = {}
def row(name, lat, la, lb):
    print(f"   {name:>5}  {len(lat):6d}  {pct(lat, 50):7.1f}  {pct(lat, 99):7.1f}  {max(lat):7.1f}"
          f"  {pct(la, 50):9.1f} / {pct(la, 99):6.1f}  {pct(lb, 50):11.1f} / {pct(lb, 99):6.1f}")
for s, nr, msr, nc, msc, idle, hwm, mem, ev in rows:
    ids = {l.strip() for l in open(os.path.join(tmp, f"ids-measured-s{s}.txt")) if l.strip()}
    lat, la, lb = [], [], []
    for l in open(ev):
        t, j = l.split("\t", 1)
        m = json.loads(j)
        e = m["message"]
        if e["task_id"] in ids:
            lat.append(float(t) - e["ts"])
            la.append(m["timestamp"] - e["ts"])
            lb.append(float(t) - m["timestamp"])
    alll += lat; alla += la; allb += lb
    p99_by_slots[s] = pct(lat, 99)
    row(s, lat, la, lb)
row("all", alll, alla, allb)
print("   (target: p99 < 50 ms on loopback)")
print()
print("   baseline, Kafka alone at the same time (during each verify run): kcat produces a message every")
print("   25 ms with the worker's producer settings (idempotent, acks=all, linger 2 ms), `kiwi tail --follow`")
print("   reads it; Kafka timestamp -> line read (compare with produce -> tail above):")
print(f"   {'slots':>5}  {'msgs':>6}  {'p50 ms':>7}  {'p99 ms':>7}  {'max ms':>7}  {'event p99 / this p99':>20}")
for l in open(os.path.join(tmp, "base.txt")):
    s, path = l.split()
    lat = []
    for x in open(path):
        t, j = x.split("\t", 1)
        m = json.loads(j)
        lat.append(float(t) - m["timestamp"])
    if lat:
        print(f"   {s:>5}  {len(lat):6d}  {pct(lat, 50):7.1f}  {pct(lat, 99):7.1f}  {max(lat):7.1f}"
              f"  {p99_by_slots[s] / pct(lat, 99):20.2f}")
    else:
        print(f"   {s:>5}  no baseline messages read")

print()
print("3. memory: VmRSS (/proc/PID/status) and, for the task processes, Pss (/proc/PID/smaps_rollup)")
for s, nr, msr, nc, msc, idle, hwm, mem, ev in rows:
    samples = [tuple(map(int, l.split())) for l in open(mem) if l.strip()]
    full = [x for x in samples if x[1] == int(s)]
    busy = [x for x in samples if x[1] > 0]
    line = f"   {s} slot(s): idle worker {int(idle)/1024:5.1f} MiB (target < 15 MiB); peak (VmHWM) {int(hwm)/1024:5.1f} MiB"
    if full:
        per_task = statistics.median(x[3] / x[1] for x in full) / 1024
        per_pss = statistics.median(x[4] / x[1] for x in full) / 1024
        growth = (statistics.median(x[2] for x in full) - int(idle)) / 1024
        line += (f"\n      all {s} busy ({len(full)} samples): task process VmRSS {per_task:4.1f} MiB (Pss {per_pss:4.1f} MiB)"
                 f" each, daemon {growth:+4.1f} MiB -> per busy slot {(per_task + growth / int(s)):4.1f} MiB resident,"
                 f" {(per_pss + growth / int(s)):4.1f} MiB proportional")
    elif busy:
        line += f"; never all {s} busy at a sample ({len(busy)} busy samples)"
    print(line)
PY
