#!/usr/bin/env bash
# test_worker_task_policy.sh: hostile task fields against the operator's policy,
# through `kiwi-worker --once` and through the pool, each checked from
# outside the worker:
#   - task.model.base_url naming a loopback TLS listener (not in
#     KIWI_MODEL_BASE_URLS): an error naming the field and the setting, and
#     the listener sees no connection at all;
#   - task.repo.url on that listener with KIWI_GIT_TOKEN set (127.0.0.1 not
#     in KIWI_GIT_TOKEN_HOSTS): git reaches it (its request is logged) and
#     the token, raw or base64, is never in what the listener received;
#   - a local path without KIWI_ALLOW_LOCAL_REPOS: refused, naming it; with
#     it, another tenant's mirror under the state directory: refused;
#   - test_credentials naming AWS_SECRET_ACCESS_KEY (not in
#     KIWI_TEST_CREDENTIALS): refused, the value never on the progress topic
#     (read with kcat) nor in --once's output;
#   - KIWI_MAX_SANDBOX_DISK_MB=64 and a task asking 1048576: the accepted
#     event says 64 and the sandbox's disk file, read on the host while the
#     task runs, is 64 MiB; with KIWI_SANDBOX_CPUS=1 (below the default of 2
#     on a host with 2 CPUs or more) the event says 1 core and Docker holds
#     a quota of 1 core for every sandbox of the task;
#   - KIWI_TASK_TIMEOUT=5 and a task asking 86400 whose tests take 30 s:
#     timed_out; KIWI_MAX_ROUNDS=1 and KIWI_SESSION_BUDGET=500 against tasks
#     asking 100 rounds and 1e9 tokens: the scripted provider's request log
#     shows one round's requests, and fewer;
#   - two different tasks with the same id, the second sent after the first
#     finished or while it runs: the second gets an error result, not the
#     first one's.
. "$(dirname "$0")/lib.sh"
need_services

TOKEN="kiwi-git-token-$RUN_ID-0f9e"
AWS_VALUE="aws-secret-$RUN_ID-c0ffee"

# ---------- a loopback TLS listener that logs what it receives ----------
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/tls.key" -out "$TMP/tls.crt" -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 || fail "openssl"
cat >"$TMP/tls_listener.py" <<'PY'
import socket, ssl, sys, threading
cert, key, port_file, log = sys.argv[1:5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(16)
open(port_file + ".tmp", "w").write(str(srv.getsockname()[1]))
import os; os.rename(port_file + ".tmp", port_file)
lock = threading.Lock()
def record(line):
    with lock, open(log, "ab") as f:
        f.write(line)
def serve(c):
    record(b"CONNECTION\n")  # counted at accept, before any handshake
    try:
        c.settimeout(10)
        s = ctx.wrap_socket(c, server_side=True)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        record(data + b"\n")
        s.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        s.close()
    except Exception as e:
        record(("ERROR %r\n" % e).encode())
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
: >"$TMP/tls.log"
python3 "$TMP/tls_listener.py" "$TMP/tls.crt" "$TMP/tls.key" "$TMP/tls.port" "$TMP/tls.log" \
  >"$TMP/tls-listener.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$TMP/tls.port" ] && break; sleep 0.1; done
[ -s "$TMP/tls.port" ] || fail "the TLS listener did not start"
TLS_PORT=$(cat "$TMP/tls.port")
TLS_URL="https://127.0.0.1:$TLS_PORT"
connections() { grep -c '^CONNECTION$' "$TMP/tls.log" || true; }
token_absent() { # nothing the listener received carries the token
  local b64
  b64=$(printf 'x-access-token:%s' "$TOKEN" | base64 -w0)
  ! grep -aq -e "$TOKEN" -e "$b64" -e "Authorization" "$TMP/tls.log"
}

# ---------- repositories ----------
# js-sum fails its tests (a task on it reaches the model), js-pass passes
# them; js-slow passes them slowly (the disk is read while they run)
git_serve js-pass js-sum
make_slow() { # make_slow NAME: js-pass, its tests slow, a tree of its own (no verify cache hit)
  local slow="$TMP/src-$1"
  cp -a "$ROOT/tests/fixtures/examples/js-pass" "$slow"
  sed -i 's/"test": "node test.js"/"test": "sleep 12 \&\& node test.js"/' "$slow/package.json"
  grep -q 'sleep 12' "$slow/package.json" || fail "js-slow fixture"
  echo "$RUN_ID $1" >"$slow/run-id.txt"
  git -C "$slow" init -q -b main
  git -C "$slow" -c user.email=kiwi@test -c user.name=kiwi add -A
  git -C "$slow" -c user.email=kiwi@test -c user.name=kiwi commit -q -m "$1"
  git clone -q --bare "$slow" "$TMP/git/$1.git"
}
make_slow js-slow-once
make_slow js-slow-pool
make_slow js-slow-lease

