#!/usr/bin/env bash
# ops/egress/verify.sh: proves, from inside a container, that the cloud
# metadata endpoint is blocked while DNS and ordinary HTTPS still work.
#
# Usage: verify.sh [--image IMAGE] [--network NET] [--ca-bundle FILE]
#                  [--runtime RUNTIME] [--https-url URL] [--dns-name NAME]
#                  [--metadata-addr ADDR] [--metadata-dns NAME]
#                  [--route-dev DEV] [--no-metadata-probe]
#                  [--force-metadata-probe] [--timeout SECONDS]
#                  [--upstream-resolvers]
#
#   --image IMAGE          container image (kiwi/base:bookworm); needs bash,
#                          curl and getent
#   --network NET          docker network to start it on (kiwi-install)
#   --ca-bundle FILE       mounted read-only as /kiwi-ca.crt; curl trusts it
#                          for the HTTPS check (a TLS-intercepting proxy's CA)
#   --runtime RUNTIME      docker runtime (e.g. runsc-net); default dockerd's
#   --https-url URL        the ordinary HTTPS fetch (https://registry.npmjs.org/)
#   --dns-name NAME        the name that must resolve (the URL's host)
#   --metadata-addr ADDR   the metadata endpoint (169.254.169.254)
#   --metadata-dns NAME    also check that ADDR:53 answers (UDP, through a
#                          container started with --dns ADDR) and accepts TCP:
#                          for clouds whose resolver is the metadata address
#   --route-dev DEV        probe the metadata address only if the route to it
#                          (from the host and from the container's bridge)
#                          goes out through DEV; what tests use
#   --no-metadata-probe    send nothing to the metadata address; its checks
#                          print SKIP
#   --force-metadata-probe probe even where the safety policy would refuse
#   --timeout SECONDS      per network check (5)
#   --upstream-resolvers   bind the host's resolvers (its nameservers that are
#                          not loopback ones) read-only at /etc/resolv.conf,
#                          as the gvisor driver does for Phase A: gVisor's
#                          own network stack cannot reach Docker's embedded
#                          resolver (and --metadata-dns then names ADDR so)
#
# Prints one line per check, "PASS <check> (<detail>)" or "FAIL ..." (or
# "SKIP ..."), on stdout; exits 0 iff every check that ran held, 1 if one
# failed, 2 if the run could not verify (setup error, or the metadata probe
# was refused by the safety policy and --no-metadata-probe was not given).
#
# Safety policy for the metadata probe (see README.md): the probe is sent
# only if the route to ADDR stays on this machine (a local address, a veth
# into a network namespace here, or --route-dev DEV), or this is a recognised
# cloud VM (whose metadata server is exactly what is being probed), or
# --force-metadata-probe is given.
set -euo pipefail

image=${KIWI_VERIFY_IMAGE:-kiwi/base:bookworm}
network=kiwi-install
ca_bundle=
runtime=
https_url=https://registry.npmjs.org/
dns_name=
meta=169.254.169.254
meta_dns_name=
route_dev=
probe=auto
timeout=5
upstream=no

usage() { sed -n '2,46p' "$0" | sed 's/^# \{0,1\}//'; }
die() { printf 'verify: error: %s\n' "$*" >&2; exit 2; }
need_arg() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value"; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --image) need_arg "$@"; image=$2; shift ;;
    --network) need_arg "$@"; network=$2; shift ;;
    --ca-bundle) need_arg "$@"; ca_bundle=$2; shift ;;
    --runtime) need_arg "$@"; runtime=$2; shift ;;
    --https-url) need_arg "$@"; https_url=$2; shift ;;
    --dns-name) need_arg "$@"; dns_name=$2; shift ;;
    --metadata-addr) need_arg "$@"; meta=$2; shift ;;
    --metadata-dns) need_arg "$@"; meta_dns_name=$2; shift ;;
    --route-dev) need_arg "$@"; route_dev=$2; shift ;;
    --no-metadata-probe) probe=no ;;
    --force-metadata-probe) probe=force ;;
    --timeout) need_arg "$@"; timeout=$2; shift ;;
    --upstream-resolvers) upstream=yes ;;
    -h|--help) usage; exit 0 ;;
    *) printf 'verify: unknown option %s (see --help)\n' "$1" >&2; exit 2 ;;
  esac
  shift
