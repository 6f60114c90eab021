#!/usr/bin/env bash
# test_worker_egress.sh: the worker's egress checks in its heartbeat, and
# what a failed isolation check does: without the host's metadata rules the
# worker reports itself degraded, says why, and takes no new task; once the
# rules are applied the checks pass and the waiting task is taken and done;
# a worker stopped in the middle of a check leaves no sandbox behind.
. "$(dirname "$0")/lib.sh"
need_services
EGRESS="$ROOT/ops/egress/egress.sh"

applied_before=0
bash "$EGRESS" status >/dev/null 2>&1 && applied_before=1
# the host's rules go back to how the test found them, whatever happens
on_cleanup() {
  if [ "$applied_before" = 1 ]; then bash "$EGRESS" apply >/dev/null 2>&1
  else bash "$EGRESS" remove >/dev/null 2>&1; fi
}

[ "$applied_before" = 1 ] && bash "$EGRESS" remove >/dev/null

git_serve js-sum
provider_serve
worker_start a KIWI_SLOTS=1 KIWI_EGRESS_INTERVAL=10 KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

hb_field() { # hb_field PYEXPR: evaluated on this worker's newest heartbeat
  kiwi_cli tail heartbeats >"$TMP/hb.jsonl" 2>/dev/null || true
  python3 - "$TMP/hb.jsonl" "$RUN_ID-a" "$1" <<'PY'
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

# 1. no rules: degraded, with the reason, and no task taken
for _ in $(seq 1 40); do
  [ "$(hb_field 'h["degraded"] and not checks.get("metadata_blocked", {"ok": True})["ok"]' 2>/dev/null)" = True ] && break
  sleep 1
done
[ "$(hb_field 'h["degraded"]')" = True ] || fail "the worker did not report itself degraded without the rules"
reason=$(hb_field 'h.get("degraded_reason", "")')
echo "$reason" | grep -q "metadata_blocked" || fail "the degraded reason does not name the check: $reason"
echo "$reason" | grep -q "taking no new tasks" || fail "the degraded reason does not say tasks stop: $reason"
[ "$(hb_field 'checks["phase_b_isolated"]["ok"]')" = True ] || fail "phase_b_isolated should pass"
[ "$(hb_field 'checks["phase_a_https"]["ok"]')" = True ] || fail "phase_a_https should pass: $(hb_field 'checks["phase_a_https"]')"
log "degraded: $reason" 

id=$(submit_fix js-sum js-sum-one-round --max-rounds 3)
sleep 8
kiwi_cli tail progress --task "$id" >"$TMP/p.jsonl" 2>/dev/null || true  # no topic yet: nothing taken
[ ! -s "$TMP/p.jsonl" ] || fail "a degraded worker took a task: $(head -2 "$TMP/p.jsonl")"
log "no task taken while degraded"

# 2. rules applied: the next check passes and the task is done
bash "$EGRESS" apply >/dev/null
kiwi_cli wait "$id" --timeout 120 >"$TMP/result.json" || fail "the task was not done after the rules: $(cat "$TMP/result.json")"
[ "$(hb_field 'checks["metadata_blocked"]["ok"]')" = True ] || fail "metadata_blocked still fails with the rules"
[ "$(hb_field 'h["degraded"]')" = False ] || fail "still degraded: $(hb_field 'h.get("degraded_reason")')"
log "rules applied: checks pass, the task was taken and fixed"

# 3. a worker stopped while an egress check has its sandbox up leaves no
#    container behind: the check is cancelled, its sandbox destroyed, and
#    the worker waits for that before it exits
worker_start b KIWI_SLOTS=1 KIWI_EGRESS_INTERVAL=10 KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
caught=""
for _ in $(seq 1 600); do
  caught=$(container_ids "org.kiwi.worker=$RUN_ID-b" "org.kiwi.task=egress-check")
  [ -n "$caught" ] && break
  sleep 0.1
done
[ -n "$caught" ] || fail "no egress-check sandbox of $RUN_ID-b seen in 60 s"
kill "$WORKER_PID_b"
for _ in $(seq 1 160); do kill -0 "$WORKER_PID_b" 2>/dev/null || break; sleep 0.25; done
kill -0 "$WORKER_PID_b" 2>/dev/null && fail "worker b still runs 40 s after SIGTERM"
left=$(container_ids "org.kiwi.worker=$RUN_ID-b")
[ -z "$left" ] || fail "worker b stopped during an egress check and left container(s): $(echo $left)"
log "stopped during an egress check (sandbox $(echo $caught | cut -c1-12)): no container left"
echo "2 passed, 0 failed"