# result_of FILE: the "result" object of --once's JSON lines (or a kiwi wait line)
result_field() { # result_field FILE FIELD
  python3 - "$1" "$2" <<'PY'
import json, sys
r = None
for l in open(sys.argv[1]):
    l = l.strip()
    if not l:
        continue
    o = json.loads(l)
    if o.get("type") == "result":
        r = o["result"]
    elif "status" in o and "task_id" in o:
        r = o
    elif "result" in o:
        r = o["result"]
print(r.get(sys.argv[2], "") if r else "")
PY
}

# ---------- kiwi-worker --once ----------
ONCE_STATE="$TMP/once-state"
mkdir -p "$ONCE_STATE"
once() { # once NAME TASK_JSON [env...]: runs one task; its output in $TMP/once-NAME.jsonl
  local name=$1 task=$2; shift 2
  printf '%s\n' "$task" >"$TMP/once-$name.json"
  env KIWI_ONCE_EGRESS_UNCHECKED=true KIWI_STATE_DIR="$ONCE_STATE" KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" \
    KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" ANTHROPIC_API_KEY="kiwi-test-anthropic-key-7f3a9c" \
    KIWI_GIT_TOKEN="$TOKEN" GIT_SSL_CAINFO="$TMP/tls.crt" AWS_SECRET_ACCESS_KEY="$AWS_VALUE" \
    KIWI_REPO_SCHEMES=https,ssh,git "$@" \
    "$WORKER" --once "$TMP/once-$name.json" >"$TMP/once-$name.jsonl" 2>"$TMP/once-$name.log" || true
}
task_json() { # task_json ID URL [extra JSON members] [test command]
  printf '{"id":"%s","repo":{"url":"%s","ref":"main"},"test_command":"%s","goal":"Make the tests pass."%s}' \
    "$1" "$2" "${4:-npm test}" "${3:-}"
}
# print_cred TAG: a test command that prints the credential and fails (so its
# output is in the step 0 event), its own per run and use (no verify cache hit)
print_cred() { echo "node -e 'console.log(process.env.AWS_SECRET_ACCESS_KEY); process.exit(1)' $RUN_ID-$1"; }

# the model base URL
once base "$(task_json once-base "$GIT_URL_BASE/js-sum.git" \
  ",\"model\":{\"provider\":\"anthropic\",\"name\":\"m\",\"base_url\":\"$TLS_URL/v1\"}")"
[ "$(result_field "$TMP/once-base.jsonl" status)" = error ] || fail "--once base_url: $(cat "$TMP/once-base.jsonl")"
reason=$(result_field "$TMP/once-base.jsonl" reason)
[[ "$reason" == *task.model.base_url* && "$reason" == *KIWI_MODEL_BASE_URLS* ]] || fail "--once base_url reason: $reason"
[ "$(connections)" = 0 ] || fail "--once: the listener named as base URL was connected to: $(cat "$TMP/tls.log")"
log "--once: task.model.base_url refused ($reason), no connection"

# the git token to a host not in KIWI_GIT_TOKEN_HOSTS
once token "$(task_json once-token "$TLS_URL/acme/widgets.git")"
[ "$(result_field "$TMP/once-token.jsonl" status)" = error ] || fail "--once token: $(cat "$TMP/once-token.jsonl")"
grep -aq "GET /acme/widgets.git/info/refs" "$TMP/tls.log" || fail "--once: git never reached the listener: $(cat "$TMP/tls.log")"
token_absent || fail "--once: the git token reached 127.0.0.1: $(cat "$TMP/tls.log")"
log "--once: git fetched from 127.0.0.1 without the token"

