# tests/ops/egress/proxy-netns.sh: the network namespaces of the egress
# proxy's namespace tests (sourced by test_proxy_netns.sh and
# test_proxy_bump_netns.sh; tap.sh first):
#   host     Squid (proxy.sh run), with a bridge (the install bridge)
#            whose gateway is GW (10.231.A.1)
#   sandbox  SBX (10.231.A.2) on that bridge, where the probes run
#   outside  egress-proxy/outside.py on each address of OUT_ADDRS (every
#            arrival counted in $tmp/arrived, every request's headers in
#            $tmp/headers) and egress-proxy/resolver.py on DNS
#            (10.231.C.53), the host namespace's only resolver
# The host namespace has no route but to the outside one: nothing leaves
# the machine, and the machine's own firewall is never touched. Every
# namespace, process and file is removed on exit (cleanup, the EXIT trap).
# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # here comes from the sourcing test; EGRESS and P are for it

repo=$(cd "$here/../../.." && pwd)
egress_dir=${KIWI_EGRESS_DIR:-$repo/ops/egress}
EGRESS=$egress_dir/egress.sh
PROXY=$egress_dir/proxy.sh
PY=/usr/bin/python3

[[ $(id -u) == 0 ]] || skip_or_fail "root (network namespaces)"
for t in ip iptables curl openssl unshare; do
  command -v "$t" >/dev/null || skip_or_fail "the $t command"
done
[[ -x $PY ]] || skip_or_fail "$PY (for the outside's fake servers)"
command -v squid >/dev/null || skip_or_fail "squid (Debian: squid-openssl, ops/setup.sh)"
id proxy >/dev/null 2>&1 || skip_or_fail "the user proxy (Squid's; Debian: squid-common)"

for v in $(compgen -v KIWI_EGRESS_); do unset "$v"; done
tmp=$(mktemp -d /tmp/kiwi-proxy-netns.XXXXXX)
chmod 755 "$tmp"
export KIWI_EGRESS_CONF=$tmp/no-config KIWI_EGRESS_RUN_DIR=$tmp/egress-run

pid=$$
A=$((pid % 80 * 3 + 10)) B=$((pid % 80 * 3 + 11)) C=$((pid % 80 * 3 + 12))
NH=kiwi-pxn-h-$pid NS=kiwi-pxn-s-$pid NO=kiwi-pxn-o-$pid
BR=kpxn$((pid % 10000))
GW=10.231.$A.1 SBX=10.231.$A.2 HO=10.231.$B.1 OH=10.231.$B.2 DNS=10.231.$C.53
PORTS=3128,3129,3130 EPORT=3128
P=http://$GW:$EPORT
squid_pid='' out_pid='' dns_pid='' keep_tmp=''
made_ns=()

inh() { ip netns exec "$NH" "$@"; }
ins() { ip netns exec "$NS" "$@"; }

# squid_stop: the Squid squid_start started, stopped and reaped
squid_stop() {
  if [[ -n $squid_pid ]]; then # squid's shutdown_lifetime is 1 s
    kill "$squid_pid" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$squid_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$squid_pid" 2>/dev/null
    wait "$squid_pid" 2>/dev/null
  fi
  squid_pid=''
}

