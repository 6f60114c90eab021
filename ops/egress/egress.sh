#!/usr/bin/env bash
# ops/egress/egress.sh: Kiwi's egress rules on a Docker host.
#
# Usage: egress.sh apply|check|rules [OPTIONS]
#        egress.sh remove|status
#
#   apply    add the rules (idempotent: a second apply changes nothing)
#   check    exit 0 iff the live rules are exactly what `apply` with the same
#            options and configuration would add; print what differs
#   rules    print what `apply` would add, change nothing
#   remove   remove exactly what `apply` added (every jump to Kiwi's chains,
#            the chains, and DOCKER-USER only if apply created it and it is
#            empty again)
#   status   print the applied rules with their counters; exit 0 iff applied
#
# Options (each also settable in the environment or in the config file
# ${KIWI_EGRESS_CONF:-/etc/kiwi/egress.env}; command line > environment > file):
#   --rfc1918            also reject container traffic to private ranges
#                        (KIWI_EGRESS_RFC1918=true); --no-rfc1918 turns it off
#   --allow CIDR[:PORT]  with --rfc1918: let containers reach CIDR (TCP PORT
#                        only, when given); repeatable; IPv6 as [CIDR]:PORT
#                        (KIWI_EGRESS_ALLOW="10.1.2.3/32:443 ...")
#   --dns IP             with --rfc1918: a resolver containers may reach on
#                        port 53, in addition to those in /etc/resolv.conf;
#                        repeatable (KIWI_EGRESS_DNS)
#   --metadata ADDR      the metadata addresses (replaces the default
#                        "169.254.169.254 fd00:ec2::254"); repeatable
#                        (KIWI_EGRESS_METADATA)
#   --install-bridge IF  the Phase A bridge whose NEW connections to the host
#                        are rejected (KIWI_EGRESS_INSTALL_BRIDGE, kiwi-install0)
#   --deny ADDR[:PORT]   reject traffic from the install bridge to ADDR (a
#                        CIDR; TCP PORT only, when given), on this host and
#                        any other: the fleet's own services (Redis, Kafka);
#                        repeatable, added to KIWI_EGRESS_DENY="a:p b:p";
#                        IPv6 as [ADDR]:PORT. kiwi-worker passes its own
#                        Redis and Kafka addresses and KIWI_INSTALL_DENY
#   --proxy E,H,S        Phase A reaches only Kiwi's egress proxy, listening
#                        on the install bridge's gateway: TCP port E (the
#                        explicit proxy, HTTP_PROXY), H (intercepted HTTP)
#                        and S (intercepted TLS); the bridge's TCP 80 and 443
#                        are redirected to H and S (nat table), everything
#                        else it sends is rejected, DNS included; the
#                        proxy's own connections (OUTPUT, as the user
#                        proxy) are held to --deny, the metadata addresses
#                        and, with --rfc1918, the private ranges
#                        (KIWI_EGRESS_PROXY="3128,3129,3130")
#   --nflog-group N      with --proxy: what the install bridge sends and the
#                        rules reject is first logged to netlink group N+I
#                        for the bridge kiwi-installI (N for a bridge of
#                        another name), at most 20 packets a second per
#                        source address, for kiwi-worker to publish as
#                        `egress_denied` events (KIWI_EGRESS_NFLOG_GROUP,
#                        default 7460; 0 to 65519)
#   --no-ipv6            IPv4 only (KIWI_EGRESS_IPV6=off); by default IPv6
#                        rules are added whenever ip6tables works
#
# Runs as root. Every rule added or removed is logged on stderr as
# "egress: + ..." / "egress: - ...". See ops/egress/README.md.
set -euo pipefail

CHAIN=KIWI-EGRESS
INCHAIN=KIWI-EGRESS-INPUT
OUTCHAIN=KIWI-EGRESS-OUTPUT
PROXY_USER=proxy
NATCHAIN=KIWI-EGRESS-NAT
USERCHAIN=DOCKER-USER
TAG=kiwi-egress
TOKEN_PORTS=80,443,8080,8775
PRIVATE4=(10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 100.64.0.0/10 169.254.0.0/16)
PRIVATE6=(fc00::/7)
RUN_DIR=${KIWI_EGRESS_RUN_DIR:-/run/kiwi-egress}
CONF=${KIWI_EGRESS_CONF:-/etc/kiwi/egress.env}

log() { printf 'egress: %s\n' "$*" >&2; }
die() { printf 'egress: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,58p' "$0" | sed 's/^# \{0,1\}//'; }

# ------------------------------------------------------------ configuration ---