# local paths
mkdir -p "$ONCE_STATE/mirrors"
git clone -q --mirror "$TMP/git/js-pass.git" "$ONCE_STATE/mirrors/another-tenant.git"
once local "$(task_json once-local "$TMP/git/js-pass.git")"
reason=$(result_field "$TMP/once-local.jsonl" reason)
[[ "$reason" == *KIWI_ALLOW_LOCAL_REPOS* ]] || fail "--once local path without the setting: $(cat "$TMP/once-local.jsonl")"
once mirror "$(task_json once-mirror "$ONCE_STATE/mirrors/another-tenant.git")" KIWI_ALLOW_LOCAL_REPOS=true
reason=$(result_field "$TMP/once-mirror.jsonl" reason)
[[ "$reason" == *"inside the worker's state directory"* ]] || fail "--once mirror: $(cat "$TMP/once-mirror.jsonl")"
once mirror2 "$(task_json once-mirror2 "file://$ONCE_STATE/mirrors/../mirrors/another-tenant.git")" KIWI_ALLOW_LOCAL_REPOS=true
reason=$(result_field "$TMP/once-mirror2.jsonl" reason)
[[ "$reason" == *"inside the worker's state directory"* ]] || fail "--once file:// mirror: $(cat "$TMP/once-mirror2.jsonl")"
[ -z "$(ls -A "$ONCE_STATE/work" 2>/dev/null)" ] || fail "--once: a refused repository left a workspace: $(ls "$ONCE_STATE/work")"
log "--once: local path refused without KIWI_ALLOW_LOCAL_REPOS; a mirror in the state directory refused with it"

# test credentials
once cred "$(task_json once-cred "$GIT_URL_BASE/js-pass.git" \
  ',"test_credentials":["AWS_SECRET_ACCESS_KEY"],"model":{"provider":"anthropic","name":"m","base_url":"http://127.0.0.1:9/"}' \
  "$(print_cred once)")" KIWI_MODEL_BASE_URLS=http://127.0.0.1:9/
reason=$(result_field "$TMP/once-cred.jsonl" reason)
[[ "$reason" == *AWS_SECRET_ACCESS_KEY* && "$reason" == *KIWI_TEST_CREDENTIALS* ]] || fail "--once cred: $(cat "$TMP/once-cred.jsonl")"
! grep -aq "$AWS_VALUE" "$TMP/once-cred.jsonl" "$TMP/once-cred.log" || fail "--once: the credential's value was printed"
log "--once: test_credentials AWS_SECRET_ACCESS_KEY refused"

# the disk ceiling, read from the host while the task's sandbox exists: its
# containers (label org.kiwi.task), the host side of their /kiwi mount, the
# size of the disk file next to it
disk_watch() { # disk_watch TASK_ID OUT: the largest disk of the task's sandboxes, in bytes, until killed;
  # OUT.cpus: the CPU quota (NanoCpus) Docker holds for them
  local max=0 sz c src q
  while :; do
    for c in $(container_ids "org.kiwi.task=$1"); do
      # a container removed between the listing and the inspect prints an
      # empty line: only a quota Docker answered with counts
      q=$("${DOCKER[@]}" inspect -f '{{.HostConfig.NanoCpus}}' "$c" 2>/dev/null) || q=
      [ -z "$q" ] || echo "$q" >>"$2.cpus"
      src=$("${DOCKER[@]}" inspect -f '{{range .Mounts}}{{if eq .Destination "/kiwi"}}{{.Source}}{{end}}{{end}}' \
        "$c" 2>/dev/null || true)
      [ -n "$src" ] || continue
      sz=$(stat -c %s "$(dirname "$src")/disk.img" 2>/dev/null || echo 0)
      if [ "$sz" -gt "$max" ]; then max=$sz; echo "$max" >"$2"; fi
    done
    sleep 0.2
  done
}
id_once_disk="once-disk-$RUN_ID"
disk_watch "$id_once_disk" "$TMP/once-disk.max" &
watch_pid=$!
PIDS+=("$watch_pid")
once disk "$(task_json "$id_once_disk" "$GIT_URL_BASE/js-slow-once.git" ',"limits":{"disk_mb":1048576}')" \
  KIWI_MAX_SANDBOX_DISK_MB=64 KIWI_SANDBOX_CPUS=1
