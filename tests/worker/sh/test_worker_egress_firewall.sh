#!/usr/bin/env bash
# test_worker_egress_firewall.sh: what Phase A sends outside the egress
# proxy is rejected by the rules the worker applies (KIWI_EGRESS_APPLY,
# egress.sh apply --proxy ... --nflog-group BASE), and every rejected
# attempt is told to the task that made it: the rules log it (NFLOG, group
# BASE + the bridge's number) before rejecting it, the daemon reads that
# group and publishes an `egress_denied` event (via "firewall") for the task
# whose Phase A sandbox has the packet's source address, while the install
# runs, next to the proxy's own denials (via "redirected"/"proxy").
#
# A repository generated here, whose local dependency's install script
# (net-probe) tries, from the sandbox: a UDP datagram, a DNS query for a
# name unique to the run, TCP to another port and TLS that ignores
# HTTPS_PROXY (caught by the redirect into Squid) to an "outside" address,
# and TCP to the install bridge's gateway (the host itself), then a flood
# of datagrams for 3 s. Each attempt must come back as an egress_denied event
# of the task (and on the progress topic as kcat reads it), before its
# install event; the flood is logged at the rules' rate and told up to the
# worker's cap of 64 events a task; nothing may arrive outside.
#
# The outside is a network namespace the test creates, 198.19.K.210 on its
# lo, routed from the host through the test's veth (`ip route get`, from
# the host and from the worker's bridge, checked before any packet is
# sent), serving HTTP 80, TLS 443, TCP 8080, UDP 9999 and DNS on UDP 53
# (tests/ops/egress/egress-proxy/outside.py), every arrival in a log.
#
# Changes the host's iptables (the worker applies the rules; it never
# removes them): RUN_SERIAL, under flock /run/kiwi-netns.lock, with no
# egress rules applied before; the clean-up stops the worker, runs
# egress.sh remove and deletes the namespace, veth and route on every exit
# path, and the Kiwi lines of iptables-save (counters ignored) must read as
# they did before.
. "$(dirname "$0")/lib.sh"
need_services
# skip_or_fail WHAT: exit 77, or fail under KIWI_REQUIRE_SERVICES=1 (lib.sh)
skip_or_fail() {
  [ "${KIWI_REQUIRE_SERVICES:-0}" = 1 ] && fail "required: $1"
  echo "SKIP: $1"; exit 77
}
[ "$(id -u)" = 0 ] || skip_or_fail "root (iptables, a network namespace)"
for t in squid iptables iptables-save ip openssl flock ss; do
  command -v "$t" >/dev/null || skip_or_fail "the $t command"
done
EGRESS="$ROOT/ops/egress/egress.sh"
# the rules are the ones this test asks for, not an operator's environment
for v in $(compgen -v KIWI_EGRESS_); do unset "$v"; done

exec 8>/run/kiwi-netns.lock # shared with test_egress*.sh, test_worker_egress.sh, tests/support/netns.c
flock -w 120 8 || fail "another test holds /run/kiwi-netns.lock"
bash "$EGRESS" status >/dev/null 2>&1 &&
  skip_or_fail "egress rules are applied on this host already (this test applies them through the worker and removes them)"

K=$(( $$ % 200 + 20 ))
NS=kiwi-wfw-$$ VH=kwfw$$h VN=kwfw$$n
HA=198.19.$K.149 NA=198.19.$K.150 OUTSIDE=198.19.$K.210
LEAK="leak-$RUN_ID.kiwi.test"
P1=$(( 20000 + $$ % 5000 * 3 )); PORTS="$P1,$((P1 + 1)),$((P1 + 2))"
NFLOG_BASE=$(( 8000 + $$ % 400 * 16 )) # away from the default 7460..7475; at most 14384 + 15
STATE="$TMP/state"
mkdir -p "$STATE"

# Kiwi's lines of iptables-save (both families, counters ignored)
kiwi_lines() {
  { iptables-save | sed 's/^/4 /'; ip6tables-save 2>/dev/null | sed 's/^/6 /'; } |
    grep -v '^. #' | sed 's/ \[[0-9]*:[0-9]*\]$//' | grep -E 'KIWI-|kiwi-egress' || true
}
kiwi_lines >"$TMP/iptables.before"
rules_changed() { diff "$TMP/iptables.before" <(kiwi_lines) | grep '^[<>]' || true; }

