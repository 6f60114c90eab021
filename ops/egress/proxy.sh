#!/usr/bin/env bash
# ops/egress/proxy.sh: Phase A's egress proxy (Debian's squid-openssl), the
# only way out of the install bridge when egress.sh runs with --proxy.
#
# Usage: proxy.sh conf --dir DIR --listen ADDR [--ports E,H,S]
#                      [--ecosystem NAME]... [--allow HOST]... [--hosts-file FILE]
#                      [--read-only] [--bump-ca CADIR] [--bump HOST]... [--bump-registries]
#                      [--private-registry HOST[/PREFIX]=@FILE]... [--upstream-ca FILE]
#                      [--digest BIN]
#        proxy.sh hosts NAME...     the registry hosts of each ecosystem ("all": every one)
#        proxy.sh run --dir DIR [--log-max-mb N] [--digest BIN]
#                                   squid in the foreground (exec: the caller's child)
#        proxy.sh check --dir DIR   squid -k parse on DIR/squid.conf
#
#   conf       writes DIR/squid.conf (and DIR/tls/, a throwaway self-signed
#              certificate Squid needs on its TLS port; it never signs or
#              presents anything: TLS is peeked and spliced, never bumped,
#              unless a bumping option, below, asks for it).
#              Squid listens on ADDR (the install bridge's gateway): port E
#              is the explicit proxy (HTTP_PROXY/HTTPS_PROXY), H takes
#              redirected plain HTTP and S intercepted TLS (egress.sh --proxy
#              E,H,S redirects the bridge's 80 and 443 there). Default
#              ports 3128,3129,3130.
#   allow-list the union of each --ecosystem's registry hosts and every
#              --allow HOST (a name; ".example.org" = the domain and its
#              subdomains), matched as names, never by a reverse lookup: a
#              raw IP is refused. Plain HTTP is allowed when its host is
#              listed and its port is 80; CONNECT when its target is listed
#              and the port is 443; an intercepted TLS connection is spliced
#              when its SNI is listed and closed otherwise (also without
#              SNI), to the address the client connected to only if the
#              SNI resolves to it (host_verify_strict). Redirected plain
#              HTTP is taken by its Host header (a virtual host): the
#              allow-list decides before any name is resolved, and Squid
#              connects to the listed name's own addresses.
#              Nothing names the host: no Via, no X-Forwarded-For, a fixed
#              visible_hostname.
#   hosts-file names Squid resolves from FILE before DNS (default /etc/hosts).
#   bumping    off unless one of these is given; without them squid.conf is
#              what it was before they existed. Any of them makes the proxy
#              read-only (also --read-only alone): a request Squid sees
#              (plain HTTP, a bumped host's HTTPS) passes only as GET or
#              HEAD, anything else is 403 before any connection, and no
#              client's Authorization or Proxy-Authorization is forwarded.
#              --bump-ca CADIR: Kiwi's CA, CADIR/ca.pem (what a client must
#              trust) and CADIR/ca.key (mode 600, Squid's user's; it never
#              leaves the host), made when both are missing.
#              --bump HOST: a listed host whose TLS Squid terminates, by a
#              CONNECT to it whose SNI is HOST (any other SNI: closed) and
#              by an intercepted connection's SNI, with per-host
#              certificates it signs with that CA; the
#              registry's own certificate is verified (the system's CAs and
#              --upstream-ca FILE's), a failure is an error. Every other
#              host is spliced as without bumping. Needs --bump-ca.
#              --bump-registries: every host the --ecosystem options list
#              is bumped (as by --bump), so no registry takes a write.
#              --private-registry HOST[/PREFIX]=@FILE: HOST is allowed and
#              bumped, and a request to it over TLS whose path is PREFIX or
#              under it gets "Authorization: <FILE's one line>" (e.g.
#              "Bearer TOKEN", "Basic BASE64"); a path with dot segments or
#              encoded dots, slashes or backslashes is refused there. The
#              value is in DIR/squid.conf (mode 600, Squid's user's) and is
#              never printed; it is never given on a command line.
#   digest     conf --digest BIN: every response Squid sees in the clear
#              (plain HTTP, a bumped host's HTTPS) passes through an ICAP
#              service (RESPMOD) on 127.0.0.1 that run --digest BIN starts
#              beside Squid (BIN: kiwi-fetch-digest), as Squid's user: it
#              hands each response back unchanged and appends a line to
#              DIR/fetch.log with the SHA-256 of its body. If it cannot be
#              reached, the response fails (nothing passes unrecorded), and
#              when it dies Squid is stopped (its caller starts both again).
#              With private registries too: a redirect of one of them to
#              another host (its storage) lets the client that got it fetch
#              exactly that URL over TLS, bumped, for 5 minutes (BIN
#              --redirect-acl is Squid's helper for it); nothing else of
#              that host, and no credential goes there. The same for the
#              public registries whose downloads move to another host
#              (services.gradle.org, the Gradle wrapper's distributions),
#              with --bump-registries; and a redirect of such a target
#              (GitHub's release page to its storage), up to three hops.
#   run        Squid and proxy.sh run itself get an environment of their own
#              (PATH, LANG), whatever the caller's. Squid's logs are rotated
#              (to .0, one old generation kept) once one passes N MiB
#              (--log-max-mb, default 64), checked every second.
#
# The access log (DIR/access.log, one line per request) has the fields
#   time client local_port squid_status http_status method sni url
#   bytes_in bytes_out server_addr bump_mode via
# separated by single spaces ("-" when empty; via is "redirected" for what
# the nat rules brought). method, sni and url are %-encoded (no space or
# control byte survives) and cut to 32, 256 and 1024 bytes. See
# ops/egress/README.md.
set -euo pipefail

