#!/usr/bin/env bash
# bench/bench_egress_proxy.sh: the cost of Phase A's egress proxy on a real,
# uncached install. In one run, interleaved so drift hits both sides alike:
# `npm install PACKAGES` with an empty npm cache in a container on a Docker
# network of the bench's own, once straight to the registry ("open"), once
# through the egress proxy splicing the registry's TLS (Squid as
# ops/egress/proxy.sh configures it without bumping, on that network's
# gateway, HTTPS_PROXY set: "proxy") and once through the proxy as the
# worker runs it, the registries bumped so that Phase A may only read
# (--bump-ca, --bump-registries; the container trusts Kiwi's CA: "bumped").
# Prints each run, the medians, the ratio proxy/open (target <= 1.05) and
# the ratio bumped/proxy (what read-only costs).
#
# Usage: bench/bench_egress_proxy.sh [--runs N] [--image IMAGE] [PACKAGE...]
# Root (Squid drops to its user), dockerd (stack.env), squid-openssl. Adds no
# iptables rule; the redirection egress.sh --proxy adds for tools that ignore
# HTTPS_PROXY is a nat REDIRECT in the same path, not measured here.
set -euo pipefail
runs=3 image=kiwi/node:22
pkgs=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2; shift ;;
    --image) image=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) pkgs+=("$1") ;;
  esac
  shift
done
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(express@4.21.2 lodash@4.17.21 typescript@5.6.3)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
f=${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env
[[ -f $f ]] && { set -a; . "$f"; set +a; }
[[ $(id -u) == 0 ]] || { echo "bench_egress_proxy: run as root" >&2; exit 2; }
command -v squid >/dev/null || { echo "bench_egress_proxy: squid missing (squid-openssl)" >&2; exit 2; }

pid=$$ K=$((pid % 200 + 20))
NET=kiwi-pxbench-$pid BR=kpb$K SUBNET=198.18.$K.192/27 GW=198.18.$K.193
P=$((20000 + pid % 5000 * 3)) PORTS="$((20000 + pid % 5000 * 3)),$((P + 1)),$((P + 2))"
tmp=$(mktemp -d /tmp/kiwi-pxbench.XXXXXX)
chmod 755 "$tmp"
squid_pid='' squid_bump='' c_open='' c_proxy='' c_bump=''
cleanup() {
  set +e
  local c p
  for c in "$c_open" "$c_proxy" "$c_bump"; do [[ -n $c ]] && docker rm -f "$c" >/dev/null 2>&1; done
  for p in $squid_pid $squid_bump; do
    kill "$p" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
  docker network rm "$NET" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
docker network create -d bridge --subnet "$SUBNET" --gateway "$GW" -o com.docker.network.bridge.name="$BR" "$NET" >/dev/null
"$repo/ops/egress/proxy.sh" conf --dir "$tmp/proxy" --listen "$GW" --ports "$PORTS" --ecosystem npm >/dev/null
"$repo/ops/egress/proxy.sh" run --dir "$tmp/proxy" >"$tmp/squid.out" 2>&1 &
squid_pid=$!
for _ in $(seq 100); do ss -ltn | grep -q "$GW:$P " && break; sleep 0.1; done
# the worker's proxy: the registries bumped, on three ports of its own
PB=$((P + 3))
"$repo/ops/egress/proxy.sh" conf --dir "$tmp/bumped" --listen "$GW" --ports "$PB,$((PB + 1)),$((PB + 2))" --ecosystem npm \
  --bump-ca "$tmp/ca" --bump-registries >/dev/null
"$repo/ops/egress/proxy.sh" run --dir "$tmp/bumped" >"$tmp/squid-bumped.out" 2>&1 &
squid_bump=$!
for _ in $(seq 100); do ss -ltn | grep -q "$GW:$PB " && break; sleep 0.1; done
ca=/etc/ssl/certs/ca-certificates.crt
cat "$ca" "$tmp/ca/ca.pem" >"$tmp/bundle.pem"
chmod 644 "$tmp/bundle.pem"
start() { local b=$1; shift; docker run -d --network "$NET" --user 1000:1000 --tmpfs /tmp:exec -e HOME=/tmp -v "$b:/kiwi-ca.crt:ro" \
  -e npm_config_cafile=/kiwi-ca.crt -e npm_config_audit=false -e npm_config_fund=false \
  -e npm_config_update_notifier=false "$@" "$image" sleep 3600; }
c_open=$(start "$ca")
c_proxy=$(start "$ca" -e HTTPS_PROXY="http://$GW:$P" -e HTTP_PROXY="http://$GW:$P")
c_bump=$(start "$tmp/bundle.pem" -e HTTPS_PROXY="http://$GW:$PB" -e HTTP_PROXY="http://$GW:$PB")
# one install: a fresh project and an empty cache, milliseconds on stdout
install() {
  local c=$1 n=$2 t0 t1
  t0=$(date +%s%N)
  docker exec "$c" sh -c "mkdir -p /tmp/p$n && cd /tmp/p$n && echo '{}' >package.json && npm install --no-save --cache /tmp/cache$n ${pkgs[*]} >/tmp/log$n 2>&1" ||
    { echo "bench_egress_proxy: install failed in $c: $(docker exec "$c" tail -5 "/tmp/log$n")" >&2; return 1; }
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
open_ms=() proxy_ms=() bump_ms=()
echo "npm install ${pkgs[*]} (empty cache), $runs run(s) each, interleaved"
for i in $(seq 1 "$runs"); do
  case $((i % 3)) in
    1) a=$(install "$c_open" "$i"); b=$(install "$c_proxy" "$i"); c=$(install "$c_bump" "$i") ;;
    2) b=$(install "$c_proxy" "$i"); c=$(install "$c_bump" "$i"); a=$(install "$c_open" "$i") ;;
    0) c=$(install "$c_bump" "$i"); a=$(install "$c_open" "$i"); b=$(install "$c_proxy" "$i") ;;
  esac
  open_ms+=("$a") proxy_ms+=("$b") bump_ms+=("$c")
  printf 'run %d: open %d ms, proxy %d ms, bumped %d ms\n' "$i" "$a" "$b" "$c"
done
mo=$(printf '%s\n' "${open_ms[@]}" | median) mp=$(printf '%s\n' "${proxy_ms[@]}" | median)
mb=$(printf '%s\n' "${bump_ms[@]}" | median)
reqs=$(grep -c ' TCP_TUNNEL ' "$tmp/proxy/access.log" || true)
breqs=$(grep -Ec ' (GET|HEAD) [^ ]+ [^ ]+ [0-9]+ [0-9]+ [^ ]+ bump ' "$tmp/bumped/access.log" || true)
printf 'median: open %s ms, proxy %s ms, ratio %.3f (target <= 1.05); %s tunnel(s) in the proxy log\n' \
  "$mo" "$mp" "$(awk -v a="$mp" -v b="$mo" 'BEGIN {print a / b}')" "$reqs"
printf 'median: bumped %s ms, ratio bumped/proxy %.3f, bumped/open %.3f; %s read(s) seen by the bumping proxy\n' \
  "$mb" "$(awk -v a="$mb" -v b="$mp" 'BEGIN {print a / b}')" "$(awk -v a="$mb" -v b="$mo" 'BEGIN {print a / b}')" "$breqs"