NS_MADE=0 LINK_MADE=0 ROUTE_MADE="" OUT_PID="" WORKER_STARTED=0 RULES_CHECKED=0
on_cleanup() {
  local p
  # the worker first: it must not apply the rules again after they are removed
  for p in "${PIDS[@]:-}"; do
    if [ -n "$p" ]; then kill "$p" 2>/dev/null || true; fi
  done
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] || continue
    for _ in $(seq 1 120); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
  done
  if [ "$WORKER_STARTED" = 1 ]; then
    bash "$EGRESS" remove >>"$TMP/egress-remove.out" 2>&1 || log "cleanup: egress.sh remove failed: $(tail -n 5 "$TMP/egress-remove.out")"
    if [ "$RULES_CHECKED" = 0 ]; then
      local d
      d=$(rules_changed)
      [ -z "$d" ] || log "cleanup: Kiwi's iptables lines differ from before the test: $d"
    fi
  fi
  [ -n "$OUT_PID" ] && kill "$OUT_PID" 2>/dev/null
  if [ "$NS_MADE" = 1 ]; then
    for p in $(ip netns pids "$NS" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  fi
  [ -n "$ROUTE_MADE" ] && ip route del "$ROUTE_MADE" 2>/dev/null
  [ "$LINK_MADE" = 1 ] && ip link del "$VH" 2>/dev/null
  [ "$NS_MADE" = 1 ] && ip netns del "$NS" 2>/dev/null
  return 0
}

# 1. the outside: nothing of the test's may exist already
for a in "$HA" "$NA" "$OUTSIDE"; do
  ip -o addr | grep >/dev/null -F " $a/" && fail "$a is already an address on this host"
  r=$(ip -4 route show match "$a" | grep -v '^default' || true)
  [ -z "$r" ] || fail "a route to $a exists already ($r); not touching it"
done
ip netns list | grep >/dev/null -w "$NS" && fail "network namespace $NS exists already"
ip link show "$VH" >/dev/null 2>&1 && fail "interface $VH exists already"
ip netns add "$NS" || fail "ip netns add $NS"
NS_MADE=1
ip link add "$VH" type veth peer name "$VN" || fail "ip link add $VH"
LINK_MADE=1
{ ip link set "$VN" netns "$NS" && ip addr add "$HA/30" dev "$VH" && ip link set "$VH" up; } || fail "the veth's host end"
{ ip -n "$NS" link set lo up && ip -n "$NS" addr add "$NA/30" dev "$VN" && ip -n "$NS" link set "$VN" up; } || fail "the veth's outside end"
ip -n "$NS" addr add "$OUTSIDE/32" dev lo || fail "the outside address"
ip route add "$OUTSIDE/32" via "$NA" dev "$VH" || fail "the route to $OUTSIDE"
ROUTE_MADE="$OUTSIDE/32"
# route safety, before any packet is sent
r=$(ip route get "$OUTSIDE" | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1)
[ "$r" = "$VH" ] || fail "route safety: $OUTSIDE goes via '$r', not $VH; nothing was sent"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=outside -keyout "$TMP/out.key" -out "$TMP/out.crt" >/dev/null 2>&1 ||
  fail "openssl req: a certificate for the outside"
: >"$TMP/arrived"
ip netns exec "$NS" python3 "$ROOT/tests/ops/egress/egress-proxy/outside.py" --addr "$OUTSIDE" \
  --log "$TMP/arrived" --cert "$TMP/out.crt" --key "$TMP/out.key" 2>"$TMP/outside.err" 8>&- &
