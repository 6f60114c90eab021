#!/usr/bin/env bash
# shellcheck disable=SC2317  # functions run through check() and the EXIT trap
# tests/ops/egress/test_proxy_bump_netns.sh: the egress proxy's bumping
# (proxy.sh conf --bump-ca, --bump, --private-registry, --upstream-ca),
# decided from outside it, in the namespaces of proxy-netns.sh (a host
# running Squid and egress.sh apply --proxy, a sandbox on its bridge, an
# outside). The outside serves, on 443:
#   private.kiwi.test    a private registry, its certificate from a test CA
#                        (which Squid trusts by --upstream-ca); bumped, with
#                        the operator's credential (a canary) for /npm
#   pub.kiwi.test        a bumped public-like host (the same test CA)
#   untrusted.kiwi.test  bumped, its certificate self-signed (not trusted)
#   spliced.kiwi.test    allowed, not bumped: spliced as without bumping
# and records every request's method, path and headers.
# What it proves:
#   credential   only the operator's Authorization reaches the private
#                registry, only under its prefix, only over TLS, only on
#                a connection Squid made for that host (no CONNECT, SNI or
#                Host naming it elsewhere carries it); no Authorization or
#                Proxy-Authorization of the sandbox's reaches anything
#   read-only    PUT, POST, PATCH, DELETE and a GET with a body: refused,
#                nothing upstream, the method and host in the access log;
#                plain HTTP too, also with --read-only alone
#   splice       a host not bumped is spliced: its own certificate
#   upstream     a bumped host whose certificate is not trusted is an
#                error, never a response
#   secret       the canary is in nothing the sandbox received, in no log,
#                in no output of conf, check or run; squid.conf is 600 and
#                the proxy's, the CA key too
#   default      without the new options nothing of it is in squid.conf
#                (test_proxy_netns proves what that configuration does)
#   digest       with --digest (as the worker runs it), each response is
#                logged in fetch.log with the SHA-256 of the bytes the
#                sandbox received (a 3 MiB body too), its status, size,
#                URL and the sandbox's address; a HEAD without a digest;
#                a refused write not at all. kiwi-fetch-digest runs as
#                proxy with none of the caller's environment, and when it
#                dies Squid stops: nothing passes unrecorded
#   redirect     a private registry's redirect to its storage
#                (cdn.kiwi.test, on no list) is followed: exactly that URL,
#                bumped, read-only, no credential there; before it, other
#                URLs of that host, a public registry's redirect, or the
#                host under another SNI: refused, nothing arrives
# Runs as root; TAP output; exit 77 (skip) without root, squid, curl or
# python3, unless KIWI_REQUIRE_SERVICES=1.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/ops/egress/tap.sh
. "$here/tap.sh"
# shellcheck source=tests/ops/egress/proxy-netns.sh
. "$here/proxy-netns.sh"

PRIV=10.231.$C.210 PUB=10.231.$C.211 UNTR=10.231.$C.212 SPL=10.231.$C.213 CDN=10.231.$C.214 GH=10.231.$C.215
DIGEST=${KIWI_FETCH_DIGEST:-}
[[ -x $DIGEST ]] || skip_or_fail "kiwi-fetch-digest (KIWI_FETCH_DIGEST, the build's libexec/kiwi/kiwi-fetch-digest)"
CANARY=Bearer\ kiwi-canary-$pid-Zq7.x_9
SANDBOX_OWN='Bearer sandbox-own'

# ----------------------------------------------------------- the outside ---

netns_build "$PRIV" "$PUB" "$UNTR" "$SPL" "$CDN" "$GH"
mk() { openssl "$@" >/dev/null 2>&1 || bail "openssl $1 failed"; }
mk req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=test registry CA" -keyout "$tmp/testca.key" -out "$tmp/testca.pem" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign
mk req -newkey rsa:2048 -nodes -subj /CN=private.kiwi.test -keyout "$tmp/reg.key" -out "$tmp/reg.csr"
printf 'subjectAltName=DNS:private.kiwi.test,DNS:pub.kiwi.test,DNS:registry.npmjs.org,DNS:cdn.kiwi.test,DNS:services.gradle.org,DNS:gh.kiwi.test\n' >"$tmp/reg.ext"
mk x509 -req -in "$tmp/reg.csr" -CA "$tmp/testca.pem" -CAkey "$tmp/testca.key" -CAcreateserial -days 2 \
  -extfile "$tmp/reg.ext" -out "$tmp/reg.crt"
# self-signed, for untrusted.kiwi.test and spliced.kiwi.test
mk req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=spliced.kiwi.test -keyout "$tmp/out.key" -out "$tmp/out.crt" \
  -addext subjectAltName=DNS:spliced.kiwi.test,DNS:untrusted.kiwi.test
