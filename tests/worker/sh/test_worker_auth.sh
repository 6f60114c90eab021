#!/usr/bin/env bash
# test_worker_auth.sh: kiwi-worker and kiwi against services that want
# credentials.
#
# Redis: a second redis-server this test starts on a free loopback port with
# requirepass (the stack's own is left alone). With KIWI_REDIS_PASSWORD the
# daemon's connection and the task process's cache both authenticate: the
# heartbeat says redis_ok, a task's cache entries and its done record are in
# that Redis (read from outside with redis-cli), and a second task on the
# same repository is a cache hit; the task's sandbox, which prints its
# environment and names both password variables as credentials, gets
# neither. With a wrong password, or none,
# the heartbeat says redis is not ok and the reason names
# KIWI_REDIS_PASSWORD; an ACL user (KIWI_REDIS_USER) connects as that user.
# The password is in no message, event or log.
#
# Kafka: KIWI_KAFKA_PROPERTIES reaches librdkafka in both programs: a good
# property (client.id) works, an unknown one is an error naming it, and
# security.protocol=ssl against the plaintext broker stops the traffic (so
# the properties are really applied); a SASL password in them is never
# printed.
. "$(dirname "$0")/lib.sh"
need_services
command -v redis-server >/dev/null || fail "redis-server not found (ops/setup.sh installs it)"

PW="kiwi-test-redis-pw-$RUN_ID"
RPORT=$(free_port)
redis-server --bind 127.0.0.1 --port "$RPORT" --requirepass "$PW" --save '' --appendonly no \
  --dir "$TMP" --logfile "$TMP/redis-auth.log" --daemonize no </dev/null >/dev/null 2>&1 &
