#!/usr/bin/env bash
# test_worker_egress_proxy.sh: kiwi-worker with KIWI_INSTALL_EGRESS=registries
# runs Phase A's egress proxy itself: Squid, its child, listening on the
# install bridge's gateway (ports of the test's own, KIWI_INSTALL_PROXY_PORTS),
# reported in the heartbeat (`egress_proxy`, with what it carried); the
# egress check's Phase A probe reaches the registry through it and a host
# off the list is refused by it (`install_denied_host`); killed, it is
# started again and the heartbeat counts the restart; the worker stopped,
# or killed with SIGKILL, no Squid is left.
#
# The test adds no iptables rule (the enforcement, egress.sh --proxy, is
# test_egress_proxy's, on a bridge of its own): other tests' installs on
# the shared install network are untouched. Without the rules DNS is open in
# Phase A, which `install_dns_closed` must report.
. "$(dirname "$0")/lib.sh"
need_services
[ "$(id -u)" = 0 ] || { echo "SKIP: root (squid drops to its own user)"; exit 77; }
command -v squid >/dev/null || { [ "${KIWI_REQUIRE_SERVICES:-0}" = 1 ] && fail "squid missing"; echo "SKIP: squid (squid-openssl)"; exit 77; }
bash "$ROOT/ops/egress/egress.sh" status >/dev/null 2>&1 && { echo "SKIP: egress rules are applied on this host (they would close the test's proxy ports)"; exit 77; }

P1=$(( 20000 + $$ % 5000 * 3 )); PORTS="$P1,$((P1 + 1)),$((P1 + 2))"
# Squid drops to the user proxy, which must reach its directory
chmod 755 "$TMP"
STATE="$TMP/state"
mkdir -p "$STATE"
worker_start a KIWI_SLOTS=1 KIWI_EGRESS_INTERVAL=10 KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
  KIWI_STATE_DIR="$STATE" KIWI_INSTALL_EGRESS="registries" KIWI_INSTALL_PROXY_PORTS="$PORTS"

hb_field() { hb_of a "$1"; }
wait_for() { wait_hb a "$2" "$1"; } # wait_for SECONDS PYEXPR

# 1. the proxy is up, the worker's child, in the heartbeat
wait_for 40 'checks.get("egress_proxy", {}).get("ok") is True' ||
  fail "no egress_proxy check passing in the heartbeat: $(hb_field 'checks.get("egress_proxy")' 2>&1)"
squid_pid=$(hb_field 'checks["egress_proxy"]["detail"].split()[2]')
# shellcheck disable=SC2154  # set by worker_start
[ "$(ps -o ppid= -p "$squid_pid" | tr -d ' ')" = "$WORKER_PID_a" ] ||
  fail "squid $squid_pid is not the worker's child ($(ps -o ppid=,args= -p "$squid_pid"))"
gw=$(ip -4 -o addr show kiwi-install0 | awk '{print $4}' | cut -d/ -f1)
ss -ltn | grep -q "$gw:$P1 " || fail "nothing listens on $gw:$P1"
log "egress_proxy: $(hb_field 'checks["egress_proxy"]["detail"]')"

# 2. the egress check's Phase A probe went through it; a host off the list is refused
wait_for 90 'checks.get("install_denied_host", {}).get("ok") is True' ||
  fail "install_denied_host: $(hb_field 'checks.get("install_denied_host")' 2>&1)"
[ "$(hb_field 'checks["phase_a_https"]["ok"]')" = True ] || fail "phase_a_https through the proxy: $(hb_field 'checks["phase_a_https"]')"
log="$STATE/egress-proxy/$RUN_ID-a/access.log"
grep -q ' TCP_TUNNEL 200 CONNECT - registry.npmjs.org:443 ' "$log" || fail "the registry probe is not in the proxy's log: $(cat "$log")"
grep -q ' TCP_DENIED 403 CONNECT - denied.kiwi.invalid:443 ' "$log" || fail "the denied probe is not in the proxy's log: $(cat "$log")"
wait_for 30 '__import__("re").search(r"[1-9][0-9]* denied, last: denied.kiwi.invalid:443", checks["egress_proxy"]["detail"]) is not None' ||
  fail "egress_proxy does not count the denial: $(hb_field 'checks["egress_proxy"]["detail"]')"
