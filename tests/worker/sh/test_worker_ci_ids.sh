#!/usr/bin/env bash
# test_worker_ci_ids.sh: a CI event's task id taken first by another
# producer, through the pool (Kafka, Redis, kiwi-worker), decided from what
# the results topic carries (read with kcat) and what `kiwi wait` prints:
#   - with the webhook secret: an attacker submits, before the event comes,
#     a task under the id the event would have had without its tag
#     (gh-run-<run>-<attempt>) on another repository, the fleet finishes
#     it, and a `fixed` result with a diff for that id is on the topic (as
#     the attacker's own worker would publish it); then the event arrives:
#     its task is run as itself (its result is its own checkout's, not a
#     reused-id refusal) and `kiwi wait` on its id never prints the
#     attacker's result;
#   - without a secret the id is bound to the repository and commit but can
#     be computed: the attacker takes it first with another task on the
#     same repository and commit, and forges a `fixed` result stamped with
#     its own task's hash; the event's task is refused as a reused id, and
#     `kiwi wait --task-sha256` with the hash `kiwi ci-event --json`
#     printed passes over the attacker's results and prints that refusal,
#     stamped with the event's own task hash.
# No task here reaches a sandbox: each names a commit its repository does
# not have, so the worker ends it at its checkout.
. "$(dirname "$0")/lib.sh"
need_services

git_serve js-pass js-sum
ABSENT=9fceb02d0ae598e95dc970b74767f19372d61af8 # in neither repository
RUN_NO="$(date +%s)$$"                             # a run id no earlier test used (ids are global in Redis)
RESULTS="kiwi.itest.$RUN_ID.results"
SECRET="kiwi-ci-secret-$RUN_ID"
printf '%s\n' "$SECRET" >"$TMP/secret"
chmod 600 "$TMP/secret"

# event FILE RUN: the fixture's workflow_run failure for run RUN (attempt
# 2) of js-pass as served here, at the absent commit
event() {
  python3 - "$ROOT/tests/fixtures/ci/workflow_run.completed.failure.json" "$1" "$2" "$GIT_URL_BASE/js-pass.git" <<'PY'
import json, sys
src, out, run, url = sys.argv[1:5]
d = json.load(open(src))
d["workflow_run"]["id"] = int(run)
d["repository"]["clone_url"] = url
json.dump(d, open(out, "w"))
PY
}

# forge ID STATUS [TASK_SHA256]: a result for ID on the results topic, as
# a worker publishes it (msgpack, keyed by the id), with a diff when fixed
forge() {
  /usr/bin/python3 - "$TMP/forged.bin" "$1" "$2" "${3:-}" <<'PY'
import msgpack, sys, time
out, tid, status, sha = sys.argv[1:5]
r = {"v": 1, "task_id": tid, "status": status, "rounds": 1, "tokens_in": 10, "tokens_out": 10,
     "cost_usd_micros": 0, "duration_ms": 1000, "worker_id": "attacker-worker",
     "finished_at": int(time.time() * 1000)}
if status == "fixed":
    r["diff"] = "--- a/test.js\n+++ b/test.js\n@@ -1 +1 @@\n-ATTACKER-OLD\n+ATTACKER-DIFF\n"
if sha:
    r["task_sha256"] = sha
open(out, "wb").write(msgpack.packb(r, use_bin_type=False))
PY
  kcat -P -b "$KIWI_KAFKA_BROKERS" -t "$RESULTS" -k "$1" "$TMP/forged.bin" 2>>"$TMP/kcat.log" || fail "kcat could not produce"
}

# results_of ID FILE: every result keyed ID on the results topic, read with
# kcat (one partition per key: in the order produced), one JSON object a
# line (decoded here with python3-msgpack)
results_of() {
  kcat_raw results "$TMP/results.raw"
  /usr/bin/python3 - "$TMP/results.raw" "$1" >"$2" <<'PY'
import json, msgpack, os, sys
sys.path.insert(0, os.environ["KIWI_SH_LIB"])
from kcat_frames import frames
for key, value in frames(sys.argv[1]):
    if key == sys.argv[2]:
        print(json.dumps(msgpack.unpackb(value, raw=False)))
PY
}

# results_wait ID N: until N results keyed ID are on the topic (the fleet's
# among them), at most 120 s
results_wait() {
  timeout 120 "$KIWI" tail --brokers "$KIWI_KAFKA_BROKERS" --results-topic "$RESULTS" results \
    --follow --from-beginning --task "$1" --limit "$2" >/dev/null 2>>"$TMP/cli.log" || true
}

worker_start p KIWI_SLOTS=2 KIWI_STATE_DIR="$TMP/state" KIWI_EGRESS_STOP_WHEN_DEGRADED=false KIWI_EGRESS_INTERVAL=86400

# ---------- with the webhook secret ----------
event "$TMP/event1.json" "$RUN_NO"
guess="gh-run-$RUN_NO-2"
# the attacker's own worker published a fix for the id ...
forge "$guess" fixed
# ... and the fleet ran the attacker's task under it, on another repository
kiwi_cli submit --id "$guess" --repo "$GIT_URL_BASE/js-sum.git" --ref "$ABSENT" --test "npm test" \
  --goal "The attacker's task." >/dev/null 2>>"$TMP/cli.log" || fail "the attacker's submit"