: >"$tmp/requests"
outside_start --addr "$PRIV" --addr "$PUB" --addr "$UNTR" --addr "$SPL" --addr "$CDN" --addr "$GH" --cert "$tmp/out.crt" \
  --key "$tmp/out.key" --tls "$PRIV=$tmp/reg.crt:$tmp/reg.key" --tls "$PUB=$tmp/reg.crt:$tmp/reg.key" \
  --tls "$CDN=$tmp/reg.crt:$tmp/reg.key" --tls "$GH=$tmp/reg.crt:$tmp/reg.key" --requests "$tmp/requests" --

# registry.npmjs.org and services.gradle.org (for --bump-registries) are
# the outside's pub address; gh.kiwi.test stands for GitHub's release page:
# Squid resolves them from this file alone, nothing leaves the namespaces
printf '%s private.kiwi.test\n%s pub.kiwi.test\n%s untrusted.kiwi.test\n%s spliced.kiwi.test\n%s registry.npmjs.org\n%s cdn.kiwi.test\n%s services.gradle.org\n%s gh.kiwi.test\n' \
  "$PRIV" "$PUB" "$UNTR" "$SPL" "$PUB" "$CDN" "$PUB" "$GH" >"$tmp/hosts"
printf '%s\n' "$CANARY" >"$tmp/cred"
chmod 600 "$tmp/cred"
said=$tmp/said # everything conf, check and run printed
: >"$said"

# ------------------------------------------------- without the new options ---

base=(--listen "$GW" --ports "$PORTS" --allow spliced.kiwi.test --allow pub.kiwi.test --hosts-file "$tmp/hosts")
"$PROXY" conf --dir "$tmp/plain" "${base[@]}" >>"$said" 2>&1
plain=$tmp/plain/squid.conf
check "without the new options: no bumping, no read-only rule, no header rule" \
  bash -c "! grep -Eq 'ssl-bump tls-cert=[^ ]*ca.pem|sslcrtd|request_header_add|Authorization|kiwi_read|generate-host-certificates=on' '$plain'"

# ------------------------------------------------------------ bad input ---

bad() { # bad DESCRIPTION WANT_IN_ERROR ARG...: conf refuses, says why, prints no canary
  local d=$1 want=$2 out rc
  shift 2
  out=$("$PROXY" conf --dir "$tmp/bad" "${base[@]}" "$@" 2>&1); rc=$?
  printf '%s\n' "$out" >>"$said"
  if [[ $rc != 0 && $out == *"$want"* ]]; then ok "$d refused ($out)"; else notok "$d: status $rc, said '$out'"; fi
}
bad "--bump without --bump-ca" "need --bump-ca" --bump pub.kiwi.test
bad "--bump of a host off the allow-list" "not on the allow-list" --bump-ca "$tmp/ca" --bump other.kiwi.test
bad "--private-registry without =@FILE" "want HOST[/PREFIX]=@FILE" --bump-ca "$tmp/ca" --private-registry private.kiwi.test/npm
bad "--private-registry with a raw address" "bad --private-registry host" --bump-ca "$tmp/ca" --private-registry "$PRIV/npm=@$tmp/cred"
bad "--private-registry with a .. segment" "bad --private-registry path" --bump-ca "$tmp/ca" \
  --private-registry "private.kiwi.test/npm/..=@$tmp/cred"
bad "--private-registry with an unreadable file" "cannot read the credential file" --bump-ca "$tmp/ca" \
  --private-registry "private.kiwi.test=@$tmp/none"
printf '%s"\nrequest_header_add X "y" all\n' "$CANARY" >"$tmp/cred-bad"
bad "a credential file with a quote and a second line" "must hold the Authorization value on one line" --bump-ca "$tmp/ca" \
  --private-registry "private.kiwi.test=@$tmp/cred-bad"
bad "--bump-ca with a space in its path" "no spaces or quotes" --bump-ca "$tmp/c a" --bump pub.kiwi.test
bad "two credentials for overlapping paths" "overlap" --bump-ca "$tmp/ca" \
  --private-registry "private.kiwi.test/npm=@$tmp/cred" --private-registry "private.kiwi.test/npm/x=@$tmp/cred"
bad "--bump-registries without --ecosystem" "needs --ecosystem" --bump-ca "$tmp/ca" --bump-registries

# ------------------------------------------------------------ the proxy ---

out=$("$PROXY" conf --dir "$tmp/proxy" "${base[@]}" --allow untrusted.kiwi.test --bump-ca "$tmp/ca" --bump pub.kiwi.test \
  --bump untrusted.kiwi.test --private-registry "private.kiwi.test/npm=@$tmp/cred" --upstream-ca "$tmp/testca.pem" 2>&1); rc=$?