OUT_PID=$!
for _ in $(seq 1 50); do grep -q ready "$TMP/arrived" && break; sleep 0.1; done
grep -q ready "$TMP/arrived" || fail "the outside's servers did not start: $(cat "$TMP/outside.err")"
# arrivals KIND: lines of the outside's log of that kind ("udp", "dns", "tcp", "tls", "http")
arrivals() { grep -c "^$1 " "$TMP/arrived" || true; }
declare -A before=()
# mark_arrivals: the outside's counts now; no_arrivals_since_mark WHAT: none
# of them grew since (a second's grace for what is still in flight)
mark_arrivals() { local k; for k in udp dns tcp tls http; do before[$k]=$(arrivals "$k"); done; }
no_arrivals_since_mark() {
  local k a bad=""
  sleep 1
  for k in udp dns tcp tls http; do
    a=$(arrivals "$k")
    [ "$a" = "${before[$k]}" ] || bad+=" $k: $((a - before[$k]))"
  done
  [ -z "$bad" ] || fail "arrivals at the outside during $1:$bad; its log: $(cat "$TMP/arrived")"
}
# the outside counts what reaches it: a datagram and a connection from the host itself
python3 - "$OUTSIDE" <<'PY' || fail "the host cannot reach the outside at $OUTSIDE"
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"kiwi-control", (sys.argv[1], 9999))
socket.create_connection((sys.argv[1], 8080), timeout=5).close()
PY
control_seen() { [ "$(arrivals udp)" -ge 1 ] && [ "$(arrivals tcp)" -ge 1 ]; }
for _ in $(seq 1 30); do control_seen && break; sleep 0.1; done
control_seen || fail "the outside logged no control datagram or connection from the host: $(cat "$TMP/arrived")"
log "outside: $OUTSIDE in netns $NS via $VH, counting arrivals"

# 2. the worker applies the rules, NFLOG included, and runs its Squid; the
# heartbeat says DNS is closed in Phase A and the proxy is up
WORKER_STARTED=1
worker_start a KIWI_SLOTS=1 KIWI_EGRESS_APPLY=true KIWI_INSTALL_EGRESS=registries KIWI_INSTALL_PROXY_PORTS="$PORTS" \
  KIWI_EGRESS_NFLOG_GROUP="$NFLOG_BASE" KIWI_EGRESS_INTERVAL=10 KIWI_EGRESS_STOP_WHEN_DEGRADED=false \
  KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt KIWI_STATE_DIR="$STATE" 8>&-
hb_ready='checks.get("egress_proxy", {}).get("ok") is True and checks.get("install_dns_closed", {}).get("ok") is True'
ready=0
for _ in $(seq 1 120); do
  [ "$(hb_of a "$hb_ready" 2>/dev/null)" = True ] && { ready=1; break; }
  # shellcheck disable=SC2154  # set by worker_start
  kill -0 "$WORKER_PID_a" 2>/dev/null || fail "worker a exited: $(tail -n 30 "$TMP/worker-a.log")"
  sleep 1
done
[ "$ready" = 1 ] || fail "no heartbeat with egress_proxy and install_dns_closed passing in 120 s: $(hb_of a 'h' 2>&1)"
a_br=$(hb_of a '__import__("re").search(r"\((kiwi-install[0-9]+)\)", checks["egress_proxy"]["detail"]).group(1)') ||
  fail "no install bridge named in egress_proxy: $(hb_of a 'checks.get("egress_proxy")' 2>&1)"
