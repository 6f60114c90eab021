#!/usr/bin/env bash
# shellcheck disable=SC2317  # functions run through check() and the EXIT trap
# tests/ops/egress/test_egress.sh: ops/egress/egress.sh and verify.sh against
# the real iptables and dockerd, in network namespaces this test creates.
#
# Traffic stays on this machine. The test creates two namespaces, each joined
# to the host by a veth pair:
#   metadata namespace  169.254.169.254 on its lo, a fake metadata server on
#                       ports 80, 443 (TLS, self-signed), 8080, 8775 and 9999,
#                       and a DNS responder on port 53 (UDP and TCP)
#   private namespace   10.254.K.10 and 192.168.254.K (K from the pid) on its
#                       lo, an HTTP listener on port 8080 of each
#   fleet namespace     198.18.K.10 (the benchmarking range) on its lo: a
#                       "fleet host" with a real redis-server on 6379 and a
#                       TCP listener counting connections on 9092 (a Kafka
#                       broker's port), for egress.sh --deny
# and host routes (/32) that send those addresses into the namespaces. Before
# every step that sends a packet, `ip route get` (from the host, and from the
# test container's address arriving on the Docker bridge) must show the
# test's own veth; otherwise the test stops before sending anything. The only
# other destinations are containers, the kiwi-install bridge's gateway on this
# host, and (for "HTTPS still works") https://registry.npmjs.org/ through the
# proxy CA.
#
# Everything it adds (namespaces, veths, routes, listeners, containers, rules)
# is removed on every exit path, and iptables-save/ip6tables-save (counters
# ignored) must read the same afterwards. Runs as root. Output is TAP.
# Exit 77 (skip) when docker, the image or root is missing, unless
# KIWI_REQUIRE_SERVICES=1, which turns that into a failure.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
egress_dir=${KIWI_EGRESS_DIR:-$repo/ops/egress}
EGRESS=$egress_dir/egress.sh
VERIFY=$egress_dir/verify.sh
PY=/usr/bin/python3
IMAGE=${KIWI_VERIFY_IMAGE:-kiwi/base:bookworm}
NET=kiwi-install
BR=kiwi-install0
CA=/etc/ssl/certs/ca-certificates.crt
META=169.254.169.254
LOCK=/run/kiwi-netns.lock   # shared with tests/support/netns.c

# ------------------------------------------------------------------ output ---

n=0 failed=0 skipped=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { # check DESCRIPTION CMD...
  local d=$1; shift
  if "$@"; then ok "$d"; else notok "$d"; fi
}
note() { echo "# $*"; }
# skip_check REASON: a check that cannot run here, as a TAP skip, counted (the
# test then exits 77 when nothing failed); a failure in the full suite
# (KIWI_REQUIRE_SERVICES=1), which never skips.
skip_check() {
  if [[ ${KIWI_REQUIRE_SERVICES:-0} == 1 ]]; then notok "required: $* (the full suite never skips)"; return; fi
  n=$((n + 1)); skipped=$((skipped + 1)); echo "ok $n # SKIP $*"
}
indent() { sed 's/^/#   /'; }
bail() { echo "Bail out! $*"; exit 1; }

skip_or_fail() {
  if [[ ${KIWI_REQUIRE_SERVICES:-0} == 1 ]]; then
    echo "Bail out! required: $* (the full suite never skips)"; exit 1
  fi
  echo "1..0 # SKIP $* (set KIWI_REQUIRE_SERVICES=1 to fail instead)"; exit 77
}

# ----------------------------------------------------------- environment ---

