#!/usr/bin/env bash
# test_worker_own_faults.sh PART: Kiwi's own faults never become a
# repository's verdict, and two workers never disturb each other.
#
#   proxy     a worker whose egress proxy is dead (killed; its restarts held
#             off by a wrapper of proxy.sh the test controls) gets a task
#             with dependencies: the task waits for the proxy, and once the
#             hold is lifted its install runs through the restarted Squid;
#             killed and held off again, the next task waits its bound
#             (45 s) and then the result read with kcat is `error`
#             naming the proxy, not `install_failed`, and Redis holds no
#             install-cache entry for the task's key
#   id        a second kiwi-worker with the worker id of a running one (same
#             state dir) exits 2 naming the id and the holder's pid, while
#             the first keeps running, its Squid the same process with the
#             same configuration
#   rules     `kiwi-worker --once` where the host's egress rules do not hold
#             for its settings (a KIWI_INSTALL_DENY address no rule names:
#             the host's rules are read, never changed) refuses Phase A:
#             `error` with the fix as a command, no install sandbox made, no
#             cache entry; with KIWI_ONCE_EGRESS_UNCHECKED=true it runs
#             Phase A and says so in a warning and in its install event
#
# The test adds no iptables rule; its Squids listen on ports of its own on
# install bridges of their own.
. "$(dirname "$0")/lib.sh"
need_services
[ "$(id -u)" = 0 ] || { echo "SKIP: root (squid drops to its own user)"; exit 77; }
command -v squid >/dev/null || { [ "${KIWI_REQUIRE_SERVICES:-0}" = 1 ] && fail "squid missing"; echo "SKIP: squid (squid-openssl)"; exit 77; }
part=${1:?part: proxy, id or rules}

P1=$(( 20000 + $$ % 5000 * 3 )); PORTS="$P1,$((P1 + 1)),$((P1 + 2))"
STATE="$TMP/state"
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt # the registries' proxy CA, for Phase A
mkdir -p "$STATE"
redis() { redis-cli -h "${KIWI_REDIS_HOST:-127.0.0.1}" -p "${KIWI_REDIS_PORT:-16379}" --no-auth-warning \
  ${KIWI_REDIS_PASSWORD:+-a "$KIWI_REDIS_PASSWORD"} "$@"; }
# squid_pid WORKER: the pid in its proxy's pid file, when that process runs
squid_pid() {
  local p
  p=$(cat "$STATE/egress-proxy/$RUN_ID-$1/squid.pid" 2>/dev/null) || return 1
  kill -0 "$p" 2>/dev/null && echo "$p"
}
# stop_worker NAME: SIGTERM, and until it has ended: its egress check's
# sandboxes are removed by it, not left to the clean-up's SIGKILL
stop_worker() {
  local v="WORKER_PID_$1"
  kill "${!v}" 2>/dev/null || return 0
  for _ in $(seq 1 120); do kill -0 "${!v}" 2>/dev/null || return 0; sleep 0.5; done
  fail "worker $1 still runs 60 s after SIGTERM"
}
proxied_worker() { # NAME [assignments...]: a worker with its proxy on this run's ports
  local name=$1; shift
  worker_start "$name" KIWI_SLOTS=1 KIWI_EGRESS_INTERVAL=86400 KIWI_EGRESS_STOP_WHEN_DEGRADED=false \
    KIWI_CA_BUNDLE="$CA_BUNDLE" KIWI_STATE_DIR="$STATE" KIWI_INSTALL_EGRESS=registries KIWI_INSTALL_PROXY_PORTS="$PORTS" "$@"
  wait_hb "$name" 'checks.get("egress_proxy", {}).get("ok") is True' 60 ||
    fail "worker $name: no egress_proxy check passing: $(hb_of "$name" 'checks.get("egress_proxy")' 2>&1; tail -n 20 "$TMP/worker-$name.log")"
}

case $part in
proxy)
  # proxy.sh behind a wrapper: `run` refused while $TMP/hold exists, so
  # the worker's restarts of a killed Squid fail for as long as the test
  # wants the proxy absent
  cat >"$TMP/proxy-wrap.sh" <<EOF