a_net=$(ip -4 -o addr show "$a_br" | awk '{print $4}' | head -n 1)
gw=${a_net%/*}
[ -n "$gw" ] || fail "the bridge $a_br has no IPv4 address"
group=$(( NFLOG_BASE + ${a_br#kiwi-install} ))
nflog=$(iptables -S | grep -E -- "^-A KIWI-[A-Z-]+ .*-j NFLOG .*--nflog-group $group( |\$)" || true)
[ -n "$nflog" ] || fail "no NFLOG rule to group $group ($NFLOG_BASE + ${a_br#kiwi-install}) in Kiwi's chains: $(iptables -S | grep -E 'KIWI-|NFLOG')"
log "worker a on $a_br ($gw), NFLOG to group $group: $(wc -l <<<"$nflog") rule(s); $(hb_of a 'checks["egress_proxy"]["detail"]')"
# the outside's replies reach the bridge even if Docker did not masquerade
sbx=$(python3 -c 'import ipaddress, sys; n = ipaddress.ip_interface(sys.argv[1]); print(n.network.network_address + 2)' "$a_net")
ip -n "$NS" route add "$(python3 -c 'import ipaddress, sys; print(ipaddress.ip_interface(sys.argv[1]).network)' "$a_net")" \
  via "$HA" dev "$VN" || fail "the outside's route back to $a_net"
r=$(ip route get "$OUTSIDE" from "$sbx" iif "$a_br" 2>&1 | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1)
[ "$r" = "$VH" ] || fail "route safety: $OUTSIDE from $a_br goes via '$r', not $VH ($(ip route get "$OUTSIDE" from "$sbx" iif "$a_br" 2>&1)); nothing was sent"

# 3. the repository: a local dependency whose install script tries it all
src="$TMP/firewall-repo"
mkdir -p "$src/net-probe"
python3 - "$src" "$RUN_ID" <<'PY'
import json, os, sys
src, run = sys.argv[1:3]
def dump(path, doc):
    with open(os.path.join(src, path), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
dump("package.json", {
    "name": "js-egress-firewall", "version": "1.0.0", "private": True,
    "description": "A local dependency (net-probe) whose install script sends what the egress proxy never sees " + run,
    "scripts": {"test": "node test.js"},
    "dependencies": {"net-probe": "file:net-probe"}})
dump("package-lock.json", {
    "name": "js-egress-firewall", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
    "packages": {
        "": {"name": "js-egress-firewall", "version": "1.0.0", "dependencies": {"net-probe": "file:net-probe"}},
        "net-probe": {"version": "1.0.0", "hasInstallScript": True},
        "node_modules/net-probe": {"resolved": "net-probe", "link": True}}})
dump("net-probe/package.json", {
    "name": "net-probe", "version": "1.0.0", "private": True,
    "description": "UDP, DNS, TCP and TLS that ignore the egress proxy, and TCP to the host",
    "scripts": {"postinstall": "node probe.js"}})
with open(os.path.join(src, "test.js"), "w") as f:
    f.write("""// prints what net-probe saw in Phase A, then passes
const fs = require('fs');
try { process.stdout.write(fs.readFileSync('node_modules/.net-probe.log', 'utf8')); } catch (e) { console.log('no net-probe log: ' + e.message); }
console.log('firewall-ok');
""")
PY
sed -e "s/@OUTSIDE@/$OUTSIDE/g" -e "s/@LEAK@/$LEAK/g" -e "s/@GW@/$gw/g" >"$src/net-probe/probe.js" <<'JS'
// net-probe: what a hostile install script sends besides HTTP(S) through
// the proxy. One line per attempt (also into node_modules/.net-probe.log,
// which test.js prints); every attempt has a short timeout and never
// throws; the script exits 0 so that the install succeeds. The attempts
// are a second apart: the rules' log is rate-limited per source address.
'use strict';
const dgram = require('dgram'), net = require('net'), https = require('https'), fs = require('fs'), path = require('path');
const OUTSIDE = '@OUTSIDE@', LEAK = '@LEAK@', GW_OF_TEST = '@GW@';
const lines = [];
const say = (s) => { lines.push(s); console.log('net-probe: ' + s); };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// the default route's gateway: the install bridge's, the host's address
function gateway() {
  try {
    for (const l of fs.readFileSync('/proc/net/route', 'utf8').split('\n').slice(1)) {
      const f = l.trim().split(/\s+/);
      if (f.length > 2 && f[1] === '00000000') {
        const h = parseInt(f[2], 16);
        return [h & 255, (h >>> 8) & 255, (h >>> 16) & 255, (h >>> 24) & 255].join('.');
      }
    }
    say('no default route in /proc/net/route');
  } catch (e) {
    say('/proc/net/route: ' + e.message);
  }
  return GW_OF_TEST;
}
function attempt(name, ms, start) {
  return new Promise((resolve) => {
    let over = false;
    const finish = (s) => { if (!over) { over = true; clearTimeout(t); say(name + ': ' + s); resolve(); } };
    const t = setTimeout(() => finish('no answer in ' + ms + ' ms'), ms);
    try { start(finish); } catch (e) { finish('threw ' + e.message); }
  });
}
const err = (e) => 'error ' + (e.code || e.message);
function datagram(host, port, payload) {
  return (finish) => {
    const s = dgram.createSocket('udp4');
    const end = (r) => { try { s.close(); } catch (e) { /* closed */ } finish(r); };
    s.on('error', (e) => end(err(e)));
    s.on('message', () => end('an answer'));
    s.send(payload, port, host, (e) => { if (e) end(err(e)); else say('sent to ' + host + ':' + port); });
  };
}
// an A query for name, built by hand (no resolver library in the way)
function query(name) {
  const parts = [Buffer.from([0x4b, 0x69, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0])];
  for (const l of name.split('.')) parts.push(Buffer.from([l.length]), Buffer.from(l, 'ascii'));
  parts.push(Buffer.from([0, 0, 1, 0, 1]));
  return Buffer.concat(parts);
}
function tcp(host, port) {
  return (finish) => {
    const s = net.connect({ host, port });
    s.on('connect', () => { s.destroy(); finish('connected'); });
    s.on('error', (e) => finish(err(e)));
  };
}
function tls(host, servername) {
  return (finish) => {
    const req = https.get({ host, port: 443, path: '/', servername, headers: { Host: servername },
      rejectUnauthorized: false, agent: false, timeout: 4000 }, (r) => { r.resume(); finish('status ' + r.statusCode); });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => finish(err(e)));
  };
}
// datagrams to host:port for ms milliseconds, five every 10 ms
function flood(host, port, ms) {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    let n = 0, errs = 0;
    s.on('error', () => { errs++; });
    const end = Date.now() + ms;
    const tick = () => {
      if (Date.now() >= end) {
        try { s.close(); } catch (e) { /* closed */ }
        say('flood ' + host + ':' + port + ': ' + n + ' datagrams sent, ' + errs + ' errors');
        resolve();
        return;
      }
      for (let i = 0; i < 5; i++, n++) s.send(Buffer.from('kiwi-flood'), port, host, (e) => { if (e) errs++; });
      setTimeout(tick, 10);
    };
    tick();
  });
}
(async () => {
  const gw = gateway();
  say('gateway ' + gw + (gw === GW_OF_TEST ? '' : ' (the test saw ' + GW_OF_TEST + ')'));
  await attempt('udp ' + OUTSIDE + ':9999', 1000, datagram(OUTSIDE, 9999, Buffer.from('kiwi-net-probe')));
  await sleep(1000);
  await attempt('dns ' + LEAK + ' at ' + OUTSIDE + ':53', 1500, datagram(OUTSIDE, 53, query(LEAK)));
  await sleep(1000);
  await attempt('tcp ' + OUTSIDE + ':8080', 3000, tcp(OUTSIDE, 8080));
  await sleep(1000);
  await attempt('https ' + OUTSIDE + ':443 (other.kiwi.test)', 5000, tls(OUTSIDE, 'other.kiwi.test'));
  await sleep(1000);
  await attempt('tcp ' + gw + ':22', 3000, tcp(gw, 22));
  await sleep(500);
  await flood(OUTSIDE, 9999, 3000);
})().catch((e) => say('threw ' + e.message)).finally(() => {
  try {
    fs.writeFileSync(path.join(process.env.INIT_CWD || '..', 'node_modules', '.net-probe.log'), lines.join('\n') + '\n');
  } catch (e) { console.log('net-probe: no log: ' + e.message); }
  process.exit(0);
});
JS
commit_dir "$src" "net-probe: UDP, DNS, TCP and TLS past the proxy ($RUN_ID)"