# The stack's env file (DOCKER_HOST etc.); variables already set win.
load_stack_env() {
  local f=${KIWI_STACK_ENV:-${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env} line key
  [[ -f $f ]] || return 0
  while IFS= read -r line; do
    [[ $line =~ ^([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]] || continue
    key=${BASH_REMATCH[1]}
    [[ -v $key ]] || export "$key=${BASH_REMATCH[2]}"
  done <"$f"
}
load_stack_env

[[ $(id -u) == 0 ]] || skip_or_fail "root (iptables, network namespaces)"
for t in ip iptables iptables-save ip6tables-save docker openssl flock; do
  command -v "$t" >/dev/null || skip_or_fail "the $t command"
done
[[ -x $PY ]] || skip_or_fail "$PY (Debian's python3, for the fake servers)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || skip_or_fail "dockerd at ${DOCKER_HOST:-default}"
docker image inspect "$IMAGE" >/dev/null 2>&1 || skip_or_fail "image $IMAGE (ops/images/build.sh base)"

# The egress scripts read no site configuration here: the test says exactly
# which options it wants.
for v in $(compgen -v KIWI_EGRESS_); do unset "$v"; done
tmp=$(mktemp -d /tmp/kiwi-egress-test.XXXXXX)
export KIWI_EGRESS_CONF=$tmp/no-config

exec 8>"$LOCK"
flock -w 900 8 || bail "another test holds $LOCK"

pid=$$
K=$((pid % 200 + 20))
NS1=kiwi-egress-test-$pid NS2=kiwi-egress-prv-$pid NS3=kiwi-egress-flt-$pid
VH1=kem${pid}h VN1=kem${pid}n VH2=kep${pid}h VN2=kep${pid}n VH3=kef${pid}h VN3=kef${pid}n
P10=10.254.$K.10 P192=192.168.254.$K FLEET=198.18.$K.10
CLIENT=kiwi-egress-test-client-$pid

# --------------------------------------------------------------- cleanup ---

norm_save() { # the rule set, without counters or timestamps
  { iptables-save; echo '## ipv6'; ip6tables-save; } | grep -v '^#' | sed 's/ \[[0-9]*:[0-9]*\]$//'
}
# Lines Docker adds or removes for other people's networks and containers
# while this test runs; they are reported, not held against the test.
docker_owned='(br-[0-9a-f]{12}|^-A DOCKER |MASQUERADE|^-A DOCKER-ISOLATION)'

added_routes=() added_links=() added_ns=() host_pids=() made_net=0 fwd_was='' preapplied=''
cleanup() {
  local rc=$? r p
  trap - EXIT INT TERM
  docker rm -f "$CLIENT" >/dev/null 2>&1
  if [[ -x $EGRESS ]]; then
    "$EGRESS" remove >/dev/null 2>&1 || echo "# cleanup: egress.sh remove failed"
    if [[ -n $preapplied ]]; then
      # shellcheck disable=SC2086
      "$EGRESS" apply $preapplied >/dev/null 2>&1 || echo "# cleanup: could not re-apply the rules found at start"
    fi
  fi
  for p in "${host_pids[@]}"; do kill "$p" 2>/dev/null; done
  for r in "${added_ns[@]}"; do
    for p in $(ip netns pids "$r" 2>/dev/null); do kill "$p" 2>/dev/null; done
  done
  sleep 0.3
  for r in "${added_ns[@]}"; do
    for p in $(ip netns pids "$r" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  for r in "${added_routes[@]}"; do ip route del "$r" 2>/dev/null; done
  for r in "${added_links[@]}"; do ip link del "$r" 2>/dev/null; done
  for r in "${added_ns[@]}"; do ip netns del "$r" 2>/dev/null; done
  [[ -n $fwd_was ]] && sysctl -qw net.ipv4.ip_forward="$fwd_was"
  if [[ $made_net == 1 ]]; then docker network rm "$NET" >/dev/null 2>&1; fi
  # Left as found?
  if [[ -f $tmp/save.before ]]; then
    norm_save >"$tmp/save.after"
    local d ours theirs
    d=$(diff "$tmp/save.before" "$tmp/save.after" | grep '^[<>]' || true)
    theirs=$(grep -E "$docker_owned" <<<"$d" || true)
    ours=$(grep -vE "$docker_owned" <<<"$d" || true)
    [[ -n $theirs ]] && { echo "# iptables lines changed by Docker for others meanwhile (ignored):"; indent <<<"$theirs"; }
    if [[ -z $ours ]]; then ok "iptables and ip6tables left as they were (iptables-save, counters ignored)"
    else notok "iptables and ip6tables left as they were"; indent <<<"$ours"; fi
  fi
  local leftovers=""
  for r in "${added_ns[@]}"; do ip netns list | grep >/dev/null -w "$r" && leftovers+=" netns:$r"; done
  for r in "${added_links[@]}"; do ip link show "$r" >/dev/null 2>&1 && leftovers+=" link:$r"; done
  ip route show exact "$META/32" | grep >/dev/null . && ip route show exact "$META/32" | grep >/dev/null -E "$VH1" && leftovers+=" route:$META"
  if [[ -z $leftovers ]]; then ok "namespaces, veths, routes and listeners removed"
  else notok "leftovers:$leftovers"; fi
  rm -rf "$tmp"
  echo "1..$n"
  if ((failed > 0 || rc != 0)); then
    [[ $rc == 0 ]] && rc=1
    echo "# $failed of $n failed"
  elif ((skipped > 0)); then
    echo "# $skipped of $n skipped"
    rc=77
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

norm_save >"$tmp/save.before"

# Rules already applied on this host are taken off for the test (it must see
# the path without them) and put back, with the same options, at the end.
if "$EGRESS" status >/dev/null 2>&1; then
  preapplied=$(cat /run/kiwi-egress/applied.args 2>/dev/null || echo "")
  [[ -n $preapplied ]] || preapplied="--metadata $META"
  note "egress rules were applied at start ($preapplied); removed for the test, re-applied at the end"
  "$EGRESS" remove >/dev/null 2>&1 || bail "could not remove the rules found at start"
fi

# ----------------------------------------------------------- safety first ---

# route_dev ADDR [FROM IIF]: the device the kernel would send ADDR out of.
route_dev() {
  local r
  if [[ $# -eq 3 ]]; then r=$(ip route get "$1" from "$2" iif "$3" 2>&1); else r=$(ip route get "$1" 2>&1); fi
  sed -n 's/.* dev \([^ ]*\).*/\1/p' <<<"$r" | head -n1
}

CIP=
# assert_routes: before any packet, every test address must route into the
# test's own veths, from the host and from the container's bridge.
assert_routes() {
  local addr dev want got
  for addr in "$META:$VH1" "$P10:$VH2" "$P192:$VH2" "$FLEET:$VH3"; do
    want=${addr#*:} addr=${addr%%:*}
    got=$(route_dev "$addr")
    [[ $got == "$want" ]] || bail "route safety: $addr goes via '${got:-?}' from the host, not the test veth $want; nothing was sent"
    if [[ -n $CIP ]]; then
      dev=$(route_dev "$addr" "$CIP" "$BR")
      [[ $dev == "$want" ]] || bail "route safety: $addr goes via '${dev:-?}' from the container $CIP, not $want; nothing was sent"
    fi
  done
}

# ------------------------------------------------------ verifier refuses ---

if ! docker network inspect "$NET" >/dev/null 2>&1; then
  docker network create -d bridge -o com.docker.network.bridge.enable_icc=false \
    -o com.docker.network.bridge.name=$BR --label org.kiwi.network=install $NET >/dev/null \
    || bail "could not create the $NET network"
  made_net=1
  note "created docker network $NET (removed at the end)"
fi

# No test route yet: the route to 169.254.169.254 is not the test's veth, so
# the verifier must refuse to probe it (and send it nothing).
out=$("$VERIFY" --ca-bundle "$CA" --route-dev "$VH1" 2>&1); rc=$?
indent <<<"$out"
check "verify.sh refuses the metadata probe when the route is not --route-dev (exit 2)" [ "$rc" = 2 ]
check "verify.sh prints SKIP lines for the refused probe" grep -q '^SKIP metadata http blocked (not probed' <<<"$out"
out=$("$VERIFY" --ca-bundle "$CA" --no-metadata-probe 2>&1); rc=$?
check "verify.sh --no-metadata-probe: DNS and HTTPS checks pass, exit 0" [ "$rc" = 0 ]

# ------------------------------------------------------------ namespaces ---

fwd=$(sysctl -n net.ipv4.ip_forward)
if [[ $fwd != 1 ]]; then fwd_was=$fwd; sysctl -qw net.ipv4.ip_forward=1; note "ip_forward was $fwd; set to 1 for the test"; fi

for a in "198.19.$K.1" "198.19.$K.5" "198.19.$K.9" "$P10" "$P192" "$FLEET"; do
  ip -o addr | grep >/dev/null -w "$a" && bail "$a is already an address on this host; pick another pid"
done
for r in "$META/32" "$P10/32" "$P192/32" "$FLEET/32" "198.19.$K.0/30" "198.19.$K.4/30" "198.19.$K.8/30"; do
  [[ -z $(ip route show exact "$r") ]] || bail "a route to $r exists already ($(ip route show exact "$r")); not touching it"
done

setup_ns() { # setup_ns NS VH VN HOSTADDR NSADDR ADDR...
  local ns=$1 vh=$2 vn=$3 ha=$4 na=$5 a; shift 5
  ip netns add "$ns" || return 1
  added_ns+=("$ns")
  ip link add "$vh" type veth peer name "$vn" || return 1
  added_links+=("$vh")
  ip link set "$vn" netns "$ns" || return 1
  ip addr add "$ha/30" dev "$vh" && ip link set "$vh" up || return 1
  ip -n "$ns" link set lo up || return 1
  ip -n "$ns" addr add "$na/30" dev "$vn" && ip -n "$ns" link set "$vn" up || return 1
  # No default route in the namespace: replies to containers come back to
  # the host end of the veth (Docker masquerades container traffic leaving
  # the bridge), and nothing in the namespace can send anywhere else.
  for a in "$@"; do
    ip -n "$ns" addr add "$a/32" dev lo || return 1
    ip route add "$a/32" via "$na" dev "$vh" || return 1
    added_routes+=("$a/32")
  done
}
setup_ns "$NS1" "$VH1" "$VN1" "198.19.$K.1" "198.19.$K.2" "$META" || bail "could not set up $NS1"
setup_ns "$NS2" "$VH2" "$VN2" "198.19.$K.5" "198.19.$K.6" "$P10" "$P192" || bail "could not set up $NS2"
setup_ns "$NS3" "$VH3" "$VN3" "198.19.$K.9" "198.19.$K.10" "$FLEET" || bail "could not set up $NS3"
assert_routes
ok "namespaces $NS1 ($META), $NS2 ($P10, $P192) and $NS3 ($FLEET) routed through $VH1, $VH2 and $VH3"

# --------------------------------------------------------- fake services ---

cat >"$tmp/fake.py" <<'PY'
# Fake metadata server and DNS responder for test_egress.sh (stdlib only).
import argparse, http.server, socket, socketserver, ssl, struct, threading

ap = argparse.ArgumentParser()
ap.add_argument("--addr", action="append", required=True)
ap.add_argument("--http", default="")
ap.add_argument("--https", type=int, default=0)
ap.add_argument("--cert"); ap.add_argument("--key")
ap.add_argument("--dns", type=int, default=0)
ap.add_argument("--tcp", type=int, default=0)
ap.add_argument("--answer", default="169.254.169.254")
ap.add_argument("--tag", default="kiwi-fake-metadata")
ap.add_argument("--log", required=True)
ap.add_argument("--ready", required=True)
a = ap.parse_args()
lock = threading.Lock()

def log(line):
    with lock, open(a.log, "a") as f:
        f.write(line + "\n")

class Web(http.server.BaseHTTPRequestHandler):
    timeout = 10
    def do_GET(self):
        host, port = self.server.server_address[:2]
        log(f"http {host}:{port} {self.path} from {self.client_address[0]}")
        body = f"{a.tag} {host}:{port} token=FAKE-NOT-A-SECRET\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

class TCP(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    def server_bind(self):
        # HTTPServer.server_bind would look up the address's name (a DNS
        # query): no traffic to anything but the test's own peers.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

def answer(q):
    if len(q) < 17:
        return None
    tid, flags = struct.unpack(">HH", q[:4])
    i, labels = 12, []
    while i < len(q) and q[i] != 0:
        n = q[i]; labels.append(q[i + 1:i + 1 + n].decode("ascii", "replace")); i += 1 + n
    i += 1
    if i + 4 > len(q):
        return None
    qtype, _ = struct.unpack(">HH", q[i:i + 4])
    log(f"dns {'.'.join(labels)} type {qtype}")
    rr = b""
    if qtype == 1:
        rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(a.answer)
    hdr = struct.pack(">HHHHHH", tid, 0x8480 | (flags & 0x0100), 1, 1 if rr else 0, 0, 0)
    return hdr + q[12:i + 4] + rr

class DnsUdp(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        r = answer(data)
        if r:
            sock.sendto(r, self.client_address)

class DnsTcp(socketserver.StreamRequestHandler):
    timeout = 10
    def handle(self):
        while True:
            n = self.rfile.read(2)
            if len(n) < 2:
                return
            r = answer(self.rfile.read(struct.unpack(">H", n)[0]))
            if not r:
                return
            self.wfile.write(struct.pack(">H", len(r)) + r)

class Count(socketserver.BaseRequestHandler):
    def handle(self):
        host, port = self.server.server_address[:2]
        log(f"tcp {host}:{port} from {self.client_address[0]}")

class UDP(socketserver.ThreadingMixIn, socketserver.UDPServer):
    daemon_threads = True
    allow_reuse_address = True
class DTCP(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

servers = []
for addr in a.addr:
    for p in filter(None, a.http.split(",")):
        servers.append(TCP((addr, int(p)), Web))
    if a.https:
        s = TCP((addr, a.https), Web)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        s.socket = ctx.wrap_socket(s.socket, server_side=True, do_handshake_on_connect=False)
        servers.append(s)
    if a.tcp:
        servers.append(DTCP((addr, a.tcp), Count))
    if a.dns:
        servers.append(UDP((addr, a.dns), DnsUdp))
        servers.append(DTCP((addr, a.dns), DnsTcp))
for s in servers:
    threading.Thread(target=s.serve_forever, daemon=True).start()
open(a.ready, "w").write("ready\n")
threading.Event().wait()
PY

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 1 \
  -subj "/CN=$META" >/dev/null 2>&1 || bail "openssl could not make the test certificate"

ip netns exec "$NS1" "$PY" "$tmp/fake.py" --addr "$META" --http 80,8080,8775,9999 --https 443 \
  --cert "$tmp/cert.pem" --key "$tmp/key.pem" --dns 53 --log "$tmp/meta.log" --ready "$tmp/meta.ready" \
  2>"$tmp/meta.err" &
ip netns exec "$NS2" "$PY" "$tmp/fake.py" --addr "$P10" --addr "$P192" --http 8080 --tag kiwi-fake-private \
  --log "$tmp/prv.log" --ready "$tmp/prv.ready" 2>"$tmp/prv.err" &

ip netns exec "$NS3" "$PY" "$tmp/fake.py" --addr "$FLEET" --tcp 9092 --tag kiwi-fake-broker \
  --log "$tmp/fleet.log" --ready "$tmp/fleet.ready" 2>"$tmp/fleet.err" &
ip netns exec "$NS3" redis-server --bind "$FLEET" --port 6379 --protected-mode no --save '' --appendonly no \
  --dir "$tmp" --logfile "$tmp/fleet-redis.log" --daemonize no >/dev/null 2>&1 </dev/null &

GW=$(docker network inspect -f '{{range .IPAM.Config}}{{.Gateway}}{{end}}' "$NET")
HP=$((18700 + K))
"$PY" "$tmp/fake.py" --addr "$GW" --http "$HP" --tag kiwi-host-listener --log "$tmp/host.log" \
  --ready "$tmp/host.ready" 2>"$tmp/host.err" &
host_pids+=($!)

redis_up() { [[ $(ip netns exec "$NS3" env -u REDISCLI_AUTH redis-cli -h "$FLEET" -p 6379 ping 2>/dev/null) == PONG ]]; }
for _ in $(seq 100); do
  [[ -f $tmp/meta.ready && -f $tmp/prv.ready && -f $tmp/host.ready && -f $tmp/fleet.ready ]] && redis_up && break
  sleep 0.1
done
[[ -f $tmp/meta.ready && -f $tmp/prv.ready && -f $tmp/host.ready && -f $tmp/fleet.ready ]] && redis_up \
  || { cat "$tmp"/*.err; bail "the fake servers did not start"; }
ok "fleet host $FLEET: redis-server on 6379, a counting broker stand-in on 9092"
ok "fake metadata server ($META:80,443,8080,8775,9999, DNS :53) and private listeners up; host listener on $GW:$HP"

# ------------------------------------------------------- the test client ---

cat >"$tmp/probe.sh" <<'SH'
#!/bin/bash
# probe.sh URL [curl args]: one line, rc=N code=C body=...
url=$1; shift
out=$(curl -sS -w '\n%{http_code}' --connect-timeout 3 -m 6 "$@" "$url" 2>/tmp/probe.err); rc=$?
code=${out##*$'\n'}; body=${out%$'\n'*}
[[ $out == *$'\n'* ]] || body=
printf 'rc=%s code=%s body=%s err=%s\n' "$rc" "$code" "$(head -c 100 <<<"$body" | tr '\n' ' ')" "$(head -n1 /tmp/probe.err)"
SH
chmod 755 "$tmp/probe.sh"
chmod 755 "$tmp"

docker run -d --rm --name "$CLIENT" --network "$NET" --label org.kiwi.egress-test=1 \
  -v "$tmp/probe.sh:/probe.sh:ro" -v "$CA:/kiwi-ca.crt:ro" "$IMAGE" sleep 1200 >/dev/null \
  || bail "could not start the client container"
CIP=$(docker inspect -f "{{(index .NetworkSettings.Networks \"$NET\").IPAddress}}" "$CLIENT")
[[ -n $CIP ]] || bail "the client container has no address on $NET"
assert_routes
ok "client container $CLIENT at $CIP; routes to $META, $P10, $P192 from it go into the test veths"

probe() { # probe URL [curl args]: sets PR (the probe line) and PRC (curl's exit)
  assert_routes
  PR=$(docker exec "$CLIENT" /probe.sh "$@" 2>&1)
  PRC=$(sed -n 's/^rc=\([0-9]*\) .*/\1/p' <<<"$PR")
}
tcp_connect() { # tcp_connect ADDR PORT
  assert_routes
  docker exec "$CLIENT" timeout 5 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}
dns_via_meta() { # resolves metadata.google.internal through $META:53 (Docker's embedded DNS forwards from the container's namespace)
  assert_routes
  timeout 30 docker run --rm --network "$NET" --dns "$META" --label org.kiwi.egress-test=1 "$IMAGE" \
    getent hosts metadata.google.internal 2>&1
}
reaches() { # reaches URL [args]: an HTTP 200 from the fake server
  probe "$@"; [[ $PRC == 0 && $PR == *"code=200 "* && $PR == *kiwi-fake-* ]]
}
refused() { # refused URL [args]: connection refused (curl exit 7)
  probe "$@"; [[ $PRC == 7 ]]
}
quiet() { "$@" >/dev/null 2>&1; }
rc_and_log() { [ "$1" = 0 ] && grep -q -- "$2" <<<"$3"; }
http_hits() { grep -c '^http ' "$tmp/meta.log" 2>/dev/null || echo 0; }
# The fleet host's own counters, read from inside its namespace (the read
# itself is one connection to Redis).
redis_conns() { ip netns exec "$NS3" env -u REDISCLI_AUTH redis-cli -h "$FLEET" -p 6379 INFO stats | tr -d '\r' | sed -n 's/^total_connections_received://p'; }
broker_conns() { grep -c "^tcp $FLEET:9092 " "$tmp/fleet.log" 2>/dev/null || echo 0; }
# fleet_probe [docker run args]: a Phase A-like container on the install
# network sends PING to the fleet Redis and opens the broker port; prints
# what it got.
fleet_probe() {
  assert_routes
  timeout 60 docker run --rm --network "$NET" --label org.kiwi.egress-test=1 "$@" "$IMAGE" bash -c "
    if exec 3<>/dev/tcp/$FLEET/6379; then printf 'PING\r\n' >&3; read -r -t 3 r <&3; echo \"redis:\${r%\$'\r'}\"; exec 3>&-; else echo redis:refused; fi
    if exec 4<>/dev/tcp/$FLEET/9092; then echo broker:open; exec 4>&-; else echo broker:refused; fi" 2>&1
}
fleet_blocked() { # fleet_blocked [docker run args]: neither counter moves
  local r0 b0 out
  r0=$(redis_conns) b0=$(broker_conns)
  out=$(fleet_probe "$@"); note "probe: $(tr '\n' ' ' <<<"$out")"
  sleep 0.5
  [[ $out == *redis:refused* && $out == *broker:refused* && $(redis_conns) == $((r0 + 1)) && $(broker_conns) == "$b0" ]]
}
rules_count() { { iptables -S; ip6tables -S; } 2>/dev/null | grep -c -- 'kiwi-egress'; }
our_rules() { { iptables -S; echo; ip6tables -S; } 2>/dev/null | grep -E -- '(KIWI-EGRESS|kiwi-egress)'; }
run_verify() { # run_verify EXPECTED_RC DESCRIPTION [ARGS]
  local want=$1 d=$2 out rc; shift 2
  assert_routes
  out=$("$VERIFY" --ca-bundle "$CA" --route-dev "$VH1" --metadata-dns metadata.google.internal "$@" 2>&1); rc=$?
  indent <<<"$out"
  check "$d (exit $rc, want $want)" [ "$rc" = "$want" ]
  VOUT=$out
}

# ------------------------------------------------------- without rules ---

note "--- without the rules"
check "egress.sh check fails when nothing is applied" bash -c "! '$EGRESS' check >/dev/null 2>&1"
check "egress.sh status exits non-zero when nothing is applied" bash -c "! '$EGRESS' status >/dev/null 2>&1"
reaches "http://$META/computeMetadata/v1/" -H 'Metadata-Flavor: Google'; r=$?; note "$PR"
check "without rules: the container fetches the fake metadata over http :80" [ $r = 0 ]
reaches "https://$META/" -k; r=$?; note "$PR"
check "without rules: the container fetches the fake metadata over https :443" [ $r = 0 ]
for p in 8080 8775 9999; do
  check "without rules: $META:$p reachable" reaches "http://$META:$p/"
done
out=$(dns_via_meta); note "dns: $out"
check "without rules: $META:53 answers DNS (UDP)" grep -q "^$META " <<<"$out"
check "without rules: $META:53 accepts TCP" tcp_connect "$META" 53
check "without rules: $P10:8080 reachable" reaches "http://$P10:8080/"
check "without rules: $P192:8080 reachable" reaches "http://$P192:8080/"
check "without rules: the host listener on the bridge gateway $GW:$HP is reachable from Phase A's network" \
  bash -c "docker exec '$CLIENT' curl -sS -m 5 http://$GW:$HP/ | grep >/dev/null kiwi-host-listener"
r0=$(redis_conns) b0=$(broker_conns)
out=$(fleet_probe); note "probe: $(tr '\n' ' ' <<<"$out")"; sleep 0.5
check "without rules: Phase A's network gets PONG from the fleet Redis $FLEET:6379" grep -q '^redis:+PONG' <<<"$out"
check "without rules: the fleet Redis counts the connection (INFO stats total_connections_received $r0 -> $(redis_conns), one is the read)" \
  [ "$(redis_conns)" -ge $((r0 + 3)) ]
check "without rules: the broker stand-in $FLEET:9092 counts a connection" [ "$(broker_conns)" -gt "$b0" ]
run_verify 1 "verify.sh without rules fails"
check "verify.sh without rules prints FAIL metadata http blocked" grep -q '^FAIL metadata http blocked' <<<"$VOUT"
check "verify.sh without rules prints FAIL metadata https blocked" grep -q '^FAIL metadata https blocked' <<<"$VOUT"

# --------------------------------------------------------- with the rules ---

note "--- with the rules (egress.sh apply)"
out=$("$EGRESS" apply 2>&1); rc=$?
indent <<<"$out"
check "egress.sh apply exits 0" [ "$rc" = 0 ]
check "apply logs each rule it adds" grep -q '^egress: ipv4: + -A KIWI-EGRESS -d 169.254.169.254/32 -p tcp -m multiport --dports 80,443,8080,8775' <<<"$out"
c1=$(rules_count); s1=$(our_rules); save1=$(norm_save)
out=$("$EGRESS" apply 2>&1); rc=$?
indent <<<"$out"
check "a second apply exits 0 and says nothing changed" rc_and_log "$rc" 'nothing changed' "$out"
check "applying twice leaves one set of rules ($c1 lines with kiwi-egress, iptables -S)" [ "$(rules_count)" = "$c1" ]
check "applying twice: identical rules and jumps" [ "$(our_rules)" = "$s1" ]
check "applying twice: iptables-save identical (counters ignored)" [ "$(norm_save | grep -vE "$docker_owned")" = "$(grep -vE "$docker_owned" <<<"$save1")" ]
check "exactly one jump DOCKER-USER -> KIWI-EGRESS (IPv4), and it is first" \
  bash -c "[ \$(iptables -S DOCKER-USER | grep -c -- '-j KIWI-EGRESS\$') = 1 ] && [ \"\$(iptables -S DOCKER-USER | sed -n 2p)\" = '-A DOCKER-USER -m comment --comment kiwi-egress -j KIWI-EGRESS' ]"
check "exactly one jump INPUT -i $BR -> KIWI-EGRESS-INPUT (IPv4)" [ "$(iptables -S INPUT | grep -c -- "-i $BR .*-j KIWI-EGRESS-INPUT\$")" = 1 ]
check "egress.sh check exits 0" quiet "$EGRESS" check
check "egress.sh status exits 0" bash -c "'$EGRESS' status >/dev/null"
"$EGRESS" check 2>&1 | indent
"$EGRESS" status | head -n 12 | indent

hits=$(http_hits)
for u in "http://$META/computeMetadata/v1/" "https://$META/" "http://$META:8080/" "http://$META:8775/" "http://$META:9999/"; do
  extra=(); [[ $u == https* ]] && extra=(-k)
  refused "$u" "${extra[@]}"; r=$?; note "$PR"
  check "with rules: $u refused (curl exit 7)" [ $r = 0 ]
done
check "with rules: not one request reached the fake metadata server" [ "$(http_hits)" = "$hits" ]
out=$(dns_via_meta); note "dns: $out"
check "with rules: $META:53 still answers DNS (UDP)" grep -q "^$META " <<<"$out"
check "with rules: $META:53 still accepts TCP" tcp_connect "$META" 53
check "with rules, no --rfc1918: $P10:8080 reachable" reaches "http://$P10:8080/"
check "with rules, no --rfc1918: $P192:8080 reachable" reaches "http://$P192:8080/"
check "with rules: Phase A cannot connect to the host listener on $GW:$HP (INPUT)" \
  bash -c "docker exec '$CLIENT' curl -sS -m 5 http://$GW:$HP/ >/dev/null 2>&1; [ \$? = 7 ]"
run_verify 0 "verify.sh with rules passes"
for l in "PASS dns resolves" "PASS https works" "PASS metadata http blocked" "PASS metadata https blocked" "PASS metadata dns answered"; do
  check "verify.sh with rules prints '$l'" grep -q "^$l" <<<"$VOUT"
done
if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep >/dev/null '"runsc-net"'; then
  run_verify 0 "verify.sh with rules passes under gVisor (--runtime runsc-net)" --runtime runsc-net --upstream-resolvers
else
  skip_check "verify.sh under gVisor: runtime runsc-net not registered in dockerd (ops/stack.sh)"
fi

note "--- drift"
iptables -D KIWI-EGRESS 3
check "after deleting a rule by hand, egress.sh check fails" bash -c "! '$EGRESS' check >/dev/null 2>&1"
# the fix check names, run as printed, repairs it
fix=$("$EGRESS" check 2>&1 | sed -nE 's/^check: MISMATCH \(fix, as root: (.*)\)$/\1/p')
check "check's MISMATCH line names the fix: an apply of this script by its full path" \
  bash -c "case \"\$1\" in 'bash /'*'/egress.sh apply'*) exit 0 ;; *) exit 1 ;; esac" _ "$fix"
bash -c "$fix" >/dev/null 2>&1
check "apply repairs it (the fix run as printed): check exits 0 again" quiet "$EGRESS" check
check "apply repairs it: still one set of rules" [ "$(rules_count)" = "$c1" ]
iptables -I DOCKER-USER 1 -m comment --comment kiwi-egress-test-other -j RETURN
check "a foreign rule in front of the jump makes check fail" bash -c "! '$EGRESS' check >/dev/null 2>&1"
"$EGRESS" apply >/dev/null 2>&1
check "apply puts the jump first again" [ "$(iptables -S DOCKER-USER | sed -n 2p)" = "-A DOCKER-USER -m comment --comment kiwi-egress -j KIWI-EGRESS" ]
iptables -D DOCKER-USER -m comment --comment kiwi-egress-test-other -j RETURN
check "check exits 0 once the foreign rule is gone" quiet "$EGRESS" check

# --------------------------------------------------------------- rfc1918 ---

note "--- with --rfc1918"
out=$("$EGRESS" apply --rfc1918 2>&1); rc=$?
indent <<<"$out"
check "egress.sh apply --rfc1918 exits 0" [ "$rc" = 0 ]
c2=$(rules_count)
"$EGRESS" apply --rfc1918 >/dev/null 2>&1
check "applying --rfc1918 twice leaves one set of rules ($c2 lines)" [ "$(rules_count)" = "$c2" ]
check "check without --rfc1918 reports the difference" bash -c "! '$EGRESS' check >/dev/null 2>&1"
check "check --rfc1918 exits 0" quiet "$EGRESS" check --rfc1918
refused "http://$P10:8080/"; r=$?; note "$PR"
check "with --rfc1918: $P10:8080 unreachable" [ $r = 0 ]
refused "http://$P192:8080/"; r=$?; note "$PR"
check "with --rfc1918: $P192:8080 unreachable" [ $r = 0 ]
check "with --rfc1918: metadata still refused" refused "http://$META/computeMetadata/v1/"
out=$(dns_via_meta); note "dns: $out"
check "with --rfc1918: $META:53 still answers DNS" grep -q "^$META " <<<"$out"
run_verify 0 "verify.sh with --rfc1918 passes (DNS through the private resolver, registry HTTPS)"

out=$("$EGRESS" apply --rfc1918 --allow "$P10/32:8080" 2>&1); rc=$?
indent <<<"$out"
check "apply --rfc1918 --allow $P10/32:8080 exits 0 and logs the allow rule" \
  rc_and_log "$rc" "+ -A KIWI-EGRESS -d $P10/32 -p tcp -m tcp --dport 8080" "$out"
check "with --allow: $P10:8080 reachable" reaches "http://$P10:8080/"
check "with --allow: $P192:8080 still unreachable" refused "http://$P192:8080/"
check "check --rfc1918 --allow exits 0" quiet "$EGRESS" check --rfc1918 --allow "$P10/32:8080"

# --------------------------------------------------------- fleet services ---

note "--- with --deny (the fleet's Redis and Kafka on another host)"
out=$("$EGRESS" apply --deny "$FLEET:6379" --deny "$FLEET:9092" 2>&1); rc=$?
indent <<<"$out"
check "apply --deny $FLEET:6379 --deny $FLEET:9092 exits 0 and logs the deny rules" \
  rc_and_log "$rc" "+ -A KIWI-EGRESS -d $FLEET/32 -i $BR -p tcp -m tcp --dport 9092" "$out"
check "check --deny (same addresses) exits 0" quiet "$EGRESS" check --deny "$FLEET:6379" --deny "$FLEET:9092"
check "check without --deny reports the difference" bash -c "! '$EGRESS' check >/dev/null 2>&1"
check "check with KIWI_EGRESS_DENY (same addresses) exits 0" quiet env KIWI_EGRESS_DENY="$FLEET:6379 $FLEET:9092" "$EGRESS" check
out=$("$EGRESS" status 2>&1)
check "status shows the deny rules and the option" bash -c "grep -q 'fleet service denied' <<<\"\$1\" && grep -q -- '--deny $FLEET/32:6379 --deny $FLEET/32:9092' <<<\"\$1\"" _ "$out"
check "with --deny: Phase A's network (runc) reaches neither the fleet Redis nor the broker (counters unchanged)" fleet_blocked
if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep >/dev/null '"runsc-net"'; then
  check "with --deny: Phase A's network under gVisor (runsc-net) reaches neither (counters unchanged)" fleet_blocked --runtime runsc-net
else
  note "runtime runsc-net not registered; gVisor probe skipped"
fi
r0=$(redis_conns)
check "with --deny: the host itself still talks to the fleet Redis (PING)" bash -c "[ \"\$(env -u REDISCLI_AUTH redis-cli -h $FLEET -p 6379 ping)\" = PONG ]"
check "with --deny: ... and the fleet Redis counts that connection" [ "$(redis_conns)" = $((r0 + 2)) ]
check "with --deny: the metadata is still refused" refused "http://$META/computeMetadata/v1/"
check "with --deny: other addresses are untouched ($P10:8080 reachable)" reaches "http://$P10:8080/"
out=$("$EGRESS" apply 2>&1)
check "apply without --deny takes the deny rules away again" bash -c "! iptables -S KIWI-EGRESS | grep >/dev/null 'fleet service'"
out=$(fleet_probe); note "probe: $(tr '\n' ' ' <<<"$out")"
check "without --deny again: the fleet Redis answers Phase A's network" grep -q '^redis:+PONG' <<<"$out"

# ---------------------------------------------------------------- remove ---

note "--- egress.sh remove"
out=$("$EGRESS" remove 2>&1); rc=$?
indent <<<"$out"
check "egress.sh remove exits 0 and logs what it removes" rc_and_log "$rc" '^egress: ipv4: - -X KIWI-EGRESS' "$out"
check "remove leaves no kiwi-egress rule or chain (iptables-save, ip6tables-save)" \
  bash -c "! { iptables-save; ip6tables-save; } | grep >/dev/null -E 'KIWI-EGRESS|kiwi-egress'"
check "after remove, check fails and status exits non-zero" \
  bash -c "! '$EGRESS' check >/dev/null 2>&1 && ! '$EGRESS' status >/dev/null 2>&1"
check "a second remove is a no-op (exit 0)" bash -c "'$EGRESS' remove 2>&1 | grep >/dev/null 'nothing to remove'"
check "after remove: the metadata fetch succeeds again" reaches "http://$META/computeMetadata/v1/"
check "after remove: $P192:8080 reachable again" reaches "http://$P192:8080/"
check "after remove: the host listener is reachable again" \
  bash -c "docker exec '$CLIENT' curl -sS -m 5 http://$GW:$HP/ | grep >/dev/null kiwi-host-listener"

note "fake metadata server log:"
indent <"$tmp/meta.log"
exit 0