# The config file holds KEY=VALUE lines (KIWI_EGRESS_* only; quotes allowed);
# it is parsed, never sourced. A variable already in the environment wins.
load_conf() {
  [[ -f $CONF ]] || return 0
  local line key val
  while IFS= read -r line || [[ -n $line ]]; do
    line=${line%%#*}
    [[ $line =~ ^[[:space:]]*(KIWI_EGRESS_[A-Z0-9_]+)=(.*)$ ]] || continue
    key=${BASH_REMATCH[1]} val=${BASH_REMATCH[2]}
    val=${val%"${val##*[![:space:]]}"}
    if [[ $val =~ ^\"(.*)\"$ || $val =~ ^\'(.*)\'$ ]]; then val=${BASH_REMATCH[1]}; fi
    [[ -v $key ]] || printf -v "$key" '%s' "$val"
  done <"$CONF"
}

truthy() { case ${1,,} in 1|true|yes|on) return 0 ;; *) return 1 ;; esac; }

opt_rfc1918=0 opt_ipv6=1 opt_bridge=kiwi-install0 opt_proxy='' opt_nflog=7460
opt_allow=() opt_dns=() opt_metadata=() opt_deny=()

parse_options() {
  load_conf
  truthy "${KIWI_EGRESS_RFC1918:-false}" && opt_rfc1918=1
  [[ ${KIWI_EGRESS_IPV6:-auto} == off ]] && opt_ipv6=0
  opt_bridge=${KIWI_EGRESS_INSTALL_BRIDGE:-kiwi-install0}
  opt_proxy=${KIWI_EGRESS_PROXY:-}
  opt_nflog=${KIWI_EGRESS_NFLOG_GROUP:-7460}
  # shellcheck disable=SC2206
  opt_allow=(${KIWI_EGRESS_ALLOW:+${KIWI_EGRESS_ALLOW//,/ }})
  # shellcheck disable=SC2206
  opt_dns=(${KIWI_EGRESS_DNS:+${KIWI_EGRESS_DNS//,/ }})
  # shellcheck disable=SC2206
  opt_deny=(${KIWI_EGRESS_DENY:+${KIWI_EGRESS_DENY//,/ }})
  # shellcheck disable=SC2206
  opt_metadata=(${KIWI_EGRESS_METADATA:-169.254.169.254 fd00:ec2::254})
  local metadata_cli=()
  while [[ $# -gt 0 ]]; do
    case $1 in
      --rfc1918) opt_rfc1918=1 ;;
      --no-rfc1918) opt_rfc1918=0 ;;
      --allow) [[ $# -ge 2 ]] || die "--allow needs CIDR[:PORT]"; opt_allow+=("$2"); shift ;;
      --allow=*) opt_allow+=("${1#*=}") ;;
      --dns) [[ $# -ge 2 ]] || die "--dns needs an address"; opt_dns+=("$2"); shift ;;
      --dns=*) opt_dns+=("${1#*=}") ;;
      --metadata) [[ $# -ge 2 ]] || die "--metadata needs an address"; metadata_cli+=("$2"); shift ;;
      --metadata=*) metadata_cli+=("${1#*=}") ;;
      --deny) [[ $# -ge 2 ]] || die "--deny needs ADDR[:PORT]"; opt_deny+=("$2"); shift ;;
      --deny=*) opt_deny+=("${1#*=}") ;;
      --install-bridge) [[ $# -ge 2 ]] || die "--install-bridge needs a name"; opt_bridge=$2; shift ;;
      --install-bridge=*) opt_bridge=${1#*=} ;;
      --proxy) [[ $# -ge 2 ]] || die "--proxy needs E,H,S"; opt_proxy=$2; shift ;;
      --proxy=*) opt_proxy=${1#*=} ;;
      --no-proxy) opt_proxy= ;;
      --nflog-group) [[ $# -ge 2 ]] || die "--nflog-group needs a number"; opt_nflog=$2; shift ;;
      --nflog-group=*) opt_nflog=${1#*=} ;;
      --no-ipv6) opt_ipv6=0 ;;
      -h|--help) usage; exit 0 ;;
      *) printf 'egress: unknown option %s (see --help)\n' "$1" >&2; exit 2 ;;
    esac
    shift
  done
  [[ ${#metadata_cli[@]} -gt 0 ]] && opt_metadata=("${metadata_cli[@]}")
  [[ $opt_bridge =~ ^[A-Za-z0-9_.+-]{1,15}$ ]] || die "bad interface name '$opt_bridge'"
  local a
  if [[ -n $opt_proxy ]]; then
    valid_proxy_ports "$opt_proxy" || die "bad --proxy '$opt_proxy' (want three distinct TCP ports E,H,S)"
  fi
  [[ $opt_nflog =~ ^[0-9]{1,5}$ ]] && ((10#$opt_nflog <= 65519)) ||
    die "bad --nflog-group '$opt_nflog' (KIWI_EGRESS_NFLOG_GROUP: a number from 0 to 65519)"
  opt_nflog=$((10#$opt_nflog))
  for a in "${opt_metadata[@]}" "${opt_dns[@]}"; do valid_addr "$a" || die "bad address '$a'"; done
  for a in "${opt_allow[@]}"; do split_allow "$a" >/dev/null || die "bad --allow '$a' (want CIDR[:PORT], IPv6 as [CIDR]:PORT)"; done
  for a in "${opt_deny[@]}"; do split_allow "$a" >/dev/null || die "bad --deny '$a' (want ADDR[:PORT], IPv6 as [ADDR]:PORT)"; done
  # one rule per distinct address and port, in the order first given
  if [[ ${#opt_deny[@]} -gt 0 ]]; then
    mapfile -t opt_deny < <(for a in "${opt_deny[@]}"; do split_allow "$a"; done | awk '!seen[$0]++' |
      while read -r cidr port; do if is_v6 "$cidr"; then echo "[$cidr]${port:+:$port}"; else echo "$cidr${port:+:$port}"; fi; done)
  fi
  if [[ $opt_rfc1918 == 0 && ${#opt_allow[@]} -gt 0 ]]; then
    log "note: --allow only matters with --rfc1918 (public addresses are never blocked)"
  fi
}

# The options as arguments, for the record in $RUN_DIR/applied.args.
options_as_args() {
  local a out=()
  [[ $opt_rfc1918 == 1 ]] && out+=(--rfc1918)
  for a in "${opt_allow[@]}"; do out+=(--allow "$a"); done
  for a in "${opt_dns[@]}"; do out+=(--dns "$a"); done
  for a in "${opt_metadata[@]}"; do out+=(--metadata "$a"); done
  for a in "${opt_deny[@]}"; do out+=(--deny "$a"); done
  out+=(--install-bridge "$opt_bridge")
  [[ -n $opt_proxy ]] && out+=(--proxy "$opt_proxy" --nflog-group "$opt_nflog")
  [[ $opt_ipv6 == 0 ]] && out+=(--no-ipv6)
  printf '%s\n' "${out[*]}"
}

# ------------------------------------------------------------- addresses ---

is_v6() { [[ $1 == *:* ]]; }

valid_port() { [[ $1 =~ ^[0-9]{1,5}$ ]] && ((10#$1 >= 1 && 10#$1 <= 65535)); }

# valid_proxy_ports "E,H,S": three distinct ports.
valid_proxy_ports() {
  local IFS=, p
  local -a ps
  read -r -a ps <<<"$1"
  [[ ${#ps[@]} == 3 && $1 =~ ^[0-9,]+$ ]] || return 1
  for p in "${ps[@]}"; do valid_port "$p" || return 1; done
  [[ ${ps[0]} != "${ps[1]}" && ${ps[0]} != "${ps[2]}" && ${ps[1]} != "${ps[2]}" ]]
}
proxy_port() { local IFS=,; local -a ps; read -r -a ps <<<"$opt_proxy"; echo "$((10#${ps[$1]}))"; }

valid_v4() { # a.b.c.d
  local IFS=. o
  [[ $1 =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || return 1
  for o in $1; do ((10#$o <= 255)) || return 1; done
}

valid_addr() { # address, optionally /len
  local a=${1%/*} len=
  [[ $1 == */* ]] && len=${1##*/}
  if is_v6 "$a"; then
    [[ $a =~ ^[0-9A-Fa-f:.]+$ ]] || return 1
    [[ -z $len ]] || { [[ $len =~ ^[0-9]{1,3}$ ]] && ((len <= 128)); } || return 1
  else
    valid_v4 "$a" || return 1
    [[ -z $len ]] || { [[ $len =~ ^[0-9]{1,2}$ ]] && ((len <= 32)); } || return 1
  fi
}

# split_allow SPEC: prints "CIDR PORT" (PORT empty for all ports).
split_allow() {
  local spec=$1 cidr port=
  if [[ $spec =~ ^\[([^]]+)\](:([0-9]+))?$ ]]; then
    cidr=${BASH_REMATCH[1]} port=${BASH_REMATCH[3]}
  elif [[ $spec =~ ^([0-9./]+):([0-9]+)$ ]]; then
    cidr=${BASH_REMATCH[1]} port=${BASH_REMATCH[2]}
  else
    cidr=$spec
  fi
  [[ $cidr == */* ]] || { if is_v6 "$cidr"; then cidr+=/128; else cidr+=/32; fi; }
  valid_addr "$cidr" || return 1
  if [[ -n $port ]]; then
    [[ $port =~ ^[0-9]{1,5}$ ]] && ((port >= 1 && port <= 65535)) || return 1
  fi
  printf '%s %s\n' "$cidr" "$port"
}

# The resolvers containers use: Docker's embedded DNS forwards to the host's
# resolv.conf nameservers from inside the container's network namespace, so
# those packets cross the FORWARD chain. Loopback resolvers are skipped (Docker
# then forwards from the host's namespace); behind systemd-resolved the
# upstream list is in /run/systemd/resolve/resolv.conf, as Docker reads it.
resolvers() {
  local f=${KIWI_EGRESS_RESOLV_CONF:-/etc/resolv.conf} list
  list=$(awk '$1 == "nameserver" { print $2 }' "$f" 2>/dev/null | grep -Ev '^(127\.|::1$)|%' || true)
  if [[ -z $list && -z ${KIWI_EGRESS_RESOLV_CONF:-} && -f /run/systemd/resolve/resolv.conf ]]; then
    list=$(awk '$1 == "nameserver" { print $2 }' /run/systemd/resolve/resolv.conf | grep -Ev '^(127\.|::1$)|%' || true)
  fi
  # shellcheck disable=SC2086  # one address per word
  printf '%s\n' $list "${opt_dns[@]}" | awk 'NF && !seen[$0]++'
}

# ---------------------------------------------------------------- iptables ---

ipt() { # ipt 4|6 ARGS...
  if [[ $1 == 4 ]]; then shift; iptables -w "$@"; else shift; ip6tables -w "$@"; fi
}
ipt_restore() { # ipt_restore 4|6 < payload
  if [[ $1 == 4 ]]; then iptables-restore -w --noflush; else ip6tables-restore -w --noflush; fi
}

families=()
preflight() {
  [[ $(id -u) == 0 ]] || die "must run as root (changing iptables needs CAP_NET_ADMIN)"
  command -v iptables >/dev/null || die "iptables not found (Debian: apt-get install iptables)"
  command -v iptables-restore >/dev/null || die "iptables-restore not found (Debian: apt-get install iptables)"
  local err
  err=$(iptables -w -S 2>&1 >/dev/null) || die "iptables cannot read the filter table: $err"
  families=(4)
  if [[ $opt_ipv6 == 1 ]]; then
    if command -v ip6tables >/dev/null && ip6tables -w -S >/dev/null 2>&1; then
      families+=(6)
    else
      log "ipv6: ip6tables unavailable here; IPv6 rules skipped"
    fi
  fi
  mkdir -p "$RUN_DIR"
  exec 9>"$RUN_DIR/lock"
  flock -w 60 9 || die "another egress.sh holds $RUN_DIR/lock"
}

chain_exists() { ipt "$1" -S "$2" >/dev/null 2>&1; }
chain_rules() { ipt "$1" -S "$2" 2>/dev/null | grep -- '^-A ' || true; }

# ------------------------------------------------------------------- rules ---

c() { printf -- '-m comment --comment "%s: %s"' "$TAG" "$1"; }

# nflog_rules CHAIN WHAT: before CHAIN's rejects of the install bridge, each
# packet they are about to reject goes to the netlink log group of its
# bridge (BASE+I for kiwi-installI; a pattern "name+" is every bridge
# name0 .. name15), prefixed "kiwi-egress WHAT" (forward: sent beyond the
# host; host: to the host itself). One hashlimit table keyed by source
# address bounds what one sandbox can make the host log.
nflog_rules() {
  local chain=$1 what=$2 i br group
  local limit="-m hashlimit --hashlimit-upto 20/sec --hashlimit-burst 40 --hashlimit-mode srcip --hashlimit-name kiwi-egress-log"
  local brs=()
  if [[ $opt_bridge == *+ ]]; then
    for i in $(seq 0 15); do brs+=("${opt_bridge%+}$i:$((opt_nflog + i))"); done
  elif [[ $opt_bridge =~ ^kiwi-install([0-9]{1,2})$ ]] && ((10#${BASH_REMATCH[1]} <= 15)); then
    brs+=("$opt_bridge:$((opt_nflog + 10#${BASH_REMATCH[1]}))")
  else
    brs+=("$opt_bridge:$opt_nflog")
  fi
  for i in "${brs[@]}"; do
    br=${i%:*} group=${i##*:}
    echo "-A $chain -i $br $limit $(c "install bridge: denied, logged") -j NFLOG --nflog-prefix \"kiwi-egress $what\" --nflog-group $group --nflog-size 512"
  done
}

# fleet_rules CHAIN MATCH WHO F: the fleet's own services (--deny), for
# family F: nothing WHO sends reaches them, whatever the state of the flow
# and whichever host they run on.
fleet_rules() {
  local chain=$1 match=$2 who=$3 f=$4 r cidr port reject_other
  if [[ $f == 4 ]]; then reject_other=icmp-admin-prohibited; else reject_other=icmp6-adm-prohibited; fi
  for r in "${opt_deny[@]}"; do
    read -r cidr port < <(split_allow "$r")
    if [[ $f == 6 ]]; then is_v6 "$cidr" || continue; else is_v6 "$cidr" && continue; fi
    if [[ -n $port ]]; then
      echo "-A $chain $match-d $cidr -p tcp -m tcp --dport $port $(c "$who: fleet service denied") -j REJECT --reject-with tcp-reset"
    else
      echo "-A $chain $match-d $cidr -p tcp $(c "$who: fleet address denied") -j REJECT --reject-with tcp-reset"
      echo "-A $chain $match-d $cidr $(c "$who: fleet address denied") -j REJECT --reject-with $reject_other"
    fi
  done
}

# metadata_rules CHAIN LABEL F: the metadata addresses take DNS only.
metadata_rules() {
  local chain=$1 label=$2 f=$3 m reject_other
  if [[ $f == 4 ]]; then reject_other=icmp-admin-prohibited; else reject_other=icmp6-adm-prohibited; fi
  for m in "${opt_metadata[@]}"; do
    if [[ $f == 6 ]]; then is_v6 "$m" || continue; [[ $m == */* ]] || m+=/128
    else is_v6 "$m" && continue; [[ $m == */* ]] || m+=/32; fi
    echo "-A $chain -d $m -p udp -m udp --dport 53 $(c "${label}metadata DNS allowed") -j RETURN"
    echo "-A $chain -d $m -p tcp -m tcp --dport 53 $(c "${label}metadata DNS allowed") -j RETURN"
    echo "-A $chain -d $m -p tcp -m multiport --dports $TOKEN_PORTS $(c "${label}metadata token ports") -j REJECT --reject-with tcp-reset"
    echo "-A $chain -d $m -p tcp $(c "${label}metadata other TCP ports") -j REJECT --reject-with tcp-reset"
    echo "-A $chain -d $m $(c "${label}metadata other traffic") -j REJECT --reject-with $reject_other"
  done
}

# private_rules CHAIN LABEL F [forward]: with --rfc1918, the private
# ranges are rejected but for replies, resolvers (DNS) and --allow; on the
# forward path also what Docker publishes or keeps within one bridge.
private_rules() {
  local chain=$1 label=$2 f=$3 r cidr port reject_other
  if [[ $f == 4 ]]; then reject_other=icmp-admin-prohibited; else reject_other=icmp6-adm-prohibited; fi
  echo "-A $chain -m conntrack --ctstate RELATED,ESTABLISHED $(c "${label}private: replies and established flows") -j RETURN"
  if [[ ${4:-} == forward ]]; then
    echo "-A $chain -m conntrack --ctstate DNAT $(c "${label}private: published ports, Docker decides") -j RETURN"
    echo "-A $chain -m physdev --physdev-is-bridged $(c "${label}private: within one bridge, Docker decides") -j RETURN"
  fi
  while read -r r; do
    [[ -n $r ]] || continue
    if [[ $f == 6 ]]; then is_v6 "$r" || continue; r+=/128; else is_v6 "$r" && continue; r+=/32; fi
    echo "-A $chain -d $r -p udp -m udp --dport 53 $(c "${label}private: DNS to a resolver") -j RETURN"
    echo "-A $chain -d $r -p tcp -m tcp --dport 53 $(c "${label}private: DNS to a resolver") -j RETURN"
  done < <(resolvers)
  for r in "${opt_allow[@]}"; do
    read -r cidr port < <(split_allow "$r")
    if [[ $f == 6 ]]; then is_v6 "$cidr" || continue; else is_v6 "$cidr" && continue; fi
    if [[ -n $port ]]; then
      echo "-A $chain -d $cidr -p tcp -m tcp --dport $port $(c "${label}private: allow-listed") -j RETURN"
    else
      echo "-A $chain -d $cidr $(c "${label}private: allow-listed") -j RETURN"
    fi
  done
  local ranges=("${PRIVATE4[@]}")
  [[ $f == 6 ]] && ranges=("${PRIVATE6[@]}")
  for r in "${ranges[@]}"; do
    echo "-A $chain -d $r -p tcp $(c "${label}private range") -j REJECT --reject-with tcp-reset"
    echo "-A $chain -d $r $(c "${label}private range") -j REJECT --reject-with $reject_other"
  done
}

# render F: the rules of Kiwi's chains for family F, one iptables-save line
# each: $CHAIN and $INCHAIN, and with --proxy $OUTCHAIN.
render() {
  local f=$1 reject_other icmp_p
  if [[ $f == 4 ]]; then reject_other=icmp-admin-prohibited; else reject_other=icmp6-adm-prohibited; fi
  # Before anything else (the metadata rules' DNS exception included): with
  # the proxy, nothing from the install bridge is forwarded, and each such
  # packet is logged first for the worker's `egress_denied` events.
  [[ -n $opt_proxy ]] && nflog_rules "$CHAIN" forward
  fleet_rules "$CHAIN" "-i $opt_bridge " "install bridge" "$f"
  # Through the proxy or not at all: nothing from the install bridge is
  # forwarded (the proxy's own connections leave from the host, OUTPUT).
  if [[ -n $opt_proxy ]]; then
    echo "-A $CHAIN -i $opt_bridge -p tcp $(c "install bridge: only through the egress proxy") -j REJECT --reject-with tcp-reset"
    echo "-A $CHAIN -i $opt_bridge $(c "install bridge: only through the egress proxy") -j REJECT --reject-with $reject_other"
  fi
  metadata_rules "$CHAIN" "" "$f"
  if [[ $opt_rfc1918 == 1 ]]; then private_rules "$CHAIN" "" "$f" forward; fi
  # Phase A may not open connections to the host itself.
  echo "-A $INCHAIN -m conntrack --ctstate RELATED,ESTABLISHED $(c "install bridge: replies") -j RETURN"
  if [[ $f == 6 ]]; then
    icmp_p="-p ipv6-icmp -m icmp6 --icmpv6-type"
    echo "-A $INCHAIN $icmp_p 135 $(c "install bridge: neighbour discovery") -j RETURN"
    echo "-A $INCHAIN $icmp_p 136 $(c "install bridge: neighbour discovery") -j RETURN"
  fi
  # The proxy listens on the gateway (IPv4): its explicit port, and its two
  # intercepting ports only for connections the nat rules redirected.
  if [[ -n $opt_proxy && $f == 4 ]]; then
    echo "-A $INCHAIN -p tcp -m tcp --dport $(proxy_port 0) $(c "install bridge: the egress proxy") -j RETURN"
    echo "-A $INCHAIN -p tcp -m multiport --dports $(proxy_port 1),$(proxy_port 2) -m conntrack --ctstate DNAT $(c "install bridge: the egress proxy, redirected") -j RETURN"
  fi
  [[ -n $opt_proxy ]] && nflog_rules "$INCHAIN" host
  echo "-A $INCHAIN -p tcp $(c "install bridge: no new connections to the host") -j REJECT --reject-with tcp-reset"
  echo "-A $INCHAIN $(c "install bridge: no new connections to the host") -j REJECT --reject-with $reject_other"
  # The proxy's own connections leave from the host, as the user Squid
  # runs as: FORWARD never sees them. They are held to the same lists as
  # the sandboxes' (the fleet's services, the metadata addresses, with
  # --rfc1918 the private ranges).
  if [[ -n $opt_proxy ]]; then
    fleet_rules "$OUTCHAIN" "" "egress proxy" "$f"
    metadata_rules "$OUTCHAIN" "egress proxy: " "$f"
    if [[ $opt_rfc1918 == 1 ]]; then private_rules "$OUTCHAIN" "egress proxy: " "$f"; fi
  fi
  return 0
}

jump_user() { echo "-A $USERCHAIN -m comment --comment $TAG -j $CHAIN"; }
jump_input() { echo "-A INPUT -i $opt_bridge -m comment --comment $TAG -j $INCHAIN"; }
jump_output() { echo "-A OUTPUT -m owner --uid-owner $PROXY_USER -m comment --comment $TAG -j $OUTCHAIN"; }

# canonical F: the rules and the jumps as `iptables -S` prints them, loaded
# into a throwaway network namespace (its own, empty netfilter tables; nothing
# on the host is touched). This validates every rule before the live tables
# see it and makes `check` compare like with like. Prints "-A" lines of
# $CHAIN, $INCHAIN, $OUTCHAIN, then the DOCKER-USER, INPUT and OUTPUT jumps
# ($OUTCHAIN and the OUTPUT jump with --proxy only).
canonical() {
  local f=$1 payload out
  payload=$(
    echo '*filter'
    echo ":$USERCHAIN - [0:0]"
    echo ":$CHAIN - [0:0]"
    echo ":$INCHAIN - [0:0]"
    echo ":$OUTCHAIN - [0:0]"
    render "$f"
    jump_user
    jump_input
    if [[ -n $opt_proxy ]]; then jump_output; fi
    echo COMMIT
  )
  local tool=iptables
  [[ $f == 6 ]] && tool=ip6tables
  if command -v unshare >/dev/null && unshare -n true 2>/dev/null; then
    if ! out=$(unshare -n sh -c "$tool-restore -w && $tool -w -S $CHAIN && $tool -w -S $INCHAIN && $tool -w -S $OUTCHAIN && $tool -w -S $USERCHAIN && $tool -w -S INPUT && $tool -w -S OUTPUT" <<<"$payload" 2>&1); then
      die "ipv$f: the rules do not load: $out"
    fi
    grep -- '^-A ' <<<"$out"
  else
    log "ipv$f: unshare unavailable; comparing the rules as written"
    grep -- '^-A ' <<<"$payload"
  fi
}

# ------------------------------------------------------------- comparison ---

# state F: compares the live tables with the canonical rules; prints one
# reason per difference; returns 0 when they match.
declare -A want_chain want_inchain want_outchain want_juser want_jinput want_joutput
load_wanted() {
  local f=$1 all
  all=$(canonical "$f")
  want_chain[$f]=$(grep -- "^-A $CHAIN " <<<"$all" || true)
  want_inchain[$f]=$(grep -- "^-A $INCHAIN " <<<"$all" || true)
  want_outchain[$f]=$(grep -- "^-A $OUTCHAIN " <<<"$all" || true)
  want_juser[$f]=$(grep -- "^-A $USERCHAIN " <<<"$all")
  want_jinput[$f]=$(grep -- "^-A INPUT " <<<"$all")
  want_joutput[$f]=$(grep -- "^-A OUTPUT " <<<"$all" || true)
}

# The chains apply keeps, and "CHAIN:JUMP" for each jump to one of them
# (each the first rule of CHAIN): $OUTCHAIN and the OUTPUT jump only with
# --proxy.
our_chains() {
  echo "$CHAIN"; echo "$INCHAIN"
  if [[ -n $opt_proxy ]]; then echo "$OUTCHAIN"; fi
}
our_jumps() { # our_jumps F
  echo "$USERCHAIN:${want_juser[$1]}"; echo "INPUT:${want_jinput[$1]}"
  if [[ -n $opt_proxy ]]; then echo "OUTPUT:${want_joutput[$1]}"; fi
}
# "A + B [+ C]": the number of rules of each of our chains
rule_counts() {
  local out
  out="$(wc -l <<<"${want_chain[$1]}") + $(wc -l <<<"${want_inchain[$1]}")"
  if [[ -n $opt_proxy ]]; then out+=" + $(wc -l <<<"${want_outchain[$1]}")"; fi
  echo "$out"
}
# every jump to $OUTCHAIN in family F, from any chain
out_jumps() { ipt "$1" -S 2>/dev/null | grep -E -- "^-A .* -j $OUTCHAIN( |\$)" | grep -Ev -- "^-A $OUTCHAIN " || true; }

wanted() { # wanted F CHAIN
  case $2 in
    "$CHAIN") printf '%s\n' "${want_chain[$1]}" ;;
    "$INCHAIN") printf '%s\n' "${want_inchain[$1]}" ;;
    *) printf '%s\n' "${want_outchain[$1]}" ;;
  esac
}

first_rule() { chain_rules "$1" "$2" | sed -n 1p; }
count_rule() { chain_rules "$1" "$2" | grep -cxF -- "$3" || true; }
# has_rule F CHAIN RULE (whole pipelines read to the end: no SIGPIPE races)
has_rule() { [[ $(count_rule "$@") != 0 ]]; }

compare() {
  local f=$1 bad=0 have want
  local ch
  for ch in $(our_chains); do
    want=$(wanted "$f" "$ch")
    if ! chain_exists "$f" "$ch"; then
      echo "ipv$f: chain $ch missing"; bad=1; continue
    fi
    have=$(chain_rules "$f" "$ch")
    if [[ $have != "$want" ]]; then
      bad=1
      diff <(echo "$want") <(echo "$have") | sed -n "s/^< /ipv$f: missing: /p; s/^> /ipv$f: unexpected: /p"
      [[ -n $(diff <(sort <<<"$want") <(sort <<<"$have")) ]] || echo "ipv$f: $ch: rules out of order"
    fi
  done
  local rule n pair line
  while IFS= read -r pair; do
    ch=${pair%%:*} rule=${pair#*:}
    n=$(count_rule "$f" "$ch" "$rule")
    if [[ $n == 0 ]]; then echo "ipv$f: jump missing: $rule"; bad=1
    elif [[ $n != 1 ]]; then echo "ipv$f: jump present $n times: $rule"; bad=1
    elif [[ $(first_rule "$f" "$ch") != "$rule" ]]; then echo "ipv$f: jump not the first rule of $ch: $rule"; bad=1
    fi
  done < <(our_jumps "$f")
  if [[ -n $opt_proxy ]]; then
    while IFS= read -r line; do
      [[ -n $line && $line != "${want_joutput[$f]}" ]] && { echo "ipv$f: unexpected: $line"; bad=1; }
    done <<<"$(out_jumps "$f")"
  else
    if chain_exists "$f" "$OUTCHAIN"; then echo "ipv$f: chain $OUTCHAIN present (applied with --proxy)"; bad=1; fi
    while IFS= read -r line; do [[ -n $line ]] && { echo "ipv$f: unexpected: $line"; bad=1; }; done <<<"$(out_jumps "$f")"
  fi
  if ! has_rule "$f" FORWARD "-A FORWARD -j $USERCHAIN"; then
    echo "ipv$f: FORWARD does not jump to $USERCHAIN (rules inert)"; bad=1
  fi
  return $bad
}

# --------------------------------------------------------------------- nat ---

# With --proxy, the nat table's PREROUTING sends the install bridge's TCP 80
# and 443 to the proxy's intercepting ports, so a tool that ignores
# HTTP_PROXY/HTTPS_PROXY still goes through it. IPv4 only: the proxy listens
# on the gateway's IPv4 address and the filter rules reject all IPv6 from
# the bridge. Without --proxy the nat table holds nothing of Kiwi's.

nat() { iptables -w -t nat "$@"; }
nat_chain_exists() { nat -S "$NATCHAIN" >/dev/null 2>&1; }
nat_rules() { nat -S "$1" 2>/dev/null | grep -- '^-A ' || true; }
# every jump to the nat chain, from any nat chain
nat_jumps() { nat -S 2>/dev/null | grep -E -- "^-A .* -j $NATCHAIN( |\$)" | grep -Ev -- "^-A $NATCHAIN " || true; }

nat_jump() { echo "-A PREROUTING -i $opt_bridge -m comment --comment $TAG -j $NATCHAIN"; }
render_nat() {
  echo "-A $NATCHAIN -p tcp -m tcp --dport 80 $(c "install bridge: HTTP to the egress proxy") -j REDIRECT --to-ports $(proxy_port 1)"
  echo "-A $NATCHAIN -p tcp -m tcp --dport 443 $(c "install bridge: TLS to the egress proxy") -j REDIRECT --to-ports $(proxy_port 2)"
}

# load_wanted_nat: want_nat and want_jnat as `iptables -t nat -S` prints
# them (validated in a throwaway namespace, like canonical); empty without
# --proxy.
want_nat='' want_jnat=''
load_wanted_nat() {
  want_nat='' want_jnat=''
  [[ -n $opt_proxy ]] || return 0
  local payload out
  payload=$(echo '*nat'; echo ":$NATCHAIN - [0:0]"; render_nat; nat_jump; echo COMMIT)
  if command -v unshare >/dev/null && unshare -n true 2>/dev/null; then
    out=$(unshare -n sh -c "iptables-restore -w && iptables -w -t nat -S $NATCHAIN && iptables -w -t nat -S PREROUTING" <<<"$payload" 2>&1) ||
      die "ipv4: the nat rules do not load: $out"
  else
    out=$payload
  fi
  want_nat=$(grep -- "^-A $NATCHAIN " <<<"$out" || true)
  want_jnat=$(grep -- "^-A PREROUTING " <<<"$out")
}

# compare_nat: one reason per difference; 0 when the nat table holds
# exactly what apply would leave there (nothing at all without --proxy).
compare_nat() {
  local bad=0 have line jumps
  jumps=$(nat_jumps)
  if [[ -z $opt_proxy ]]; then
    if nat_chain_exists; then echo "ipv4: nat: chain $NATCHAIN present (applied with --proxy)"; bad=1; fi
    while IFS= read -r line; do [[ -n $line ]] && { echo "ipv4: nat: unexpected: $line"; bad=1; }; done <<<"$jumps"
    return $bad
  fi
  if ! nat_chain_exists; then
    echo "ipv4: nat: chain $NATCHAIN missing"; bad=1
  else
    have=$(nat_rules "$NATCHAIN")
    if [[ $have != "$want_nat" ]]; then
      bad=1
      diff <(echo "$want_nat") <(echo "$have") | sed -n "s/^< \(..*\)/ipv4: nat: missing: \1/p; s/^> \(..*\)/ipv4: nat: unexpected: \1/p"
    fi
  fi
  if [[ $jumps != "$want_jnat" ]]; then
    bad=1
    diff <(echo "$want_jnat") <(echo "$jumps") | sed -n "s/^< \(..*\)/ipv4: nat: jump missing: \1/p; s/^> \(..*\)/ipv4: nat: unexpected jump: \1/p"
  elif [[ $(nat_rules PREROUTING | sed -n 1p) != "$want_jnat" ]]; then
    echo "ipv4: nat: jump not the first rule of PREROUTING: $want_jnat"; bad=1
  fi
  return $bad
}

# remove_nat [quiet]: every jump to the nat chain, then the chain.
remove_nat() {
  local payload=$'*nat\n' any=0 line
  while IFS= read -r line; do
    [[ -n $line ]] || continue
    payload+="-D ${line#-A }"$'\n'; log "ipv4: nat: - $line"; any=1
  done <<<"$(nat_jumps)"
  if nat_chain_exists; then
    while IFS= read -r line; do [[ -n $line ]] && log "ipv4: nat: - $line"; done <<<"$(nat_rules "$NATCHAIN")"
    payload+="-F $NATCHAIN"$'\n'"-X $NATCHAIN"$'\n'; log "ipv4: nat: - -X $NATCHAIN"; any=1
  fi
  if [[ $any == 0 ]]; then
    [[ ${1:-} == quiet ]] || log "ipv4: nat: not applied; nothing to remove"
    return 0
  fi
  local err
  err=$(iptables-restore -w --noflush <<<"$payload"$'COMMIT\n' 2>&1) || die "ipv4: nat: iptables-restore failed: $err"
  log "ipv4: nat: removed"
}

apply_nat() {
  if [[ -z $opt_proxy ]]; then remove_nat quiet; return 0; fi
  local payload=$'*nat\n' changed=0 have line
  have=$(nat_rules "$NATCHAIN")
  if ! nat_chain_exists || [[ $have != "$want_nat" ]]; then
    changed=1
    payload+=":$NATCHAIN - [0:0]"$'\n'"$want_nat"$'\n'
    diff <(echo "$have") <(echo "$want_nat") | sed -n "s/^< /egress: ipv4: nat: - /p; s/^> /egress: ipv4: nat: + /p" >&2 || true
  fi
  if [[ $(nat_jumps) != "$want_jnat" || $(nat_rules PREROUTING | sed -n 1p) != "$want_jnat" ]]; then
    changed=1
    while IFS= read -r line; do
      [[ -n $line ]] || continue
      payload+="-D ${line#-A }"$'\n'; log "ipv4: nat: - $line (to re-insert it first)"
    done <<<"$(nat_jumps)"
    payload+="-I PREROUTING 1 ${want_jnat#-A PREROUTING }"$'\n'
    log "ipv4: nat: + -I PREROUTING 1 ${want_jnat#-A PREROUTING }"
  fi
  if [[ $changed == 0 ]]; then
    log "ipv4: nat: already applied ($(wc -l <<<"$want_nat") rules); nothing changed"
    return 0
  fi
  local err why
  err=$(iptables-restore -w --noflush <<<"$payload"$'COMMIT\n' 2>&1) || die "ipv4: nat: iptables-restore failed: $err"
  why=$(compare_nat) || die "ipv4: nat: rules applied but do not read back as expected: $why"
  log "ipv4: nat: applied"
}

# ------------------------------------------------------------------ apply ---

marker() { echo "$RUN_DIR/ipv$1.created"; }

nft_family() { if [[ $1 == 4 ]]; then echo ip; else echo ip6; fi; }
uses_nft() { [[ $(ipt "$1" -V 2>/dev/null) == *nf_tables* ]] && command -v nft >/dev/null; }
nft_table_missing() { uses_nft "$1" && ! nft list table "$(nft_family "$1")" filter >/dev/null 2>&1; }

apply_family() {
  local f=$1 payload="" changed=0 have want
  local created=()
  payload+=$'*filter\n'
  # With the nf_tables backend a family's filter table may not exist at all
  # yet (no IPv6 rules on this host); remove deletes it again.
  if nft_table_missing "$f"; then
    created+=(table)
  fi
  if ! chain_exists "$f" "$USERCHAIN"; then
    payload+=":$USERCHAIN - [0:0]"$'\n'
    log "ipv$f: + -N $USERCHAIN (missing; created as dockerd does)"
    created+=(chain)
  fi
  if ! has_rule "$f" FORWARD "-A FORWARD -j $USERCHAIN"; then
    payload+="-I FORWARD 1 -j $USERCHAIN"$'\n'
    log "ipv$f: + -I FORWARD 1 -j $USERCHAIN (missing; added as dockerd does)"
    created+=(jump)
    changed=1
  fi
  [[ ${#created[@]} -gt 0 ]] && changed=1
  local pair ch line
  for ch in $(our_chains); do
    want=$(wanted "$f" "$ch")
    have=$(chain_rules "$f" "$ch")
    if chain_exists "$f" "$ch" && [[ $have == "$want" ]]; then continue; fi
    changed=1
    payload+=":$ch - [0:0]"$'\n'"$want"$'\n'
    if ! chain_exists "$f" "$ch"; then
      log "ipv$f: + -N $ch"
      while IFS= read -r line; do log "ipv$f: + $line"; done <<<"$want"
    else
      diff <(echo "$have") <(echo "$want") | sed -n "s/^< /egress: ipv$f: - /p; s/^> /egress: ipv$f: + /p" >&2 || true
      [[ -n $(diff <(sort <<<"$want") <(sort <<<"$have")) ]] || log "ipv$f: $ch: rules reordered"
    fi
  done
  local rule n
  while IFS= read -r pair; do
    ch=${pair%%:*} rule=${pair#*:}
    n=$(count_rule "$f" "$ch" "$rule")
    if [[ $n == 1 && $(first_rule "$f" "$ch") == "$rule" ]]; then continue; fi
    changed=1
    for ((; n > 0; n--)); do
      payload+="-D ${rule#-A }"$'\n'
      log "ipv$f: - $rule (to re-insert it first)"
    done
    payload+="-I $ch 1 ${rule#-A "$ch" }"$'\n'
    log "ipv$f: + -I $ch 1 ${rule#-A "$ch" }"
  done < <(our_jumps "$f")
  # Applied before with --proxy, now without: the proxy's chain goes.
  if [[ -z $opt_proxy ]]; then
    while IFS= read -r line; do
      [[ -n $line ]] || continue
      changed=1; payload+="-D ${line#-A }"$'\n'; log "ipv$f: - $line"
    done <<<"$(out_jumps "$f")"
    if chain_exists "$f" "$OUTCHAIN"; then
      changed=1; payload+="-F $OUTCHAIN"$'\n'"-X $OUTCHAIN"$'\n'; log "ipv$f: - -X $OUTCHAIN"
    fi
  fi
  payload+=$'COMMIT\n'
  if [[ $changed == 0 ]]; then
    log "ipv$f: already applied ($(rule_counts "$f") rules); nothing changed"
    return 0
  fi
  local err
  err=$(ipt_restore "$f" <<<"$payload" 2>&1) || die "ipv$f: iptables-restore failed: $err"
  if [[ ${#created[@]} -gt 0 ]]; then
    local old=""
    [[ -f $(marker "$f") ]] && old=$(cat "$(marker "$f")")
    # shellcheck disable=SC2086  # one word per line
    printf '%s\n' $old "${created[@]}" | sort -u >"$(marker "$f")"
  fi
  local why
  why=$(compare "$f") || die "ipv$f: rules applied but do not read back as expected: $why"
  log "ipv$f: applied"
}

cmd_apply() {
  local f
  for f in "${families[@]}"; do load_wanted "$f"; done
  load_wanted_nat
  for f in "${families[@]}"; do apply_family "$f"; done
  apply_nat
  options_as_args >"$RUN_DIR/applied.args"
}

# ------------------------------------------------------------------ remove ---

remove_family() {
  local f=$1 payload=$'*filter\n' any=0 line ch
  # Every jump to our chains, from any chain.
  while IFS= read -r line; do
    [[ -n $line ]] || continue
    payload+="-D ${line#-A }"$'\n'
    log "ipv$f: - $line"
    any=1
  done < <(ipt "$f" -S 2>/dev/null | grep -E -- "^-A .* -j ($CHAIN|$INCHAIN|$OUTCHAIN)( |$)" | grep -Ev -- "^-A ($CHAIN|$INCHAIN|$OUTCHAIN) " || true)
  for ch in "$CHAIN" "$INCHAIN" "$OUTCHAIN"; do
    chain_exists "$f" "$ch" || continue
    while IFS= read -r line; do [[ -n $line ]] && log "ipv$f: - $line"; done < <(chain_rules "$f" "$ch")
    payload+="-F $ch"$'\n'"-X $ch"$'\n'
    log "ipv$f: - -X $ch"
    any=1
  done
  # DOCKER-USER and its FORWARD jump only if apply made them and nothing
  # else (dockerd's RETURN, an operator's rule) lives there now.
  local m made=""
  m=$(marker "$f")
  [[ -f $m ]] && made=$(cat "$m")
  if grep -qxE 'chain|jump' <<<"$made" && chain_exists "$f" "$USERCHAIN"; then
    local others
    others=$(chain_rules "$f" "$USERCHAIN" | grep -Ev -- "-j $CHAIN( |$)" || true)
    if [[ -z $others ]]; then
      if grep -qx jump <<<"$made" && has_rule "$f" FORWARD "-A FORWARD -j $USERCHAIN"; then
        payload+="-D FORWARD -j $USERCHAIN"$'\n'
        log "ipv$f: - -A FORWARD -j $USERCHAIN (apply had added it)"
      fi
      if grep -qx chain <<<"$made"; then
        payload+="-X $USERCHAIN"$'\n'
        log "ipv$f: - -X $USERCHAIN (apply had created it)"
      fi
      any=1
    else
      log "ipv$f: $USERCHAIN is in use by others now; left in place"
    fi
  fi
  payload+=$'COMMIT\n'
  if [[ $any == 0 ]]; then
    log "ipv$f: not applied; nothing to remove"
  else
    local err
    err=$(ipt_restore "$f" <<<"$payload" 2>&1) || die "ipv$f: iptables-restore failed: $err"
    log "ipv$f: removed"
  fi
  # The filter table itself, if apply made it and it is empty again (only
  # the built-in chains, policy ACCEPT, no rules).
  local rest
  if grep -qx table <<<"$made" && uses_nft "$f" && rest=$(ipt "$f" -S) \
     && [[ -z $(grep -vxE -- '-P (INPUT|FORWARD|OUTPUT) ACCEPT' <<<"$rest" || true) ]]; then
    nft delete table "$(nft_family "$f")" filter && log "ipv$f: - table $(nft_family "$f") filter (apply had created it)"
  fi
  rm -f "$m"
}

cmd_remove() {
  local f
  for f in "${families[@]}"; do remove_family "$f"; done
  remove_nat
  rm -f "$RUN_DIR/applied.args"
}

# ------------------------------------------------------------ status, check ---

cmd_status() {
  local f applied=1 line
  for f in "${families[@]}"; do
    if chain_exists "$f" "$CHAIN" && chain_exists "$f" "$INCHAIN" \
       && [[ $(chain_rules "$f" "$USERCHAIN") == *"-j $CHAIN"* ]] \
       && [[ $(chain_rules "$f" INPUT) == *"-j $INCHAIN"* ]]; then
      echo "ipv$f: applied"
    else
      echo "ipv$f: not applied"; applied=0
      continue
    fi
    echo "  jumps:"
    ipt "$f" -S | grep -E -- "-j ($CHAIN|$INCHAIN|$OUTCHAIN)\$" | grep -Ev -- "^-A ($CHAIN|$INCHAIN|$OUTCHAIN) " | sed 's/^/    /'
    for line in "$CHAIN" "$INCHAIN" "$OUTCHAIN"; do
      chain_exists "$f" "$line" || continue
      echo "  $line (packets bytes rule):"
      ipt "$f" -S "$line" -v | sed -n 's/^-A [^ ]* \(.*\) -c \([0-9]*\) \([0-9]*\) \(-j .*\)$/    \2 \3 \1 \4/p'
    done
  done
  if nat_chain_exists; then
    echo "  nat: jumps:"
    nat_jumps | sed 's/^/    /'
    echo "  nat: $NATCHAIN (packets bytes rule):"
    nat -S "$NATCHAIN" -v | sed -n 's/^-A [^ ]* \(.*\) -c \([0-9]*\) \([0-9]*\) \(-j .*\)$/    \2 \3 \1 \4/p'
  fi
  [[ -f $RUN_DIR/applied.args ]] && echo "options: $(cat "$RUN_DIR/applied.args")"
  [[ $applied == 1 ]]
}

# fix_command: the apply that makes `check` with these options pass, as a
# command line that works as printed (this script's absolute path, the
# options it was given, each quoted for the shell).
fix_command() {
  local a line
  line="bash $(sh_word "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")") apply"
  for a in "${cmd_args[@]}"; do line+=" $(sh_word "$a")"; done
  printf '%s\n' "$line"
}
# sh_word S: S as one shell word (as is when it is plain, else in single quotes)
sh_word() {
  if [[ $1 =~ ^[A-Za-z0-9_./:,+=@%-]+$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"
  fi
}

cmd_check() {
  local f bad=0 out
  for f in "${families[@]}"; do
    load_wanted "$f"
    if out=$(compare "$f"); then
      echo "ipv$f: ok ($(rule_counts "$f") rules, jumps in place)"
    else
      echo "$out"; bad=1
    fi
  done
  load_wanted_nat
  if out=$(compare_nat); then
    [[ -n $opt_proxy ]] && echo "ipv4: nat: ok ($(wc -l <<<"$want_nat") rules, jump in place)"
  else
    echo "$out"; bad=1
  fi
  [[ $bad == 0 ]] && echo "check: the applied rules match" || echo "check: MISMATCH (fix, as root: $(fix_command))"
  return $bad
}

cmd_rules() {
  local f
  for f in "${families[@]}"; do
    load_wanted "$f"
    echo "# ipv$f"
    printf '%s\n' "${want_juser[$f]}" "${want_jinput[$f]}" "${want_chain[$f]}" "${want_inchain[$f]}"
    if [[ -n $opt_proxy ]]; then printf '%s\n' "${want_joutput[$f]}" "${want_outchain[$f]}"; fi
  done
  load_wanted_nat
  if [[ -n $opt_proxy ]]; then
    echo "# ipv4 nat"
    printf '%s\n' "$want_jnat" "$want_nat"
  fi
}

# -------------------------------------------------------------------- main ---

[[ $# -ge 1 ]] || { usage >&2; exit 2; }
cmd=$1; shift
cmd_args=("$@") # for fix_command
case $cmd in
  apply|check|rules) parse_options "$@" ;;
  remove|status)
    [[ $# == 0 || $1 == -h || $1 == --help ]] || { printf 'egress: %s takes no options\n' "$cmd" >&2; exit 2; }
    parse_options "$@" ;;
  -h|--help|help) usage; exit 0 ;;
  *) printf 'egress: unknown command %s (see --help)\n' "$cmd" >&2; exit 2 ;;
esac
if [[ $cmd != remove && $cmd != status && -n $opt_proxy ]] && ! id -u "$PROXY_USER" >/dev/null 2>&1; then
  die "--proxy: the user $PROXY_USER, which Squid runs as, does not exist (Debian: apt-get install squid-openssl)"
fi
# remove looks at both families whatever the configuration says, so that
# rules applied under another configuration are still found.
[[ $cmd == remove ]] && opt_ipv6=1
preflight
"cmd_$cmd"