#!/bin/bash
if [ "\$1" = run ] && [ -e "$TMP/hold" ]; then echo "proxy-wrap: held off by the test" >&2; exit 1; fi
exec bash "$BUILD/libexec/kiwi/proxy.sh" "\$@"
EOF
  proxied_worker a KIWI_EGRESS_PROXY_SCRIPT="$TMP/proxy-wrap.sh"
  sq=$(squid_pid a) || fail "worker a's squid has no pid file"
  touch "$TMP/hold"
  kill -9 "$sq"
  for _ in $(seq 1 60); do grep -q 'proxy-wrap: held off' "$TMP/worker-a.log" && break; sleep 0.5; done
  grep -q 'proxy-wrap: held off' "$TMP/worker-a.log" || fail "the worker did not try to restart its squid: $(tail -n 20 "$TMP/worker-a.log")"
  squid_pid a >/dev/null && fail "a squid of worker a still runs"
  log "worker a's squid $sq killed, its restarts held off"

  # a task that finds no proxy waits for the worker to restart it: the
  # hold lifted once the task says it waits, its install runs through the
  # new Squid
  fresh_npm_repo js-tiny-dep "$TMP/repo-back" "proxy back"
  tid=$(kiwi_cli submit --repo "$TMP/repo-back" --ref main --test "npm test" --goal "Make the tests pass." \
    --provider anthropic --model claude-sonnet-4-5-20250929 --base-url "http://127.0.0.1:9/")
  for _ in $(seq 1 120); do grep -q 'waiting up to .* for the worker to restart it' "$TMP/worker-a.log" && break; sleep 0.5; done
  grep -q 'waiting up to .* for the worker to restart it' "$TMP/worker-a.log" ||
    fail "the task did not wait for the proxy: $(tail -n 20 "$TMP/worker-a.log")"
  rm -f "$TMP/hold"
  kiwi_cli wait "$tid" --timeout 400 >"$TMP/result-back.json" || true
  kiwi_cli tail progress --task "$tid" >"$TMP/progress-back.jsonl" 2>/dev/null || true
  python3 - "$TMP/progress-back.jsonl" <<'PY' || fail "the task that waited: $(tail -n 30 "$TMP/worker-a.log")"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evs = [e.get("event", e) for e in evs]
inst = [e["payload"] for e in evs if e.get("kind") == "install"]
assert inst and inst[-1].get("status") == "ok", "install: %s" % inst
PY
  grep -q 'the egress proxy is back (squid pid [0-9]*) after [0-9]* ms' "$TMP/worker-a.log" ||
    fail "no 'the egress proxy is back' in the worker's log"
  log "a task that found no proxy waited: $(grep -o 'the egress proxy is back.*' "$TMP/worker-a.log" | tail -n 1); install ok"
  sq=$(squid_pid a) || fail "worker a's squid was not restarted"
  touch "$TMP/hold"
  held=$(grep -c 'proxy-wrap: held off' "$TMP/worker-a.log")
  kill -9 "$sq"
  for _ in $(seq 1 60); do [ "$(grep -c 'proxy-wrap: held off' "$TMP/worker-a.log")" -gt "$held" ] && break; sleep 0.5; done
  squid_pid a >/dev/null && fail "a squid of worker a still runs"

  # held off for good: the task waits its bound, then ends in error
  src="$TMP/repo"
  fresh_npm_repo js-tiny-dep "$src" "proxy absent"
  tid=$(kiwi_cli submit --repo "$src" --ref main --test "npm test" --goal "Make the tests pass." --provider anthropic \
    --model claude-sonnet-4-5-20250929 --base-url "http://127.0.0.1:9/")
  log "submitted $tid"
  set +e
  kiwi_cli wait "$tid" --timeout 400 >"$TMP/result.json"
  set -e
  kiwi_cli tail progress --task "$tid" >"$TMP/progress.jsonl" 2>/dev/null || true
  key=$(python3 - "$TMP/progress.jsonl" <<'PY'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evs = [e.get("event", e) for e in evs]
keys = [e["payload"]["key"] for e in evs if e.get("kind") == "install" and e["payload"].get("key")]
print(keys[-1] if keys else "")
PY
)
  [ -n "$key" ] || fail "no install event with a key: $(cat "$TMP/progress.jsonl")"
  # the result as the results topic carries it (kcat): keyed by the task,
  # status error, the proxy named
  kcat_raw results "$TMP/results-raw.bin"
  python3 - "$TMP/results-raw.bin" "$tid" <<'PY' || fail "the result on the results topic: $(cat "$TMP/result.json")"