cleanup() {
  local rc=$? p
  trap - EXIT INT TERM
  squid_stop
  [[ -n $out_pid ]] && kill "$out_pid" 2>/dev/null
  [[ -n $dns_pid ]] && kill "$dns_pid" 2>/dev/null
  for r in "${made_ns[@]}"; do for p in $(ip netns pids "$r" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done; done
  for r in "${made_ns[@]}"; do ip netns del "$r" 2>/dev/null; done
  rm -rf "/etc/netns/$NH"
  # kept when asked, or when Squid did not start (its logs are the evidence)
  if [[ -n ${KIWI_KEEP_TMP:-}$keep_tmp ]]; then note "kept $tmp"; else rm -rf "$tmp"; fi
  tap_finish "$rc"
}
trap cleanup EXIT
trap 'exit 143' INT TERM

# netns_build ADDR...: the three namespaces, the outside holding each ADDR
# (and DNS); addresses off 10.231.C.0/24 are routed one by one
netns_build() {
  local ns a
  for ns in "$NH" "$NS" "$NO"; do
    ip netns add "$ns" || bail "ip netns add $ns"
    made_ns+=("$ns")
    ip -n "$ns" link set lo up
  done
  {
    ip -n "$NH" link add "$BR" type bridge && ip -n "$NH" addr add "$GW/24" dev "$BR" && ip -n "$NH" link set "$BR" up &&
      ip -n "$NH" link add sb0 type veth peer name eth0 netns "$NS" && ip -n "$NH" link set sb0 master "$BR" &&
      ip -n "$NH" link set sb0 up && ip -n "$NS" addr add "$SBX/24" dev eth0 && ip -n "$NS" link set eth0 up &&
      ip -n "$NS" route add default via "$GW" &&
      ip -n "$NH" link add out0 type veth peer name eth0 netns "$NO" && ip -n "$NH" addr add "$HO/30" dev out0 &&
      ip -n "$NH" link set out0 up && ip -n "$NO" addr add "$OH/30" dev eth0 && ip -n "$NO" link set eth0 up &&
      ip -n "$NO" route add "10.231.$A.0/24" via "$HO" &&
      ip -n "$NH" route add "10.231.$C.0/24" via "$OH" &&
      for a in "$@" "$DNS"; do
        ip -n "$NO" addr add "$a/32" dev lo || exit 1
        [[ $a == 10.231.$C.* ]] || ip -n "$NH" route add "$a/32" via "$OH" || exit 1
      done &&
      inh sysctl -qw net.ipv4.ip_forward=1
  } || bail "could not build the namespaces"
  # The host namespace resolves through the outside's resolver only.
  mkdir -p "/etc/netns/$NH"
  echo "nameserver $DNS" >"/etc/netns/$NH/resolv.conf"
}

# outside_start ARG...: outside.py (--log, --headers given) and the
# resolver, each with its own arguments: OUTSIDE ARGS -- RESOLVER ARGS
outside_start() {
  local oargs=() rargs=()
  while [[ $# -gt 0 && $1 != -- ]]; do oargs+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  rargs=("$@")
  : >"$tmp/arrived"
  : >"$tmp/headers"
  : >"$tmp/questions"
  ip netns exec "$NO" "$PY" "$here/egress-proxy/outside.py" --log "$tmp/arrived" --headers "$tmp/headers" \
    "${oargs[@]}" 2>"$tmp/outside.err" &
  out_pid=$!
  ip netns exec "$NO" "$PY" "$here/egress-proxy/resolver.py" --addr "$DNS" --log "$tmp/questions" \
    "${rargs[@]}" 2>"$tmp/resolver.err" &
  dns_pid=$!
  for _ in $(seq 100); do grep -q ready "$tmp/arrived" && grep -q ready "$tmp/questions" && break; sleep 0.1; done
  grep -q ready "$tmp/arrived" || bail "the outside's servers did not start: $(cat "$tmp/outside.err")"
  grep -q ready "$tmp/questions" || bail "the outside's resolver did not start: $(cat "$tmp/resolver.err")"
}

# squid_start DIR [PROXY.SH RUN ARG...]: proxy.sh run in the host namespace
# (its own process group, as the worker starts it; its output in
# $tmp/squid.out), once it listens: within 30 s, the worker's own bound. A
# Squid that ends before it listens is started once more after 1 s, as the
# worker's proxy runner does, with what it said in the output; a second
# end, or 30 s without listening, ends the test with its logs kept.
squid_start() {
  local d=$1 i state attempt
  shift
  for attempt in 1 2; do
    setsid ip netns exec "$NH" bash "$PROXY" run --dir "$d" "$@" >>"$tmp/squid.out" 2>&1 &
    squid_pid=$!
    for ((i = 0; i < 300; i++)); do
      inh ss -ltn | grep >/dev/null "$GW:${PORTS##*,}" && return 0
      kill -0 "$squid_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$squid_pid" 2>/dev/null && break
    wait "$squid_pid" 2>/dev/null
    [[ $attempt == 1 ]] || break
    note "squid ended before it listened ($((i / 10)) s); starting it again in 1 s. What it said:"
    squid_said "$d" | indent
    sleep 1
  done
  state="still running after $((i / 10)) s"
  kill -0 "$squid_pid" 2>/dev/null || state="ended after $((i / 10)) s, twice"
  keep_tmp=1
  note "squid did not start; what it said (kept in $tmp):"
  squid_said "$d" | indent
  bail "squid is not listening on $GW:${PORTS##*,} (proxy.sh run $state): $(grep -h 'FATAL' "$d/cache.log" "$tmp/squid.out" 2>/dev/null | tail -n 1)"
}
# squid_said DIR: why a Squid ended: every FATAL or ERROR line of its
# cache.log and of what proxy.sh run printed, then the last lines of each
# (Squid's rusage lines follow its FATAL: the last five do not hold it)
squid_said() {
  grep -h -A1 'FATAL\|ERROR\|WARNING' "$1/cache.log" "$tmp/squid.out" 2>/dev/null | tail -n 20
  tail -n 15 "$1/cache.log" "$tmp/squid.out" 2>&1
}

arrivals() { grep -c -- "$1" "$tmp/arrived" || true; }
asked() { grep -c -- "$1" "$tmp/questions" || true; }
# code ARGS...: curl from the sandbox; prints the HTTP status (000: none)
code() { ins curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@" 2>/dev/null; }

# probe DESCRIPTION WANT_STATUS_REGEX ARRIVAL_PATTERN WANT_DELTA CURL_ARGS...
probe() {
  local d=$1 want=$2 pat=$3 delta=$4 before after res
  shift 4
  before=$(arrivals "$pat")
  res=$(code "$@")
  sleep 0.2
  after=$(arrivals "$pat")
  if [[ $res =~ $want && $((after - before)) == "$delta" ]]; then ok "$d (status $res)"
  else notok "$d: got status '$res', $((after - before)) arrival(s) of '$pat' (want /$want/, $delta)"; fi
}