# 4. the task; the outside's counts before it
mark_arrivals
tid=$(kiwi_cli submit --repo "$src" --ref main --test "npm test" --goal "Make the tests pass." --provider anthropic \
  --model claude-sonnet-4-5-20250929 --base-url "http://127.0.0.1:9/")
log "submitted $tid"
set +e
kiwi_cli wait "$tid" --timeout 180 >"$TMP/result.json"
wait_rc=$?
set -e
kiwi_cli tail progress --task "$tid" >"$TMP/progress.jsonl" 2>/dev/null || true
log "kiwi wait exited $wait_rc: $(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r = r.get("result", r); print(r.get("status"), "-", str(r.get("reason", ""))[:300])' "$TMP/result.json" 2>&1)"

# 5. the events: one per attempt, typed, before the install event
python3 - "$TMP/result.json" "$TMP/progress.jsonl" "$OUTSIDE" "$gw" "$LEAK" <<'PY' || fail "the task's egress_denied events (above); worker log: $(grep -i 'egress\|nflog' "$TMP/worker-a.log" | tail -n 20)"
import json, sys
res, prog, outside, gw, leak = sys.argv[1:6]
try:
    r = json.load(open(res))
    r = r.get("result", r)
except ValueError:
    r = {"unreadable": open(res).read()[:2000]}
