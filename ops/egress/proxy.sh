#!/usr/bin/env bash
# ops/egress/proxy.sh: Phase A's egress proxy (Debian's squid-openssl), the
# only way out of the install bridge when egress.sh runs with --proxy.
#
# Usage: proxy.sh conf --dir DIR --listen ADDR [--ports E,H,S]
#                      [--ecosystem NAME]... [--allow HOST]... [--hosts-file FILE]
#        proxy.sh hosts NAME...     the registry hosts of each ecosystem ("all": every one)
#        proxy.sh run --dir DIR     squid in the foreground (exec: the caller's child)
#        proxy.sh check --dir DIR   squid -k parse on DIR/squid.conf
#
#   conf       writes DIR/squid.conf (and DIR/tls/, a throwaway self-signed
#              certificate Squid needs on its TLS port; it never signs or
#              presents anything: TLS is peeked and spliced, never bumped).
#              Squid listens on ADDR (the install bridge's gateway): port E
#              is the explicit proxy (HTTP_PROXY/HTTPS_PROXY), H takes
#              intercepted HTTP and S intercepted TLS (egress.sh --proxy
#              E,H,S redirects the bridge's 80 and 443 there). Default
#              ports 3128,3129,3130.
#   allow-list the union of each --ecosystem's registry hosts and every
#              --allow HOST (a name; ".example.org" = the domain and its
#              subdomains). Plain HTTP is allowed when its Host is listed;
#              CONNECT when its target is listed and the port is 443; an
#              intercepted TLS connection is spliced when its SNI is listed
#              and closed otherwise (also without SNI). A Host that does
#              not resolve to the address the client connected to is
#              refused (host_verify_strict), so a listed name cannot be
#              used to reach another address.
#   hosts-file names Squid resolves from FILE before DNS (default /etc/hosts).
#
# The access log (DIR/access.log, one line per request) has the fields
#   time client local_port squid_status http_status method sni url
#   bytes_in bytes_out server_addr bump_mode
# separated by single spaces ("-" when empty). See ops/egress/README.md.
set -euo pipefail

die() { printf 'proxy: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; }

# registries NAME: the hosts an ecosystem's package manager fetches from.
registries() {
  case $1 in
    npm|yarn|pnpm|node) echo registry.npmjs.org registry.yarnpkg.com ;;
    pypi|pip|python|poetry|uv) echo pypi.org files.pythonhosted.org ;;
    go) echo proxy.golang.org sum.golang.org ;;
    crates|cargo|rust) echo index.crates.io static.crates.io crates.io ;;
    maven|gradle|java) echo repo.maven.apache.org repo1.maven.org plugins.gradle.org services.gradle.org ;;
    rubygems|bundler|ruby) echo rubygems.org index.rubygems.org ;;
    packagist|composer|php) echo repo.packagist.org packagist.org ;;
    all) local e; for e in npm pypi go crates maven rubygems packagist; do registries "$e"; done | tr '\n' ' '; echo ;;
    *) return 1 ;;
  esac
}

