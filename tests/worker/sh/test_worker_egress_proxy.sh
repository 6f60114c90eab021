#!/usr/bin/env bash
# test_worker_egress_proxy.sh: kiwi-worker with KIWI_INSTALL_EGRESS=registries
# runs Phase A's egress proxy itself: Squid, its child, listening on the
# gateway of an install bridge of its own (ports of the test's own,
# KIWI_INSTALL_PROXY_PORTS; a second proxying worker on the host takes
# another bridge, the same ports on its gateway, and sees only its own
# sandboxes; a third told to take a held bridge refuses to start),
# reported in the heartbeat (`egress_proxy`, with what it carried); the
# egress check's Phase A probe reaches the registry through it and a host
# off the list is refused by it (`install_denied_host`); killed, it is
# started again and the heartbeat counts the restart; its fetch digest
# service killed, Squid is stopped and started again, the worker's log
# naming why; a task's install
# denied a host is told by an `egress_denied` event, its install event's
# host list and its result's reason; the worker stopped,
# or killed with SIGKILL, no Squid is left; `kiwi-worker --once` under the
# default setting runs a Squid of its own for the run, with the same events.
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
STATE="$TMP/state"
mkdir -p "$STATE"
worker_start a KIWI_SLOTS=1 KIWI_EGRESS_INTERVAL=10 KIWI_EGRESS_STOP_WHEN_DEGRADED=false KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
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
# its own install bridge (worker/egress/install-bridge.h), named in the detail
bridge_of() { hb_of "$1" '__import__("re").search(r"\((kiwi-install[0-9]+)\)", checks["egress_proxy"]["detail"]).group(1)'; }
a_br=$(bridge_of a)
gw=$(ip -4 -o addr show "$a_br" | awk '{print $4}' | cut -d/ -f1)
ss -ltn | grep >/dev/null "$gw:$P1 " || fail "nothing listens on $gw:$P1"
log "egress_proxy: $(hb_field 'checks["egress_proxy"]["detail"]')"

# 2. the egress check's Phase A probe went through it; a host off the list is refused
wait_for 90 'checks.get("install_denied_host", {}).get("ok") is True' ||
  fail "install_denied_host: $(hb_field 'checks.get("install_denied_host")' 2>&1)"
[ "$(hb_field 'checks["phase_a_https"]["ok"]')" = True ] || fail "phase_a_https through the proxy: $(hb_field 'checks["phase_a_https"]')"
log="$STATE/egress-proxy/$RUN_ID-a/access.log"
# the registry's TLS is Squid's (bumped): the probe's request itself is logged
grep -Eq ' TCP_[A-Z_]+ 200 GET registry.npmjs.org https://registry.npmjs.org/[^ ]* [0-9]+ [0-9]+ [^ ]+ bump ' "$log" ||
  fail "the registry probe's request (bumped) is not in the proxy's log: $(cat "$log")"
# denied; the port bumps TLS, so Squid answers the CONNECT 200 and its 403 inside
grep -Eq ' TCP_DENIED 200 CONNECT denied.kiwi.invalid denied.kiwi.invalid:443 [0-9]+ [0-9]+ - bump ' "$log" ||
  fail "the denied probe is not in the proxy's log: $(cat "$log")"
grep -Eq ' NONE_NONE 403 GET denied.kiwi.invalid https://denied.kiwi.invalid/ [0-9]+ [0-9]+ - ' "$log" ||
  fail "the denied probe got no 403 of Squid's inside the bumped CONNECT: $(cat "$log")"
wait_for 30 '__import__("re").search(r"[1-9][0-9]* denied, last: denied.kiwi.invalid:443", checks["egress_proxy"]["detail"]) is not None' ||
  fail "egress_proxy does not count the denial: $(hb_field 'checks["egress_proxy"]["detail"]')"
hb_field 'checks["egress_proxy"]["detail"]' | grep >/dev/null 'denied.kiwi.invalid:443 .*rule: host not allowed; KIWI_INSTALL_EGRESS=registries,denied.kiwi.invalid would allow it' ||
  fail "the denial does not name the host, the rule and the setting: $(hb_field 'checks["egress_proxy"]["detail"]')"
