#!/usr/bin/env bash
# test_worker_egress.sh: the worker's egress checks in its heartbeat, and
# what a failed isolation check does: without the host's metadata rules the
# worker reports itself degraded, says why, and takes no new task; once the
# rules are applied the checks pass and the waiting task is taken and done;
# a worker stopped in the middle of a check leaves no sandbox behind;
# Redis and a Kafka broker port on another "fleet host" (a network namespace
# at 198.18.K.20 this test creates, routed through its own veth) are out of
# Phase A's reach once the worker applies its rules (KIWI_EGRESS_APPLY: its
# Redis and KIWI_INSTALL_DENY become egress.sh --deny), which its check
# fleet_services_blocked proves in the heartbeat, and the fleet host's own
# counters (Redis INFO stats, the listener's log) confirm from outside.
. "$(dirname "$0")/lib.sh"
need_services
EGRESS="$ROOT/ops/egress/egress.sh"
# The layer under test is the one every mode has (metadata, the fleet's
# services); Phase A stays open, since egress.sh apply without --proxy
# leaves DNS open, which a proxying worker rightly reports. The proxy's own
# rules and checks are test_egress_proxy's and test_worker_egress_proxy's.
export KIWI_INSTALL_EGRESS=open

applied_before=0
bash "$EGRESS" status >/dev/null 2>&1 && applied_before=1
# the host's rules go back to how the test found them, whatever happens
NS="" VH="" FLEET_ROUTE=""
on_cleanup() {
  local p
  # workers first: a worker must not re-apply rules after they are restored
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] || continue
    for _ in $(seq 1 80); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
  done
  if [ "$applied_before" = 1 ]; then bash "$EGRESS" apply >/dev/null 2>&1
  else bash "$EGRESS" remove >/dev/null 2>&1; fi
  if [ -n "$NS" ]; then
    for p in $(ip netns pids "$NS" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    sleep 0.3
    for p in $(ip netns pids "$NS" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    [ -n "$FLEET_ROUTE" ] && ip route del "$FLEET_ROUTE" 2>/dev/null
    ip link del "$VH" 2>/dev/null
    ip netns del "$NS" 2>/dev/null
  fi
  return 0
}

[ "$applied_before" = 1 ] && bash "$EGRESS" remove >/dev/null

git_serve js-sum
provider_serve
worker_start a KIWI_SLOTS=1 KIWI_EGRESS_INTERVAL=10 KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

hb_field() { hb_of a "$1"; } # on worker a

# 1. no rules: degraded, with the reason, and no task taken
for _ in $(seq 1 40); do
  [ "$(hb_field 'h["degraded"] and not checks.get("metadata_blocked", {"ok": True})["ok"]' 2>/dev/null)" = True ] && break
  sleep 1
done
[ "$(hb_field 'h["degraded"]')" = True ] || fail "the worker did not report itself degraded without the rules"
reason=$(hb_field 'h.get("degraded_reason", "")')
echo "$reason" | grep >/dev/null "metadata_blocked" || fail "the degraded reason does not name the check: $reason"
echo "$reason" | grep >/dev/null "taking no new tasks" || fail "the degraded reason does not say tasks stop: $reason"
[ "$(hb_field 'checks["phase_b_isolated"]["ok"]')" = True ] || fail "phase_b_isolated should pass"
[ "$(hb_field 'checks["phase_a_https"]["ok"]')" = True ] || fail "phase_a_https should pass: $(hb_field 'checks["phase_a_https"]')"
log "degraded: $reason" 

id=$(submit_fix js-sum js-sum-one-round --max-rounds 3)
sleep 8
kiwi_cli tail progress --task "$id" >"$TMP/p.jsonl" 2>/dev/null || true  # no topic yet: nothing taken
[ ! -s "$TMP/p.jsonl" ] || fail "a degraded worker took a task: $(head -2 "$TMP/p.jsonl")"
log "no task taken while degraded"

# 2. the fix the reason names, run as printed: the next check passes and
#    the task is done
fix=$(sed -nE 's/.*fix: as root, run `([^`]*)`.*/\1/p' <<<"$reason" | head -n 1)
[ -n "$fix" ] || fail "the degraded reason names no fix command: $reason"
case "$fix" in "bash /"*"/egress.sh apply"*) ;; *) fail "the fix is not an egress.sh apply by its full path: $fix" ;; esac
# the host-readiness command fails the same check and names the same fix
KIWI_BUILD_DIR="$BUILD" bash "$ROOT/ops/doctor.sh" >"$TMP/doctor1.out" 2>&1 \
  && fail "ops/doctor.sh passed without the egress rules: $(cat "$TMP/doctor1.out")"