kill "$watch_pid" 2>/dev/null || true
python3 - "$TMP/once-disk.jsonl" <<'PY' || fail "--once disk: $(cat "$TMP/once-disk.jsonl")"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
acc = [o["event"] for o in evs if o.get("type") == "progress" and o["event"]["kind"] == "accepted"]
assert acc and acc[0]["payload"]["limits"]["disk_mb"] == 64, acc
assert acc[0]["payload"]["limits"]["cpus"] == 1, acc
res = [o["result"] for o in evs if o.get("type") == "result"]
assert res and res[0]["status"] == "not_fixed", res  # the tests pass: it ran, in a sandbox
PY
[ "$(cat "$TMP/once-disk.max" 2>/dev/null)" = $((64 * 1024 * 1024)) ] ||
  fail "--once: the sandbox disk was $(cat "$TMP/once-disk.max" 2>/dev/null || echo never seen) bytes, not 64 MiB"
log "--once: a task asking 1048576 MB got a 64 MiB sandbox disk"
[ -s "$TMP/once-disk.max.cpus" ] && [ "$(sort -u "$TMP/once-disk.max.cpus")" = 1000000000 ] ||
  fail "--once: KIWI_SANDBOX_CPUS=1 gave the sandboxes NanoCpus $(sort -u "$TMP/once-disk.max.cpus" 2>/dev/null | tr '\n' ' ')"
log "--once: KIWI_SANDBOX_CPUS=1: every sandbox of the task had a quota of 1 core"

# the timeout: a worker at 5 s, a task asking 86400 whose tests take 30 s
make_slow js-slower
sed -i 's/sleep 12/sleep 30/' "$TMP/src-js-slower/package.json"
git -C "$TMP/src-js-slower" -c user.email=kiwi@test -c user.name=kiwi commit -qam "slower"
git -C "$TMP/git/js-slower.git" fetch -q "$TMP/src-js-slower" +main:main
once timeout "$(task_json "once-timeout-$RUN_ID" "$GIT_URL_BASE/js-slower.git" \
  ',"limits":{"timeout_seconds":86400},"model":{"provider":"anthropic","name":"m","base_url":"http://127.0.0.1:9/"}')" \
  KIWI_TASK_TIMEOUT=5 KIWI_MODEL_BASE_URLS=http://127.0.0.1:9/
[ "$(result_field "$TMP/once-timeout.jsonl" status)" = timed_out ] ||
  fail "--once: a 5 s ceiling did not stop a task asking 86400 s: $(tail -2 "$TMP/once-timeout.jsonl")"
log "--once: KIWI_TASK_TIMEOUT=5 ended a task asking 86400 s (timed_out)"

# rounds and the token budget, counted in the scripted provider's request log
provider_serve
requests() { if [ -f "$TMP/provider-requests.jsonl" ]; then wc -l <"$TMP/provider-requests.jsonl"; else echo 0; fi; }
session_once() { # session_once NAME LIMITS_JSON [env...]: prints the requests the task made
  local name=$1 limits=$2 before; shift 2
  curl -s -X POST "http://127.0.0.1:$PROVIDER_PORT/_control/reset?script=js-sum-never" >/dev/null
  before=$(requests)
  once "$name" "$(task_json "once-$name-$RUN_ID" "$GIT_URL_BASE/js-sum.git" \
    ",\"limits\":$limits,\"model\":{\"provider\":\"anthropic\",\"name\":\"claude-sonnet-4-5-20250929\",\"base_url\":\"http://127.0.0.1:$PROVIDER_PORT/script/js-sum-never\"}")" \
    KIWI_MODEL_BASE_URLS="http://127.0.0.1:$PROVIDER_PORT/" "$@"
  echo $(($(requests) - before))
}
ref=$(session_once rounds-ref '{"max_rounds":1}')
[ "$(result_field "$TMP/once-rounds-ref.jsonl" status)" = max_rounds ] || fail "--once one round: $(tail -2 "$TMP/once-rounds-ref.jsonl")"
[ "$ref" -gt 0 ] || fail "--once one round made no request"
n=$(session_once rounds '{"max_rounds":100}' KIWI_MAX_ROUNDS=1)
[ "$(result_field "$TMP/once-rounds.jsonl" status)" = max_rounds ] || fail "--once rounds: $(tail -2 "$TMP/once-rounds.jsonl")"
[ "$n" = "$ref" ] || fail "--once: KIWI_MAX_ROUNDS=1 and a task asking 100 made $n requests, one round makes $ref"
log "--once: KIWI_MAX_ROUNDS=1 held a task asking 100 rounds to one round ($n model requests)"
n=$(session_once budget '{"max_rounds":1,"session_budget_tokens":1000000000}' KIWI_SESSION_BUDGET=500)
[ "$(result_field "$TMP/once-budget.jsonl" status)" = budget_exhausted ] || fail "--once budget: $(tail -2 "$TMP/once-budget.jsonl")"
[ "$n" -lt "$ref" ] || fail "--once: KIWI_SESSION_BUDGET=500 and a task asking 1e9 tokens made $n requests (a round: $ref)"
log "--once: KIWI_SESSION_BUDGET=500 ended a task asking 1e9 tokens after $n model request(s) (a round: $ref)"