printf '%s\n' "$out" >>"$said"
check "proxy.sh conf with --bump-ca, --bump, --private-registry, --upstream-ca" [ "$rc" = 0 ]
conf=$tmp/proxy/squid.conf
out=$("$PROXY" check --dir "$tmp/proxy" 2>&1); rc=$?
printf '%s\n' "$out" >>"$said"
check "squid -k parse accepts it (proxy.sh check)" [ "$rc" = 0 ]
indent <<<"$out"
check "squid.conf (it holds the credential) is mode 600, owned by proxy" [ "$(stat -c %a:%U "$conf")" = 600:proxy ]
check "the CA key is mode 600, owned by proxy" [ "$(stat -c %a:%U "$tmp/ca/ca.key")" = 600:proxy ]
check "the minted certificates' store is mode 700, owned by proxy" [ "$(stat -c %a:%U "$tmp/proxy/ssl_db")" = 700:proxy ]
check "ca.pem is a CA (CA:TRUE, keyCertSign) named Kiwi egress proxy CA" bash -c "
  openssl x509 -in '$tmp/ca/ca.pem' -noout -text | grep >/dev/null 'CA:TRUE' &&
  openssl x509 -in '$tmp/ca/ca.pem' -noout -text | grep >/dev/null 'Certificate Sign' &&
  openssl x509 -in '$tmp/ca/ca.pem' -noout -subject | grep >/dev/null 'Kiwi egress proxy CA'"
# a check that fails quotes the line at fault (Squid's "Bungled"): never
# the credential in it
printf 'request_header_add Authorization "%s" kiwi_no_such_acl\n' "$CANARY" >>"$conf"
out=$("$PROXY" check --dir "$tmp/proxy" 2>&1); rc=$?
printf '%s\n' "$out" >>"$said"
check "a failing check quotes the line at fault, its credential masked ($(grep -m1 Bungled <<<"$out" | cut -c1-160))" \
  bash -c "[[ $rc != 0 && '$(grep -c 'Bungled.*request_header_add Authorization \"(credential)\"' <<<"$out")' -ge 1 ]]"
sed -i '$d' "$conf"
ANTHROPIC_API_KEY=sk-test-not-a-key squid_start "$tmp/proxy"
check "cache.log is Squid's own (owned by proxy, its start in it: $(stat -c %U "$tmp/proxy/cache.log"))" \
  bash -c "[[ \$(stat -c %U '$tmp/proxy/cache.log') == proxy ]] && grep -q 'Starting Squid Cache' '$tmp/proxy/cache.log'"
out=$(inh bash "$EGRESS" apply --proxy "$PORTS" --install-bridge "$BR" 2>&1); rc=$?
check "egress.sh apply --proxy inside the host namespace (the intercepted ports)" [ "$rc" = 0 ]

# --------------------------------------------------------------- probes ---

