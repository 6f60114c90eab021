#!/usr/bin/env bash
# shellcheck disable=SC2317  # functions run through check() and the EXIT trap
# tests/ops/egress/test_egress_proxy.sh: Phase A reaches only the egress
# proxy (ops/egress/proxy.sh, Squid) and through it only allow-listed hosts;
# egress.sh --proxy enforces it (transparent redirection of 80/443, all else
# rejected, DNS included), under runc and runsc (runsc-net, Phase A's
# gVisor runtime).
#
# Everything runs on a Docker network of the test's own (bridge kpxK, not
# kiwi-install) and an "outside" network namespace the test creates:
#   outside  198.18.K.200 ("allowed.kiwi.test" in the proxy's hosts file) and
#            198.18.K.201 ("other.kiwi.test", not allowed) on its lo, each
#            serving HTTP 80, TLS 443, TCP 8080, UDP 9999 and a resolver on
#            UDP 53 (tests/ops/egress/egress-proxy/outside.py), every
#            arrival counted in a log
# reached from the host by /32 routes through the test's veth (checked with
# `ip route get` before any packet). The one other destination is
# registry.npmjs.org, through the proxy, for a real `npm install`.
#
# Changes the host's iptables while it runs (egress.sh apply --proxy
# --install-bridge kpxK): run under flock /work/locks/iptables.lock with
# no other egress rules applied. Everything it adds is removed on every exit
# path, and iptables-save (counters ignored) must read the same afterwards.
# Runs as root; TAP output; exit 77 (skip) when root, docker, squid or an
# image is missing, unless KIWI_REQUIRE_SERVICES=1.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
egress_dir=${KIWI_EGRESS_DIR:-$repo/ops/egress}
EGRESS=$egress_dir/egress.sh
PROXY=$egress_dir/proxy.sh
PY=/usr/bin/python3
IMAGE=${KIWI_PROXY_TEST_IMAGE:-kiwi/node:22}
CA=/etc/ssl/certs/ca-certificates.crt
LOCK=/run/kiwi-netns.lock # shared with test_egress.sh and tests/support/netns.c

# shellcheck source=tests/ops/egress/tap.sh
. "$here/tap.sh"