PIDS+=($!)
rcli() { REDISCLI_AUTH="$PW" redis-cli --no-auth-warning -h 127.0.0.1 -p "$RPORT" "$@"; }
for _ in $(seq 1 50); do [ "$(rcli ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
[ "$(rcli ping)" = PONG ] || fail "the test's redis-server did not start"
[ "$(env -u REDISCLI_AUTH redis-cli -h 127.0.0.1 -p "$RPORT" ping 2>&1)" != PONG ] || fail "the test's Redis answers without its password"
log "redis with requirepass on 127.0.0.1:$RPORT"

# hb_of, wait_hb: lib.sh

git_serve js-sum
provider_serve
common=(KIWI_SLOTS=1 KIWI_EGRESS_INTERVAL=3600 KIWI_EGRESS_STOP_WHEN_DEGRADED=false
        KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt KIWI_REDIS_HOST=127.0.0.1 KIWI_REDIS_PORT="$RPORT")

# 1. the right password: connected, a task runs cached
# the operator lets tasks name both (KIWI_TEST_CREDENTIALS), so what is shown
# is that the sandbox layer withholds them whatever the policy allows
worker_start a "${common[@]}" KIWI_REDIS_PASSWORD="$PW" REDISCLI_AUTH="$PW" KIWI_KAFKA_PROPERTIES=client.id=kiwi-prop-test \
  KIWI_TEST_CREDENTIALS=KIWI_REDIS_PASSWORD,REDISCLI_AUTH
wait_hb a 'h["redis_ok"] is True' 60 || fail "worker a: redis not ok with the right password: $(hb_of a 'h.get("degraded_reason")')"
log "worker a: redis_ok with KIWI_REDIS_PASSWORD (and KIWI_KAFKA_PROPERTIES=client.id=kiwi-prop-test)"
# the task prints its sandbox's environment and names both password
# variables as credentials it needs: neither may enter
submit_env() { # [--cred NAME ...]
  kiwi_cli submit --repo "$GIT_URL_BASE/js-sum.git" --ref main --test "env; npm test" \
    "$@" --goal "Make the tests pass." --provider anthropic \
    --model claude-sonnet-4-5-20250929 --base-url "http://127.0.0.1:$PROVIDER_PORT/script/js-sum-one-round" --max-rounds 3
}
id=$(submit_env --cred KIWI_REDIS_PASSWORD --cred REDISCLI_AUTH)
kiwi_cli wait "$id" --timeout 240 >"$TMP/result.json" || fail "task 1 not fixed: $(cat "$TMP/result.json")"
kiwi_cli tail progress --task "$id" >"$TMP/p1.jsonl" 2>/dev/null || true
grep -q 'HOME=/kiwi/home' "$TMP/p1.jsonl" || fail "the sandbox's environment is not in the task's events (the check below would prove nothing)"
! grep -q -- "$PW" "$TMP/p1.jsonl" || fail "the Redis password entered the task's sandbox"
log "task 1: its sandbox's environment (in its events) holds neither KIWI_REDIS_PASSWORD nor REDISCLI_AUTH"
rcli EXISTS "kiwi:done:$id" | grep >/dev/null -x 1 || fail "no kiwi:done:$id in the password Redis: the daemon did not write there"
# a run that held credentials is never cached (worker/task/plan.c): the cache is
# shown with tasks that hold none
curl -fsS -X POST "http://127.0.0.1:$PROVIDER_PORT/_control/reset?script=js-sum-one-round" >/dev/null
id1b=$(submit_env)
kiwi_cli wait "$id1b" --timeout 240 >"$TMP/result1b.json" || fail "task 1b not fixed: $(cat "$TMP/result1b.json")"
cached=$(rcli --scan --pattern 'kiwi:install:*'; rcli --scan --pattern 'kiwi:verify:*')
[ -n "$cached" ] || fail "no kiwi:install:* or kiwi:verify:* entry in the password Redis: the task's cache did not write there (keys: $(rcli --scan | tr '\n' ' '))"
log "tasks 1 and 1b fixed; done records and cache entries are in the password Redis: $(echo $cached | cut -c1-160)"
curl -fsS -X POST "http://127.0.0.1:$PROVIDER_PORT/_control/reset?script=js-sum-one-round" >/dev/null
id2=$(submit_env)
kiwi_cli wait "$id2" --timeout 240 >"$TMP/result2.json" || fail "task 2 not fixed: $(cat "$TMP/result2.json")"
wait_hb a 'h["cache_hits"] >= 1' 30 || fail "task 2 was no cache hit: $(hb_of a 'h')"
log "task 2: a cache hit ($(hb_of a 'h["cache_hits"]')) read through the authenticated cache connection"

# 2. a wrong password, and none: not ok, and the reason names the setting
worker_start b "${common[@]}" KIWI_REDIS_PASSWORD="wrong-$PW"
worker_start c -u KIWI_REDIS_PASSWORD "${common[@]}"
wait_hb b 'h["redis_ok"] is False and "KIWI_REDIS_PASSWORD" in h.get("degraded_reason", "")' 60 \
  || fail "worker b (wrong password): $(hb_of b 'h')"
wait_hb c 'h["redis_ok"] is False and "KIWI_REDIS_PASSWORD" in h.get("degraded_reason", "")' 60 \
  || fail "worker c (no password): $(hb_of c 'h')"
# an ACL user: AUTH user password
UPW="kiwi-test-acl-pw-$RUN_ID"
rcli ACL SETUSER kiwi-acl on ">$UPW" '~kiwi:*' '+@all' >/dev/null
worker_start h "${common[@]}" KIWI_REDIS_USER=kiwi-acl KIWI_REDIS_PASSWORD="$UPW"
wait_hb h 'h["redis_ok"] is True' 60 || fail "worker h (ACL user kiwi-acl): $(hb_of h 'h.get("degraded_reason")')"
rcli CLIENT LIST | grep >/dev/null 'user=kiwi-acl' || fail "no client connected as kiwi-acl: $(rcli CLIENT LIST)"
log "KIWI_REDIS_USER=kiwi-acl: connected as that user (CLIENT LIST)"
log "wrong password: $(hb_of b 'h["degraded_reason"][h["degraded_reason"].find("redis "):]')"
log "no password: $(hb_of c 'h["degraded_reason"][h["degraded_reason"].find("redis "):]')"

# 3. the password in no output
kiwi_cli tail progress >"$TMP/all-progress.jsonl" 2>/dev/null || true
kiwi_cli tail results >"$TMP/all-results.jsonl" 2>/dev/null || true
for f in "$TMP"/worker-*.log "$TMP/hb.jsonl" "$TMP/all-progress.jsonl" "$TMP/all-results.jsonl"; do
  ! grep -q -- "$PW" "$f" || fail "the Redis password is in $(basename "$f")"
done
KIWI_REDIS_PASSWORD="$PW" "$WORKER" --print-config >"$TMP/dump.txt" 2>&1 || true
grep -q 'redis.password = (set, not shown)' "$TMP/dump.txt" || fail "the configuration dump does not say the password is set: $(head -5 "$TMP/dump.txt")"
! grep -q -- "$PW" "$TMP/dump.txt" || fail "the configuration dump prints the Redis password"
log "the password is in no log, heartbeat, event, result or configuration dump"

# 4. Kafka properties, both programs
set +e
out=$(KIWI_KAFKA_PROPERTIES="client.id=x,no.such.property=1" KIWI_WORKER_ID="$RUN_ID-x" KIWI_GROUP="kiwi-itest-$RUN_ID-x" \
  KIWI_TOPIC_TASKS="kiwi.itest.$RUN_ID.x.tasks" KIWI_TOPIC_HEARTBEATS="kiwi.itest.$RUN_ID.x.heartbeats" \
  KIWI_TOPIC_PROGRESS="kiwi.itest.$RUN_ID.x.progress" KIWI_TOPIC_RESULTS="kiwi.itest.$RUN_ID.x.results" \
  KIWI_TOPIC_DLQ="kiwi.itest.$RUN_ID.x.dlq" timeout 30 "$WORKER" 2>&1); rc=$?
set -e
[ "$rc" != 0 ] && echo "$out" | grep >/dev/null 'no.such.property' || fail "kiwi-worker with an unknown property: rc $rc: $out"
set +e
out=$(KIWI_KAFKA_PROPERTIES="no.such.property=1" kiwi_cli tail heartbeats 2>&1); rc=$?
set -e
[ "$rc" != 0 ] && echo "$out" | grep >/dev/null 'kafka property no.such.property=1: No such configuration property' \
  || fail "kiwi with an unknown property: rc $rc: $out"
KIWI_KAFKA_PROPERTIES=client.id=kiwi-prop-test kiwi_cli tail heartbeats >/dev/null || fail "kiwi with client.id=kiwi-prop-test failed"
log "an unknown property is refused by name (kiwi-worker and kiwi); client.id=kiwi-prop-test works"

# security.protocol=ssl against the plaintext broker: no heartbeat gets
# through, so the property is applied; the SASL password in the same list
# is never printed
SASLPW="kiwi-test-sasl-pw-$RUN_ID"
worker_start d "${common[@]}" KIWI_REDIS_PASSWORD="$PW" \
  KIWI_KAFKA_PROPERTIES="security.protocol=sasl_ssl,sasl.mechanism=PLAIN,sasl.username=kiwi,sasl.password=$SASLPW"
worker_start e "${common[@]}" KIWI_REDIS_PASSWORD="$PW"
wait_hb e 'True' 60 || fail "worker e (no properties) published no heartbeat"
# d's producer reached for the broker and its TLS handshake failed (its
# librdkafka log line): the property is applied to what carries heartbeats
for _ in $(seq 1 120); do
  grep -qE '\|FAIL\|[^|]*#producer-[0-9]+\|.*SSL' "$TMP/worker-d.log" && break
  sleep 0.25
done
grep -qE '\|FAIL\|[^|]*#producer-[0-9]+\|.*SSL' "$TMP/worker-d.log" \
  || fail "worker d's producer never failed a TLS handshake with the plaintext broker in 30 s: $(grep -E '^%[0-9]' "$TMP/worker-d.log" | tail -n 3)"
# the window for a heartbeat of d's: e, started with it, publishes two more
hb_count() { # hb_count NAME: how many heartbeats worker NAME has on the topic
  { kiwi_cli tail heartbeats 2>/dev/null || true; } | python3 -c '
import json, sys
print(sum(1 for l in sys.stdin if l.strip() and json.loads(l).get("worker_id") == sys.argv[1]))' "$RUN_ID-$1"
}
e0=$(hb_count e)
for _ in $(seq 1 60); do [ "$(hb_count e)" -ge $((e0 + 2)) ] && break; sleep 0.5; done
[ "$(hb_count e)" -ge $((e0 + 2)) ] || fail "worker e published no two more heartbeats after its ${e0}th"
hb_of d 'True' >/dev/null 2>&1 && fail "worker d (security.protocol=sasl_ssl against a plaintext broker) published a heartbeat: the properties were not applied"
set +e
out=$(KIWI_KAFKA_PROPERTIES="security.protocol=ssl" kiwi_cli submit --repo "$GIT_URL_BASE/js-sum.git" --ref main \
  --test "npm test" --goal x --delivery-timeout 5 2>&1); rc=$?
set -e
[ "$rc" != 0 ] || fail "kiwi submit with security.protocol=ssl against a plaintext broker succeeded: $out"
! grep -q -- "$SASLPW" "$TMP/worker-d.log" || fail "the SASL password is in worker-d.log"
KIWI_KAFKA_PROPERTIES="sasl.password=$SASLPW" "$WORKER" --print-config >"$TMP/dump2.txt" 2>&1 || true
! grep -q -- "$SASLPW" "$TMP/dump2.txt" || fail "the configuration dump prints the SASL password"
log "security.protocol=sasl_ssl/ssl: no traffic to the plaintext broker (kiwi-worker and kiwi); the SASL password is never printed"
echo "5 passed, 0 failed"
