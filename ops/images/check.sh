#!/usr/bin/env bash
# ops/images/check.sh: checks the built sandbox images, as a sandbox uses them.
#
# Usage: ops/images/check.sh [IMAGE...]
#        ops/images/check.sh --trust-store-only REFERENCE...
#
#   IMAGE   a name (base node18 ... java17) or a reference (kiwi/node:20);
#           default: every image of recipes/
#   --trust-store-only  step 2 alone, for any image reference
#
# For each image, with "docker run --rm --network none":
#   1. runs the recipe's checks (node -v, npm -v, pnpm -v, yarn -v, python3 -V,
#      pytest --version, go version, cargo --version, ruby -v, bundle -v,
#      php -v, composer --version, java -version, mvn -v, gradle -v, and small
#      offline builds), as the image's own user in /workspace, and prints each
#      version; a failing command or an unexpected version is a failure;
#   2. verifies the trust store: /etc/ssl/certs/ca-certificates.crt holds
#      exactly Debian's ca-certificates, nothing is in
#      /usr/local/share/ca-certificates, /etc/ssl/certs holds nothing else,
#      Java's store (if any) holds only Debian's certificates, no file in the
#      image contains a certificate that only the host trusts (the host bundle,
#      KIWI_HOST_CA_BUNDLE, default /etc/ssl/certs/ca-certificates.crt, minus
#      Debian's: the TLS-intercepting proxy's CA), and the image's environment
#      points no tool at an extra CA bundle.
# A missing image is a failure; an image built from an older recipe is
# reported (stale) but still checked. Exit status: 0 if every image passed.
# Ends with the line "N passed, N failed".
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/common.sh
. "$here/lib/common.sh"
KIWI_IMAGES_LOG_NAME=check