# ---------- through the pool ----------
POOL_STATE="$TMP/pool-state"
mkdir -p "$POOL_STATE"
worker_start p KIWI_SLOTS=2 KIWI_STATE_DIR="$POOL_STATE" KIWI_MAX_SANDBOX_DISK_MB=64 \
  KIWI_GIT_TOKEN="$TOKEN" GIT_SSL_CAINFO="$TMP/tls.crt" AWS_SECRET_ACCESS_KEY="$AWS_VALUE" \
  KIWI_EGRESS_STOP_WHEN_DEGRADED=false KIWI_EGRESS_INTERVAL=86400
: >"$TMP/tls.log"

submit() { # submit REPO_URL [kiwi submit flags]: prints the task id
  local url=$1; shift
  kiwi_cli submit --repo "$url" --ref main --test "npm test" --goal "Make the tests pass." "$@" 2>>"$TMP/cli.log"
}
wait_result() { # wait_result ID OUT
  kiwi_cli wait "$1" --timeout 300 >"$2" 2>>"$TMP/cli.log" || true
  [ -s "$2" ] || fail "no result for $1"
}

id_base=$(submit "$GIT_URL_BASE/js-sum.git" --provider anthropic --model m --base-url "$TLS_URL/v1")
id_token=$(submit "$TLS_URL/acme/widgets.git")
id_cred=$(kiwi_cli submit --repo "$GIT_URL_BASE/js-pass.git" --ref main --test "$(print_cred pool)" --goal "x" \
  --cred AWS_SECRET_ACCESS_KEY --provider anthropic --model m --base-url "http://127.0.0.1:9/" 2>>"$TMP/cli.log")
id_disk="pool-disk-$RUN_ID"
disk_watch "$id_disk" "$TMP/pool-disk.max" &
watch_pid=$!
PIDS+=("$watch_pid")
submit "$GIT_URL_BASE/js-slow-pool.git" --disk-mb 1048576 --id "$id_disk" >/dev/null

wait_result "$id_base" "$TMP/base.json"
[ "$(result_field "$TMP/base.json" status)" = error ] || fail "pool base_url: $(cat "$TMP/base.json")"
reason=$(result_field "$TMP/base.json" reason)
[[ "$reason" == *task.model.base_url* && "$reason" == *KIWI_MODEL_BASE_URLS* ]] || fail "pool base_url reason: $reason"
log "pool: task.model.base_url refused ($reason)"

wait_result "$id_token" "$TMP/token.json"
[ "$(result_field "$TMP/token.json" status)" = error ] || fail "pool token: $(cat "$TMP/token.json")"
grep -aq "GET /acme/widgets.git/info/refs" "$TMP/tls.log" || fail "pool: git never reached the listener: $(cat "$TMP/tls.log")"
token_absent || fail "pool: the git token reached 127.0.0.1: $(cat "$TMP/tls.log")"
# every connection the listener saw was git's (the base URL task made none)
[ "$(connections)" = "$(grep -ac '^GET ' "$TMP/tls.log")" ] || fail "pool: a connection that was not git's: $(cat "$TMP/tls.log")"
log "pool: git fetched from 127.0.0.1 without the token; the base URL saw no connection"

wait_result "$id_cred" "$TMP/cred.json"
reason=$(result_field "$TMP/cred.json" reason)
[[ "$reason" == *AWS_SECRET_ACCESS_KEY* && "$reason" == *KIWI_TEST_CREDENTIALS* ]] || fail "pool cred: $(cat "$TMP/cred.json")"
log "pool: test_credentials AWS_SECRET_ACCESS_KEY refused"

wait_result "$id_disk" "$TMP/disk.json"
kill "$watch_pid" 2>/dev/null || true
[ "$(result_field "$TMP/disk.json" status)" = not_fixed ] || fail "pool disk: $(cat "$TMP/disk.json")"
[ "$(cat "$TMP/pool-disk.max" 2>/dev/null)" = $((64 * 1024 * 1024)) ] ||
  fail "pool: the sandbox disk was $(cat "$TMP/pool-disk.max" 2>/dev/null || echo never seen) bytes, not 64 MiB"