evs = [json.loads(l) for l in open(prog) if l.strip()]
evs = [e.get("event", e) for e in evs]
den = [e for e in evs if e.get("kind") == "egress_denied"]
problems = []
def want(cond, what):
    if not cond:
        problems.append(what)
    return cond
want(r.get("status") != "install_failed", "the install failed: %s" % json.dumps(r)[:2000])
fw = [e for e in den if e["payload"].get("via") == "firewall"]
ONLY, HOST = "only through the egress proxy", "no new connections to the host"
for e in fw:
    p = e["payload"]
    want(e.get("phase") == "install", "phase %r: %s" % (e.get("phase"), json.dumps(e)))
    want(p.get("sni") is None, "sni %r: %s" % (p.get("sni"), json.dumps(p)))
    want(p.get("allow_with") == "KIWI_INSTALL_EGRESS=open", "allow_with: %s" % json.dumps(p))
    want(str(p.get("command", "")).startswith("npm ci"), "command: %s" % json.dumps(p))
    a = p.get("attempted_at")
    want(isinstance(a, int) and not isinstance(a, bool) and a > 1500000000000, "attempted_at: %s" % json.dumps(p))
    want(p.get("protocol") in ("tcp", "udp", "dns", "icmp", "ip"), "protocol: %s" % json.dumps(p))
    want(p.get("rule") in (ONLY, HOST), "rule: %s" % json.dumps(p))
def one(what, pred):
    m = [e for e in fw if pred(e["payload"])]
    want(m, "no egress_denied (via firewall) for %s" % what)
    return m[0] if m else None
one("UDP to %s:9999" % outside, lambda p: p.get("protocol") == "udp" and p.get("address") == outside
    and p.get("host") == outside and p.get("port") == 9999 and p.get("rule") == ONLY)
one("the DNS query for %s to %s:53" % (leak, outside), lambda p: p.get("protocol") == "dns" and p.get("address") == outside
    and p.get("port") == 53 and p.get("host") == leak and p.get("rule") == ONLY)
one("TCP to %s:8080" % outside, lambda p: p.get("protocol") == "tcp" and p.get("address") == outside
    and p.get("host") == outside and p.get("port") == 8080 and p.get("rule") == ONLY)
one("TCP to the gateway %s:22" % gw, lambda p: p.get("protocol") == "tcp" and p.get("address") == gw
    and p.get("port") == 22 and p.get("rule") == HOST)
tls = [e for e in den if e["payload"].get("via") == "redirected" and e["payload"].get("protocol") == "tls"]
want(tls, "no egress_denied via redirected, protocol tls (the HTTPS that ignored HTTPS_PROXY)")
for e in tls:
    p = e["payload"]
    want("other.kiwi.test" in (p.get("host"), p.get("sni")) and p.get("port") == 443, "the redirected TLS: %s" % json.dumps(p))
# the flood: the rules log at most 20 a second per sandbox, the worker
# tells at most 64 denials of a task
want(len(den) == 64, "%d egress_denied events, not the cap of 64, after a flood of datagrams" % len(den))
inst = [e for e in evs if e.get("kind") == "install" and not (e.get("payload") or {}).get("cached")]
if want(inst, "no uncached install event"):
    for e in den:
        want(e["seq"] < inst[0]["seq"], "egress_denied seq %d not before the install event's %d: %s"
             % (e["seq"], inst[0]["seq"], json.dumps(e["payload"])))