import os, sys
sys.path.insert(0, os.environ["KIWI_SH_LIB"])
from kcat_frames import frames
tid = sys.argv[2]
mine = [p for k, p in frames(sys.argv[1]) if k == tid]
assert len(mine) == 1, "%d result(s) keyed by %s" % (len(mine), tid)
p = mine[0]
assert b"install_failed" not in p, p
assert b"\xa6status\xa5error" in p, p
assert b"egress_proxy" in p and b"is not running" in p and b"for the worker to restart it" in p, p
print("kcat: one result keyed by %s, status error, naming the egress proxy" % tid)
PY
  n=$(redis EXISTS "kiwi:install:$key")
  [ "$n" = 0 ] || fail "the install cache holds kiwi:install:$key: $(redis HGETALL "kiwi:install:$key")"
  stop_worker a
  log "result error ($(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r=r.get("result", r); print(r["reason"][:200])' "$TMP/result.json")); no kiwi:install:${key:0:16}... in Redis"
  ;;

id)
  proxied_worker a
  sq=$(squid_pid a) || fail "worker a's squid has no pid file"
  conf_sum=$(md5sum <"$STATE/egress-proxy/$RUN_ID-a/squid.conf")
  # worker b: worker a's id, state dir and ports
  env KIWI_ALLOW_LOCAL_REPOS=true KIWI_IMAGE_REGISTRIES=none KIWI_SLOTS=1 KIWI_STATE_DIR="$STATE" \
    KIWI_INSTALL_EGRESS=registries KIWI_INSTALL_PROXY_PORTS="$PORTS" KIWI_EGRESS_STOP_WHEN_DEGRADED=false \
    KIWI_WORKER_ID="$RUN_ID-a" KIWI_GROUP="kiwi-itest-$RUN_ID" \
    KIWI_TOPIC_TASKS="kiwi.itest.$RUN_ID.tasks" KIWI_TOPIC_PROGRESS="kiwi.itest.$RUN_ID.progress" \
    KIWI_TOPIC_RESULTS="kiwi.itest.$RUN_ID.results" KIWI_TOPIC_HEARTBEATS="kiwi.itest.$RUN_ID.heartbeats" \
    KIWI_TOPIC_DLQ="kiwi.itest.$RUN_ID.dlq" KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" \
    KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" \
    "$WORKER" >"$TMP/worker-b.log" 2>&1 &
  b=$!
  PIDS+=("$b")
  # until b ends, or a's squid is gone (what a second worker with its id did)
  for _ in $(seq 1 120); do
    kill -0 "$b" 2>/dev/null || break
    kill -0 "$sq" 2>/dev/null || break
    sleep 0.5
  done
  kill -0 "$sq" 2>/dev/null || fail "worker a's squid $sq was stopped while worker b ran: $(grep -i 'squid\|proxy' "$TMP/worker-b.log" | tail -n 5)"
  kill -0 "$b" 2>/dev/null && fail "worker b runs with worker a's id: $(tail -n 5 "$TMP/worker-b.log")"
  set +e; wait "$b"; b_rc=$?; set -e
  [ "$b_rc" = 2 ] || fail "worker b exited $b_rc, not 2: $(cat "$TMP/worker-b.log")"
  # shellcheck disable=SC2154  # set by worker_start
  grep -q "KIWI_WORKER_ID=$RUN_ID-a is held by another kiwi-worker on this host (pid $WORKER_PID_a, " "$TMP/worker-b.log" ||
    fail "worker b's refusal does not name the id and its holder: $(cat "$TMP/worker-b.log")"
  kill -0 "$WORKER_PID_a" 2>/dev/null || fail "worker a stopped"
  [ "$(squid_pid a)" = "$sq" ] || fail "worker a's squid is no longer $sq"
  [ "$(md5sum <"$STATE/egress-proxy/$RUN_ID-a/squid.conf")" = "$conf_sum" ] || fail "worker a's squid.conf was rewritten"
  log "worker b refused: $(grep -o 'KIWI_WORKER_ID=.*' "$TMP/worker-b.log" | head -n 1 | cut -c1-160)"
  log "worker a ($WORKER_PID_a) runs on, its squid $sq and its configuration untouched"
  stop_worker a
  ;;

