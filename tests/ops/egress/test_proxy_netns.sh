#!/usr/bin/env bash
# shellcheck disable=SC2317  # functions run through check() and the EXIT trap
# tests/ops/egress/test_proxy_netns.sh: what Phase A's egress proxy
# (ops/egress/proxy.sh, Squid) does on the wire, decided from outside it,
# in network namespaces the test creates and nothing else:
#   host     Squid (proxy.sh run) and egress.sh apply --proxy, as on a
#            worker's host, with a bridge (the install bridge) whose gateway
#            is 10.231.A.1
#   sandbox  10.231.A.2 on that bridge, where the probes (curl, openssl)
#            run, as Phase A would
#   outside  10.231.C.200 ("allowed.kiwi.test" in the proxy's hosts file),
#            .201 ("other.kiwi.test", not allowed), .202 (no name but
#            its PTR) and 169.254.169.254 (the metadata address, as
#            "meta.kiwi.test"), each serving
#            HTTP 80, TLS 443 and TCP 8080 (egress-proxy/outside.py, every
#            arrival counted, every request's headers kept), and the
#            host's resolver on 10.231.C.53 (egress-proxy/resolver.py,
#            every question kept; "resolve.kiwi.test" is an allowed name
#            only it knows, and it answers the PTR of .202 with
#            "allowed.kiwi.test")
# The host namespace has no route but to the outside namespace: nothing
# leaves the machine, and the machine's own firewall is never touched
# (egress.sh runs inside the host namespace, with a run directory of the
# test's own).
#
# What it proves:
#   environment  Squid (and proxy.sh run) hold none of the caller's variables
#   no Via       what reaches a registry names neither the host nor a proxy
#   names        a raw IP (however its PTR reads) is refused; only port 80
#                for plain HTTP and 443 for CONNECT
#   no lookups   a name off the list is refused without a DNS question
#   own egress   Squid's own connections are held to egress.sh's deny list,
#                the metadata address and (with --rfc1918) private ranges
#   the log      a newline or escape in an SNI stays inside its field, and
#                a flood of refused TLS hellos with long SNIs keeps the
#                log under proxy.sh run --log-max-mb
# Runs as root; TAP output; exit 77 (skip) without root, squid, curl or
# python3, unless KIWI_REQUIRE_SERVICES=1.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/ops/egress/tap.sh
. "$here/tap.sh"
# shellcheck source=tests/ops/egress/proxy-netns.sh
. "$here/proxy-netns.sh"

ALLOWED=10.231.$C.200 OTHER=10.231.$C.201 PTR=10.231.$C.202 META=169.254.169.254
LOG_MAX_MB=1

# ----------------------------------------------------------- the namespaces ---

netns_build "$ALLOWED" "$OTHER" "$PTR" "$META"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=outside -keyout "$tmp/out.key" -out "$tmp/out.crt" >/dev/null 2>&1
outside_start --addr "$ALLOWED" --addr "$OTHER" --addr "$PTR" --addr "$META" --cert "$tmp/out.crt" --key "$tmp/out.key" \
  -- --a "resolve.kiwi.test=$ALLOWED" --ptr "$PTR=allowed.kiwi.test"

# ------------------------------------------------------------- the proxy ---

printf '%s allowed.kiwi.test\n%s other.kiwi.test\n%s meta.kiwi.test\n' "$ALLOWED" "$OTHER" "$META" >"$tmp/hosts"
out=$("$PROXY" conf --dir "$tmp/proxy" --listen "$GW" --ports "$PORTS" --allow allowed.kiwi.test \
  --allow resolve.kiwi.test --allow meta.kiwi.test --hosts-file "$tmp/hosts" 2>&1)
