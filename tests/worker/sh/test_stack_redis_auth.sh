#!/usr/bin/env bash
# test_stack_redis_auth.sh: ops/stack.sh's Redis password, on a stack of
# its own (a temporary KIWI_STATE_DIR and a free port; the shared stack is
# not touched): `up redis` makes a password once (0600 file), starts
# redis-server from a 0600 redis.conf with requirepass (the password on no
# command line), writes KIWI_REDIS_PASSWORD and REDISCLI_AUTH to a 0600
# stack.env; Redis refuses clients without it; a second `up` keeps it; a
# Redis that an older stack.sh started without a password is given it.
. "$(dirname "$0")/lib.sh"
command -v redis-server >/dev/null || fail "redis-server not found (ops/setup.sh installs it)"
STACK="$ROOT/ops/stack.sh"
SD="$TMP/state"
PORT=$(free_port)
st() { KIWI_STATE_DIR="$SD" KIWI_STACK_REDIS_PORT="$PORT" bash "$STACK" "$@" >>"$TMP/stack.log" 2>&1; }
on_cleanup() { # this test's Redis only, by its pid file
  local p
  p=$(cat "$SD/run/redis.pid" 2>/dev/null || true)
  [ -n "$p" ] && kill "$p" 2>/dev/null
  return 0
}
envv() { sed -n "s/^$1=//p" "$SD/stack.env"; }
plain() { env -u REDISCLI_AUTH redis-cli -h 127.0.0.1 -p "$PORT" "$@" 2>&1; }
authed() { REDISCLI_AUTH="$(envv REDISCLI_AUTH)" redis-cli --no-auth-warning -h 127.0.0.1 -p "$PORT" "$@" 2>&1; }
mode() { stat -c %a "$1"; }

st up redis || fail "stack.sh up redis: $(tail -5 "$TMP/stack.log")"
pw=$(cat "$SD/redis.password" 2>/dev/null || true)
[ "${#pw}" = 48 ] || fail "the password is not 48 characters: ${#pw}"
[ "$(mode "$SD/redis.password")" = 600 ] || fail "redis.password mode $(mode "$SD/redis.password")"
[ "$(mode "$SD/redis.conf")" = 600 ] || fail "redis.conf mode $(mode "$SD/redis.conf")"
[ "$(mode "$SD/stack.env")" = 600 ] || fail "stack.env mode $(mode "$SD/stack.env")"
grep -qx "requirepass $pw" "$SD/redis.conf" || fail "redis.conf has no requirepass"
[ "$(envv KIWI_REDIS_PASSWORD)" = "$pw" ] || fail "stack.env: KIWI_REDIS_PASSWORD is not the password"
[ "$(envv REDISCLI_AUTH)" = "$pw" ] || fail "stack.env: REDISCLI_AUTH is not the password"
[ "$(envv KIWI_REDIS_PORT)" = "$PORT" ] || fail "stack.env: KIWI_REDIS_PORT"
plain ping | grep >/dev/null NOAUTH || fail "Redis answers without the password: $(plain ping)"
[ "$(authed ping)" = PONG ] || fail "Redis refuses the password in stack.env: $(authed ping)"
rpid=$(cat "$SD/run/redis.pid")
! tr '\0' ' ' <"/proc/$rpid/cmdline" | grep >/dev/null -- "$pw" || fail "the password is on redis-server's command line"
! grep -q -- "$pw" "$TMP/stack.log" || fail "stack.sh printed the password"
log "up: password made (0600), requirepass in redis.conf (0600), KIWI_REDIS_PASSWORD and REDISCLI_AUTH in stack.env (0600); NOAUTH without it"

st up redis || fail "second up: $(tail -5 "$TMP/stack.log")"
[ "$(cat "$SD/redis.password")" = "$pw" ] && [ "$(envv KIWI_REDIS_PASSWORD)" = "$pw" ] || fail "a second up changed the password"
log "a second up keeps the password"

# a Redis an older stack.sh left running without a password
kill "$rpid"; for _ in $(seq 1 50); do kill -0 "$rpid" 2>/dev/null || break; sleep 0.1; done
rm -f "$SD/redis.password" "$SD/redis.conf"
redis-server --bind 127.0.0.1 --port "$PORT" --daemonize yes --pidfile "$SD/run/redis.pid" --dir "$SD/redis" \
  --save '' --logfile "$SD/logs/old-redis.log" >/dev/null
for _ in $(seq 1 50); do [ "$(plain ping)" = PONG ] && break; sleep 0.1; done
[ "$(plain ping)" = PONG ] || fail "the password-less Redis did not start"
st up redis || fail "up over a password-less Redis: $(tail -5 "$TMP/stack.log")"
pw2=$(cat "$SD/redis.password")
plain ping | grep >/dev/null NOAUTH || fail "the running Redis still answers without a password"
[ "$(authed ping)" = PONG ] && [ "$(envv KIWI_REDIS_PASSWORD)" = "$pw2" ] || fail "the running Redis does not take the new password"
grep -q 'requirepass set (CONFIG SET)' "$TMP/stack.log" || fail "stack.sh did not say it set the password"
log "up over a running Redis without a password: requirepass set live, stack.env updated"
echo "3 passed, 0 failed"