valid_host() { [[ $1 =~ ^\.?[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*$ && ${#1} -le 253 ]]; }
valid_v4() {
  local IFS=. o
  [[ $1 =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || return 1
  for o in $1; do ((10#$o <= 255)) || return 1; done
}

dir='' listen='' ports=3128,3129,3130 hosts_file=/etc/hosts
allow=()

parse() {
  while [[ $# -gt 0 ]]; do
    case $1 in
      --dir) [[ $# -ge 2 ]] || die "--dir needs a directory"; dir=$2; shift ;;
      --listen) [[ $# -ge 2 ]] || die "--listen needs an IPv4 address"; listen=$2; shift ;;
      --ports) [[ $# -ge 2 ]] || die "--ports needs E,H,S"; ports=$2; shift ;;
      --allow) [[ $# -ge 2 ]] || die "--allow needs a host"; allow+=("$2"); shift ;;
      --ecosystem)
        [[ $# -ge 2 ]] || die "--ecosystem needs a name"
        local h
        h=$(registries "$2") || die "unknown ecosystem '$2'"
        # shellcheck disable=SC2206  # one host per word
        allow+=($h); shift ;;
      --hosts-file) [[ $# -ge 2 ]] || die "--hosts-file needs a file"; hosts_file=$2; shift ;;
      -h|--help) usage; exit 0 ;;
      *) printf 'proxy: unknown option %s (see --help)\n' "$1" >&2; exit 2 ;;
    esac
    shift
  done
  [[ -n $dir ]] || die "--dir is required"
}

conf_text() {
  local e h s
  IFS=, read -r e h s <<<"$ports"
  cat <<EOF
# Written by ops/egress/proxy.sh: Phase A's egress proxy. Do not edit; it is
# rewritten whenever the proxy starts.
pid_filename $dir/squid.pid
cache_log $dir/cache.log
coredump_dir $dir
logformat kiwi %ts.%03tu %>a %>lp %Ss %>Hs %rm %ssl::>sni %ru %>st %<st %<a %ssl::bump_mode
access_log stdio:$dir/access.log logformat=kiwi buffer-size=0KB
buffered_logs off
logfile_rotate 0
hosts_file $hosts_file
pinger_enable off
cache deny all
cache_mem 0 MB
forwarded_for delete
httpd_suppress_version_string on
host_verify_strict on
client_dst_passthru off
shutdown_lifetime 1 seconds
workers 1

http_port $listen:$e name=explicit
http_port $listen:$h intercept name=http_intercept
https_port $listen:$s intercept ssl-bump tls-cert=$dir/tls/cert.pem tls-key=$dir/tls/key.pem generate-host-certificates=off name=tls_intercept

acl kiwi_allowed dstdomain ${allow[*]}
acl kiwi_allowed_sni ssl::server_name ${allow[*]}
acl kiwi_tls_intercept myportname tls_intercept
acl kiwi_step1 at_step SslBump1
acl kiwi_tls_port port 443
acl CONNECT method CONNECT

http_access deny CONNECT !kiwi_tls_port
# an intercepted TLS connection: ssl_bump below decides on its SNI
http_access allow kiwi_tls_intercept
http_access allow kiwi_allowed
http_access deny all

ssl_bump peek kiwi_step1
ssl_bump splice kiwi_allowed_sni
ssl_bump terminate all
EOF
}

cmd_conf() {
  [[ -n $listen ]] || die "--listen is required"
  valid_v4 "$listen" || die "bad --listen '$listen' (want an IPv4 address)"
  [[ $ports =~ ^[0-9]{1,5},[0-9]{1,5},[0-9]{1,5}$ ]] || die "bad --ports '$ports' (want E,H,S)"
  [[ ${#allow[@]} -gt 0 ]] || die "nothing allowed: give --ecosystem or --allow"
  local a
  for a in "${allow[@]}"; do valid_host "$a" || die "bad host '$a'"; done
  mapfile -t allow < <(printf '%s\n' "${allow[@]}" | awk '!seen[tolower($0)]++')
  [[ -r $hosts_file ]] || die "cannot read --hosts-file $hosts_file"
  command -v openssl >/dev/null || die "openssl not found (Debian: apt-get install openssl)"
  mkdir -p "$dir/tls"
  if [[ ! -s $dir/tls/cert.pem || ! -s $dir/tls/key.pem ]]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=kiwi-egress-proxy" \
      -keyout "$dir/tls/key.pem" -out "$dir/tls/cert.pem" >/dev/null 2>&1 || die "openssl could not make the TLS port's certificate"
    chmod 600 "$dir/tls/key.pem"
  fi
  conf_text >"$dir/squid.conf.tmp"
  mv "$dir/squid.conf.tmp" "$dir/squid.conf"
  # Squid drops to its own user after reading its configuration: it must be
  # able to write its logs and pid file there.
  if [[ $(id -u) == 0 ]] && id proxy >/dev/null 2>&1; then
    chown -R proxy: "$dir"
    if command -v runuser >/dev/null && ! runuser -u proxy -- test -w "$dir" -a -r "$hosts_file"; then
      die "Squid runs as the user proxy, which cannot write $dir or read $hosts_file (a parent directory closed to it?)"
    fi
  fi
  echo "$dir/squid.conf"
}

squid_bin() { command -v squid || echo /usr/sbin/squid; }

cmd_check() {
  [[ -f $dir/squid.conf ]] || die "$dir/squid.conf missing (proxy.sh conf writes it)"
  "$(squid_bin)" -k parse -f "$dir/squid.conf" 2>&1 | grep -E 'ERROR|FATAL|WARNING' >&2 && return 1
  return 0
}

cmd_run() {
  [[ -f $dir/squid.conf ]] || die "$dir/squid.conf missing (proxy.sh conf writes it)"
  [[ -x $(squid_bin) ]] || die "squid not found (Debian: apt-get install squid-openssl)"
  # A Squid left by a caller that was killed outright holds the ports:
  # stopped first, if its pid file names a squid running this configuration.
  local old
  old=$(cat "$dir/squid.pid" 2>/dev/null || true)
  if [[ $old =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$old/cmdline" 2>/dev/null | grep -qF -- "-f $dir/squid.conf"; then
    printf 'proxy: stopping squid %s left from an earlier run\n' "$old" >&2
    kill "$old" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$old" 2>/dev/null || true
  fi
  # Squid ends with its caller however the caller ends (a worker killed
  # with SIGKILL cannot stop it, and Squid's change to the user proxy
  # clears a parent-death signal): a watcher in Squid's process group
  # (which the caller stops as a group) looks for the caller every second
  # and stops Squid when it is gone. Squid is the watcher's parent (this
  # shell, after the exec); a watcher whose parent is no longer Squid ends
  # without a kill, so it never signals a pid that was reused.
  local caller=$PPID self=$$
  (
    me=$BASHPID
    parent() { local s; s=$(cat "/proc/$me/stat" 2>/dev/null) || return 1; s=${s##*) }; set -- $s; echo "$2"; }
    while kill -0 "$caller" 2>/dev/null; do
      [ "$(parent)" = "$self" ] || exit 0
      sleep 1
    done
    [ "$(parent)" = "$self" ] && kill "$self" 2>/dev/null
  ) </dev/null >/dev/null 2>&1 &
  exec "$(squid_bin)" -N -f "$dir/squid.conf"
}

[[ $# -ge 1 ]] || { usage >&2; exit 2; }
cmd=$1; shift
case $cmd in
  conf|run|check) parse "$@"; "cmd_$cmd" ;;
  hosts)
    [[ $# -ge 1 ]] || die "hosts needs an ecosystem"
    for e in "$@"; do registries "$e" || die "unknown ecosystem '$e'"; done | tr ' ' '\n' ;;
  -h|--help|help) usage ;;
  *) printf 'proxy: unknown command %s (see --help)\n' "$cmd" >&2; exit 2 ;;
esac