check "proxy.sh conf writes the Squid configuration" [ -f "$tmp/proxy/squid.conf" ]
indent <<<"$out"
check "squid -k parse accepts it (proxy.sh check)" "$PROXY" check --dir "$tmp/proxy"
conf=$tmp/proxy/squid.conf
check "the configuration turns Via off" grep -qx 'via off' "$conf"
check "the configuration names no host of the machine (visible_hostname is fixed)" grep -qx 'visible_hostname kiwi-egress-proxy' "$conf"
check "the allow-list matches names only (dstdomain -n)" grep -q '^acl kiwi_allowed dstdomain -n ' "$conf"
check "every field a client chooses is %-encoded and bounded in the log format" \
  grep -Eq '^logformat kiwi .* %#\.[0-9]+rm %#\.[0-9]+ssl::>sni %#\.[0-9]+ru ' "$conf"

# Squid started as the worker does (its own process group), by a caller
# that holds secrets: none of them may reach Squid.
ANTHROPIC_API_KEY=sk-test-not-a-key KIWI_REDIS_PASSWORD=not-a-password KIWI_GIT_TOKEN=not-a-token \
  squid_start "$tmp/proxy" --log-max-mb "$LOG_MAX_MB"

# Every process of Squid's group (squid, its helpers, proxy.sh's watcher):
# the names of their environment variables.
env_names() {
  local p
  for p in $(pgrep -g "$squid_pid"); do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed 's/=.*//'; done | sort -u
}
names=$(env_names)
leaked=$(grep -xE 'ANTHROPIC_API_KEY|KIWI_REDIS_PASSWORD|KIWI_GIT_TOKEN' <<<"$names" || true)
check "Squid's process group holds none of the caller's secrets ($(pgrep -g "$squid_pid" | wc -l) processes)" [ -z "$leaked" ]
check "Squid's environment is PATH and LANG only (and bash's own PWD, SHLVL, _)" \
  [ "$(grep -vxE 'PATH|LANG|PWD|SHLVL|_' <<<"$names" | grep -c .)" = 0 ]
note "environment variable names in Squid's group: $(tr '\n' ' ' <<<"$names")"

# Squid names its shared memory segments after its service name; under the
# default one ("squid") every Squid on the host shares them, and one that
# exits unlinks what another is opening (which then ends, FATAL).
shm_maps() {
  local p
  for p in $(pgrep -g "$squid_pid"); do grep -o '/dev/shm/[^ ]*' "/proc/$p/maps" 2>/dev/null; done | sort -u
}
own_shm() { [[ -n $shm ]] && ! grep -q '^/dev/shm/squid-' <<<"$shm"; }
shm=$(shm_maps)
check "Squid maps shared memory segments of its own ($(grep -c . <<<"$shm") of them), none under the default service name" own_shm
note "Squid's shared memory: $(tr '\n' ' ' <<<"$shm")"

# ------------------------------------------------------------- the rules ---

eout=$(inh bash "$EGRESS" apply --proxy "$PORTS" --install-bridge "$BR" --deny "$OTHER:8080" 2>&1); rc=$?
check "egress.sh apply --proxy inside the host namespace" [ "$rc" = 0 ]
indent <<<"$eout"

# --------------------------------------------------------------- probes ---


# Vector 12: no Via, nothing that names the host
probe "explicit proxy, allowed host" '^200$' "http $ALLOWED allowed.kiwi.test" 1 -x "$P" http://allowed.kiwi.test/
probe "redirected HTTP, allowed host" '^200$' "http $ALLOWED allowed.kiwi.test" 1 http://allowed.kiwi.test/ \
  --resolve "allowed.kiwi.test:80:$ALLOWED"
host_names=$(inh hostname; hostname)
check "the registry saw no Via header" bash -c "! grep -qi ' via:' '$tmp/headers'"
check "the registry saw no X-Forwarded-For, Forwarded or Surrogate-Capability header" \
  bash -c "! grep -Eqi ' (x-forwarded-for|forwarded|surrogate-capability):' '$tmp/headers'"