ts_only=0
case ${1:-} in
  -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --trust-store-only) ts_only=1; shift
    [[ $# -gt 0 ]] || { echo "check.sh: --trust-store-only needs image references" >&2; exit 2; } ;;
esac

names=()
if [[ $ts_only == 1 ]]; then
  :
elif [[ $# -eq 0 ]]; then
  names=("${KIWI_IMAGE_NAMES[@]}")
else
  for a in "$@"; do
    n=$(img_resolve "$a") || { echo "check.sh: unknown image '$a' (known: ${KIWI_IMAGE_NAMES[*]})" >&2; exit 2; }
    names+=("$n")
  done
fi

dk version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
  img_die "no docker daemon at DOCKER_HOST=$DOCKER_HOST"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
host_ca_collect "$tmp"
cp "$tmp/host.pem" "$tmp/host.keep"; [[ -f $tmp/hostdeb.pem ]] && cp "$tmp/hostdeb.pem" "$tmp/hostdeb.keep"

# Variables that would point a tool at another CA bundle.
CA_ENV_RE='^(SSL_CERT_FILE|SSL_CERT_DIR|NODE_EXTRA_CA_CERTS|REQUESTS_CA_BUNDLE|PIP_CERT|CURL_CA_BUNDLE|GIT_SSL_CAINFO|GIT_SSL_CAPATH|npm_config_cafile|NPM_CONFIG_CAFILE|YARN_CAFILE|COMPOSER_CAFILE|JAVA_TOOL_OPTIONS|BUNDLE_SSL_CA_CERT|CARGO_HTTP_CAINFO)='

# The trust-store collection, run as root in the image; the patterns of the
# host-only certificates arrive on stdin.
# shellcheck disable=SC2016
COLLECT='
m() { echo "=====kiwi:$1"; }
m bundle.pem; cat /etc/ssl/certs/ca-certificates.crt 2>/dev/null
m debian.pem
if [ -f /etc/ca-certificates.conf ]; then
  grep -v -e "^#" -e "^!" -e "^$" /etc/ca-certificates.conf | while IFS= read -r f; do
    if [ -f "/usr/share/ca-certificates/$f" ]; then cat "/usr/share/ca-certificates/$f"; echo; fi
  done
fi
m local.list; find /usr/local/share/ca-certificates -mindepth 1 ! -type d 2>/dev/null
m certs.list; find /etc/ssl/certs -mindepth 1 -printf "%y %p -> %l\n" 2>/dev/null
if command -v keytool >/dev/null 2>&1; then m java.pem; keytool -list -rfc -cacerts -storepass changeit 2>/dev/null; fi
m found.list
cat >/tmp/kiwi-patterns
if [ -s /tmp/kiwi-patterns ]; then
  for d in /*; do
    case $d in /proc|/sys|/dev|/tmp) continue ;; esac
    grep -rlF -f /tmp/kiwi-patterns "$d" 2>/dev/null
  done
fi
m end
'

# check_trust_store REF DIR: step 2 for one image; prints findings.
check_trust_store() {
  local ref=$1 d=$2 env_ca collected bad=0
  env_ca=$(dk image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$ref" | grep -E "$CA_ENV_RE" || true)
  if [[ -n $env_ca ]]; then
    echo "  FAIL: the image's environment points at a CA: $env_ca"
    bad=1
  fi
  mkdir -p "$d"
  cp "$tmp/host.keep" "$d/host.pem"; [[ -f $tmp/hostdeb.keep ]] && cp "$tmp/hostdeb.keep" "$d/hostdeb.pem"
  # debian.pem is needed for the patterns: a first pass collects it.
  collected=$(dk run --rm --network none --user 0 -i "$ref" sh -c "$COLLECT" </dev/null 2>/dev/null)
  awk -v d="$d" '/^=====kiwi:/ { f = d "/" substr($0, 11); printf "" > f; next } { print > f }' <<<"$collected"
  ca_host_only "$d"
  pem_grep_patterns <"$d/hostonly.set" >"$d/patterns"
  collected=$(dk run --rm --network none --user 0 -i "$ref" sh -c "$COLLECT" <"$d/patterns" 2>/dev/null)
  rm -f "$d"/*.pem "$d"/*.list "$d/end"
  cp "$tmp/host.keep" "$d/host.pem"; [[ -f $tmp/hostdeb.keep ]] && cp "$tmp/hostdeb.keep" "$d/hostdeb.pem"
  awk -v d="$d" '/^=====kiwi:/ { f = d "/" substr($0, 11); printf "" > f; next } { print > f }' <<<"$collected"
  if [[ ! -f $d/end ]]; then
    echo "  FAIL: could not read the image's trust store"
    return 1
  fi
  touch "$d/local.list" "$d/certs.list" "$d/found.list"
  sed -i '/^\/tmp\/kiwi-patterns$/d' "$d/found.list"
  ca_compare "$d" | sed 's/^/  /' || bad=1
  return "$bad"
}

pass=0 fail=0 failed=()
if [[ $ts_only == 1 ]]; then
  i=0
  for ref in "$@"; do
    i=$((i + 1))
    echo "== $ref (trust store)"
    if ! dk image inspect "$ref" >/dev/null 2>&1; then
      echo "  FAIL: image $ref does not exist"; fail=$((fail + 1)); failed+=("$ref"); continue
    fi
    if check_trust_store "$ref" "$tmp/ts$i"; then
      echo "  ok"; pass=$((pass + 1))
    else
      echo "  FAILED: $ref"; fail=$((fail + 1)); failed+=("$ref")
    fi
  done
  [[ $fail -gt 0 ]] && echo "failed: ${failed[*]}"
  echo "$pass passed, $fail failed"
  [[ $fail -eq 0 ]]
  exit
fi

for name in "${names[@]}"; do
  recipe_load "$name" || { fail=$((fail + 1)); failed+=("$name"); continue; }
  echo "== $REF ($name)"
  bad=0
  if ! dk image inspect "$REF" >/dev/null 2>&1; then
    echo "  FAIL: image $REF does not exist (build it: ops/images/build.sh $name)"
    fail=$((fail + 1)); failed+=("$name"); continue
  fi
  label=$(image_label "$REF" org.kiwi.recipe)
  hash=$(recipe_hash "$name")
  if [[ $label != "$hash" ]]; then
    echo "  note: stale: built from recipe ${label:0:12}, current recipe is ${hash:0:12}"
  fi

  # 1. versions, as the image's user, without network.
  script='cd /workspace || exit 1'$'\n'
  all_checks=("${KIWI_COMMON_CHECKS[@]}" "${CHECKS[@]}") runtime_out=
  for c in "${all_checks[@]}"; do
    IFS='|' read -r cname cre ccmd <<<"$c"
    script+="echo '=====kiwi:$cname'; bash -c $(printf '%q' "$ccmd") 2>&1; echo \"=====kiwi-rc:\$?\""$'\n'
  done
  out=$(dk run --rm --network none -i "$REF" bash -s <<<"$script" 2>&1)
  rc=$?
  if [[ $rc -ne 0 ]] && ! grep -q '=====kiwi-rc:' <<<"$out"; then
    echo "  FAIL: docker run exited $rc: $(head -c 400 <<<"$out")"
    bad=1
  fi
  for c in "${all_checks[@]}"; do
    IFS='|' read -r cname cre ccmd <<<"$c"
    section=$(awk -v n="=====kiwi:$cname" '$0 == n { f = 1; next } /^=====kiwi-rc:/ { if (f) { print; exit } } f' <<<"$out")
    crc=$(tail -n1 <<<"$section" | sed -n 's/^=====kiwi-rc://p')
    first=$(sed '$d' <<<"$section" | sed 's/\x1b\[[0-9;]*[A-Za-z]//g' | head -n1)
    if [[ $crc == 0 ]] && grep -Eq -- "$cre" <<<"$first"; then
      printf '  %-14s %s\n' "$cname" "$first"
    else
      printf '  %-14s FAIL (exit %s): %s  [expected /%s/ from: %s]\n' "$cname" "${crc:-?}" "$first" "$cre" "$ccmd"
      bad=1
    fi
    if [[ $c == "${CHECKS[0]}" ]]; then runtime_out=$first; fi
  done

  # 2. the runtime's version is the one the tag and the catalogue promise:
  # the recipe's first check (the runtime's own --version) names VERSION,
  # and so does the image's org.kiwi.version label.
  if [[ $VERSION != '*' ]]; then
    vre="(^|[^0-9.])v?${VERSION//./\\.}([^0-9]|$)"
    if grep -Eq -- "$vre" <<<"$runtime_out"; then
      printf '  %-14s %s\n' "version" "$VERSION ($RUNTIME)"
    else
      printf '  %-14s FAIL: the runtime reports "%s", the tag says %s\n' "version" "$runtime_out" "$VERSION"
      bad=1
    fi
    vlabel=$(image_label "$REF" org.kiwi.version)
    if [[ $vlabel != "$VERSION" ]]; then
      printf '  %-14s FAIL: label org.kiwi.version is "%s", the recipe says %s\n' "version-label" "$vlabel" "$VERSION"
      bad=1
    fi
  fi

  check_trust_store "$REF" "$tmp/$name" || bad=1

  if [[ $bad == 0 ]]; then
    echo "  ok"; pass=$((pass + 1))
  else
    echo "  FAILED: $REF"; fail=$((fail + 1)); failed+=("$name")
  fi
done

[[ $fail -gt 0 ]] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