rules)
  # an address of the benchmarking range no rule on this host names: the
  # rules these settings want are not the ones applied, whatever is applied
  DENY="198.18.$(( $$ % 250 )).$(( RANDOM % 250 + 1 )):6379"
  src="$TMP/repo"
  fresh_npm_repo js-tiny-dep "$src" "once rules"
  once() { # NAME [assignments...]
    local name=$1; shift
    cat >"$TMP/task-$name.json" <<EOF
{"id": "rules-$RUN_ID-$name", "repo": {"url": "$src", "ref": "main"}, "test_command": "npm test", "goal": "x"}
EOF
    env -u KIWI_EGRESS_APPLY -u KIWI_ONCE_EGRESS_UNCHECKED KIWI_STATE_DIR="$STATE" KIWI_WORKER_ID="$RUN_ID-$name" \
      KIWI_ALLOW_LOCAL_REPOS=true KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" KIWI_CA_BUNDLE="$CA_BUNDLE" \
      KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" KIWI_INSTALL_PROXY_PORTS="$PORTS" KIWI_INSTALL_DENY="$DENY" "$@" \
      "$WORKER" --once "$TMP/task-$name.json" >"$TMP/once-$name.jsonl" 2>"$TMP/once-$name.log" || true
  }
  since=$(date +%s)
  once refused
  st=$(once_payload "$TMP/once-refused.jsonl" result status)
  reason=$(once_payload "$TMP/once-refused.jsonl" result reason)
  [ "$st" = error ] || fail "--once without the rules ended '$st': $reason $(tail -n 5 "$TMP/once-refused.log")"
  [[ $reason == *"egress_rules"* && $reason == *"the host's egress rules do not hold"* && $reason == *KIWI_ONCE_EGRESS_UNCHECKED=true* ]] ||
    fail "the refusal does not say why and how to opt out: $reason"
  # the fix is a command that works as printed: the same words with
  # `rules` (which prints what apply would add, changing nothing) for
  # `apply` parse, and name the deny address
  fix=$(python3 -c 'import re,sys; m=re.search(r"fix: as root, run `([^`]*)`", sys.argv[1]); print(m.group(1) if m else "")' "$reason")
  [ -n "$fix" ] || fail "the refusal names no command: $reason"
  [[ $fix == *" apply "* && $fix == *"--deny ${DENY}"* ]] || fail "the fix is not the apply for these settings: $fix"
  eval "${fix/ apply / rules }" >"$TMP/fix-rules.txt" 2>&1 || fail "the printed command does not run: $fix: $(cat "$TMP/fix-rules.txt")"
  grep -q -- "${DENY%:*}" "$TMP/fix-rules.txt" || fail "the printed command's rules do not close $DENY: $(head -n 20 "$TMP/fix-rules.txt")"
  key=$(once_payload "$TMP/once-refused.jsonl" install key)
  [ "$(once_payload "$TMP/once-refused.jsonl" install status)" = error ] || fail "the install event is not an error: $(grep '"install"' "$TMP/once-refused.jsonl")"
  [ "$(once_payload "$TMP/once-refused.jsonl" install cause)" = egress_rules ] || fail "the install event names no cause"
  [ -n "$key" ] && [ "$(redis EXISTS "kiwi:install:$key")" = 0 ] || fail "key '$key': an install-cache entry for a refused Phase A"
  made=$("${DOCKER[@]}" events --since "$since" --until "$(date +%s)" --filter type=container --filter event=create \
    --filter "label=org.kiwi.task=rules-$RUN_ID-refused" --filter label=org.kiwi.phase=install --format '{{.ID}}' | wc -l)
  [ "$made" = 0 ] || fail "$made Phase A container(s) made for the refused run"
  log "--once refused Phase A: ${reason:0:240}..."

  once optout KIWI_ONCE_EGRESS_UNCHECKED=true
  inst=$(once_payload "$TMP/once-optout.jsonl" install status)
  [ "$inst" = ok ] || fail "with KIWI_ONCE_EGRESS_UNCHECKED=true Phase A did not run: install '$inst': $(tail -n 5 "$TMP/once-optout.log")"
  [[ $(once_payload "$TMP/once-optout.jsonl" install egress_rules) == *KIWI_ONCE_EGRESS_UNCHECKED* ]] ||
    fail "the install event does not record the opt-out: $(grep '"install"' "$TMP/once-optout.jsonl")"
  [ "$(once_payload "$TMP/once-optout.jsonl" warning setting)" = KIWI_ONCE_EGRESS_UNCHECKED ] ||
    fail "no warning event names the opt-out: $(grep '"warning"' "$TMP/once-optout.jsonl")"
  grep -q 'KIWI_ONCE_EGRESS_UNCHECKED=true: Phase A runs although' "$TMP/once-optout.log" || fail "the opt-out is not logged"
  log "with KIWI_ONCE_EGRESS_UNCHECKED=true: Phase A ran, the opt-out in the log, a warning and the install event"
  ;;
*) fail "unknown part '$part' (proxy, id, rules)" ;;
esac
log "PASS ($part)"