grep -q 'egress proxy: denied denied.kiwi.invalid:443' "$TMP/worker-a.log" || fail "the worker did not log the denial"
# without egress.sh --proxy applied, DNS is open in Phase A: the check says so
[ "$(hb_field 'checks["install_dns_closed"]["ok"]')" = False ] || fail "install_dns_closed passes without the rules"
log "phase A probe through the proxy; denial logged: $(grep -m1 'egress proxy: denied' "$TMP/worker-a.log")"

# 2b. a second proxying worker on the same host, same ports: a bridge of
# its own, its Squid on that bridge's gateway, its egress check's probes in
# its own log and none of them in the first one's; a third one told to
# take the first one's bridge refuses to start and says who holds it
worker_start c KIWI_SLOTS=1 KIWI_EGRESS_INTERVAL=10 KIWI_EGRESS_STOP_WHEN_DEGRADED=false KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
  KIWI_STATE_DIR="$STATE" KIWI_INSTALL_EGRESS="registries" KIWI_INSTALL_PROXY_PORTS="$PORTS"
wait_hb c 'checks.get("install_denied_host", {}).get("ok") is True' 90 ||
  fail "worker c: install_denied_host: $(hb_of c 'checks.get("egress_proxy"), checks.get("install_denied_host")' 2>&1; tail -n 20 "$TMP/worker-c.log")"