leak=0
while read -r h; do [[ -n $h ]] && grep -qiF -- "$h" "$tmp/headers" && leak=1; done <<<"$host_names"
check "no header the registry saw names this machine ($(tr '\n' ' ' <<<"$host_names"))" [ "$leak" = 0 ]
note "headers the registry saw:"; indent <"$tmp/headers"

# Vector 4: names, never reverse lookups; only the ports a registry needs
probe "CONNECT to a raw IP whose PTR names an allowed host" '^(403|000)$' "$PTR" 0 -x "$P" "https://$PTR/" -k
probe "plain HTTP to a raw IP whose PTR names an allowed host" '^403$' "$PTR" 0 -x "$P" "http://$PTR/"
before=$(arrivals "tls $PTR")
ins timeout 10 openssl s_client -noservername -connect "$PTR:443" </dev/null >/dev/null 2>&1
sleep 0.2
check "redirected TLS without SNI to that address is closed, nothing arrives" [ "$(arrivals "tls $PTR")" = "$before" ]
ptr_q=$(awk -F. '{ print $4 "." $3 "." $2 "." $1 ".in-addr.arpa" }' <<<"$PTR")
check "no PTR question was asked for the address ($ptr_q)" [ "$(asked "^PTR $ptr_q\$")" = 0 ]
probe "explicit proxy, allowed host on port 8080 (http://allowed:8080/)" '^403$' "tcp $ALLOWED 8080" 0 \
  -x "$P" http://allowed.kiwi.test:8080/
probe "CONNECT to an allowed host on port 8080" '^(403|000)$' "tcp $ALLOWED 8080" 0 -x "$P" https://allowed.kiwi.test:8080/ -k
probe "redirected HTTP with Host allowed.kiwi.test:8080" '^403$' "tcp $ALLOWED 8080" 0 \
  http://allowed.kiwi.test:8080/ --connect-to "allowed.kiwi.test:8080:$ALLOWED:80"
# raw REQUEST: sent to the explicit proxy from the sandbox; prints the status line
raw() { ins timeout 10 bash -c "exec 3<>/dev/tcp/$GW/$EPORT; printf '%b' \"\$1\" >&3; head -n1 <&3" _ "$1" 2>/dev/null | tr -d '\r'; }
before=$(arrivals "$ALLOWED")
res=$(raw 'GET https://allowed.kiwi.test/ HTTP/1.1\r\nHost: allowed.kiwi.test\r\nConnection: close\r\n\r\n')
check "explicit proxy, GET https://... (TLS by Squid itself) refused ($res)" \
  bash -c "[[ '$res' == *' 403 '* && $(arrivals "$ALLOWED") == $before ]]"

# Vector 5: no name resolved before the allow-list decides
probe "resolve.kiwi.test (allowed, known only to DNS) is resolved and reached" '^200$' "http $ALLOWED resolve.kiwi.test" 1 \
  http://resolve.kiwi.test/ --resolve "resolve.kiwi.test:80:$ALLOWED"
check "the resolver saw that question (it is listening)" [ "$(asked '^A resolve.kiwi.test$')" -ge 1 ]
probe "redirected HTTP, Host not allowed" '^403$' "$OTHER" 0 http://leak-http.kiwi.test/ --resolve "leak-http.kiwi.test:80:$OTHER"
probe "explicit proxy, a name not allowed" '^403$' "$OTHER" 0 -x "$P" http://leak-proxy.kiwi.test/
probe "explicit proxy, CONNECT to a name not allowed" '^(403|000)$' "$OTHER" 0 -x "$P" https://leak-connect.kiwi.test/ -k
before=$(arrivals "tls $OTHER")
ins "$PY" "$here/egress-proxy/hello.py" --to "$OTHER:443" --sni-hex "$(printf leak-tls.kiwi.test | od -An -tx1 | tr -d ' \n')" >/dev/null
sleep 0.3
check "redirected TLS with an SNI not allowed is closed, nothing arrives" [ "$(arrivals "tls $OTHER")" = "$before" ]
check "no name off the list was asked of the resolver" [ "$(asked 'leak-')" = 0 ]
note "questions the resolver saw:"; indent <"$tmp/questions"

