#!/usr/bin/env bash
# test_worker_e2e.sh: a task through the whole system: `kiwi submit` puts it
# on the tasks topic, kiwi-worker takes it (consumer group), fetches the
# repository from a git server on loopback, runs step 0 and the session
# against the scripted provider in real Docker sandboxes, publishes the
# progress events and the result; `kiwi wait` sees it fixed with its diff,
# `kiwi tail` shows the events in order and the worker's heartbeat.
. "$(dirname "$0")/lib.sh"
need_services

git_serve js-sum
provider_serve
worker_start a KIWI_SLOTS=2 KIWI_EGRESS_INTERVAL=10 KIWI_EGRESS_STOP_WHEN_DEGRADED=false KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

id=$(submit_fix js-sum js-sum-one-round --max-rounds 3)
log "submitted $id"
set +e
kiwi_cli wait "$id" --timeout 180 >"$TMP/result.json"
rc=$?
set -e
[ "$rc" = 0 ] || fail "kiwi wait exited $rc: $(cat "$TMP/result.json")"
python3 - "$TMP/result.json" "$id" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r = r.get("result", r)
assert r["task_id"] == sys.argv[2], r
assert r["status"] == "fixed", r
assert "+  return a + b;" in r["diff"], r["diff"]
assert r["rounds"] == 1, r
PY
log "result: fixed with its diff"

kiwi_cli tail progress --task "$id" >"$TMP/progress.jsonl"
python3 - "$TMP/progress.jsonl" <<'PY'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evs = [e.get("event", e) for e in evs]
seqs = [e["seq"] for e in evs]
assert seqs == list(range(1, len(seqs) + 1)), seqs
phases = [e["phase"] for e in evs]
assert phases[0] == "accepted" and phases[-1] == "finished", phases
for p in ("install", "step0", "round"):
    assert p in phases, (p, phases)
rnd = [e for e in evs if e["phase"] == "round"][0]
assert rnd["payload"]["verify"]["passed"] is True, rnd
print("events:", " ".join(f'{e["seq"]}:{e["phase"]}/{e["kind"]}' for e in evs))
PY

# a ref that does not exist is a named failure, not a crash
bad=$(kiwi_cli submit --repo "$GIT_URL_BASE/js-sum.git" --ref no-such-branch --test "npm test" --goal "x")
set +e
kiwi_cli wait "$bad" --timeout 120 >"$TMP/bad.json"
rc=$?
set -e
[ "$rc" = 16 ] || fail "a missing ref: kiwi wait exited $rc (want 16, error): $(cat "$TMP/bad.json")"
grep -q 'ref not found' "$TMP/bad.json" || fail "a missing ref is not named: $(cat "$TMP/bad.json")"
grep -q 'no-such-branch' "$TMP/bad.json" || fail "the missing ref is not named: $(cat "$TMP/bad.json")"
log "a missing ref: error, named"

# a second task on the same repository: fetched into the same mirror
curl -fsS -X POST "http://127.0.0.1:$PROVIDER_PORT/_control/reset?script=js-sum-one-round" >/dev/null
id2=$(submit_fix js-sum js-sum-one-round --max-rounds 3)
kiwi_cli wait "$id2" --timeout 180 >"$TMP/result2.json" || fail "second task: $(cat "$TMP/result2.json")"
mirror="${KIWI_STATE_DIR:-/var/lib/kiwi}/mirrors/$(python3 -c 'import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())' "$GIT_URL_BASE/js-sum.git").git"
[ -d "$mirror" ] || fail "no mirror at $mirror"
log "second task fixed from the same mirror ($mirror)"

# snapshots whose cache entries expired are removed from disk; live ones stay
gcstate="$TMP/gc-state"
mkdir -p "$gcstate/snapshots/expired-$RUN_ID" "$gcstate/snapshots/live-$RUN_ID" "$gcstate/snapshots/fresh-$RUN_ID"
touch -d '2 hours ago' "$gcstate/snapshots/expired-$RUN_ID" "$gcstate/snapshots/live-$RUN_ID"
redis-cli -h "$KIWI_REDIS_HOST" -p "$KIWI_REDIS_PORT" HSET "kiwi:install:live-$RUN_ID" status ok >/dev/null
# expiry only: gc-state shares the host's disk, and above the watermark
# (KIWI_GC_DISK_HIGH, 85% by default) the live snapshot, two hours unused,
# would go by it (test_gc and test_worker_images check the watermark)
KIWI_GC_DISK_HIGH=100 KIWI_STATE_DIR="$gcstate" "$WORKER" --gc-snapshots >"$TMP/gc.log" 2>&1
redis-cli -h "$KIWI_REDIS_HOST" -p "$KIWI_REDIS_PORT" DEL "kiwi:install:live-$RUN_ID" >/dev/null
[ ! -e "$gcstate/snapshots/expired-$RUN_ID" ] || fail "an expired snapshot was kept: $(cat "$TMP/gc.log")"
[ -d "$gcstate/snapshots/live-$RUN_ID" ] || fail "a live snapshot was removed"
[ -d "$gcstate/snapshots/fresh-$RUN_ID" ] || fail "a recently used snapshot was removed"
log "snapshot clean-up: expired removed, live and recently used kept"

# the heartbeat carries the worker's state and, once run, its egress checks
for _ in $(seq 1 30); do
  kiwi_cli tail heartbeats >"$TMP/hb.jsonl" || true
  if python3 - "$TMP/hb.jsonl" "$RUN_ID-a" "${KIWI_SANDBOX_RUNTIME:-docker}" <<'PY'
import json, sys
hbs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
hbs = [h for h in hbs if h.get("worker_id") == sys.argv[2]]
assert hbs, "no heartbeat"
last = hbs[-1]
assert last["slots_total"] == 2
names = {c["name"] for c in last.get("egress", [])}
assert {"phase_b_isolated", "metadata_blocked", "phase_a_https"} <= names, names
# under gVisor the verify has a runtime of its own (runsc-verify): the check
# looks at both, the Implementer's sandbox's and the verify's
b = [c for c in last["egress"] if c["name"] == "phase_b_isolated"][0]
if sys.argv[3] == "runsc":
    assert b["ok"] and "the verify's runtime: interfaces: lo" in b.get("detail", ""), b
    print("phase_b_isolated:", b.get("detail", ""))
print("heartbeat:", json.dumps(last)[:600])
PY
  then ok=1; break; fi
  sleep 2
done
[ "${ok:-0}" = 1 ] || fail "no heartbeat with the egress checks"
echo "1 passed, 0 failed"