if problems:
    print("result: %s" % json.dumps(r)[:1500])
    print("events: %s" % [(e.get("seq"), e.get("phase"), e.get("kind")) for e in evs])
    for e in den:
        print("egress_denied seq %s ts %s: %s" % (e.get("seq"), e.get("ts"), json.dumps(e["payload"], sort_keys=True)))
    for p in problems:
        print("FAIL: " + p)
    sys.exit(1)
lat = max(e["ts"] - e["payload"]["attempted_at"] for e in fw)
print("%d egress_denied event(s), %d via the firewall, before the install event (seq %d); status %s"
      % (len(den), len(fw), inst[0]["seq"], r.get("status")))
for e in den:
    print("  seq %d: %s" % (e["seq"], json.dumps(e["payload"], sort_keys=True)))
print("largest time from attempt to event, via the firewall: %d ms" % lat)
PY

# 5b. from outside: the rules rejected the whole flood but logged a bounded
# part of it (hashlimit, 20/s with bursts of 40, per source), and the worker
# said it stopped telling them
counters=$(iptables -w -vxnL KIWI-EGRESS)
nflog_pkts=$(awk -v br="$a_br" '$3 == "NFLOG" && $6 == br { print $1 }' <<<"$counters")
reject_pkts=$(awk '$3 == "REJECT" && $6 == "kiwi-install+" { n += $1 } END { print n + 0 }' <<<"$counters")
[ -n "$nflog_pkts" ] && [ "$nflog_pkts" -le 150 ] && [ "$reject_pkts" -ge 300 ] ||
  fail "the flood: $reject_pkts packet(s) rejected from the install bridges, ${nflog_pkts:-no} logged from $a_br (want >= 300 and <= 150): $counters"
grep -q "more than 64 denied attempts" "$TMP/worker-a.log" || fail "the worker did not say it stopped telling the denials: $(grep -i denied "$TMP/worker-a.log" | tail -n 5)"
log "the flood: $reject_pkts packet(s) rejected, $nflog_pkts logged from $a_br, 64 told"

# 6. the raw messages with kcat: one keyed by the task, its msgpack naming
# the kind, the firewall and the query's name
kcat_raw progress "$TMP/progress-raw.bin"
python3 - "$TMP/progress-raw.bin" "$tid" "$LEAK" <<'PY' || fail "no egress_denied message naming the firewall and $LEAK keyed by $tid on the progress topic (kcat; $(wc -c <"$TMP/progress-raw.bin") bytes read)"
import os, sys
sys.path.insert(0, os.environ["KIWI_SH_LIB"])
from kcat_frames import frames
tid, leak = sys.argv[2], sys.argv[3].encode()
msgs = [(k, p) for k, p in frames(sys.argv[1])]
n = sum(1 for k, p in msgs if k == tid and b"egress_denied" in p and b"firewall" in p and leak in p)
print("kcat: %d of %d message(s) keyed by %s: egress_denied via the firewall for %s"
      % (n, sum(1 for k, _ in msgs if k == tid), tid, leak.decode()))
sys.exit(0 if n else 1)
PY

# 7. nothing reached the outside from the sandbox
no_arrivals_since_mark "the task"
log "the outside counted nothing from the sandbox (udp, dns, tcp, tls, http)"

# 7b. kiwi-worker --once beside worker a: it takes another bridge (worker
# a holds its own), runs its own Squid on the ports the rules redirect to,
# reads that bridge's group (NFLOG_BASE + its number) and prints each
# rejected packet of its sandbox as an egress_denied event before its
# install event. A run-unique install input, so nothing cached answers.
once_src="$TMP/firewall-once"
cp -a "$src" "$once_src"
rm -rf "$once_src/.git"
python3 - "$once_src/package.json" <<'PY2'
import json, sys
d = json.load(open(sys.argv[1]))
d["description"] += " (--once)"
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY2
commit_dir "$once_src" "net-probe for --once ($RUN_ID)"
cat >"$TMP/once-task.json" <<EOF
{"id": "once-$RUN_ID", "repo": {"url": "$once_src", "ref": "main"}, "test_command": "npm test", "goal": "x"}
EOF
mark_arrivals
env -u KIWI_INSTALL_EGRESS -u KIWI_INSTALL_BRIDGE -u KIWI_EGRESS_APPLY KIWI_STATE_DIR="$STATE" \
  KIWI_INSTALL_PROXY_PORTS="$PORTS" KIWI_EGRESS_NFLOG_GROUP="$NFLOG_BASE" \
  KIWI_WORKER_ID="$RUN_ID-once" KIWI_ALLOW_LOCAL_REPOS=true KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" \
  KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
  "$WORKER" --once "$TMP/once-task.json" >"$TMP/once.jsonl" 2>"$TMP/once.log" 8>&- || true
