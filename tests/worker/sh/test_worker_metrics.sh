#!/usr/bin/env bash
# test_worker_metrics.sh: kiwi-worker's /metrics scraped by a real
# Prometheus server (Debian's prometheus, started here on loopback with its
# own configuration and storage, scraping every second). A worker with 3
# slots and KIWI_METRICS_ADDR on loopback fixes a task end to end (git
# server, scripted provider, real sandboxes); then Prometheus's HTTP API
# answers that the task was counted as fixed, that the phase histograms
# have counts, that a sandbox was started, that Redis is up and that the
# slots gauge is 3; the text the worker serves passes `promtool check
# metrics`.
. "$(dirname "$0")/lib.sh"
need_services
for tool in prometheus promtool curl; do
  command -v "$tool" >/dev/null || { echo "SKIP: no $tool (ops/setup.sh installs Debian's prometheus)"; exit 77; }
done

git_serve js-sum
provider_serve
mport=$(free_port)
worker_start a KIWI_SLOTS=3 KIWI_METRICS_ADDR="127.0.0.1:$mport" KIWI_EGRESS_INTERVAL=10 \
  KIWI_EGRESS_STOP_WHEN_DEGRADED=false KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

# the endpoint answers once the worker is up
# shellcheck disable=SC2154 # WORKER_PID_<name> is set by worker_start (lib.sh), through eval
for _ in $(seq 1 60); do
  curl -fsS "http://127.0.0.1:$mport/metrics" >"$TMP/first.txt" 2>/dev/null && break
  kill -0 "$WORKER_PID_a" 2>/dev/null || fail "the worker exited: $(tail -5 "$TMP/worker-a.log")"
  sleep 0.5
done
[ -s "$TMP/first.txt" ] || fail "no /metrics at 127.0.0.1:$mport (KIWI_METRICS_ADDR)"
log "the worker serves /metrics at 127.0.0.1:$mport"

# Prometheus of its own, scraping the worker every second
pport=$(free_port)
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: kiwi-worker
    static_configs:
      - targets: ['127.0.0.1:$mport']
EOF
promtool check config "$TMP/prometheus.yml" >"$TMP/promtool-config.log" 2>&1 \
  || fail "promtool refuses the scrape config: $(cat "$TMP/promtool-config.log")"
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prometheus-data" \
  --web.listen-address="127.0.0.1:$pport" >"$TMP/prometheus.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 60); do
  curl -fsS "http://127.0.0.1:$pport/-/ready" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$pport/-/ready" >/dev/null || fail "prometheus did not become ready: $(tail -5 "$TMP/prometheus.log")"
log "prometheus ready at 127.0.0.1:$pport"

id=$(submit_fix js-sum js-sum-one-round --max-rounds 3)
log "submitted $id"
kiwi_cli wait "$id" --timeout 180 >"$TMP/result.json" || fail "kiwi wait: $(cat "$TMP/result.json")"
grep -q '"status": *"fixed"' "$TMP/result.json" || fail "not fixed: $(cat "$TMP/result.json")"
log "task fixed"

# the text as served: Prometheus's own checker (format and naming)
curl -fsS "http://127.0.0.1:$mport/metrics" >"$TMP/metrics.txt"
promtool check metrics <"$TMP/metrics.txt" >"$TMP/promtool.log" 2>&1 \
  || fail "promtool check metrics: $(cat "$TMP/promtool.log")"
grep -qx 'kiwi_tasks_total{status="fixed"} 1' "$TMP/metrics.txt" \
  || fail "the fixed task is not counted in /metrics: $(grep kiwi_tasks_total "$TMP/metrics.txt")"
log "promtool check metrics: ok; /metrics counts the fixed task"

# query EXPR: the value of the single sample EXPR gives now, or nothing
query() {
  curl -fsS -G "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["status"] == "success", r
res = r["data"]["result"]
if len(res) == 1:
    print(res[0]["value"][1])
'
}
# expect EXPR WANT: polls until Prometheus has scraped what makes EXPR equal WANT
expect() {
  local got=""
  for _ in $(seq 1 60); do
    got=$(query "$1" || true)
    [ "$got" = "$2" ] && { log "prometheus: $1 = $got"; return 0; }
    sleep 0.5
  done
  fail "prometheus: $1 is '${got}', not $2 (last scrape: $(query 'up{job="kiwi-worker"}'))"
}
expect 'kiwi_tasks_total{job="kiwi-worker",status="fixed"}' 1
expect 'kiwi_tasks_total{job="kiwi-worker",status="error"}' 0
expect 'kiwi_slots{job="kiwi-worker"}' 3
expect 'kiwi_redis_up{job="kiwi-worker"}' 1
expect 'kiwi_task_duration_seconds_count{job="kiwi-worker"}' 1
for phase in checkout step0 round; do
  expect "kiwi_phase_duration_seconds_count{job=\"kiwi-worker\",phase=\"$phase\"} >= bool 1" 1
done
# a round's verify and the deciding verify of the published diff
expect 'kiwi_phase_duration_seconds_count{job="kiwi-worker",phase="verify"} >= bool 2' 1
expect 'kiwi_phase_duration_seconds_bucket{job="kiwi-worker",phase="round",le="+Inf"} >= bool 1' 1
# step 0's run (unless the verify cache serves it), the round's and the deciding verify
expect 'sum(kiwi_sandboxes_started_total{job="kiwi-worker"}) >= bool 2' 1
expect 'kiwi_cache_hits_total{job="kiwi-worker",kind="verify"} + kiwi_cache_misses_total{job="kiwi-worker",kind="verify"}' 1
expect 'count(kiwi_build_info{job="kiwi-worker",worker="'"$RUN_ID"'-a"})' 1
echo "1 passed, 0 failed"