hb_field 'checks["egress_proxy"]["detail"]' | grep -q 'denied.kiwi.invalid:443 .*rule: host not allowed; KIWI_INSTALL_EGRESS=registries,denied.kiwi.invalid would allow it' ||
  fail "the denial does not name the host, the rule and the setting: $(hb_field 'checks["egress_proxy"]["detail"]')"
grep -q 'egress proxy: denied denied.kiwi.invalid:443' "$TMP/worker-a.log" || fail "the worker did not log the denial"
# without egress.sh --proxy applied, DNS is open in Phase A: the check says so
[ "$(hb_field 'checks["install_dns_closed"]["ok"]')" = False ] || fail "install_dns_closed passes without the rules"
log "phase A probe through the proxy; denial logged: $(grep -m1 'egress proxy: denied' "$TMP/worker-a.log")"

# 3. killed, it comes back, and the heartbeat counts it
kill -9 "$squid_pid"
wait_for 30 'checks["egress_proxy"]["ok"] and __import__("re").search(r"[1-9][0-9]* restart", checks["egress_proxy"]["detail"]) is not None' ||
  fail "squid was not restarted: $(hb_field 'checks["egress_proxy"]')"
new_pid=$(hb_field 'checks["egress_proxy"]["detail"].split()[2]')
[ "$new_pid" != "$squid_pid" ] || fail "the same pid after a restart"
grep -q 'egress proxy: squid (pid '"$squid_pid"') killed by signal 9' "$TMP/worker-a.log" || fail "the worker did not log the death"
log "restarted: pid $squid_pid -> $new_pid"

# 4. the worker stopped: no squid left
kill "$WORKER_PID_a"
for _ in $(seq 1 120); do kill -0 "$WORKER_PID_a" 2>/dev/null || break; sleep 0.25; done
kill -0 "$WORKER_PID_a" 2>/dev/null && fail "the worker still runs 30 s after SIGTERM"
for _ in $(seq 1 20); do kill -0 "$new_pid" 2>/dev/null || break; sleep 0.25; done
kill -0 "$new_pid" 2>/dev/null && fail "squid $new_pid outlived the worker"
ss -ltn | grep -q "$gw:$P1 " && fail "something still listens on $gw:$P1"

# 5. the worker killed with SIGKILL (no chance to stop it): its Squid dies
# with it, and a worker started after it has the ports
worker_start b KIWI_SLOTS=1 KIWI_EGRESS_INTERVAL=10 KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
  KIWI_STATE_DIR="$STATE" KIWI_INSTALL_EGRESS="registries" KIWI_INSTALL_PROXY_PORTS="$PORTS"
wait_hb b 'checks.get("egress_proxy", {}).get("ok") is True' 40 ||
  fail "worker b: no egress_proxy check passing: $(hb_of b 'checks.get("egress_proxy")' 2>&1)"
b_squid=$(hb_of b 'checks["egress_proxy"]["detail"].split()[2]')
# shellcheck disable=SC2154  # set by worker_start
kill -9 "$WORKER_PID_b"
for _ in $(seq 1 40); do kill -0 "$b_squid" 2>/dev/null || break; sleep 0.25; done
kill -0 "$b_squid" 2>/dev/null && fail "squid $b_squid outlived worker b killed with SIGKILL ($(ps -o ppid=,args= -p "$b_squid"))"
for _ in $(seq 1 40); do ss -ltn | grep -q "$gw:$P1 " || break; sleep 0.25; done
ss -ltn | grep -q "$gw:$P1 " && fail "something still listens on $gw:$P1 after worker b was killed"
log "worker b killed with SIGKILL: its squid $b_squid went with it"
log "PASS"