c_br=$(bridge_of c)
[ "$c_br" != "$a_br" ] || fail "two proxying workers share the install bridge $a_br"
c_net=$(ip -4 -o addr show "$c_br" | awk '{print $4}')
c_gw=${c_net%/*}
if [ -z "$c_gw" ] || [ "$c_gw" = "$gw" ]; then fail "worker c's bridge $c_br has no gateway of its own ('$c_net' vs $gw)"; fi
ss -ltn | grep >/dev/null "$c_gw:$P1 " || fail "nothing listens on $c_gw:$P1 (worker c's squid)"
c_log="$STATE/egress-proxy/$RUN_ID-c/access.log"
grep -Eq ' TCP_DENIED 200 CONNECT denied.kiwi.invalid denied.kiwi.invalid:443 ' "$c_log" || fail "worker c's denied probe is not in its own proxy log: $(cat "$c_log")"
python3 - "$log" "$c_log" "$c_net" "$(ip -4 -o addr show "$a_br" | awk '{print $4}')" <<'PY' || fail "the two proxies' logs are not each their own bridge's"
import ipaddress, sys
a_log, c_log, c_net, a_net = sys.argv[1:5]
cn, an = ipaddress.ip_network(c_net, strict=False), ipaddress.ip_network(a_net, strict=False)
def clients(path):
    return [ipaddress.ip_address(l.split()[1]) for l in open(path) if len(l.split()) > 2]
ca, cc = clients(a_log), clients(c_log)
assert cc and all(x in cn for x in cc), ("worker c's log", c_net, cc)
assert ca and all(x in an for x in ca), ("worker a's log", a_net, ca)
print("worker a's proxy: %d line(s), all from %s; worker c's: %d, all from %s" % (len(ca), a_net, len(cc), c_net))
PY
worker_start d KIWI_SLOTS=1 KIWI_STATE_DIR="$STATE" KIWI_INSTALL_EGRESS="registries" KIWI_INSTALL_PROXY_PORTS="$PORTS" \
  KIWI_INSTALL_BRIDGE="$a_br"
# shellcheck disable=SC2154  # set by worker_start
for _ in $(seq 1 40); do kill -0 "$WORKER_PID_d" 2>/dev/null || break; sleep 0.25; done
kill -0 "$WORKER_PID_d" 2>/dev/null && fail "worker d runs on $a_br, which worker a holds"
set +e; wait "$WORKER_PID_d"; d_rc=$?; set -e
[ "$d_rc" = 2 ] || fail "worker d exited $d_rc, not 2: $(cat "$TMP/worker-d.log")"
grep -q "KIWI_INSTALL_BRIDGE=$a_br is held by another worker on this host (pid $WORKER_PID_a" "$TMP/worker-d.log" ||
  fail "worker d's refusal does not name the bridge and its holder: $(cat "$TMP/worker-d.log")"
# shellcheck disable=SC2154  # set by worker_start
kill "$WORKER_PID_c"
for _ in $(seq 1 120); do kill -0 "$WORKER_PID_c" 2>/dev/null || break; sleep 0.25; done
log "worker a on $a_br ($gw), worker c on $c_br ($c_gw), same ports $PORTS; worker d refused: $(grep -m1 -o 'KIWI_INSTALL_BRIDGE=.*' "$TMP/worker-d.log")"

# 3. a task whose install contacts a host off the list: npm fetches its
# dependency from the registry through the proxy, then a dependency's
# install script (leaky-hook, a local one: the repository's own lifecycle
# scripts do not run in Phase A) sends a PUT to registry.npmjs.org (a
# publish: refused, the registry's TLS being Squid's, and told with its
# method) and asks for leak.kiwi.invalid (through
# HTTPS_PROXY, as every well-behaved tool does; a tool that ignores it is
# caught by the redirect, test_egress_proxy's). The denial is a typed
# progress event of that task, published while Phase A still runs (before
# its install event); the install event lists the registry with its
# requests and bytes and the denial; the result's reason names the host
# and the setting that allows it.
# leaky_repo DIR TAG: the fixture as a repository whose install input no
# earlier run has seen (TAG and the run id in its description)
leaky_repo() {
  cp -a "$ROOT/tests/fixtures/examples/js-leaky-hook" "$1"
  python3 - "$1/package.json" "$2 $RUN_ID" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["description"] += " " + sys.argv[2]
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
  commit_dir "$1" "leaky install script ($2)"
}
src="$TMP/leaky"
leaky_repo "$src" Run
tid=$(kiwi_cli submit --repo "$src" --ref main --test "npm test" --goal "Make the tests pass." --provider anthropic \
  --model claude-sonnet-4-5-20250929 --base-url "http://127.0.0.1:9/")
log "submitted $tid"
set +e
kiwi_cli wait "$tid" --timeout 120 >"$TMP/leaky-result.json"
set -e
kiwi_cli tail progress --task "$tid" >"$TMP/leaky-progress.jsonl" 2>/dev/null || true
python3 - "$TMP/leaky-result.json" "$TMP/leaky-progress.jsonl" <<'PY' || fail "the denied install: $(cat "$TMP/leaky-result.json"; tail -n 20 "$TMP/worker-a.log")"
import json, sys
r = json.load(open(sys.argv[1]))
r = r.get("result", r)
evs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
evs = [e.get("event", e) for e in evs]
assert r["status"] == "install_failed", r
assert "the egress proxy denied leak.kiwi.invalid:443" in r["reason"], r["reason"]
assert "KIWI_INSTALL_EGRESS=registries,leak.kiwi.invalid allows it" in r["reason"], r["reason"]
den = [e for e in evs if e["kind"] == "egress_denied"]
assert den, [(e["phase"], e["kind"]) for e in evs]
# the publish: refused before it left, told as a write
put = [e for e in den if e["payload"].get("method") == "PUT"]
assert put, [e["payload"] for e in den]
w = put[0]["payload"]
assert w["host"] == "registry.npmjs.org" and "Phase A may only read" in w["rule"], w
assert "KIWI_INSTALL_EGRESS=" not in w["allow_with"], w
d = [e for e in den if e["payload"].get("host") == "leak.kiwi.invalid"][0]
p = d["payload"]
assert d["phase"] == "install", d
for k, v in (("host", "leak.kiwi.invalid"), ("port", 443), ("protocol", "connect"), ("via", "proxy"),
             ("rule", "host not allowed"), ("allow_with", "KIWI_INSTALL_EGRESS=registries,leak.kiwi.invalid")):
    assert p.get(k) == v, (k, p)
assert p["command"].startswith("npm ci"), p
inst = [e for e in evs if e["kind"] == "install" and not e["payload"].get("cached")]
assert inst, [(e["phase"], e["kind"]) for e in evs]
i = inst[0]
# published as the attempt was read, not gathered at the end
assert d["seq"] < i["seq"], (d["seq"], i["seq"])
eg = i["payload"]["egress"]
reg = eg["hosts"].get("registry.npmjs.org")
assert reg and reg["requests"] >= 1 and reg["bytes"] > 0, eg
assert eg["denials"] >= 2 and "leak.kiwi.invalid" in [x["host"] for x in eg["denied"]], eg
assert "the egress proxy denied PUT registry.npmjs.org:443 (method not allowed: Phase A may only read; nothing allows it)" in r["reason"], r["reason"]
assert "leak.kiwi.invalid" in i["payload"]["reason"], i["payload"]
print("egress_denied %d ms after the attempt (seq %d; install event seq %d): %s" % (
    d["ts"] - p["attempted_at"], d["seq"], i["seq"], json.dumps(p, sort_keys=True)))
print("install egress: %s" % json.dumps(eg["hosts"], sort_keys=True))
print("the publish: %s" % json.dumps(w, sort_keys=True))
PY
# and from outside: Squid refused it before any connection (its log)
grep -Eq ' TCP_DENIED 403 PUT registry.npmjs.org https://registry.npmjs.org/kiwi-leak-hook ' "$log" ||
  fail "the install script's PUT is not refused in the proxy's log: $(grep -F kiwi-leak-hook "$log")"
# the raw messages with kcat (framed as key, size, payload): one keyed by
# the task whose msgpack says kind egress_denied and names the host
kcat_raw progress "$TMP/progress-raw.bin"
python3 - "$TMP/progress-raw.bin" "$tid" <<'PY' || fail "no egress_denied message keyed by $tid on the progress topic (kcat)"
import os, sys
sys.path.insert(0, os.environ["KIWI_SH_LIB"])
from kcat_frames import frames
tid = sys.argv[2]
n = sum(1 for key, payload in frames(sys.argv[1])
        if key == tid and b"\xa4kind\xadegress_denied" in payload and b"leak.kiwi.invalid" in payload)
print("kcat: %d egress_denied message(s) keyed by %s" % (n, tid))
sys.exit(0 if n else 1)
PY

# 4. killed, it comes back, and the heartbeat counts it
kill -9 "$squid_pid"
wait_for 30 'checks["egress_proxy"]["ok"] and __import__("re").search(r"[1-9][0-9]* restart", checks["egress_proxy"]["detail"]) is not None' ||
  fail "squid was not restarted: $(hb_field 'checks["egress_proxy"]')"
new_pid=$(hb_field 'checks["egress_proxy"]["detail"].split()[2]')
[ "$new_pid" != "$squid_pid" ] || fail "the same pid after a restart"
grep -q 'egress proxy: squid (pid '"$squid_pid"') killed by signal 9' "$TMP/worker-a.log" || fail "the worker did not log the death"
log "restarted: pid $squid_pid -> $new_pid"

# 4b. its fetch digest service killed: proxy.sh run's watcher stops Squid,
# the worker's log says why, and both come back
digest_pid=$(pgrep -f -- "kiwi-fetch-digest .*--parent $new_pid" | head -n 1)
[ -n "$digest_pid" ] || fail "no kiwi-fetch-digest beside squid $new_pid: $(pgrep -af kiwi-fetch-digest)"
kill -9 "$digest_pid"
wait_for 40 'checks["egress_proxy"]["ok"] and checks["egress_proxy"]["detail"].split()[2] != "'"$new_pid"'"' ||
  fail "squid was not restarted after its digest service died: $(hb_field 'checks["egress_proxy"]')"
grep -q "egress proxy: squid (pid $new_pid) exited with status [0-9]* (proxy: kiwi-fetch-digest (pid $digest_pid) ended: stopping squid)" \
  "$TMP/worker-a.log" || fail "the worker's log does not say why squid $new_pid ended: $(grep 'egress proxy' "$TMP/worker-a.log" | tail -n 3)"
new_pid=$(hb_field 'checks["egress_proxy"]["detail"].split()[2]')
log "digest service $digest_pid killed: squid restarted ($new_pid), the cause in the worker's log"

# 5. the worker stopped: no squid left
kill "$WORKER_PID_a"
for _ in $(seq 1 120); do kill -0 "$WORKER_PID_a" 2>/dev/null || break; sleep 0.25; done
kill -0 "$WORKER_PID_a" 2>/dev/null && fail "the worker still runs 30 s after SIGTERM"
for _ in $(seq 1 20); do kill -0 "$new_pid" 2>/dev/null || break; sleep 0.25; done
kill -0 "$new_pid" 2>/dev/null && fail "squid $new_pid outlived the worker"
ss -ltn | grep >/dev/null "$gw:$P1 " && fail "something still listens on $gw:$P1"

# 6. the worker killed with SIGKILL (no chance to stop it): its Squid dies
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
for _ in $(seq 1 40); do ss -ltn | grep >/dev/null "$gw:$P1 " || break; sleep 0.25; done
ss -ltn | grep >/dev/null "$gw:$P1 " && fail "something still listens on $gw:$P1 after worker b was killed"
log "worker b killed with SIGKILL: its squid $b_squid went with it"

# 7. kiwi-worker --once with KIWI_INSTALL_EGRESS unset (registries, the
# default) and no daemon on the host: the run starts a Squid of its own on
# a bridge it holds, the denial is an egress_denied event of its output
# before its install event, the result names the host and the setting, and
# no Squid outlives the run. A run-unique install input, so that the
# failure cached in step 3 is not what answers.
once_src="$TMP/leaky-once"
leaky_repo "$once_src" Once
cat >"$TMP/once-task.json" <<EOF
{"id": "once-$RUN_ID", "repo": {"url": "$once_src", "ref": "main"}, "test_command": "npm test", "goal": "x"}
EOF
env -u KIWI_INSTALL_EGRESS -u KIWI_INSTALL_PROXY_PORTS -u KIWI_INSTALL_BRIDGE KIWI_ONCE_EGRESS_UNCHECKED=true KIWI_STATE_DIR="$STATE" \
  KIWI_WORKER_ID="$RUN_ID-once" KIWI_ALLOW_LOCAL_REPOS=true KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" \
  KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
  "$WORKER" --once "$TMP/once-task.json" >"$TMP/once.jsonl" 2>"$TMP/once.log" || true
python3 - "$TMP/once.jsonl" <<'PY' || fail "--once behind the default proxy: $(tail -n 3 "$TMP/once.jsonl"; tail -n 20 "$TMP/once.log")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evs = [l["event"] for l in lines if l["type"] == "progress"]
r = [l["result"] for l in lines if l["type"] == "result"][0]
assert r["status"] == "install_failed", r
assert "the egress proxy denied leak.kiwi.invalid:443" in r["reason"], r["reason"]
assert "KIWI_INSTALL_EGRESS=registries,leak.kiwi.invalid allows it" in r["reason"], r["reason"]
den = [e for e in evs if e["kind"] == "egress_denied" and e["payload"].get("host") == "leak.kiwi.invalid"]
assert den, [(e["phase"], e["kind"], e["payload"]) for e in evs if e["kind"] == "egress_denied"]
assert [e for e in evs if e["kind"] == "egress_denied" and e["payload"].get("method") == "PUT"], "no refused PUT"
p = den[0]["payload"]
for k, v in (("host", "leak.kiwi.invalid"), ("port", 443), ("rule", "host not allowed"),
             ("allow_with", "KIWI_INSTALL_EGRESS=registries,leak.kiwi.invalid")):
    assert p.get(k) == v, (k, p)
assert p["command"].startswith("npm ci") and p["attempted_at"] > 0, p
inst = [e for e in evs if e["kind"] == "install"][0]
assert den[0]["seq"] < inst["seq"], (den[0]["seq"], inst["seq"])
assert inst["payload"]["egress"]["hosts"].get("registry.npmjs.org", {}).get("requests", 0) >= 1, inst["payload"]
print("--once: %s" % json.dumps(p, sort_keys=True))
PY
once_squid=$(sed -nE 's/.*egress proxy: squid \(pid ([0-9]+)\).*/\1/p' "$TMP/once.log" | head -n 1)
[ -n "$once_squid" ] || fail "--once did not log its squid: $(cat "$TMP/once.log")"
grep -q 'install bridge: kiwi-install[0-9]* (held while this worker runs' "$TMP/once.log" || fail "--once held no bridge: $(cat "$TMP/once.log")"
kill -0 "$once_squid" 2>/dev/null && fail "squid $once_squid outlived kiwi-worker --once"
log "--once: its own squid ($once_squid), the denial in its output, nothing left"
log "PASS"