f=${KIWI_STACK_ENV:-${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env}
if [[ -f $f ]]; then
  while IFS= read -r line; do
    [[ $line =~ ^([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]] || continue
    [[ -v ${BASH_REMATCH[1]} ]] || export "${BASH_REMATCH[1]}=${BASH_REMATCH[2]}"
  done <"$f"
fi

[[ $(id -u) == 0 ]] || skip_or_fail "root (iptables, network namespaces)"
for t in ip iptables iptables-save docker openssl flock; do
  command -v "$t" >/dev/null || skip_or_fail "the $t command"
done
[[ -x $PY ]] || skip_or_fail "$PY (for the outside's fake servers)"
command -v squid >/dev/null || skip_or_fail "squid (Debian: squid-openssl, ops/setup.sh)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || skip_or_fail "dockerd at ${DOCKER_HOST:-default}"
docker image inspect "$IMAGE" >/dev/null 2>&1 || skip_or_fail "image $IMAGE (ops/images/build.sh)"
for v in $(compgen -v KIWI_EGRESS_); do unset "$v"; done
tmp=$(mktemp -d /tmp/kiwi-egress-proxy-test.XXXXXX)
chmod 755 "$tmp"
export KIWI_EGRESS_CONF=$tmp/no-config

exec 8>"$LOCK"
flock -w 900 8 || bail "another test holds $LOCK"
if "$EGRESS" status >/dev/null 2>&1; then
  bail "egress rules are applied on this host already; this test needs the host without them"
fi

pid=$$
K=$((pid % 200 + 20))
BR=kpx$K NET=kiwi-pxtest-$pid
GW=198.18.$K.65 SUBNET=198.18.$K.64/26
VH=kpo${pid}h VN=kpo${pid}n HA=198.18.$K.129 NA=198.18.$K.130
ALLOWED=198.18.$K.200 OTHER=198.18.$K.201
PORTS=23128,23129,23130 EPORT=23128
NS=kiwi-pxtest-out-$pid
added_ns=() added_links=() added_routes=() containers=() squid_pid='' out_pid='' made_net=0 applied=0

norm_save() { iptables-save | grep -v '^#' | sed 's/ \[[0-9]*:[0-9]*\]$//'; }
# Docker changes its own lines for other networks meanwhile (other tests'
# installs): only lines of Kiwi's chains and of this test's bridge count.
ours_re="(KIWI-|kiwi-egress|[ \t]$BR( |\$))"

cleanup() {
  local rc=$? r
  trap - EXIT INT TERM
  for r in "${containers[@]}"; do docker rm -f "$r" >/dev/null 2>&1; done
  [[ $applied == 1 ]] && { "$EGRESS" remove >/dev/null 2>&1 || echo "# cleanup: egress.sh remove failed"; }
  [[ -n $out_pid ]] && kill "$out_pid" 2>/dev/null
  if [[ -n $squid_pid ]]; then # squid's shutdown_lifetime is 1 s
    kill "$squid_pid" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$squid_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$squid_pid" 2>/dev/null
    wait "$squid_pid" 2>/dev/null
  fi
  for r in "${added_ns[@]}"; do for p in $(ip netns pids "$r" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done; done
  for r in "${added_routes[@]}"; do ip route del "$r" 2>/dev/null; done
  for r in "${added_links[@]}"; do ip link del "$r" 2>/dev/null; done
  for r in "${added_ns[@]}"; do ip netns del "$r" 2>/dev/null; done
  [[ $made_net == 1 ]] && docker network rm "$NET" >/dev/null 2>&1
  if [[ -f $tmp/save.before ]]; then
    local d ours
    d=$(diff "$tmp/save.before" <(norm_save) | grep '^[<>]' || true)
    ours=$(grep -E "$ours_re" <<<"$d" || true)
    if [[ -z $ours ]]; then ok "iptables left as it was (iptables-save, counters ignored)"
    else notok "iptables left as it was"; indent <<<"$ours"; fi
  fi
  [[ -n ${KIWI_KEEP_TMP:-} ]] || rm -rf "$tmp"
  echo "1..$n"
  if ((failed > 0 || rc != 0)); then [[ $rc == 0 ]] && rc=1; echo "# $failed of $n failed"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' INT TERM
norm_save >"$tmp/save.before"

# ------------------------------------------------------- the test network ---

for a in "$GW" "$HA" "$ALLOWED" "$OTHER"; do
  ip -o addr | grep >/dev/null -w "$a" && bail "$a is already an address on this host"
  r=$(ip route get "$a" 2>&1 | sed -n 's/.* dev \([^ ]*\).*/\1/p')
  [[ $r == eth0 || -z $r ]] || bail "a route to $a exists already (dev $r); not touching it"
done
docker network create -d bridge --subnet "$SUBNET" --gateway "$GW" \
  -o com.docker.network.bridge.enable_icc=false -o com.docker.network.bridge.name="$BR" \
  --label org.kiwi.test=egress-proxy "$NET" >/dev/null || bail "could not create the docker network $NET"
made_net=1

ip netns add "$NS" || bail "ip netns add"
added_ns+=("$NS")
ip link add "$VH" type veth peer name "$VN" || bail "veth"
added_links+=("$VH")
{ ip link set "$VN" netns "$NS" && ip addr add "$HA/30" dev "$VH" && ip link set "$VH" up; } || bail "veth host end"
{ ip -n "$NS" link set lo up && ip -n "$NS" addr add "$NA/30" dev "$VN" && ip -n "$NS" link set "$VN" up; } || bail "veth ns end"
for a in "$ALLOWED" "$OTHER"; do
  ip -n "$NS" addr add "$a/32" dev lo || bail "outside address"
  ip route add "$a/32" via "$NA" dev "$VH" || bail "route"
  added_routes+=("$a/32")
done
# Route safety: the outside's addresses go into the test's veth, from the
# host and from the container bridge, before anything is sent.
for a in "$ALLOWED" "$OTHER"; do
  r=$(ip route get "$a" | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n1)
  [[ $r == "$VH" ]] || bail "route safety: $a goes via '$r', not $VH; nothing was sent"
  r=$(ip route get "$a" from 198.18.$K.66 iif "$BR" 2>&1 | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n1)
  [[ $r == "$VH" ]] || bail "route safety: $a from the bridge goes via '$r', not $VH; nothing was sent"
done

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=outside -keyout "$tmp/out.key" -out "$tmp/out.crt" >/dev/null 2>&1
: >"$tmp/arrived"
ip netns exec "$NS" "$PY" "$here/egress-proxy/outside.py" --addr "$ALLOWED" --addr "$OTHER" \
  --log "$tmp/arrived" --cert "$tmp/out.crt" --key "$tmp/out.key" 2>"$tmp/outside.err" &
out_pid=$!
for _ in $(seq 50); do grep -q ready "$tmp/arrived" && break; sleep 0.1; done
grep -q ready "$tmp/arrived" || bail "the outside's servers did not start: $(cat "$tmp/outside.err")"

# ------------------------------------------------------------- the proxy ---

printf '%s allowed.kiwi.test\n%s other.kiwi.test\n' "$ALLOWED" "$OTHER" >"$tmp/hosts"
out=$("$PROXY" conf --dir "$tmp/proxy" --listen "$GW" --ports "$PORTS" --ecosystem npm \
  --allow allowed.kiwi.test --hosts-file "$tmp/hosts" 2>&1)
check "proxy.sh conf writes the Squid configuration" [ -f "$tmp/proxy/squid.conf" ]
indent <<<"$out"
check "squid -k parse accepts it (proxy.sh check)" "$PROXY" check --dir "$tmp/proxy"
"$PROXY" run --dir "$tmp/proxy" >"$tmp/squid.out" 2>&1 &
squid_pid=$!

out=$("$EGRESS" apply --proxy "$PORTS" --install-bridge "$BR" --no-ipv6 2>&1); rc=$?
applied=1
indent <<<"$out"
check "egress.sh apply --proxy $PORTS --install-bridge $BR" [ "$rc" = 0 ]
out=$("$EGRESS" check --proxy "$PORTS" --install-bridge "$BR" --no-ipv6 2>&1); rc=$?
check "egress.sh check: exact, nat table included" [ "$rc" = 0 ]
indent <<<"$out"
out=$("$EGRESS" check --install-bridge "$BR" --no-ipv6 2>&1); rc=$?
check "egress.sh check without --proxy reports the nat chain as a mismatch" [ "$rc" != 0 ]
grep -q 'nat: chain KIWI-EGRESS-NAT present' <<<"$out" || notok "the mismatch names the nat chain"
out=$("$EGRESS" apply --proxy "$PORTS" --install-bridge "$BR" --no-ipv6 2>&1)
check "a second apply changes nothing" grep -q 'nat: already applied' <<<"$out"

for _ in $(seq 100); do
  ss -ltn | grep >/dev/null "$GW:${PORTS##*,}" && break
  kill -0 "$squid_pid" 2>/dev/null || break
  sleep 0.1
done
ss -ltn | grep >/dev/null "$GW:${PORTS##*,}" || bail "squid is not listening: $(tail -5 "$tmp/proxy/cache.log" "$tmp/squid.out" 2>/dev/null)"

# --------------------------------------------------------------- probes ---

arrivals() { grep -c -- "$1" "$tmp/arrived" || true; }

# probe RUNTIME DESCRIPTION WANT_OUTPUT_REGEX ARRIVAL_PATTERN WANT_COUNT_DELTA -- client args
probe() {
  local c=$1 d=$2 want=$3 pat=$4 delta=$5 before after res
  shift 6
  before=$(arrivals "$pat")
  res=$(docker exec "$c" node /probe/client.js "$@" 2>&1 | tail -n1)
  sleep 0.3
  after=$(arrivals "$pat")
  if [[ $res =~ $want && $((after - before)) == "$delta" ]]; then ok "$c: $d ($res)"
  else notok "$c: $d: got '$res', $((after - before)) arrival(s) of '$pat' (want /$want/, $delta)"; fi
}

for rt in runc runsc-net; do
  if ! docker info --format '{{json .Runtimes}}' | grep >/dev/null "\"$rt\""; then
    notok "runtime $rt is not registered in dockerd"; continue
  fi
  c=kiwi-pxtest-$rt-$pid
  containers+=("$c")
  docker run -d --name "$c" --network "$NET" --runtime "$rt" --cap-drop ALL --security-opt no-new-privileges \
    --user 1000:1000 -v "$here/egress-proxy:/probe:ro" -v "$CA:/kiwi-ca.crt:ro" --tmpfs /tmp:exec \
    -e HOME=/tmp "$IMAGE" sleep 600 >/dev/null || { notok "$rt: container did not start"; continue; }
  P=$GW:$EPORT
  # through the proxy, allowed
  probe "$c" "explicit proxy, allowed host over HTTP" '^status 200' "http $ALLOWED allowed.kiwi.test" 1 -- proxy-http "$P" allowed.kiwi.test
  probe "$c" "explicit proxy, CONNECT to an allowed host" '^status 200' "tls $ALLOWED" 1 -- proxy-connect "$P" allowed.kiwi.test
  # ignoring the proxy settings: caught by the redirection, still allowed
  probe "$c" "no proxy settings, HTTP to an allowed host (redirected)" '^status 200' "http $ALLOWED" 1 -- http "$ALLOWED" allowed.kiwi.test
  probe "$c" "no proxy settings, TLS with an allowed SNI (redirected, spliced)" '^status 200' "tls $ALLOWED" 1 -- tls "$ALLOWED" allowed.kiwi.test
  # denied: nothing arrives at the outside
  probe "$c" "explicit proxy, a host not allowed" '^status 403' "$OTHER" 0 -- proxy-http "$P" other.kiwi.test
  probe "$c" "explicit proxy, CONNECT to a host not allowed" '^status 403' "$OTHER" 0 -- proxy-connect "$P" other.kiwi.test
  probe "$c" "HTTP to a host not allowed" '^status 403' "$OTHER" 0 -- http "$OTHER" other.kiwi.test
  probe "$c" "HTTP to a raw IP" '^status 403' "$OTHER" 0 -- http "$OTHER" "$OTHER"
  # (taken by its Host: sent to the listed name's own address, never to the one the client chose)
  probe "$c" "HTTP with an allowed Host header to another address" '^status (200|403|409)' "$OTHER" 0 -- http "$OTHER" allowed.kiwi.test
  probe "$c" "TLS with an SNI not allowed" '^(error|closed)' "tls $OTHER" 0 -- tls "$OTHER" other.kiwi.test
  probe "$c" "TLS to a raw IP without SNI" '^(error|closed)' "tls" 0 -- tls "$OTHER" -
  probe "$c" "TLS with an allowed SNI to another address" '^(error|closed)' "tls $OTHER" 0 -- tls "$OTHER" allowed.kiwi.test
  probe "$c" "TCP to another port" '^error' "tcp" 0 -- tcp "$ALLOWED" 8080
  probe "$c" "UDP datagram" 'sent|error' "udp" 0 -- udp "$ALLOWED" 9999
  probe "$c" "DNS query to a resolver outside" '^error' "dns" 0 -- dns "$ALLOWED" leak.kiwi.test
  probe "$c" "Docker's embedded DNS resolves nothing" '^(error|timeout)' "dns" 0 -- lookup registry.npmjs.org
  probe "$c" "the host's other ports are closed" '^error' "no-such-arrival" 0 -- tcp "$GW" 22
  # a real install through the proxy
  res=$(docker exec -w /tmp -e HTTPS_PROXY="http://$P" -e HTTP_PROXY="http://$P" -e npm_config_cafile=/kiwi-ca.crt \
    -e npm_config_update_notifier=false -e npm_config_audit=false -e npm_config_fund=false "$c" \
    sh -c 'mkdir -p /tmp/app && cd /tmp/app && echo "{}" >package.json && npm install --no-save --cache /tmp/npmc left-pad@1.3.0 2>&1 && test -f node_modules/left-pad/package.json && echo INSTALLED' 2>&1)
  if grep -q INSTALLED <<<"$res"; then ok "$c: npm install left-pad through the proxy"
  else notok "$c: npm install left-pad through the proxy"; indent <<<"$res"; fi
  res=$(docker exec -w /tmp -e npm_config_cafile=/kiwi-ca.crt "$c" \
    sh -c 'cd /tmp && npm view left-pad@1.3.0 version --cache /tmp/npmc2 --fetch-retries 0 --fetch-timeout 5000 2>&1; echo rc=$?')
  if grep -q 'rc=0' <<<"$res"; then notok "$c: npm without proxy settings is refused (no DNS)"; indent <<<"$res"
  else ok "$c: npm without proxy settings gets nowhere (no DNS, no route)"; fi
done

# ------------------------------------------------------------- the log ---

sleep 0.5
log=$tmp/proxy/access.log
check "the access log records the allowed host with bytes" \
  grep -Eq " TCP_[A-Z_]+ 200 GET - http://allowed.kiwi.test/ [0-9]+ [0-9]+ $ALLOWED " "$log"
check "the access log records a spliced TLS connection with its SNI" grep -Eq " TCP_TUNNEL [0-9]+ CONNECT allowed.kiwi.test allowed.kiwi.test:443 [0-9]+ [0-9]+ $ALLOWED splice( redirected)?$" "$log"
check "the access log records registry.npmjs.org" grep -q 'registry.npmjs.org' "$log"
check "the access log records the denied host" grep -Eq ' TCP_DENIED 403 GET - http://other.kiwi.test/ ' "$log"
check "the access log records the terminated TLS connection with its SNI" grep -Eq ' other.kiwi.test .* terminate redirected$' "$log"
note "access log:"; indent <"$log"
note "arrived at the outside:"; indent <"$tmp/arrived"

out=$("$EGRESS" remove 2>&1); rc=$?
applied=0
check "egress.sh remove" [ "$rc" = 0 ]
check "remove took the nat chain too" bash -c "! iptables -t nat -S KIWI-EGRESS-NAT >/dev/null 2>&1"