# Vector 4: Squid's own connections are held to egress.sh's deny list; it
# connects from the host namespace (OUTPUT), never through FORWARD.
apply() { inh bash "$EGRESS" apply --proxy "$PORTS" --install-bridge "$BR" "$@" 2>&1; }
egress_check() { inh bash "$EGRESS" check --proxy "$PORTS" --install-bridge "$BR" "$@" 2>&1; }
out=$(egress_check --deny "$OTHER:8080"); rc=$?
check "egress.sh check: the rules applied are exactly what apply adds (OUTPUT chain included)" [ "$rc" = 0 ]
indent <<<"$out"
check "egress.sh rules lists the OUTPUT jump for Squid's user" \
  bash -c "inh() { ip netns exec '$NH' \"\$@\"; }; inh bash '$EGRESS' rules --proxy '$PORTS' --install-bridge '$BR' | grep >/dev/null -- '-A OUTPUT -m owner --uid-owner $(id -u proxy) .*-j KIWI-EGRESS-OUTPUT'"
probe "Squid cannot reach the metadata address (meta.kiwi.test -> $META)" '^(403|5[0-9][0-9])$' "$META" 0 \
  -x "$P" http://meta.kiwi.test/
out=$(apply --deny "$ALLOWED:80"); rc=$?
check "egress.sh apply --deny $ALLOWED:80 (a fleet service where an allowed name points)" [ "$rc" = 0 ]
probe "Squid cannot reach a denied fleet service" '^5[0-9][0-9]$' "http $ALLOWED" 0 -x "$P" http://allowed.kiwi.test/
out=$(egress_check --deny "$OTHER:8080"); rc=$?
check "egress.sh check with other options reports the difference" [ "$rc" != 0 ]
apply --rfc1918 >/dev/null
probe "with --rfc1918, Squid cannot reach a private address" '^5[0-9][0-9]$' "http $ALLOWED" 0 -x "$P" http://allowed.kiwi.test/
apply --rfc1918 --allow "$ALLOWED/32" --dns "$DNS" >/dev/null
probe "with --rfc1918 --allow $ALLOWED/32, it can again" '^200$' "http $ALLOWED" 1 -x "$P" http://allowed.kiwi.test/
probe "... and still resolves through the resolver (--dns)" '^200$' "http $ALLOWED resolve.kiwi.test" 1 \
  http://resolve.kiwi.test/ --resolve "resolve.kiwi.test:80:$ALLOWED"
out=$(inh bash "$EGRESS" remove 2>&1); rc=$?
check "egress.sh remove" [ "$rc" = 0 ]
check "remove took the OUTPUT chain and its jump (IPv4 and IPv6)" \
  bash -c "for t in iptables ip6tables; do ! ip netns exec '$NH' \$t -S KIWI-EGRESS-OUTPUT >/dev/null 2>&1 && ! ip netns exec '$NH' \$t -S OUTPUT | grep >/dev/null KIWI || exit 1; done"
out=$(apply); rc=$?
check "egress.sh apply --proxy again" [ "$rc" = 0 ]
out=$(inh bash "$EGRESS" status 2>&1)
check "egress.sh status lists the OUTPUT chain with its counters" grep -q '^  KIWI-EGRESS-OUTPUT (packets bytes rule):' <<<"$out"
out=$(inh bash "$EGRESS" apply --install-bridge "$BR" 2>&1); rc=$?
check "egress.sh apply without --proxy takes the OUTPUT chain away" \
  bash -c "[ $rc = 0 ] && ! ip netns exec '$NH' iptables -S KIWI-EGRESS-OUTPUT >/dev/null 2>&1 && ! ip netns exec '$NH' iptables -S OUTPUT | grep >/dev/null KIWI"