python3 - "$TMP/once.jsonl" "$OUTSIDE" "$LEAK" "$a_br" <<'PY2' || fail "--once under the rules: $(tail -n 3 "$TMP/once.jsonl"; grep -i 'egress\|bridge\|nflog' "$TMP/once.log" | tail -n 20)"
import json, sys
path, outside, leak, a_br = sys.argv[1:5]
lines = [json.loads(l) for l in open(path) if l.strip()]
evs = [l["event"] for l in lines if l["type"] == "progress"]
fw = [e for e in evs if e["kind"] == "egress_denied" and e["payload"].get("via") == "firewall"]
got = sorted((e["payload"]["protocol"], e["payload"]["port"]) for e in fw)
assert len([e for e in evs if e["kind"] == "egress_denied"]) == 64, len(evs)
for want in (("udp", 9999), ("dns", 53), ("tcp", 8080), ("tcp", 22)):
    assert want in got, (want, got, [(e["seq"], e["kind"]) for e in evs])
den = [e for e in evs if e["kind"] == "egress_denied"]
# the proxy's denial among the rules' ones, all in the order attempted
assert any(e["payload"].get("via") == "redirected" and e["payload"].get("sni") == "other.kiwi.test" for e in den), den[:8]
at = [e["payload"]["attempted_at"] for e in den]
assert at == sorted(at), at
dns = [e["payload"] for e in fw if e["payload"]["protocol"] == "dns"][0]
assert dns["host"] == leak and dns["address"] == outside, dns
assert all(e["payload"]["command"].startswith("npm ci") for e in fw), fw
inst = [e for e in evs if e["kind"] == "install" and not e["payload"].get("cached")][0]
assert all(e["seq"] < inst["seq"] for e in fw), ([e["seq"] for e in fw], inst["seq"])
print("--once: %d egress_denied (%d via the firewall) before its install event, in the order attempted: %s"
      % (len(den), len(fw), sorted(set(got))))
PY2
once_br=$(sed -nE 's/.*install bridge: (kiwi-install[0-9]+) \(held while this worker runs.*/\1/p' "$TMP/once.log" | head -n 1)
[ -n "$once_br" ] && [ "$once_br" != "$a_br" ] || fail "--once did not hold a bridge of its own (got '$once_br', worker a holds $a_br): $(cat "$TMP/once.log")"
grep -q "netlink log group $((NFLOG_BASE + ${once_br#kiwi-install}))" "$TMP/once.log" ||
  fail "--once did not read group $((NFLOG_BASE + ${once_br#kiwi-install})) of $once_br: $(grep -i 'nflog\|netlink\|egress rules' "$TMP/once.log")"
no_arrivals_since_mark "--once"
log "--once on $once_br: its sandbox's rejected packets in its output, nothing outside"

# 8. the worker stopped, the rules removed: Kiwi's lines as before
# shellcheck disable=SC2154  # set by worker_start
kill "$WORKER_PID_a"
for _ in $(seq 1 120); do kill -0 "$WORKER_PID_a" 2>/dev/null || break; sleep 0.25; done
kill -0 "$WORKER_PID_a" 2>/dev/null && fail "the worker still runs 30 s after SIGTERM"
bash "$EGRESS" remove >>"$TMP/egress-remove.out" 2>&1 || fail "egress.sh remove: $(cat "$TMP/egress-remove.out")"
RULES_CHECKED=1
d=$(rules_changed)
[ -z "$d" ] || fail "Kiwi's iptables lines differ from before the test after egress.sh remove: $d"
bash "$EGRESS" status >/dev/null 2>&1 && fail "egress.sh status still says applied after remove"
log "rules removed; iptables (Kiwi's chains) as before"
log "PASS"