grep -q '^FAIL  egress    metadata_blocked' "$TMP/doctor1.out" || fail "ops/doctor.sh does not fail metadata_blocked: $(cat "$TMP/doctor1.out")"
dfix=$(sed -nE 's/^      fix: (.*egress\.sh apply.*)$/\1/p' "$TMP/doctor1.out" | head -n 1)
[ "$dfix" = "$fix" ] || fail "ops/doctor.sh's fix ($dfix) is not the worker's ($fix)"
log "running the fix as printed: $fix"
bash -c "$fix" >/dev/null 2>"$TMP/fix.err" || fail "the fix as printed failed: $(cat "$TMP/fix.err")"
KIWI_BUILD_DIR="$BUILD" bash "$ROOT/ops/doctor.sh" >"$TMP/doctor2.out" 2>&1 \
  || fail "ops/doctor.sh still fails after the fix: $(grep -A1 '^FAIL' "$TMP/doctor2.out")"
log "ops/doctor.sh passes after the fix"
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
# shellcheck disable=SC2154 # WORKER_PID_<name> is set by worker_start (lib.sh), through eval
kill "$WORKER_PID_b"
for _ in $(seq 1 160); do kill -0 "$WORKER_PID_b" 2>/dev/null || break; sleep 0.25; done
kill -0 "$WORKER_PID_b" 2>/dev/null && fail "worker b still runs 40 s after SIGTERM"
left=$(container_ids "org.kiwi.worker=$RUN_ID-b")
[ -z "$left" ] || fail "worker b stopped during an egress check and left container(s): $(echo $left)"
log "stopped during an egress check (sandbox $(echo $caught | cut -c1-12)): no container left"

# 4. the fleet's own services on another host
# shellcheck disable=SC2154 # WORKER_PID_<name> is set by worker_start (lib.sh), through eval
kill "$WORKER_PID_a" 2>/dev/null || true
exec 8>/run/kiwi-netns.lock   # shared with test_egress.sh and tests/support/netns.c
flock -w 900 8 || fail "another test holds /run/kiwi-netns.lock"
K=$(( $$ % 200 + 20 ))
NS=kiwi-wfleet-$$ VH=kwf$$h VN=kwf$$n
FLEET=198.18.$K.20 HA=198.19.$K.13 NA=198.19.$K.14
[ -z "$(ip route show exact "$FLEET/32")" ] || fail "a route to $FLEET exists already; not touching it"
ip -o addr | grep >/dev/null -w "$HA" && fail "$HA is already an address on this host"
ip netns add "$NS"
ip link add "$VH" type veth peer name "$VN"
ip link set "$VN" netns "$NS"
ip addr add "$HA/30" dev "$VH"; ip link set "$VH" up
ip -n "$NS" link set lo up; ip -n "$NS" addr add "$NA/30" dev "$VN"; ip -n "$NS" link set "$VN" up
ip -n "$NS" addr add "$FLEET/32" dev lo
ip route add "$FLEET/32" via "$NA" dev "$VH"; FLEET_ROUTE="$FLEET/32"
route_ok() { ip route get "$FLEET" | grep >/dev/null " dev $VH "; }
route_ok || fail "route safety: $FLEET does not go via $VH ($(ip route get "$FLEET")); nothing sent"
FPW="kiwi-test-fleet-pw-$RUN_ID"
ip netns exec "$NS" redis-server --bind "$FLEET" --port 6379 --requirepass "$FPW" --save '' --appendonly no \
  --dir "$TMP" --logfile "$TMP/fleet-redis.log" --daemonize no </dev/null >/dev/null 2>&1 &
ip netns exec "$NS" python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], 9092)); s.listen(64)
open(sys.argv[2], "w").close()
while True:
    c, a = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("tcp from %s\n" % a[0])
    c.close()' "$FLEET" "$TMP/fleet-broker.log" </dev/null >/dev/null 2>&1 &
frcli() { ip netns exec "$NS" env REDISCLI_AUTH="$FPW" redis-cli --no-auth-warning -h "$FLEET" -p 6379 "$@"; }
for _ in $(seq 1 50); do [ "$(frcli ping 2>/dev/null)" = PONG ] && [ -f "$TMP/fleet-broker.log" ] && break; sleep 0.1; done
[ "$(frcli ping)" = PONG ] || fail "the fleet host's redis-server did not start"
redis_conns() { frcli INFO stats | tr -d '\r' | sed -n 's/^total_connections_received://p'; }
broker_conns() { wc -l <"$TMP/fleet-broker.log"; }
log "fleet host $FLEET (netns $NS via $VH): redis-server :6379 (requirepass), a counting listener :9092"