out=$(inh bash "$EGRESS" check --install-bridge "$BR" 2>&1); rc=$?
check "... and check without --proxy passes" [ "$rc" = 0 ]
out=$(apply); rc=$?
check "egress.sh apply --proxy once more" [ "$rc" = 0 ]

# ---------------------------------------------------------------- the log ---

log=$tmp/proxy/access.log
hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
lines_before=$(wc -l <"$log")
forged="x.kiwi.test"$'\n'"1796168010.000 10.231.$A.99 443 NONE_NONE 0 CONNECT evil.kiwi.test evil.kiwi.test:443 0 0 - splice"$'\n'$'\e[31m'"red"
ins "$PY" "$here/egress-proxy/hello.py" --to "$OTHER:443" --sni-hex "$(hex "$forged")" >/dev/null
sleep 0.5
check "a hello whose SNI holds a newline and a whole line adds one line to the log" \
  [ "$(($(wc -l <"$log") - lines_before))" = 1 ]
check "no line of the log is for the forged client" bash -c "! grep -q '^1796168010.000 ' '$log'"
check "no escape byte reaches the log" bash -c "! grep -q $'\e' '$log'"
note "the line: $(tail -n1 "$log" | cut -c1-300)"

# A flood of refused hellos with 8 KiB SNIs, from several connections at
# once: the log (and its one old generation) stays under the bound.
bound=$((LOG_MAX_MB * 1024 * 1024))
t0=$(date +%s.%N)
made=$(ins "$PY" "$here/egress-proxy/hello.py" --to "$OTHER:443" --sni-hex "$(hex abcdefgh.)" --repeat 910 \
  --count 16000 --procs 8)
t1=$(date +%s.%N)
sleep 1.5
size=$(stat -c %s "$log") size0=$(stat -c %s "$log.0" 2>/dev/null || echo 0)
note "flood: $made refused hellos in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s; access.log $size bytes, access.log.0 $size0 bytes (bound $bound each)"
check "the flood was refused hellos, not errors (at least 10000 made)" [ "${made:-0}" -ge 10000 ]
check "the log was rotated (access.log.0 exists)" [ -f "$log.0" ]
# The watcher looks every second: a second of the flood may land past the
# bound before it rotates, and more when the machine is loaded (the watcher
# is a shell loop: on a suite's two busy cores its second took over two).
# The flood's rate, from what it wrote (one line per hello, each line no
# longer than the longest seen, and never counted as more than 2 KiB); four
# seconds of it allowed past the bound, but never more than half of what
# the flood wrote past the bound: without the rotation one file would hold
# it all, and fail.
longest=$(cat "$log" "$log.0" 2>/dev/null | awk '{ if (length > m) m = length } END { print m + 0 }')
line=$((longest + 1 > 2048 ? 2048 : longest + 1))
ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 + 1 }')
per_s=$((made * line * 1000 / ms))
total=$((made * line)) slack=$((per_s * 4))
check "the flood wrote more than the bound ($total > $bound bytes)" [ "$total" -gt "$bound" ]
((slack <= (total - bound) / 2)) || slack=$(((total - bound) / 2))
note "the flood wrote about $per_s bytes a second, $total in all; allowed past the bound: $slack"
check "access.log stays within its bound (+ 4 s of flood)" [ "$size" -le $((bound + slack)) ]
check "access.log.0 stays within its bound (+ 4 s of flood)" [ "$size0" -le $((bound + slack)) ]
check "no line of the log is longer than 2 KiB (longest $longest)" [ "$longest" -le 2048 ]
csize=$(stat -c %s "$tmp/proxy/cache.log" 2>/dev/null || echo 0)
check "cache.log stays within the bound too ($csize bytes)" [ "$csize" -le $((bound * 2)) ]