kiwi_cli tail progress --task "$id_disk" >"$TMP/disk-progress.jsonl" 2>>"$TMP/cli.log"
python3 - "$TMP/disk-progress.jsonl" <<'PY' || fail "pool disk accepted event: $(head -3 "$TMP/disk-progress.jsonl")"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evs = [e.get("event", e) for e in evs]
acc = [e for e in evs if e["kind"] == "accepted"]
assert len(acc) == 1 and acc[0]["payload"]["limits"]["disk_mb"] == 64, acc
PY
log "pool: a task asking 1048576 MB got a 64 MiB sandbox disk; the accepted event says 64"

# the credential's value never on the progress topic (every event of the run, raw)
kcat -C -b "$KIWI_KAFKA_BROKERS" -t "kiwi.itest.$RUN_ID.progress" -o beginning -e -q >"$TMP/progress.raw" 2>>"$TMP/kcat.log" ||
  fail "kcat: $(tail -3 "$TMP/kcat.log")"
[ -s "$TMP/progress.raw" ] || fail "kcat read no progress events"
! grep -aq "$AWS_VALUE" "$TMP/progress.raw" || fail "the credential's value is on the progress topic"
grep -aq "AWS_SECRET_ACCESS_KEY" "$TMP/progress.raw" || fail "the refusal is not on the progress topic"
log "pool: the credential's value is not on the progress topic ($(wc -c <"$TMP/progress.raw") bytes read)"

# the same id, a different task
dup="dup-$RUN_ID"
submit "$GIT_URL_BASE/js-pass.git" --id "$dup" >/dev/null
wait_result "$dup" "$TMP/dup1.json"
[ "$(result_field "$TMP/dup1.json" status)" = not_fixed ] || fail "first task of the id: $(cat "$TMP/dup1.json")"
kiwi_cli submit --repo "$GIT_URL_BASE/js-pass.git" --ref main --test "npm test" --id "$dup" \
  --goal "A different task under the same id." >/dev/null 2>>"$TMP/cli.log"
timeout 120 "$KIWI" tail --brokers "$KIWI_KAFKA_BROKERS" --results-topic "kiwi.itest.$RUN_ID.results" results \
  --follow --from-beginning --task "$dup" --limit 2 >"$TMP/dup.jsonl" 2>>"$TMP/cli.log" || true
python3 - "$TMP/dup.jsonl" "$dup" <<'PY' || fail "the reused id: $(cat "$TMP/dup.jsonl")"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rs = [r.get("result", r) for r in rs]
assert len(rs) == 2, rs
assert rs[0]["status"] == "not_fixed", rs
assert rs[1]["status"] == "error" and "already used by a different task" in rs[1]["reason"], rs
PY
log "pool: a different task under a finished id got an error result, not the first one's"

# the same id, a different task, while the first one runs (its lease held)
lease="lease-$RUN_ID"
submit "$GIT_URL_BASE/js-slow-lease.git" --id "$lease" >/dev/null
for _ in $(seq 1 100); do
  grep -q "task $lease: started in slot" "$TMP/worker-p.log" && break
  sleep 0.2
done
grep -q "task $lease: started in slot" "$TMP/worker-p.log" || fail "the slow task did not start"
kiwi_cli submit --repo "$GIT_URL_BASE/js-pass.git" --ref main --test "npm test" --id "$lease" \
  --goal "Another task while the first runs." >/dev/null 2>>"$TMP/cli.log"
timeout 120 "$KIWI" tail --brokers "$KIWI_KAFKA_BROKERS" --results-topic "kiwi.itest.$RUN_ID.results" results \
  --follow --from-beginning --task "$lease" --limit 2 >"$TMP/lease.jsonl" 2>>"$TMP/cli.log" || true
python3 - "$TMP/lease.jsonl" <<'PY' || fail "the id reused while running: $(cat "$TMP/lease.jsonl")"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rs = [r.get("result", r) for r in rs]
assert len(rs) == 2, rs
assert rs[0]["status"] == "not_fixed", rs
assert rs[1]["status"] == "error" and "already used by a different task" in rs[1]["reason"], rs
PY
log "pool: a different task under the id of a running task waited for it, then got an error result"
echo "PASS"