fleet=(KIWI_SLOTS=1 KIWI_EGRESS_INTERVAL=10 KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
       KIWI_REDIS_HOST="$FLEET" KIWI_REDIS_PORT=6379 KIWI_REDIS_PASSWORD="$FPW" KIWI_INSTALL_DENY="$FLEET:9092")

# 4a. without the deny rules (none applied): the check fails, says what
#     Phase A reached, and the worker is degraded; the fleet host counted
bash "$EGRESS" remove >/dev/null
route_ok || fail "route safety"
r0=$(redis_conns) b0=$(broker_conns)
worker_start g "${fleet[@]}"
wait_hb g '"fleet_services_blocked" in checks' 90 || fail "worker g: no fleet_services_blocked check in its heartbeat: $(hb_of g 'sorted(checks)')"
[ "$(hb_of g 'checks["fleet_services_blocked"]["ok"]')" = False ] || fail "without the rules fleet_services_blocked passed: $(hb_of g 'checks["fleet_services_blocked"]')"
hb_of g 'checks["fleet_services_blocked"]["detail"]' | grep >/dev/null "$FLEET:6379 REACHED" || fail "the detail does not name the Redis reached: $(hb_of g 'checks["fleet_services_blocked"]')"
wait_hb g 'h["degraded"] and "fleet_services_blocked" in h.get("degraded_reason", "")' 30 || fail "worker g is not degraded for it: $(hb_of g 'h.get("degraded_reason")')"
[ "$(broker_conns)" -gt "$b0" ] || fail "without the rules the broker stand-in counted no connection (the probe did not run?)"
[ "$(redis_conns)" -ge $((r0 + 3)) ] || fail "without the rules the fleet Redis counted no probe connection ($r0 -> $(redis_conns))"
log "without the deny rules: $(hb_of g 'checks["fleet_services_blocked"]["detail"]')"
# shellcheck disable=SC2154 # WORKER_PID_<name> is set by worker_start (lib.sh), through eval
kill "$WORKER_PID_g"
for _ in $(seq 1 160); do kill -0 "$WORKER_PID_g" 2>/dev/null || break; sleep 0.25; done

# 4b. KIWI_EGRESS_APPLY: the worker applies --deny for its Redis and the
#     operator's list; the check passes and the fleet host counts nothing
#     from Phase A, while the worker itself uses its Redis
worker_start f "${fleet[@]}" KIWI_EGRESS_APPLY=true
wait_hb f 'h["redis_ok"] and checks.get("fleet_services_blocked", {}).get("ok") is True and checks["metadata_blocked"]["ok"] is True' 90 \
  || fail "worker f: $(hb_of f '(h["redis_ok"], h.get("degraded_reason"), checks)')"
rules=$(iptables -S KIWI-EGRESS)
echo "$rules" | grep >/dev/null -- "-d $FLEET/32 -i kiwi-install0 -p tcp -m tcp --dport 6379 .* -j REJECT" || fail "no deny rule for $FLEET:6379: $rules"
echo "$rules" | grep >/dev/null -- "-d $FLEET/32 -i kiwi-install0 -p tcp -m tcp --dport 9092 .* -j REJECT" || fail "no deny rule for $FLEET:9092: $rules"
route_ok || fail "route safety"
t0=$(hb_of f 'checks["fleet_services_blocked"]["checked_at"]')
r0=$(redis_conns) b0=$(broker_conns)
wait_hb f "checks['fleet_services_blocked']['checked_at'] > $t0" 60 || fail "worker f ran no further check"
[ "$(hb_of f 'checks["fleet_services_blocked"]["ok"]')" = True ] || fail "the next check failed: $(hb_of f 'checks["fleet_services_blocked"]')"
r1=$(redis_conns) b1=$(broker_conns)
[ "$b1" = "$b0" ] || fail "the broker stand-in counted $((b1 - b0)) connection(s) during a check with the rules"
[ "$r1" = $((r0 + 1)) ] || fail "the fleet Redis counted $((r1 - r0 - 1)) connection(s) during a check with the rules"
[ "$(hb_of f 'h["redis_ok"]')" = True ] || fail "worker f lost its own Redis"
log "with the worker's rules: $(hb_of f 'checks["fleet_services_blocked"]["detail"]'); counters unchanged (redis $r0 -> $r1 incl. this read, broker $b0 -> $b1)"
echo "3 passed, 0 failed"