results_wait "$guess" 2
results_of "$guess" "$TMP/guess.jsonl"
[ "$(wc -l <"$TMP/guess.jsonl")" = 2 ] || fail "the attacker's id: $(cat "$TMP/guess.jsonl")"
log "the attacker took $guess: a forged fix and the fleet's result are on the topic"

kiwi_cli ci-event --secret-file "$TMP/secret" --test "npm test" --json "$TMP/event1.json" \
  >"$TMP/ci1.json" 2>>"$TMP/cli.log" || fail "ci-event: $(tail -3 "$TMP/cli.log")"
ci_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$TMP/ci1.json")
ci_sha=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("task_sha256", ""))' "$TMP/ci1.json")
log "the CI event's task: $ci_id"
rc=0
kiwi_cli wait "$ci_id" --timeout 180 >"$TMP/wait1.json" 2>>"$TMP/cli.log" || rc=$?
[ -s "$TMP/wait1.json" ] || fail "no result for the CI event's task $ci_id (kiwi wait exit $rc)"
results_of "$ci_id" "$TMP/ci1-results.jsonl"
python3 - "$TMP/wait1.json" "$TMP/ci1-results.jsonl" "$ci_id" "$ci_sha" "$rc" <<'PY' || fail "with the secret: $(cat "$TMP/wait1.json")"
import json, sys
waited = json.load(open(sys.argv[1]))
on_topic = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ci_id, ci_sha, rc = sys.argv[3], sys.argv[4], int(sys.argv[5])
for r in [waited] + on_topic:
    assert r["task_id"] == ci_id, r
    assert r["status"] != "fixed" and "ATTACKER" not in r.get("diff", ""), r
    assert r.get("worker_id") != "attacker-worker", r
    assert "already used by a different task" not in r.get("reason", ""), r  # not refused as a reused id
    assert "js-pass" in r.get("reason", ""), r                               # its own checkout's error
    assert r.get("task_sha256") == ci_sha and len(ci_sha) == 64, (r, ci_sha)
assert len(on_topic) == 1, on_topic
assert rc == 16, rc
PY
log "with the secret: the event's task ran as itself ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reason"][:140])' "$TMP/wait1.json")); kiwi wait never printed the attacker's"

# ---------- without a secret: the id computed, the follower checks ----------
RUN_NO2="${RUN_NO}1"
event "$TMP/event2.json" "$RUN_NO2"
# the id as docs/threat-model.md says it is made, with no key
guess2=$(python3 - "gh-run-$RUN_NO2-2" "$GIT_URL_BASE/js-pass.git" "$ABSENT" <<'PY'
import hashlib, sys
m = b"".join(p.encode() + b"\0" for p in ["kiwi-ci-task-id"] + sys.argv[1:4])
print(sys.argv[1] + "-" + hashlib.sha256(m).hexdigest()[:16])
PY
)
kiwi_cli submit --id "$guess2" --repo "$GIT_URL_BASE/js-pass.git" --ref "$ABSENT" --test "npm test" \
  --goal "The attacker's task on the same commit." --json >"$TMP/attacker2.json" 2>>"$TMP/cli.log" ||
  fail "the attacker's second submit"
attacker_sha=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("task_sha256", ""))' "$TMP/attacker2.json")
results_wait "$guess2" 1
forge "$guess2" fixed "$attacker_sha"

unset KIWI_CI_WEBHOOK_SECRET
kiwi_cli ci-event --test "npm test" --json "$TMP/event2.json" >"$TMP/ci2.json" 2>>"$TMP/cli.log" ||
  fail "ci-event without a secret: $(tail -3 "$TMP/cli.log")"
ci_id2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$TMP/ci2.json")
ci_sha2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("task_sha256", ""))' "$TMP/ci2.json")
[ "$ci_id2" = "$guess2" ] || fail "the unkeyed id is $ci_id2, the documented derivation gives $guess2"
rc=0
kiwi_cli wait "$ci_id2" --task-sha256 "$ci_sha2" --timeout 180 >"$TMP/wait2.json" 2>"$TMP/wait2.err" || rc=$?
results_of "$ci_id2" "$TMP/ci2-results.jsonl"
python3 - "$TMP/wait2.json" "$TMP/ci2-results.jsonl" "$ci_id2" "$ci_sha2" "$attacker_sha" "$rc" <<'PY' ||
import json, sys
waited = json.load(open(sys.argv[1]))
on_topic = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ci_id, ci_sha, attacker_sha, rc = sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
assert len(ci_sha) == 64 and len(attacker_sha) == 64 and ci_sha != attacker_sha, (ci_sha, attacker_sha)
# on the topic: the attacker's two (the fleet's and the forged fix), then the event's refusal
assert [r.get("task_sha256") for r in on_topic] == [attacker_sha, attacker_sha, ci_sha], on_topic
assert waited["task_id"] == ci_id and waited["status"] == "error", waited
assert waited["task_sha256"] == ci_sha, waited
assert "already used by a different task" in waited["reason"], waited
assert "ATTACKER" not in waited.get("diff", ""), waited
assert rc == 16, rc
PY
  fail "without a secret: $(cat "$TMP/wait2.json" "$TMP/wait2.err")"
grep -q "its task_sha256 differs): passed over" "$TMP/wait2.err" || fail "kiwi wait did not say it passed over: $(cat "$TMP/wait2.err")"
log "without a secret: the id was taken, and kiwi wait --task-sha256 printed the event's own refusal, not the attacker's fix"
echo "PASS"