CA=$tmp/ca/ca.pem
seen=$tmp/seen # every header and body the sandbox received
: >"$seen"
# fetch ARGS...: curl from the sandbox; prints the status, keeps what came back
fetch() {
  local res
  res=$(ins curl -s -D "$tmp/resp.h" -o "$tmp/resp.b" -w '%{http_code}' --max-time 10 "$@" 2>/dev/null)
  cat "$tmp/resp.h" "$tmp/resp.b" >>"$seen" 2>/dev/null
  rm -f "$tmp/resp.h" "$tmp/resp.b"
  echo "$res"
}
# reqs ADDR [METHOD] [PATH]: the requests that arrived at ADDR
reqs() { "$PY" -c '
import json, sys
a = sys.argv[2:] + [None, None]
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    n += r["addr"] == a[0] and a[1] in (None, "", r["method"]) and a[2] in (None, "", r["path"])
print(n)' "$tmp/requests" "$@"; }
# auths ADDR PATH: the Authorization values that arrived at ADDR for PATH
auths() { "$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["addr"] == sys.argv[2] and r["path"] == sys.argv[3]:
        print("|".join(v for k, v in r["headers"] if k.lower() in ("authorization", "proxy-authorization")) or "-")
' "$tmp/requests" "$@"; }
log=$tmp/proxy/access.log

# get DESCRIPTION WANT_STATUS ADDR PATH WANT_AUTH CURL_ARGS...: one request,
# its status, exactly one arrival at ADDR for PATH carrying WANT_AUTH ("-":
# none)
get() {
  local d=$1 want=$2 addr=$3 path=$4 auth=$5 before res got
  shift 5
  before=$(reqs "$addr" "" "$path")
  res=$(fetch "$@")
  sleep 0.2
  got=$(auths "$addr" "$path" | tail -n +$((before + 1)))
  if [[ $res == "$want" && $(reqs "$addr" "" "$path") == $((before + 1)) && $got == "$auth" ]]; then ok "$d (status $res)"
  else notok "$d: status '$res' (want $want), arrivals now $(reqs "$addr" "" "$path") (before $before), Authorization '${got//$CANARY/(the canary)}'"; fi
}
# refused DESCRIPTION METHOD URL HOST CURL_ARGS...: 403, nothing at all
# arrives, and the access log has the method and host
refused() {
  local d=$1 m=$2 url=$3 host=$4 before lines res
  shift 4
  before=$(wc -l <"$tmp/requests") lines=$(wc -l <"$log")
  res=$(fetch -X "$m" --data kiwi-upload "$@" "$url")
  sleep 0.2
  if [[ $res == 403 && $(wc -l <"$tmp/requests") == "$before" ]] &&
    tail -n +$((lines + 1)) "$log" | grep >/dev/null -E " TCP_DENIED 403 $m [^ ]+ [a-z]+://${host}[:/]"; then ok "$d (403, nothing upstream, logged)"
  else notok "$d: status '$res', $(($(wc -l <"$tmp/requests") - before)) request(s) arrived; log: $(tail -n +$((lines + 1)) "$log" | tr '\n' ' ')"; fi
}
U=https://private.kiwi.test

# The private registry, by the explicit proxy (CONNECT, bumped)
get "GET under the prefix: the operator's credential, once" 200 "$PRIV" /npm/pkg "$CANARY" --cacert "$CA" -x "$P" "$U/npm/pkg"
get "... with the sandbox's own Authorization: replaced by ours" 200 "$PRIV" /npm/own "$CANARY" --cacert "$CA" -x "$P" \
  -H "Authorization: $SANDBOX_OWN" "$U/npm/own"
get "... with a Proxy-Authorization: not forwarded" 200 "$PRIV" /npm/pa "$CANARY" --cacert "$CA" -x "$P" \
  -H "Proxy-Authorization: Basic c2FuZGJveDpvd24=" "$U/npm/pa"
get "GET outside the prefix: no credential" 200 "$PRIV" /other/pkg - --cacert "$CA" -x "$P" "$U/other/pkg"
get "GET of /npmx (a prefix of the name, not of the path): no credential" 200 "$PRIV" /npmx - --cacert "$CA" -x "$P" "$U/npmx"
get "... outside the prefix with the sandbox's Authorization: none arrives" 200 "$PRIV" /other/own - --cacert "$CA" -x "$P" \
  -H "Authorization: $SANDBOX_OWN" "$U/other/own"
get "plain HTTP under the prefix: no credential (TLS only)" 200 "$PRIV" /npm/plain - -x "$P" http://private.kiwi.test/npm/plain
before=$(wc -l <"$tmp/requests")
res=$(fetch --path-as-is --cacert "$CA" -x "$P" "$U/npm/../admin")
res2=$(fetch --cacert "$CA" -x "$P" "$U/npm/%2e%2e/admin")
sleep 0.2
check "a dot segment or an encoded one under the prefix is refused, nothing arrives ($res, $res2)" \
  [ "$res:$res2:$(wc -l <"$tmp/requests")" = "403:403:$before" ]
got=$(fetch --cacert "$CA" -x "$P" -w '%{http_code} %{ssl_verify_result}' "$U/npm/pkg")
check "the sandbox verified the private registry's certificate against Kiwi's CA ($got)" [ "$got" = "200 0" ]
issuer=$(ins timeout 10 openssl s_client -proxy "$GW:$EPORT" -connect private.kiwi.test:443 -servername private.kiwi.test \
  </dev/null 2>/dev/null | openssl x509 -noout -issuer 2>/dev/null)
check "the certificate the sandbox gets for private.kiwi.test is Kiwi's ($issuer)" grep -q 'Kiwi egress proxy CA' <<<"$issuer"
# a registry whose answer Squid cannot pass on (two Content-Lengths):
# Squid's error page, which quotes what it received, holds no credential
before=$(wc -c <"$seen")
res=$(fetch --cacert "$CA" -x "$P" "$U/npm/kiwi-bad")
sleep 0.2
check "an invalid answer to a request with the credential: Squid's error page ($res), no canary in it" \
  bash -c "[[ '$res' == 502 && '$(reqs "$PRIV" GET /npm/kiwi-bad)' -ge 1 ]] && ! tail -c +$((before + 1)) '$seen' | grep >/dev/null -F '${CANARY#Bearer }'"
get "a bumped public host: no Authorization of anyone's" 200 "$PUB" /pkg - --cacert "$CA" -x "$P" \
  -H "Authorization: $SANDBOX_OWN" https://pub.kiwi.test/pkg
# CONNECT to a host not bumped, with private.kiwi.test's name inside (its
# SNI and Host): a tunnel, and nothing of ours goes through it
get "CONNECT spliced.kiwi.test with SNI and Host private.kiwi.test: tunnelled, no credential" 200 "$SPL" /npm/tunnel - \
  -k -x "$P" --connect-to private.kiwi.test:443:spliced.kiwi.test:443 "$U/npm/tunnel"
# CONNECT to one bumped host with another's name inside (SNI and Host
# private.kiwi.test, at pub.kiwi.test, whose certificate here is valid for
# both names): closed, so the credential never goes to pub.kiwi.test; and
# the same by the intercepted 443 (an address that is not the name's)
mismatch() {
  local d=$1 before res
  shift
  before=$(wc -l <"$tmp/requests")
  res=$(fetch --cacert "$CA" "$@" "$U/npm/mismatch")
  sleep 0.2
  if [[ $res != 2* && $(wc -l <"$tmp/requests") == "$before" ]]; then ok "$d (status $res, nothing arrives)"
  else notok "$d: status $res, $(($(wc -l <"$tmp/requests") - before)) request(s) arrived: $(auths "$PUB" /npm/mismatch | sed "s/${CANARY#Bearer }/(the canary)/g")"; fi
}
mismatch "CONNECT pub.kiwi.test with SNI and Host private.kiwi.test: closed" -x "$P" \
  --connect-to private.kiwi.test:443:pub.kiwi.test:443
mismatch "intercepted TLS to pub.kiwi.test's address with SNI and Host private.kiwi.test: closed" \
  --resolve "private.kiwi.test:443:$PUB"
# inside a bumped connection to pub.kiwi.test, a request whose Host is
# private.kiwi.test (Squid forwards it on the connection to pub.kiwi.test)
before=$(wc -l <"$tmp/requests")
res=$(fetch --cacert "$CA" -x "$P" -H "Host: private.kiwi.test" https://pub.kiwi.test/npm/host)
sleep 0.2
check "CONNECT pub.kiwi.test, then Host private.kiwi.test: 403, nothing arrives (status $res)" \
  bash -c "[[ '$res' == 403 && '$(wc -l <"$tmp/requests")' == '$before' ]]"

# Read-only
for m in PUT POST DELETE PATCH; do
  refused "$m to the private registry (bumped)" "$m" "$U/npm/pkg" private.kiwi.test --cacert "$CA" -x "$P"
done
refused "POST to a bumped public host" POST https://pub.kiwi.test/upload pub.kiwi.test --cacert "$CA" -x "$P"
refused "plain HTTP POST by the explicit proxy" POST http://spliced.kiwi.test/upload spliced.kiwi.test -x "$P"
refused "plain HTTP PUT to the private registry" PUT http://private.kiwi.test/npm/pkg private.kiwi.test -x "$P"
res=$(fetch -I --cacert "$CA" -x "$P" "$U/npm/pkg")
check "HEAD passes ($res)" [ "$res" = 200 ]
before=$(wc -l <"$tmp/requests")
res=$(fetch -X GET --data kiwi-upload --cacert "$CA" -x "$P" "$U/npm/pkg")
sleep 0.2
check "a GET with a Content-Length body: refused ($res, by Squid before the rules), nothing arrives" \
  bash -c "[[ '$res' == 4* && '$(wc -l <"$tmp/requests")' == '$before' ]]"
refused "a GET with a chunked body" GET "$U/npm/pkg" private.kiwi.test --cacert "$CA" -x "$P" -H "Transfer-Encoding: chunked"
# a client's GET https:// to the explicit proxy (TLS made by Squid, which
# would add the credential to what came in the clear): refused
before=$(wc -l <"$tmp/requests")
res=$(ins timeout 10 bash -c "exec 3<>/dev/tcp/$GW/$EPORT; printf 'GET $U/npm/pkg HTTP/1.1\r\nHost: private.kiwi.test\r\nConnection: close\r\n\r\n' >&3; head -n1 <&3" 2>/dev/null | tr -d '\r')
sleep 0.2
check "GET https://private.kiwi.test/... in the clear to the explicit proxy: 403, nothing arrives ($res)" \
  bash -c "[[ '$res' == *' 403 '* && '$(wc -l <"$tmp/requests")' == '$before' ]]"

# A host not bumped is spliced: its own certificate, as without bumping
get "GET https://spliced.kiwi.test/ with the outside's certificate" 200 "$SPL" / - --cacert "$tmp/out.crt" -x "$P" \
  https://spliced.kiwi.test/
issuer=$(ins timeout 10 openssl s_client -proxy "$GW:$EPORT" -connect spliced.kiwi.test:443 -servername spliced.kiwi.test \
  </dev/null 2>/dev/null | openssl x509 -noout -issuer 2>/dev/null)
check "the certificate the sandbox gets for spliced.kiwi.test is the outside's ($issuer)" grep -q 'CN = spliced.kiwi.test' <<<"$issuer"
res=$(fetch --cacert "$CA" -x "$P" https://spliced.kiwi.test/)
check "Kiwi's CA does not verify spliced.kiwi.test (status $res)" [ "$res" = 000 ]

# Upstream verification: a bumped host whose certificate is not trusted
before=$(reqs "$UNTR")
res=$(fetch --cacert "$CA" -x "$P" https://untrusted.kiwi.test/pkg)
sleep 0.2
check "a bumped host with an untrusted certificate: an error ($res), no request reaches it" \
  bash -c "[[ '$res' != 2* && '$(reqs "$UNTR")' == '$before' ]]"

# The intercepted path (the nat rules send the sandbox's 443 to Squid)
R=(--resolve "private.kiwi.test:443:$PRIV")
get "intercepted TLS: GET under the prefix, the operator's credential" 200 "$PRIV" /npm/icpt "$CANARY" --cacert "$CA" \
  -H "Authorization: $SANDBOX_OWN" "${R[@]}" "$U/npm/icpt"
get "intercepted TLS: outside the prefix, none" 200 "$PRIV" /other/icpt - --cacert "$CA" "${R[@]}" "$U/other/icpt"
refused "intercepted TLS: PUT to the private registry" PUT "$U/npm/icpt" private.kiwi.test --cacert "$CA" "${R[@]}"
get "intercepted TLS: spliced.kiwi.test, the outside's certificate" 200 "$SPL" /icpt - --cacert "$tmp/out.crt" \
  --resolve "spliced.kiwi.test:443:$SPL" https://spliced.kiwi.test/icpt

# The secret, searched from outside
check "the sandbox's Authorization reached nothing" bash -c "! grep -qF '${SANDBOX_OWN#Bearer }' '$tmp/requests'"
check "the canary reached no address but the private registry's" \
  [ "$(grep -F "${CANARY#Bearer }" "$tmp/requests" | grep -vc "\"addr\": \"$PRIV\"")" = 0 ]
check "nothing the sandbox received holds the canary ($(wc -c <"$seen") bytes)" bash -c "! grep -qF '${CANARY#Bearer }' '$seen'"
cat "$tmp/squid.out" >>"$said"
check "nothing conf, check or run printed holds the canary" bash -c "! grep -qF '${CANARY#Bearer }' '$said'"
check "access.log and cache.log hold no canary" bash -c "! grep -qF '${CANARY#Bearer }' '$log' '$tmp/proxy/cache.log'"
note "access log (last lines):"
tail -n 12 "$log" | indent

# --read-only alone: nothing bumped, plain HTTP held to GET and HEAD
squid_stop
out=$("$PROXY" conf --dir "$tmp/ro" "${base[@]}" --read-only 2>&1); rc=$?
check "proxy.sh conf --read-only (no CA, nothing bumped)" [ "$rc" = 0 ]
check "... bumps nothing (no ssl-bump on the explicit port, no certificate generator)" \
  bash -c "! grep -Eq '^http_port .*ssl-bump|^sslcrtd_program|generate-host-certificates=on' '$tmp/ro/squid.conf'"
squid_start "$tmp/ro"
log=$tmp/ro/access.log
refused "--read-only: plain HTTP POST" POST http://spliced.kiwi.test/upload spliced.kiwi.test -x "$P"
get "--read-only: plain HTTP GET" 200 "$SPL" /ro - -x "$P" http://spliced.kiwi.test/ro
get "--read-only: GET https:// spliced (the outside's certificate), the sandbox's Authorization inside TLS untouched" 200 \
  "$SPL" /ro-tls "$SANDBOX_OWN" --cacert "$tmp/out.crt" -x "$P" -H "Authorization: $SANDBOX_OWN" https://spliced.kiwi.test/ro-tls

# --bump-registries (what the worker gives): every host of --ecosystem
# bumped, so a registry takes reads alone; registry.npmjs.org is the
# outside's pub address here (the hosts file)
squid_stop
out=$("$PROXY" conf --dir "$tmp/regs" "${base[@]}" --ecosystem npm --bump-ca "$tmp/ca" --bump-registries \
  --upstream-ca "$tmp/testca.pem" --digest "$DIGEST" 2>&1); rc=$?
printf '%s\n' "$out" >>"$said"
check "proxy.sh conf --ecosystem npm --bump-ca --bump-registries --digest" [ "$rc" = 0 ]
check "... bumps npm's registries and no other host" \
  grep -qx 'acl kiwi_bump dstdomain -n registry.npmjs.org registry.yarnpkg.com' "$tmp/regs/squid.conf"
out=$("$PROXY" check --dir "$tmp/regs" 2>&1); rc=$?
check "squid -k parse accepts the ICAP lines (proxy.sh check)" [ "$rc" = 0 ]
indent <<<"$out"
out=$(bash "$PROXY" run --dir "$tmp/regs" --digest "$tmp/none" 2>&1); rc=$?
check "run --digest with no such binary: refused ($out)" bash -c "[[ $rc != 0 && '$out' == *'not an executable'* ]]"
ANTHROPIC_API_KEY=sk-test-not-a-key squid_start "$tmp/regs" --digest "$DIGEST"
log=$tmp/regs/access.log
N=https://registry.npmjs.org
get "--bump-registries: GET from registry.npmjs.org, no Authorization of the sandbox's" 200 "$PUB" /left-pad - \
  --cacert "$CA" -x "$P" -H "Authorization: $SANDBOX_OWN" "$N/left-pad"
issuer=$(ins timeout 10 openssl s_client -proxy "$GW:$EPORT" -connect registry.npmjs.org:443 -servername registry.npmjs.org \
  </dev/null 2>/dev/null | openssl x509 -noout -issuer 2>/dev/null)
check "--bump-registries: the certificate the sandbox gets for registry.npmjs.org is Kiwi's ($issuer)" \
  grep -q 'Kiwi egress proxy CA' <<<"$issuer"
refused "--bump-registries: PUT (npm publish) to registry.npmjs.org" PUT "$N/kiwi-leak" registry.npmjs.org --cacert "$CA" -x "$P"
refused "--bump-registries: POST (npm login) to registry.npmjs.org" POST "$N/-/v1/login" registry.npmjs.org --cacert "$CA" -x "$P"
refused "--bump-registries: intercepted PUT to registry.npmjs.org" PUT "$N/kiwi-leak" registry.npmjs.org --cacert "$CA" \
  --resolve "registry.npmjs.org:443:$PUB"
get "--bump-registries: a listed host that is not a registry stays spliced (the outside's certificate)" 200 "$SPL" /regs - \
  --cacert "$tmp/out.crt" -x "$P" https://spliced.kiwi.test/regs

# The fetch digest: what the sandbox received, hashed from outside it
flog=$tmp/regs/fetch.log
dpid=$(inh pgrep -f "kiwi-fetch-digest --log $flog")
# digest_line URL: fetch.log's fields for URL (the last line naming it)
digest_line() { awk -v u="$1" '$7 == u { l = $0 } END { print l }' "$flog"; }
for path in left-pad kiwi-big-3m; do
  ins curl -s --cacert "$CA" -x "$P" -o "$tmp/got.$path" --max-time 30 "$N/$path"
  sleep 0.3
  want=$(sha256sum <"$tmp/got.$path" | cut -d' ' -f1) size=$(stat -c %s "$tmp/got.$path")
  read -r _ client method status bytes sha url <<<"$(digest_line "$N/$path")"
  check "fetch.log: GET $path from the sandbox, 200, $size bytes, the SHA-256 of what it received (${sha:0:16}...)" \
    [ "$client $method $status $bytes $sha $url" = "$SBX GET 200 $size $want $N/$path" ]
done
check "... the 3 MiB body came whole ($(stat -c %s "$tmp/got.kiwi-big-3m") bytes)" [ "$(stat -c %s "$tmp/got.kiwi-big-3m")" = 3145728 ]
ins curl -s -I --cacert "$CA" -x "$P" -o /dev/null --max-time 10 "$N/head-only"
sleep 0.3
read -r _ client method status bytes sha _ <<<"$(digest_line "$N/head-only")"
check "fetch.log: a HEAD, no body, no digest ($method $status $bytes $sha)" [ "$method $status $bytes $sha" = "HEAD 200 0 -" ]
lines=$(wc -l <"$flog")
refused "--digest: PUT to registry.npmjs.org still refused" PUT "$N/kiwi-leak2" registry.npmjs.org --cacert "$CA" -x "$P"
check "... and nothing of it in fetch.log" [ "$(wc -l <"$flog")" = "$lines" ]
listen=$(inh ss -ltnpH | grep '"kiwi-fetch-di' | awk '{print $4}' | tr '\n' ' ')
check "kiwi-fetch-digest runs as proxy, listening on 127.0.0.1 alone ($listen)" \
  bash -c "[[ -n '$dpid' && \$(ps -o user= -p '$dpid') == proxy && '$listen' =~ ^127\.0\.0\.1:[0-9]+\ \$ ]]"
check "kiwi-fetch-digest has none of the caller's environment (only $(tr '\0' ' ' <"/proc/$dpid/environ"))" \
  bash -c "! grep -qa ANTHROPIC_API_KEY '/proc/$dpid/environ'"
note "fetch.log:"
indent <"$flog"
kill "$dpid"
for _ in $(seq 50); do kill -0 "$squid_pid" 2>/dev/null || break; sleep 0.1; done
check "when kiwi-fetch-digest dies, Squid stops (its caller starts both again)" bash -c "! kill -0 '$squid_pid' 2>/dev/null"
squid_pid=''

# Redirects: the private registry sends a download to its storage,
# cdn.kiwi.test, which no list names
out=$("$PROXY" conf --dir "$tmp/redir" "${base[@]}" --ecosystem npm --ecosystem gradle --bump-ca "$tmp/ca" --bump-registries \
  --private-registry "private.kiwi.test/npm=@$tmp/cred" --upstream-ca "$tmp/testca.pem" --digest "$DIGEST" 2>&1); rc=$?
printf '%s\n' "$out" >>"$said"
check "proxy.sh conf with a private registry and --digest" [ "$rc" = 0 ]
out=$("$PROXY" check --dir "$tmp/redir" 2>&1); rc=$?
printf '%s\n' "$out" >>"$said"
check "squid -k parse accepts the redirect helper (proxy.sh check)" [ "$rc" = 0 ]
indent <<<"$out"
squid_start "$tmp/redir" --digest "$DIGEST"
log=$tmp/redir/access.log
D=https://cdn.kiwi.test
# nothing_at DESCRIPTION CURL_ARGS...: no 2xx, nothing arrives at the storage
nothing_at() {
  local d=$1 before res
  shift
  before=$(reqs "$CDN")
  res=$(fetch "$@")
  sleep 0.2
  if [[ $res != 2* && $(reqs "$CDN") == "$before" ]]; then ok "$d (status $res, nothing arrives)"
  else notok "$d: status $res, $(($(reqs "$CDN") - before)) request(s) arrived at the storage"; fi
}
nothing_at "before any redirect, the storage is refused" --cacert "$CA" -x "$P" "$D/blob/pkg-1?sig=kiwi"
nothing_at "a public registry's redirect to it is not followed" --cacert "$CA" -x "$P" -L \
  "https://registry.npmjs.org/kiwi-redirect-to-cdn.kiwi.test-pkg-0"
get "the private registry's redirect, followed: the file from the storage, no Authorization there" 200 "$CDN" \
  "/blob/pkg-1?sig=kiwi" - --cacert "$CA" -x "$P" -L "$U/npm/kiwi-redirect-to-cdn.kiwi.test-pkg-1"
check "... and the registry's own request had the operator's credential" \
  bash -c "[[ \$(grep -c 'kiwi-redirect-to-cdn.kiwi.test-pkg-1' '$tmp/requests') == 1 ]] && grep 'kiwi-redirect-to-cdn.kiwi.test-pkg-1' '$tmp/requests' | grep >/dev/null -F '${CANARY#Bearer }'"
get "... again within its time: the same URL" 200 "$CDN" "/blob/pkg-1?sig=kiwi" - --cacert "$CA" -x "$P" "$D/blob/pkg-1?sig=kiwi"
nothing_at "... another path of the storage: refused" --cacert "$CA" -x "$P" "$D/blob/pkg-2?sig=kiwi"
nothing_at "... the same path with another query: refused" --cacert "$CA" -x "$P" "$D/blob/pkg-1?sig=forged"
refused "... a PUT to the redirect's URL" PUT "$D/blob/pkg-1?sig=kiwi" cdn.kiwi.test --cacert "$CA" -x "$P"
nothing_at "... CONNECT cdn.kiwi.test with the SNI private.kiwi.test (no tunnel under an allowed name)" -k -x "$P" \
  --connect-to private.kiwi.test:443:cdn.kiwi.test:443 "$U/blob/pkg-1?sig=kiwi"
nothing_at "... intercepted TLS to the storage's address (only the explicit proxy follows)" --cacert "$CA" \
  --resolve "cdn.kiwi.test:443:$CDN" "$D/blob/pkg-1?sig=kiwi"
read -r _ client method status bytes sha url <<<"$(awk '$7 ~ /cdn.kiwi.test/ { l = $0 } END { print l }' "$tmp/redir/fetch.log")"
check "fetch.log: the storage's file with its digest ($method $status $bytes ${sha:0:16}... $url)" \
  bash -c "[[ '$client $method $status' == '$SBX GET 200' && ${#sha} == 64 && '$url' == 'https://cdn.kiwi.test/blob/pkg-1?sig=kiwi' ]]"
# A parallel install (uv: dozens of downloads at once) with the redirect
# helper configured: a listed host's requests never wait on it. Asked
# first, its eight children queued and Squid refused the rest with 403
# (pallets/jinja's uv sync, from the benchmark)
check "the listed hosts are allowed before the redirect helper is asked" \
  awk '/^http_access allow kiwi_allowed$/ { a = NR } /^http_access allow kiwi_redirected_to$/ { r = NR }
       END { exit !(a && r && a < r) }' "$tmp/redir/squid.conf"
# The Gradle wrapper's download: services.gradle.org (a public registry
# whose redirects are followed) sends it to GitHub's release page
# (gh.kiwi.test), which sends it to its storage; each hop exactly the URL
# named, up to three
check "redirects are noted for the private registry and services.gradle.org alone" \
  [ "$(sort "$tmp/redir/redirect-from" | tr '\n' ' ')" = "private.kiwi.test services.gradle.org " ]
G=https://services.gradle.org/distributions
get "services.gradle.org's redirect, and the release page's, followed: the file from the storage" 200 "$CDN" \
  "/blob/gradle-9-bin.zip?sig=kiwi?sig=kiwi" - --cacert "$CA" -x "$P" -L \
  "$G/kiwi-redirect-to-gh.kiwi.test-kiwi-redirect-to-cdn.kiwi.test-gradle-9-bin.zip"
check "... the release page had exactly the URL it was sent to (one request)" \
  [ "$(reqs "$GH" GET "/blob/kiwi-redirect-to-cdn.kiwi.test-gradle-9-bin.zip?sig=kiwi")" = 1 ]
nothing_at "... another path of the release page's host: refused" --cacert "$CA" -x "$P" "https://gh.kiwi.test/blob/other"
before=$(reqs "$GH")
res=$(fetch --cacert "$CA" -x "$P" -L \
  "$G/kiwi-redirect-to-gh.kiwi.test-kiwi-redirect-to-cdn.kiwi.test-kiwi-redirect-to-gh.kiwi.test-kiwi-redirect-to-cdn.kiwi.test-deep")
sleep 0.2
check "a fourth hop is not followed ($res): the first and third arrive at the release page, nothing at the fourth's URL" \
  bash -c "[[ '$res' != 2* && '$(reqs "$GH")' == $((before + 2)) && '$(grep -c '/blob/deep' "$tmp/requests")' == 0 ]]"
note "redirects noted:"
indent <"$tmp/redir/redirects.log"
squid_stop