die() { printf 'proxy: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,74p' "$0" | sed 's/^# \{0,1\}//'; }

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

# The public registries whose downloads answer with a redirect to another
# host: the Gradle wrapper's distributions (services.gradle.org) move to
# GitHub's release page, and that to its storage. With --bump-registries
# and --digest their redirects are followed as a private registry's.
FOLLOWED_REGISTRIES='services.gradle.org'

# a name (the last label not all digits: an address is never listed)
valid_host() { [[ $1 =~ ^\.?[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*$ && ${#1} -le 253 && ! ${1##*.} =~ ^[0-9]+$ ]]; }
valid_v4() {
  local IFS=. o
  [[ $1 =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || return 1
  for o in $1; do ((10#$o <= 255)) || return 1; done
}

LOG_SNI_MAX=256 LOG_URL_MAX=1024
dir='' listen='' ports=3128,3129,3130 hosts_file=/etc/hosts log_max_mb=64 watch_s=1
allow=()
# Bumping (off unless asked for): the CA's directory, the hosts whose TLS
# Squid terminates, each private registry's SPEC, an extra upstream CA,
# and read-only (GET and HEAD), which any of these turns on.
bump_ca='' upstream_ca='' read_only=0 bump_registries=0
bump=() private=() eco_hosts=()
# the fetch digest: conf --digest writes the ICAP lines, run --digest BIN
# starts the service
digest=0 digest_bin=''
CERTGEN=/usr/lib/squid/security_file_certgen

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
        allow+=($h) eco_hosts+=($h); shift ;;
      --hosts-file) [[ $# -ge 2 ]] || die "--hosts-file needs a file"; hosts_file=$2; shift ;;
      --log-max-mb) [[ $# -ge 2 ]] || die "--log-max-mb needs a size"; log_max_mb=$2; shift ;;
      --bump-ca) [[ $# -ge 2 ]] || die "--bump-ca needs a directory"; bump_ca=$2; read_only=1; shift ;;
      --bump) [[ $# -ge 2 ]] || die "--bump needs a host"; bump+=("$2"); read_only=1; shift ;;
      --bump-registries) bump_registries=1; read_only=1 ;;
      --private-registry)
        [[ $# -ge 2 ]] || die "--private-registry needs HOST[/PREFIX]=@FILE"
        private+=("$2"); read_only=1; shift ;;
      --upstream-ca) [[ $# -ge 2 ]] || die "--upstream-ca needs a file"; upstream_ca=$2; read_only=1; shift ;;
      --read-only) read_only=1 ;;
      --digest)
        [[ $# -ge 2 ]] || die "--digest needs the kiwi-fetch-digest binary"; digest_bin=$2; digest=1; shift ;;
      -h|--help) usage; exit 0 ;;
      *) printf 'proxy: unknown option %s (see --help)\n' "$1" >&2; exit 2 ;;
    esac
    shift
  done
  [[ -n $dir ]] || die "--dir is required"
}

conf_text() {
  local e h s explicit_tls='' intercept_tls
  IFS=, read -r e h s <<<"$ports"
  # the TLS port's certificate is never presented unless hosts are bumped
  intercept_tls="tls-cert=$dir/tls/cert.pem tls-key=$dir/tls/key.pem generate-host-certificates=off"
  if ((${#bump[@]})); then
    # bumped: host certificates minted on the fly (security_file_certgen),
    # signed by Kiwi's CA, on the explicit port's CONNECT and the TLS port
    intercept_tls="tls-cert=$bump_ca/ca.pem tls-key=$bump_ca/ca.key generate-host-certificates=on dynamic_cert_mem_cache_size=4MB"
    explicit_tls="ssl-bump $intercept_tls "
  fi
  cat <<EOF
# Written by ops/egress/proxy.sh: Phase A's egress proxy. Do not edit; it is
# rewritten whenever the proxy starts.
pid_filename $dir/squid.pid
cache_log $dir/cache.log
coredump_dir $dir
# Every field a client chooses is %-encoded (no space, control byte or
# newline survives) and cut to a width; the client is the connection's.
logformat kiwi %tS %>a %>lp %Ss %>Hs %#.32rm %#.${LOG_SNI_MAX}ssl::>sni %#.${LOG_URL_MAX}ru %>st %<st %<a %ssl::bump_mode %{kiwi_via}note
access_log stdio:$dir/access.log logformat=kiwi buffer-size=0KB
buffered_logs off
$(conf_digest)
# proxy.sh run rotates (SIGUSR1) once a log passes its bound: one old
# generation (.0) is kept.
logfile_rotate 1
hosts_file $hosts_file
pinger_enable off
cache deny all
cache_mem 0 MB
# nothing names this host to a registry or to Phase A
via off
forwarded_for delete
visible_hostname kiwi-egress-proxy
request_header_access Surrogate-Capability deny all
httpd_suppress_version_string on
host_verify_strict on
client_dst_passthru off
shutdown_lifetime 1 seconds
workers 1

http_port $listen:$e ${explicit_tls}name=explicit
# Redirected plain HTTP is taken as a virtual host (its Host names the
# origin), not intercepted: an intercepted request's Host is resolved
# before any access rule runs; here the allow-list decides first and only
# a listed name is ever resolved (and connected to).
http_port $listen:$h accel vhost allow-direct name=http_redirected
https_port $listen:$s intercept ssl-bump $intercept_tls name=tls_intercept

# -n: names only, never a reverse lookup of an address
acl kiwi_allowed dstdomain -n ${allow[*]}
acl kiwi_allowed_sni ssl::server_name ${allow[*]}
acl kiwi_raw_ip dstdom_regex -n ^[0-9.]+\$ ^0[xX] :
acl kiwi_tls_intercept myportname tls_intercept
acl kiwi_step1 at_step SslBump1
acl kiwi_http_port port 80
acl kiwi_tls_port port 443
acl kiwi_http proto HTTP
acl CONNECT method CONNECT
acl kiwi_redirected myportname http_redirected tls_intercept
# the log's last field: "redirected" for what the nat rules brought here
note kiwi_via redirected kiwi_redirected

EOF
  if ((read_only)); then
    conf_read_only
    return
  fi
  cat <<EOF
# an intercepted TLS connection (a CONNECT to the address it was sent to):
# ssl_bump below decides on its SNI
http_access allow kiwi_tls_intercept
http_access deny kiwi_raw_ip
http_access deny CONNECT !kiwi_tls_port
http_access deny !CONNECT !kiwi_http
http_access deny !CONNECT !kiwi_http_port
http_access allow kiwi_allowed
http_access deny all

ssl_bump peek kiwi_step1
ssl_bump splice kiwi_allowed_sni
ssl_bump terminate all
EOF
}

# conf_read_only: the access rules with --read-only (and any bumping
# option): only GET and HEAD, no client's Authorization, the operator's
# credential added to its private registry's paths, the bumped hosts'
# TLS terminated with Kiwi's CA.
conf_read_only() {
  local i
  cat <<EOF
# Read-only: a sandbox may fetch, never send (no PUT, POST, PATCH,
# DELETE, ...), on every request Squid sees: plain HTTP and the bumped
# hosts' HTTPS. CONNECT stays the way in.
acl kiwi_read method GET HEAD
# a body (a GET or HEAD can carry one too)
acl kiwi_body_length req_header Content-Length [1-9]
acl kiwi_body_chunked req_header Transfer-Encoding .
# a request that came over TLS Squid terminated (a bumped host's)
acl kiwi_encrypted connections_encrypted
acl kiwi_https proto HTTPS
# No credential of the sandbox's goes anywhere; the operator's is added
# below, over TLS only, to its registry's paths only.
request_header_access Authorization deny all
request_header_access Proxy-Authorization deny all
EOF
  if ((${#priv_host[@]})); then
    echo "acl kiwi_private dstdomain -n $(printf '%s\n' "${priv_host[@]}" | awk '!seen[tolower($0)]++' | tr '\n' ' ' | sed 's/ $//')"
    echo "# dot segments and encoded dots, slashes or backslashes: a path that a"
    echo "# registry could read as outside its prefix"
    echo "acl kiwi_path_tricks urlpath_regex -i (^|/)\\.\\.?(/|\\?|;|\$) %2e %2f %5c"
    # on a connection Squid made for that host (its SNI, see ssl_bump
    # below), under its prefix
    for i in "${!priv_host[@]}"; do
      echo "acl kiwi_cred_$i dstdomain -n ${priv_host[$i]}"
      echo "acl kiwi_cred_${i}_sni ssl::server_name --client-requested ${priv_host[$i]}"
      if [[ -n ${priv_prefix[$i]} ]]; then
        echo "acl kiwi_cred_${i}_path urlpath_regex ^$(prefix_re "${priv_prefix[$i]}")(/|\\?|\$)"
        echo "request_header_add Authorization \"${priv_value[$i]}\" kiwi_cred_$i kiwi_cred_${i}_sni kiwi_cred_${i}_path kiwi_https kiwi_encrypted !kiwi_path_tricks"
      else
        echo "request_header_add Authorization \"${priv_value[$i]}\" kiwi_cred_$i kiwi_cred_${i}_sni kiwi_https kiwi_encrypted !kiwi_path_tricks"
      fi
    done
  fi
  if ((${#bump[@]})); then
    cat <<EOF
# Bumped hosts (ssl_bump below), each with its own pair: the request's
# host, and the SNI of the connection it came on
acl kiwi_bump dstdomain -n ${bump[*]}
acl kiwi_bump_sni ssl::server_name --client-requested ${bump[*]}
EOF
    for i in "${!bump[@]}"; do
      echo "acl kiwi_bump_$i dstdomain -n ${bump[$i]}"
      echo "acl kiwi_bump_sni_$i ssl::server_name --client-requested ${bump[$i]}"
    done
  fi
  cat <<EOF

http_access deny !CONNECT !kiwi_read
http_access deny !CONNECT kiwi_body_length
http_access deny !CONNECT kiwi_body_chunked
# an intercepted TLS connection (a CONNECT to the address it was sent to):
# ssl_bump below decides on its SNI; what a bumped one carries is checked
# as any request
http_access allow kiwi_tls_intercept CONNECT
http_access deny kiwi_raw_ip
http_access deny CONNECT !kiwi_tls_port
http_access deny !CONNECT !kiwi_http !kiwi_encrypted
http_access deny !CONNECT !kiwi_encrypted !kiwi_http_port
http_access deny !CONNECT kiwi_encrypted !kiwi_tls_port
EOF
  ((${#priv_host[@]})) && echo "http_access deny kiwi_private kiwi_path_tricks"
  local redirects=0 not_redirected=''
  if ((digest && ${#priv_host[@]} + ${#followed[@]})); then redirects=1 not_redirected=' !kiwi_redirected_to'; fi
  # a bumped request for a bumped host must come on a connection for that
  # host: Squid sends it on the connection the bump made
  for i in "${!bump[@]}"; do echo "http_access deny kiwi_encrypted kiwi_bump_$i !kiwi_bump_sni_$i"; done
  # the listed hosts first: the redirect helper is asked only about a host
  # off the list (every request asked it would queue behind its eight
  # children, and Squid refuses what it cannot ask: a parallel install's
  # downloads came back 403)
  echo "http_access allow kiwi_allowed"
  # a private or followed registry's redirect target: exactly the URL it
  # named, over TLS on a connection made for that host (the helper checks
  # the SNI)
  ((redirects)) && echo "http_access allow kiwi_redirected_to"
  cat <<EOF
http_access deny all

EOF
  if ((${#bump[@]} == 0)); then
    cat <<EOF
ssl_bump peek kiwi_step1
ssl_bump splice kiwi_allowed_sni
ssl_bump terminate all
EOF
    return
  fi
  cat <<EOF
# Bumped: TLS terminated with Kiwi's CA for these hosts alone, by the
# explicit proxy's CONNECT (whose SNI must be the host it names: Squid
# connects to the CONNECT's host, and a request for one bumped host must
# never go to another's address) and by the SNI of an intercepted
# connection (host_verify_strict: the address it was sent to is the
# SNI's); every other CONNECT to the explicit proxy is a tunnel as
# without bumping, every other intercepted one spliced by its SNI.
ssl_bump splice kiwi_step1 !kiwi_tls_intercept !kiwi_bump$not_redirected
ssl_bump peek kiwi_step1
ssl_bump bump kiwi_tls_intercept kiwi_bump_sni
EOF
  for i in "${!bump[@]}"; do echo "ssl_bump bump !kiwi_tls_intercept kiwi_bump_$i kiwi_bump_sni_$i"; done
  if ((redirects)); then
    # a redirect's target is bumped when its SNI is the host (the helper
    # checks it) and never spliced: a CONNECT to a host off the list that
    # was not bumped above ends here, whatever SNI it carries
    echo "ssl_bump bump !kiwi_tls_intercept kiwi_redirected_to"
    echo "ssl_bump terminate !kiwi_tls_intercept !kiwi_allowed"
  fi
  cat <<EOF
ssl_bump terminate kiwi_bump
ssl_bump splice kiwi_allowed_sni
ssl_bump terminate all
sslcrtd_program $CERTGEN -s $dir/ssl_db -M 4MB
sslcrtd_children 4 startup=1 idle=1
# the registry's certificate is verified (the system's CAs${upstream_ca:+ and $upstream_ca}):
# a failure ends the request with an error
sslproxy_cert_error deny all
tls_outgoing_options default-ca=on${upstream_ca:+ cafile=$upstream_ca}
EOF
}

# conf_digest: with --digest, every response Squid sees in the clear goes
# through kiwi-fetch-digest (ICAP RESPMOD), whose address run writes to
# DIR/icap.conf once the service listens; without it the service is down
# and the response fails (bypass=off): nothing passes unrecorded.
conf_digest() {
  ((digest)) || return 0
  if ((${#priv_host[@]} + ${#followed[@]})); then
    cat <<EOF
# A private or followed registry's redirect to another host: the URL it
# named, for the client it named it to (kiwi-fetch-digest notes it, this
# helper asks)
external_acl_type kiwi_redirect ttl=0 negative_ttl=0 children-startup=1 children-max=8 %SRC %DST %METHOD %PATH %ssl::>sni $digest_bin --redirect-acl $dir/redirects.log
acl kiwi_redirected_to external kiwi_redirect
EOF
  fi
  cat <<EOF
# The fetch digest: each response's body hashed by kiwi-fetch-digest
# (DIR/fetch.log); the service's address is in icap.conf (proxy.sh run).
icap_enable on
icap_send_client_ip on
icap_preview_enable off
icap_persistent_connections on
icap_service_failure_limit -1
include $dir/icap.conf
adaptation_access kiwi_digest allow all
EOF
}

# icap_conf PORT: DIR/icap.conf, the service at 127.0.0.1:PORT
icap_conf() {
  printf 'icap_service kiwi_digest respmod_precache bypass=off icap://127.0.0.1:%s/digest\n' "$1" >"$dir/icap.conf.tmp"
  chmod 644 "$dir/icap.conf.tmp"
  mv "$dir/icap.conf.tmp" "$dir/icap.conf"
}

# prefix_re PREFIX: PREFIX as a regex (its only special characters . +)
prefix_re() { sed 's/[.+]/\\&/g' <<<"$1"; }

cmd_conf() {
  [[ -n $listen ]] || die "--listen is required"
  valid_v4 "$listen" || die "bad --listen '$listen' (want an IPv4 address)"
  [[ $ports =~ ^[0-9]{1,5},[0-9]{1,5},[0-9]{1,5}$ ]] || die "bad --ports '$ports' (want E,H,S)"
  [[ ${#allow[@]} -gt 0 ]] || die "nothing allowed: give --ecosystem or --allow"
  local a
  for a in "${allow[@]}"; do valid_host "$a" || die "bad host '$a'"; done
  mapfile -t allow < <(printf '%s\n' "${allow[@]}" | awk '!seen[tolower($0)]++')
  [[ -r $hosts_file ]] || die "cannot read --hosts-file $hosts_file"
  if ((digest)); then
    [[ -x $digest_bin ]] || die "--digest: $digest_bin is not an executable (kiwi-fetch-digest)"
    digest_bin=$(realpath -- "$digest_bin")
    [[ $digest_bin != *[[:space:]\"]* ]] || die "--digest $digest_bin: no spaces or quotes in the path (it goes into squid.conf)"
  fi
  command -v openssl >/dev/null || die "openssl not found (Debian: apt-get install openssl)"
  prepare_bump
  mkdir -p "$dir/tls"
  if [[ ! -s $dir/tls/cert.pem || ! -s $dir/tls/key.pem ]]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=kiwi-egress-proxy" \
      -keyout "$dir/tls/key.pem" -out "$dir/tls/cert.pem" >/dev/null 2>&1 || die "openssl could not make the TLS port's certificate"
    chmod 600 "$dir/tls/key.pem"
  fi
  if ((${#priv_host[@]})); then
    # it holds the credentials: the owner's alone (proxy's, below)
    rm -f "$dir/squid.conf.tmp"
    (umask 077 && conf_text >"$dir/squid.conf.tmp")
  else
    conf_text >"$dir/squid.conf.tmp"
  fi
  mv "$dir/squid.conf.tmp" "$dir/squid.conf"
  # until run starts the service, an address nothing listens on; the
  # private registries and the followed public ones, whose redirects it
  # notes
  rm -f "$dir/redirect-from"
  if ((digest)); then
    icap_conf 9
    if ((${#priv_host[@]} + ${#followed[@]})); then
      printf '%s\n' "${priv_host[@]}" "${followed[@]}" | awk 'NF && !seen[tolower($0)]++' >"$dir/redirect-from"
    fi
  fi
  if ((${#bump[@]})); then
    # the certificates Squid mints per bumped host: a fresh store each
    # time (one signed by an earlier CA is never served)
    rm -rf "$dir/ssl_db"
    "$CERTGEN" -c -s "$dir/ssl_db" -M 4MB >/dev/null 2>&1 || die "$CERTGEN -c could not make $dir/ssl_db"
    chmod 700 "$dir/ssl_db"
  fi
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

# prepare_bump: the bumping options checked, the private registries'
# credentials read (never printed), Kiwi's CA made if missing.
priv_host=() priv_prefix=() priv_value=() followed=()
prepare_bump() {
  local spec host prefix file value i j
  for spec in "${private[@]}"; do
    [[ $spec =~ ^([^/=@]+)(/[^=]*)?=@(.+)$ ]] || die "bad --private-registry '$spec' (want HOST[/PREFIX]=@FILE)"
    host=${BASH_REMATCH[1]} prefix=${BASH_REMATCH[2]%/} file=${BASH_REMATCH[3]}
    [[ $host != .* ]] && valid_host "$host" || die "bad --private-registry host '$host' (one name, no leading dot)"
    if [[ -n $prefix ]]; then
      [[ $prefix =~ ^(/[A-Za-z0-9._~@+-]+)+$ && ! $prefix =~ /\.\.?(/|$) ]] ||
        die "bad --private-registry path '$prefix' (segments of letters, digits and ._~@+-; no . or ..)"
    fi
    [[ -f $file && -r $file ]] || die "--private-registry $host: cannot read the credential file $file"
    value=$(head -c 8193 -- "$file") || die "--private-registry $host: cannot read the credential file $file"
    # its value is never printed, not even in an error
    [[ ${#value} -le 8192 && $value =~ ^[A-Za-z0-9._~+/=:-]+(\ [A-Za-z0-9._~+/=:-]+)*$ ]] ||
      die "--private-registry $host: $file must hold the Authorization value on one line (e.g. 'Bearer TOKEN' or 'Basic BASE64'; letters, digits, single spaces and ._~+/=:- only, at most 8 KiB)"
    for j in "${!priv_host[@]}"; do
      [[ ${priv_host[$j],,} == "${host,,}" ]] || continue
      [[ ${priv_prefix[$j]}/ == "$prefix"/* || $prefix/ == "${priv_prefix[$j]}"/* ]] &&
        die "--private-registry $host: the paths '${priv_prefix[$j]:-/}' and '${prefix:-/}' overlap (one credential per request)"
    done
    priv_host+=("$host") priv_prefix+=("$prefix") priv_value+=("$value")
    allow+=("$host") bump+=("$host")
  done
  if ((bump_registries)); then
    ((${#eco_hosts[@]})) || die "--bump-registries needs --ecosystem (the registries it bumps)"
    bump+=("${eco_hosts[@]}")
    if ((digest)); then
      for host in "${eco_hosts[@]}"; do
        [[ " $FOLLOWED_REGISTRIES " == *" ${host,,} "* ]] && followed+=("${host,,}")
      done
    fi
  fi
  if ((${#bump[@]} == 0)); then
    if [[ -n $bump_ca ]]; then make_ca; fi
    return 0
  fi
  [[ -n $bump_ca ]] || die "--bump and --private-registry need --bump-ca DIR (Kiwi's CA, which the sandbox trusts)"
  [[ -x $CERTGEN ]] || die "$CERTGEN not found (Debian: apt-get install squid-openssl)"
  if [[ -n $upstream_ca ]]; then
    [[ -f $upstream_ca && -r $upstream_ca ]] || die "cannot read --upstream-ca $upstream_ca"
    upstream_ca=$(realpath -- "$upstream_ca")
    [[ $upstream_ca != *[[:space:]\"]* ]] || die "--upstream-ca $upstream_ca: no spaces or quotes in the path (it goes into squid.conf)"
  fi
  for i in "${!bump[@]}"; do
    valid_host "${bump[$i]}" || die "bad --bump host '${bump[$i]}'"
    allowed_name "${bump[$i]}" || die "--bump ${bump[$i]}: not on the allow-list (add --allow ${bump[$i]})"
  done
  mapfile -t allow < <(printf '%s\n' "${allow[@]}" | awk '!seen[tolower($0)]++')
  mapfile -t bump < <(printf '%s\n' "${bump[@]}" | awk '!seen[tolower($0)]++')
  make_ca
}

# allowed_name HOST: HOST is on the allow-list (itself, or under a .domain)
allowed_name() {
  local a h=${1,,}
  for a in "${allow[@]}"; do
    a=${a,,}
    [[ $h == "$a" ]] && return 0
    [[ $a == .* && ( .${h#.} == *"$a" ) ]] && return 0
  done
  return 1
}

# make_ca: --bump-ca DIR's ca.pem (what a client trusts) and ca.key (which
# never leaves the host), made when both are missing; the key the owner's
# alone, the owner Squid's user.
make_ca() {
  bump_ca=$(realpath -m -- "$bump_ca")
  [[ $bump_ca != *[[:space:]\"]* ]] || die "--bump-ca $bump_ca: no spaces or quotes in the path (it goes into squid.conf)"
  mkdir -p "$bump_ca"
  local pem=$bump_ca/ca.pem key=$bump_ca/ca.key lock
  # the workers of one host share the CA: one makes it, the others wait
  exec {lock}>"$bump_ca/.lock" && flock -w 60 "$lock" || die "--bump-ca $bump_ca: could not lock $bump_ca/.lock"
  if [[ ! -s $pem && ! -s $key ]]; then
    rm -f "$key.tmp" "$pem.tmp"
    (umask 077 && openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=Kiwi egress proxy CA" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
      -keyout "$key.tmp" -out "$pem.tmp" >/dev/null 2>&1) || die "openssl could not make the CA in $bump_ca"
    chmod 644 "$pem.tmp"
    mv "$key.tmp" "$key"
    mv "$pem.tmp" "$pem"
  fi
  [[ -s $pem && -s $key ]] || die "--bump-ca $bump_ca holds only one of ca.pem and ca.key"
  chmod 600 "$key"
  if [[ $(id -u) == 0 ]] && id proxy >/dev/null 2>&1; then chown proxy: "$key"; fi
  exec {lock}>&-
}

squid_bin() { command -v squid || echo /usr/sbin/squid; }

cmd_check() {
  [[ -f $dir/squid.conf ]] || die "$dir/squid.conf missing (proxy.sh conf writes it)"
  # `via off` is deliberate (nothing names this host to a registry)
  local out
  out=$("$(squid_bin)" -k parse -f "$dir/squid.conf" 2>&1 | grep -E 'ERROR|FATAL|WARNING' |
    grep -v 'WARNING: HTTP requires the use of Via' || true)
  [[ -n $out ]] || return 0
  redact <<<"$out" >&2
  return 1
}

# redact: stdin with every credential of DIR/squid.conf (a
# request_header_add value) replaced, wherever it appears
redact() {
  local text v
  text=$(cat)
  while IFS= read -r v; do
    [[ -n $v ]] && text=${text//"$v"/(credential)}
  done < <(sed -n 's/^request_header_add [^ ]* "\([^"]*\)".*/\1/p' "$dir/squid.conf" 2>/dev/null)
  printf '%s\n' "$text"
}

# The environment Squid and this script's run get, whoever starts them: no
# variable of the caller's (a worker's keys and passwords) reaches Squid.
CLEAN_ENV=(PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C)

# rotate_if_big SQUID_PID: Squid's logs rotated (SIGUSR1: each renamed to
# .0, the .0 before it dropped, reopened) once one holds more than
# log_max bytes.
rotate_if_big() {
  local f size
  if [[ -n $digest_pid ]] && size=$(stat -c %s "$dir/fetch.log" 2>/dev/null) && ((size > log_max)); then
    # renamed here, reopened by kiwi-fetch-digest on SIGHUP
    mv -f "$dir/fetch.log" "$dir/fetch.log.0" && kill -HUP "$digest_pid" 2>/dev/null
  fi
  for f in "$dir/access.log" "$dir/cache.log"; do
    size=$(stat -c %s "$f" 2>/dev/null) || continue
    if ((size > log_max)); then kill -USR1 "$1" 2>/dev/null; return 0; fi
  done
}

# start_digest: kiwi-fetch-digest as Squid's user (as this user when
# that is not root), a child of this shell (which becomes Squid: the
# service ends with it), listening on a port of the kernel's choice, which
# goes to DIR/icap.conf before Squid reads it.
start_digest() {
  local port_file=$dir/digest.port run_as=()
  rm -f "$port_file"
  if [[ $(id -u) == 0 ]] && id proxy >/dev/null 2>&1; then
    run_as=(setpriv --reuid=proxy --regid=proxy --clear-groups --inh-caps=-all --no-new-privs --)
  fi
  # a binary under a folder Squid's user cannot search (a checkout in a
  # mode-700 folder such as mktemp -d makes) cannot start as that user
  if ((${#run_as[@]})) && ! "${run_as[@]}" test -x "$digest_bin"; then
    local d=$digest_bin shut=()
    while d=$(dirname "$d") && [[ $d != / ]]; do
      [[ -n $(find "$d" -maxdepth 0 -perm -o+x) || $(stat -c %U "$d") == proxy ]] || shut=("$d" "${shut[@]}")
    done
    die "kiwi-fetch-digest ($digest_bin) cannot be run by Squid's user 'proxy'${shut[*]:+: these folders are closed to it: ${shut[*]}; open them with: chmod o+x ${shut[*]@Q}}"
  fi
  local redirects=()
  [[ -f $dir/redirect-from ]] && redirects=(--redirects "$dir/redirects.log" --redirect-from "$dir/redirect-from")
  "${run_as[@]}" "$digest_bin" --log "$dir/fetch.log" --port-file "$port_file" --parent $$ "${redirects[@]}" </dev/null &
  digest_pid=$!
  local i port=''
  for ((i = 0; i < 100; i++)); do
    [[ -s $port_file ]] && { port=$(cat "$port_file"); break; }
    kill -0 "$digest_pid" 2>/dev/null || break
    sleep 0.05
  done
  [[ $port =~ ^[0-9]{1,5}$ ]] || { kill "$digest_pid" 2>/dev/null; die "kiwi-fetch-digest did not start (see the lines above)"; }
  icap_conf "$port"
}

cmd_run() {
  [[ -f $dir/squid.conf ]] || die "$dir/squid.conf missing (proxy.sh conf writes it)"
  [[ -x $(squid_bin) ]] || die "squid not found (Debian: apt-get install squid-openssl)"
  [[ $log_max_mb =~ ^[0-9]{1,6}$ ]] && ((10#$log_max_mb > 0)) || die "bad --log-max-mb '$log_max_mb'"
  if compgen -e | grep >/dev/null -vxE 'PATH|LANG|PWD|OLDPWD|SHLVL|_'; then
    # the same run again, in an environment of its own (exec: the caller
    # keeps its child, and $PPID stays the caller)
    exec env -i "${CLEAN_ENV[@]}" bash "${BASH_SOURCE[0]}" run --dir "$dir" --log-max-mb "$log_max_mb" \
      ${digest_bin:+--digest "$digest_bin"}
  fi
  log_max=$((10#$log_max_mb * 1024 * 1024))
  if [[ -n $digest_bin ]]; then
    [[ -x $digest_bin ]] || die "run --digest: $digest_bin is not an executable (kiwi-fetch-digest)"
    grep -qx "include $dir/icap.conf" "$dir/squid.conf" || die "run --digest: $dir/squid.conf was written without --digest"
  fi
  # A Squid left by a caller that was killed outright holds the ports:
  # stopped first, if its pid file names a squid running this configuration.
  local old
  old=$(cat "$dir/squid.pid" 2>/dev/null || true)
  if [[ $old =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$old/cmdline" 2>/dev/null | grep >/dev/null -F -- "-f $dir/squid.conf"; then
    printf 'proxy: stopping squid %s left from an earlier run\n' "$old" >&2
    kill "$old" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$old" 2>/dev/null || true
  fi
  # Squid ends with its caller however the caller ends (a worker killed
  # with SIGKILL cannot stop it, and Squid's change to the user proxy
  # clears a parent-death signal): a watcher in Squid's process group
  # (which the caller stops as a group) looks for the caller every second
  # and stops Squid when it is gone; meanwhile it keeps Squid's logs under
  # their bound (rotate_if_big). Squid is the watcher's parent (this
  # shell, after the exec); a watcher whose parent is no longer Squid ends
  # without a signal, so it never signals a pid that was reused.
  local caller=$PPID self=$$ digest_pid=''
  # Squid writes cache.log as its own user: the file is made here as that
  # user before the watcher below appends to it (made by this shell it
  # would be root's, Squid could not write it, and its lines, a FATAL's
  # cause too, would go to its stderr alone)
  if [[ -L $dir/cache.log ]]; then rm -f "$dir/cache.log"; fi
  if [[ $(id -u) == 0 ]] && id proxy >/dev/null 2>&1; then
    setpriv --reuid=proxy --regid=proxy --clear-groups -- sh -c ': >>"$1"' sh "$dir/cache.log" ||
      die "the user proxy cannot write $dir/cache.log"
  fi
  if [[ -n $digest_bin ]]; then start_digest; fi
  (
    me=$BASHPID
    parent() { local s; s=$(cat "/proc/$me/stat" 2>/dev/null) || return 1; s=${s##*) }; set -- $s; echo "$2"; }
    # the caller runs (a caller that died but is not yet reaped is a zombie)
    caller_runs() { local s; s=$(cat "/proc/$caller/stat" 2>/dev/null) || return 1; s=${s##*) }; [ "${s%% *}" != Z ]; }
    # the fetch digest runs (without it every response fails): when it
    # is gone Squid is stopped, and the caller starts both again
    digest_runs() { [ -z "$digest_pid" ] && return 0; local s; s=$(cat "/proc/$digest_pid/stat" 2>/dev/null) || return 1; s=${s##*) }; [ "${s%% *}" != Z ]; }
    while caller_runs; do
      [ "$(parent)" = "$self" ] || exit 0
      if ! digest_runs; then
        echo "proxy: kiwi-fetch-digest (pid $digest_pid) ended: stopping squid" >&2
        break
      fi
      rotate_if_big "$self"
      sleep "$watch_s"
    done
    [ "$(parent)" = "$self" ] && kill "$self" 2>/dev/null
  ) </dev/null >/dev/null 2>>"$dir/cache.log" &
  # A service name of this directory's own: Squid names its shared memory
  # segments (/dev/shm/<name>-*.shm) after it, and every Squid on the host
  # (in any network namespace) under the default name "squid" shares them:
  # one that exits unlinks the segments another is opening, which then ends
  # with "FATAL: Ipc::Mem::Segment::open failed to shm_open".
  local service
  service=kiwi$(realpath -m -- "$dir" | sha256sum | cut -c1-16)
  exec "$(squid_bin)" -N -n "$service" -f "$dir/squid.conf"
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