done
[[ $timeout =~ ^[0-9]+$ && $timeout -gt 0 ]] || die "--timeout wants whole seconds"
[[ $meta =~ ^[0-9.]+$ ]] || die "--metadata-addr wants an IPv4 address"
if [[ -z $dns_name ]]; then
  dns_name=${https_url#*://}; dns_name=${dns_name%%/*}; dns_name=${dns_name%%:*}
fi
[[ -n $dns_name ]] || die "cannot tell the host of $https_url; give --dns-name"
if [[ -n $ca_bundle ]]; then
  [[ -r $ca_bundle ]] || die "--ca-bundle $ca_bundle is not readable"
  ca_bundle=$(readlink -f "$ca_bundle")
fi

command -v docker >/dev/null || die "docker CLI not found"
command -v ip >/dev/null || die "ip (iproute2) not found"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
  || die "no docker daemon at ${DOCKER_HOST:-the default socket} (set DOCKER_HOST; see /var/lib/kiwi/stack.env)"
docker image inspect "$image" >/dev/null 2>&1 || die "image $image not present"
docker network inspect "$network" >/dev/null 2>&1 || die "docker network $network does not exist"

failures=0 ran=0 skipped=0
pass() { echo "PASS $*"; ran=$((ran + 1)); }
fail() { echo "FAIL $*"; ran=$((ran + 1)); failures=$((failures + 1)); }
skip() { echo "SKIP $*"; skipped=$((skipped + 1)); }
info() { echo "INFO $*"; }

containers=()
rdir=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  local c
  for c in "${containers[@]}"; do docker rm -f "$c" >/dev/null 2>&1 || true; done
  [[ -n $rdir ]] && rm -rf "$rdir"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_args=(--network "$network" --label org.kiwi.egress-verify=1)
[[ -n $runtime ]] && run_args+=(--runtime "$runtime")
[[ -n $ca_bundle ]] && run_args+=(-v "$ca_bundle:/kiwi-ca.crt:ro")
if [[ $upstream == yes ]]; then
  # What sandbox/docker/resolv.c writes: non-loopback nameservers, search, options.
  rdir=$(mktemp -d /tmp/kiwi-verify-resolv.XXXXXX)
  awk '$1 == "nameserver" && $2 !~ /^(127\.|::1$|::ffff:127\.)/ { print "nameserver " $2 }
       $1 == "search" || $1 == "options" { print }' /etc/resolv.conf >"$rdir/upstream.conf"
  echo "nameserver $meta" >"$rdir/meta.conf"
  chmod 0755 "$rdir"; chmod 0644 "$rdir"/*.conf
  run_args+=(--mount "type=bind,source=$rdir/upstream.conf,target=/etc/resolv.conf,readonly")
fi

name=kiwi-egress-verify-$$-$RANDOM
cid=$(docker run -d --rm --name "$name" "${run_args[@]}" "$image" sleep 600) \
  || die "could not start a container from $image on $network"
containers+=("$cid")
cx() { docker exec "$cid" bash -c "$1" 2>&1; }

cip=$(docker inspect -f "{{with index .NetworkSettings.Networks \"$network\"}}{{.IPAddress}}{{end}}" "$cid")
bridge=$(docker network inspect -f '{{index .Options "com.docker.network.bridge.name"}}' "$network" 2>/dev/null || true)
if [[ -z $bridge || $bridge == "<no value>" ]]; then
  if [[ $network == bridge ]]; then bridge=docker0; else
    bridge=br-$(docker network inspect -f '{{.Id}}' "$network" | cut -c1-12)
  fi
fi
info "container $name on $network (bridge $bridge, address ${cip:-none})${runtime:+, runtime $runtime}"

# --------------------------------------------------------------- ordinary ---

# curl_probe URL [ARGS...]: sets rc, code and msg.
curl_probe() {
  local url=$1 out; shift
  out=$(cx "curl -sS -o /dev/null -w 'code=%{http_code}\n' --connect-timeout $timeout -m $((timeout * 2)) $* '$url'; echo \"rc=\$?\"")
  rc=$(sed -n 's/^rc=//p' <<<"$out" | tail -n1)
  code=$(sed -n 's/^code=//p' <<<"$out" | tail -n1)
  msg=$(grep -v -e '^rc=' -e '^code=' <<<"$out" | sed 's/^curl: ([0-9]*) //' | head -n1 || true)
}

out=$(cx "getent hosts '$dns_name'" || true)
if [[ -n $out ]]; then
  pass "dns resolves ($dns_name -> $(awk '{print $1}' <<<"$out" | paste -sd, -))"
else
  fail "dns resolves ($dns_name did not resolve through the container's resolver)"
fi

ca_args=
[[ -n $ca_bundle ]] && ca_args="--cacert /kiwi-ca.crt"
# shellcheck disable=SC2086  # empty or two words
curl_probe "$https_url" $ca_args
if [[ $rc == 0 && $code != 000 ]]; then
  pass "https works ($https_url: HTTP $code${ca_bundle:+, verified with $ca_bundle})"
else
  fail "https works ($https_url: curl exit $rc: ${msg:-no response})"
fi

# --------------------------------------------------------------- metadata ---

cloud_vendor() {
  local f v
  for f in sys_vendor product_name bios_vendor chassis_vendor; do
    v=$(cat "/sys/class/dmi/id/$f" 2>/dev/null || true)
    case $v in
      *Google*) echo "Google Cloud"; return 0 ;;
      *Amazon*) echo "AWS"; return 0 ;;
      *"Microsoft Corporation"*) echo "Azure"; return 0 ;;
      *OpenStack*) echo "OpenStack"; return 0 ;;
      *DigitalOcean*) echo "DigitalOcean"; return 0 ;;
      *OracleCloud*) echo "Oracle Cloud"; return 0 ;;
      *Alibaba*) echo "Alibaba Cloud"; return 0 ;;
      *Hetzner*) echo "Hetzner"; return 0 ;;
    esac
  done
  if [[ $(cat /sys/hypervisor/uuid 2>/dev/null || true) == ec2* ]]; then echo AWS; return 0; fi
  return 1
}

route_dev_of() { sed -n 's/.* dev \([^ ]*\).*/\1/p' <<<"$1" | head -n1; }

# probe_allowed: sets why; returns 0 if the metadata probe may be sent.
probe_allowed() {
  local r_host r_ctr d_host d_ctr vendor
  r_host=$(ip route get "$meta" 2>&1 | head -n1 | sed "s/ *$//") || true
  r_ctr=
  if [[ -n $cip ]]; then
    r_ctr=$(ip route get "$meta" from "$cip" iif "$bridge" 2>&1 | head -n1 | sed "s/ *$//") || true
  fi
  d_host=$(route_dev_of "$r_host")
  d_ctr=$(route_dev_of "$r_ctr")
  info "route to $meta from the host: ${r_host:-none}"
  [[ -n $r_ctr ]] && info "route to $meta from the container ($cip via $bridge): $r_ctr"
  if [[ -n $route_dev ]]; then
    if [[ $d_host == "$route_dev" && ( -z $cip || $d_ctr == "$route_dev" ) ]]; then
      why="the route goes into $route_dev, as required"; return 0
    fi
    why="the route goes via ${d_ctr:-$d_host}, not --route-dev $route_dev"; return 1
  fi
  if [[ $r_host == local\ * ]]; then why="$meta is an address of this machine"; return 0; fi
  if [[ -n $d_host && $d_host == "$d_ctr" ]] && ip -d link show dev "$d_host" 2>/dev/null | grep >/dev/null -w veth; then
    why="the route goes into the veth $d_host, a network namespace on this machine"; return 0
  fi
  if vendor=$(cloud_vendor); then
    why="this is a $vendor VM: the probe goes to its own metadata server"; return 0
  fi
  if [[ $probe == force ]]; then why="--force-metadata-probe"; return 0; fi
  why="the route leaves this machine via ${d_ctr:-$d_host} and this is not a recognised cloud VM"
  return 1
}

meta_checks=("metadata http blocked" "metadata https blocked")
[[ -n $meta_dns_name ]] && meta_checks+=("metadata dns answered" "metadata dns tcp reachable")
refused=0
if [[ $probe == no ]]; then
  for c in "${meta_checks[@]}"; do skip "$c (--no-metadata-probe: nothing sent to $meta)"; done
elif ! probe_allowed; then
  refused=1
  for c in "${meta_checks[@]}"; do
    skip "$c (not probed: $why; --no-metadata-probe to skip, --force-metadata-probe to send anyway)"
  done
else
  info "metadata probe allowed: $why"
  # blocked_line CHECK PORT: judges the last curl_probe.
  blocked_line() {
    local check=$1 port=$2
    case $rc in
      7) pass "$check ($meta:$port: ${msg:-connection refused})" ;;
      28) pass "$check ($meta:$port: timed out after ${timeout}s)" ;;
      0) fail "$check ($meta:$port answered HTTP $code)" ;;
      *) fail "$check ($meta:$port: a connection was made: curl exit $rc: $msg)" ;;
    esac
  }
  curl_probe "http://$meta/computeMetadata/v1/" -H "'Metadata-Flavor: Google'"
  blocked_line "metadata http blocked" 80
  curl_probe "https://$meta/" -k
  blocked_line "metadata https blocked" 443
  if [[ -n $meta_dns_name ]]; then
    # Docker's embedded DNS forwards to ADDR from the container's own network
    # namespace, so this crosses the same FORWARD path as any container packet.
    dns_args=(--network "$network" --dns "$meta" --label org.kiwi.egress-verify=1)
    [[ -n $runtime ]] && dns_args+=(--runtime "$runtime")
    [[ $upstream == yes ]] && dns_args+=(--mount "type=bind,source=$rdir/meta.conf,target=/etc/resolv.conf,readonly")
    out=$(timeout $((timeout * 4)) docker run --rm "${dns_args[@]}" "$image" getent hosts "$meta_dns_name" 2>&1 || true)
    if [[ $out =~ ^[0-9a-fA-F.:]+[[:space:]] ]]; then
      pass "metadata dns answered ($meta:53 resolved $meta_dns_name -> $(awk '{print $1}' <<<"$out" | head -n1))"
    else
      fail "metadata dns answered ($meta:53 did not resolve $meta_dns_name: ${out:-no answer})"
    fi
    out=$(cx "timeout $timeout bash -c 'exec 3<>/dev/tcp/$meta/53' && echo connected" || true)
    if [[ $out == *connected* ]]; then
      pass "metadata dns tcp reachable ($meta:53 accepted a TCP connection)"
    else
      fail "metadata dns tcp reachable ($meta:53: ${out:-no connection})"
    fi
  fi
fi

printf 'verify: %d checks, %d failed, %d skipped\n' "$ran" "$failures" "$skipped" >&2
if ((failures > 0)); then exit 1; fi
if ((refused)); then
  echo "verify: the metadata checks were not run (safety policy); nothing proves the endpoint is blocked" >&2
  exit 2
fi
exit 0
