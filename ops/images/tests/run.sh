#!/usr/bin/env bash
# ops/images/tests/run.sh: tests of the image tooling.
#
# Usage: ops/images/tests/run.sh [--images]
#
#   unit (always): catalogue format and coverage, recipes, the trust-store
#     verdict (ca_compare) on synthetic certificates made with openssl.
#   docker (when kiwi/base:bookworm exists and docker answers): images made
#     from kiwi/base:bookworm that trust the host's extra CA in different ways
#     (bundle, /usr/local/share/ca-certificates, a stray copy, an environment
#     variable) must fail "check.sh --trust-store-only"; kiwi/base must pass.
#   --images: also runs check.sh on every built image (a few minutes).
#
# Ends with "N passed, N failed"; exits non-zero on any failure.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../lib/common.sh
. "$here/lib/common.sh"

with_images=0
case ${1:-} in
  --images) with_images=1 ;;
  -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  '') ;;
  *) echo "tests/run.sh: unknown option '$1'" >&2; exit 2 ;;
esac

pass=0 fail=0 skip=0
ok()   { echo "PASS $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL $1${2:+: $2}"; fail=$((fail + 1)); }
skip() { echo "SKIP $1${2:+: $2}"; skip=$((skip + 1)); }
t() { # t NAME CMD...: passes if CMD succeeds
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$(tail -n 5 <<<"$out")"; fi
}
tfm() { # tfm NAME REGEX CMD...: passes if CMD fails and its output matches REGEX
  local name=$1 re=$2; shift 2
  local out
  if out=$("$@" 2>&1); then bad "$name" "succeeded, expected a failure"
  elif grep -Eq -- "$re" <<<"$out"; then ok "$name"
  else bad "$name" "failed without /$re/: $(tail -n 5 <<<"$out")"
  fi
}
tf() { # tf NAME CMD...: passes if CMD fails
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then bad "$name" "succeeded, expected a failure"; else ok "$name"; fi
}

tmp=$(mktemp -d)
cleanup_images=()
cleanup() {
  local i
  # The test images are all tagged with this process's id (poison runs in
  # a command substitution, so it cannot add to cleanup_images itself).
  for i in "${cleanup_images[@]}" $(dk images --format '{{.Repository}}:{{.Tag}}' \
    --filter "reference=kiwi-test/*:$$" 2>/dev/null); do
    dk rmi -f "$i" >/dev/null 2>&1 || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# ------------------------------------------------------------- catalogues ---

RUNTIMES=(base node python go rust ruby php java maven gradle)

catalog_valid() { # FILE: format of every row, a "*" row per runtime, no duplicates
  local f=$1 n=0 line rt ver img seen=" " r
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    [[ -z $line || $line == '#'* ]] && continue
    if [[ $(awk -F'\t' '{ print NF }' <<<"$line") != 3 ]]; then
      echo "$f:$n: not three TAB-separated fields: $line"; return 1
    fi
    IFS=$'\t' read -r rt ver img <<<"$line"
    [[ " ${RUNTIMES[*]} " == *" $rt "* ]] || { echo "$f:$n: unknown runtime '$rt'"; return 1; }
    [[ $ver =~ ^(\*|[0-9]+|[0-9]+\.[0-9]+)$ ]] || { echo "$f:$n: bad version '$ver'"; return 1; }
    [[ $img =~ ^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]+)?$ ]] || { echo "$f:$n: bad image '$img'"; return 1; }
    [[ $seen == *" $rt/$ver "* ]] && { echo "$f:$n: duplicate $rt $ver"; return 1; }
    seen+="$rt/$ver "
  done <"$f"
  for r in "${RUNTIMES[@]}"; do
    [[ $seen == *" $r/* "* ]] || { echo "$f: no default (*) row for $r"; return 1; }
  done
}

t "catalog.default.tsv is well formed, a default per runtime" catalog_valid "$here/catalog.default.tsv"
t "catalog.local.tsv is well formed, a default per runtime" catalog_valid "$here/catalog.local.tsv"

local_refs_are_recipes() {
  local ref n found
  while IFS= read -r ref; do
    found=0
    for n in "${KIWI_IMAGE_NAMES[@]}"; do [[ $(recipe_get "$n" REF) == "$ref" ]] && found=1; done
    [[ $found == 1 ]] || { echo "catalog.local.tsv names $ref, which no recipe builds"; return 1; }
  done < <(grep -v '^#' "$here/catalog.local.tsv" | awk -F'\t' 'NF == 3 { print $3 }' | sort -u)
  for n in "${KIWI_IMAGE_NAMES[@]}"; do
    ref=$(recipe_get "$n" REF)
    awk -F'\t' -v r="$ref" '$3 == r { f = 1 } END { exit !f }' "$here/catalog.local.tsv" ||
      { echo "recipe $n ($ref) is not in catalog.local.tsv"; return 1; }
  done
}
t "catalog.local.tsv names exactly the images the recipes build" local_refs_are_recipes

local_tags_honest() { # the version row of each local image is the recipe's VERSION
  local n rt ver ref
  for n in "${KIWI_IMAGE_NAMES[@]}"; do
    rt=$(recipe_get "$n" RUNTIME); ver=$(recipe_get "$n" VERSION); ref=$(recipe_get "$n" REF)
    [[ $ver == '*' ]] && continue
    awk -F'\t' -v a="$rt" -v b="$ver" -v c="$ref" '$1 == a && $2 == b && $3 == c { f = 1 } END { exit !f }' \
      "$here/catalog.local.tsv" || { echo "no row '$rt $ver $ref'"; return 1; }
    [[ $ref == *":$ver" ]] || { echo "$ref: tag is not the version $ver"; return 1; }
  done
}
t "local rows and tags match the recipes' versions" local_tags_honest

recipes_complete() {
  local n
  for n in "${KIWI_IMAGE_NAMES[@]}"; do
    ( recipe_load "$n" || exit 1
      [[ -n $REF && -n $RUNTIME && -n $VERSION && ${#CHECKS[@]} -gt 0 ]] || { echo "$n: incomplete"; exit 1; }
      for c in "${CHECKS[@]}"; do
        [[ $(tr -cd '|' <<<"$c" | wc -c) -ge 2 ]] || { echo "$n: check '$c' is not NAME|REGEX|COMMAND"; exit 1; }
      done
      for d in "${DOWNLOADS[@]}"; do
        read -r f s u <<<"$d"
        [[ $s =~ ^[0-9a-f]{128}$ && $u == https://* && -n $f ]] || { echo "$n: download '$d' is not FILE SHA512 URL"; exit 1; }
      done ) || return 1
  done
}
t "every recipe has a reference, runtime, version, checks and pinned downloads" recipes_complete

base_stages_valid() { # every image's base stage is a base recipe; its suite is the image's
  local n b
  for n in "${KIWI_IMAGE_NAMES[@]}"; do
    b=$(recipe_base "$n")
    [[ $(recipe_get "$b" RUNTIME) == base ]] || { echo "$n: base stage $b is not a base recipe"; return 1; }
    [[ $(recipe_suite "$n") == "$(recipe_get "$b" SUITE "$KIWI_DEBIAN_DEFAULT_SUITE")" ]] ||
      { echo "$n: suite differs from its base stage $b"; return 1; }
  done
  [[ $(recipe_base base) == base && $(recipe_suite base) == bookworm ]] || { echo "base is not bookworm"; return 1; }
  [[ $(recipe_base python3.13) == base-trixie && $(recipe_suite python3.13) == trixie ]] ||
    { echo "python3.13 is not built on the trixie stage"; return 1; }
  [[ $(recipe_suite java21) == trixie && $(recipe_suite go1.27) == bookworm ]] || { echo "suites"; return 1; }
}
t "every image's base stage is a base recipe of the image's suite" base_stages_valid

base_stage_in_hash() { # the base stage's recipe and suite are part of an image's hash
  local a b
  a=$(recipe_hash python3.13)
  b=$(KIWI_DEBIAN_DEFAULT_SUITE=trixie recipe_hash python3.11)
  [[ $a =~ ^[0-9a-f]{64}$ && $a != "$(recipe_hash python3.11)" && $b != "$(recipe_hash python3.11)" ]]
}
t "the base stage and its suite are part of the recipe hash" base_stage_in_hash

recipe_hash_changes() {
  local a b
  a=$(recipe_hash node20)
  b=$(recipe_hash node22)
  [[ $a =~ ^[0-9a-f]{64}$ && $a != "$b" && $a == "$(recipe_hash node20)" ]]
}
t "recipe hashes are stable and differ between images" recipe_hash_changes

for v in 0 x -1 1000; do
  tfm "build.sh refuses KIWI_IMAGES_JOBS=$v" "KIWI_IMAGES_JOBS must be a number" env KIWI_IMAGES_JOBS="$v" bash "$here/build.sh" --list
done

# ------------------------------------------------------- trust-store logic ---

if command -v openssl >/dev/null 2>&1; then
  mkcert() { # NAME -> $tmp/NAME.pem
    openssl req -x509 -newkey rsa:2048 -nodes -keyout /dev/null -subj "/CN=$1" -days 30 \
      -out "$tmp/$1.pem" >/dev/null 2>&1
  }
  mkcert deb1; mkcert deb2; mkcert deb3; mkcert proxy
  # A fixture: an image trusting exactly its Debian set {deb1, deb2, deb3};
  # a host trusting an older Debian set {deb1, deb2} plus the proxy.
  fixture() { # DIR
    local d=$1
    rm -rf "$d"; mkdir -p "$d"
    cat "$tmp/deb1.pem" "$tmp/deb2.pem" "$tmp/deb3.pem" >"$d/bundle.pem"
    cat "$tmp/deb1.pem" "$tmp/deb2.pem" "$tmp/deb3.pem" >"$d/debian.pem"
    cat "$tmp/deb1.pem" "$tmp/deb2.pem" "$tmp/proxy.pem" >"$d/host.pem"
    cat "$tmp/deb1.pem" "$tmp/deb2.pem" >"$d/hostdeb.pem"
    : >"$d/local.list"; : >"$d/found.list"
    printf '%s\n' "f /etc/ssl/certs/ca-certificates.crt -> " \
      "l /etc/ssl/certs/deb1.pem -> /usr/share/ca-certificates/mozilla/deb1.crt" \
      "l /etc/ssl/certs/1a2b3c4d.0 -> deb1.pem" >"$d/certs.list"
  }
  export KIWI_CA_MIN_DEBIAN=1

  fixture "$tmp/c0"
  t "ca_compare: an image with exactly Debian's certificates passes" ca_compare "$tmp/c0"

  fixture "$tmp/c1"; cat "$tmp/proxy.pem" >>"$tmp/c1/bundle.pem"
  tf "ca_compare: the proxy CA in the bundle fails" ca_compare "$tmp/c1"

  fixture "$tmp/c2"; echo /usr/local/share/ca-certificates/proxy.crt >"$tmp/c2/local.list"
  tf "ca_compare: a file in /usr/local/share/ca-certificates fails" ca_compare "$tmp/c2"

  fixture "$tmp/c3"; echo "f /etc/ssl/certs/proxy.pem -> " >>"$tmp/c3/certs.list"
  tf "ca_compare: a regular file in /etc/ssl/certs fails" ca_compare "$tmp/c3"

  fixture "$tmp/c4"; echo "l /etc/ssl/certs/p.pem -> /opt/proxy.pem" >>"$tmp/c4/certs.list"
  tf "ca_compare: a link out of Debian's store fails" ca_compare "$tmp/c4"

  fixture "$tmp/c5"; cat "$tmp/deb1.pem" "$tmp/proxy.pem" >"$tmp/c5/java.pem"
  tf "ca_compare: the proxy CA in Java's trust store fails" ca_compare "$tmp/c5"

  fixture "$tmp/c6"; echo /opt/tool/cacert.pem >"$tmp/c6/found.list"
  tf "ca_compare: a stray copy of the proxy CA fails" ca_compare "$tmp/c6"

  fixture "$tmp/c7"; cat "$tmp/deb1.pem" >"$tmp/c7/bundle.pem"
  tf "ca_compare: a bundle missing Debian certificates fails" ca_compare "$tmp/c7"

  host_only_is_proxy() {
    fixture "$tmp/c8"
    ca_host_only "$tmp/c8"
    [[ $(wc -l <"$tmp/c8/hostonly.set") == 1 && $(cat "$tmp/c8/hostonly.set") == "$(pem_set "$tmp/proxy.pem")" ]]
  }
  t "ca_host_only: only the proxy is host-only (older Debian roots are not)" host_only_is_proxy

  rewrap_same() {
    local one two
    one=$(pem_set "$tmp/proxy.pem")
    two=$({ echo '-----BEGIN CERTIFICATE-----'; fold -w 76 <<<"$one"; echo '-----END CERTIFICATE-----'; } | pem_set)
    [[ -n $one && $(wc -l <<<"$one") == 1 && $one == "$two" ]]
  }
  t "pem_set: the same certificate wrapped at 76 columns is the same" rewrap_same

  patterns_find() {
    pem_set "$tmp/proxy.pem" | pem_grep_patterns >"$tmp/pat"
    mkdir -p "$tmp/tree/opt"; cp "$tmp/proxy.pem" "$tmp/tree/opt/copy.pem"; cp "$tmp/deb1.pem" "$tmp/tree/opt/other.pem"
    [[ $(grep -rlF -f "$tmp/pat" "$tmp/tree") == "$tmp/tree/opt/copy.pem" ]]
  }
  t "pem_grep_patterns: finds a copy of the certificate and nothing else" patterns_find
else
  skip "trust-store logic" "openssl is not installed"
fi

# ------------------------------------------------- poisoned images (docker) ---

if dk version >/dev/null 2>&1 && dk image inspect kiwi/base:bookworm >/dev/null 2>&1 &&
  [[ -s $KIWI_HOST_CA_BUNDLE ]]; then
  unset KIWI_CA_MIN_DEBIAN
  t "check.sh --trust-store-only kiwi/base:bookworm passes" "$here/check.sh" --trust-store-only kiwi/base:bookworm
  host_ca_collect "$tmp"
  if [[ -f $tmp/hostdeb.pem ]]; then
    pem_set "$tmp/host.pem" | LC_ALL=C comm -23 - <(pem_set "$tmp/hostdeb.pem") >"$tmp/extra.set"
  else
    pem_set "$tmp/host.pem" >"$tmp/extra.set"
  fi
  if [[ -s $tmp/extra.set ]]; then
    head -n1 "$tmp/extra.set" | fold -w 64 | sed '1i -----BEGIN CERTIFICATE-----' | sed '$a -----END CERTIFICATE-----' >"$tmp/extra.pem"
    poison() { # NAME SCRIPT: an image from kiwi/base with SCRIPT run as root, extra.pem at /x.pem
      local ref="kiwi-test/poisoned-$1:$$" cid
      cid=$(dk create --user 0 --network none kiwi/base:bookworm sh -c "$2") || return 1
      dk cp "$tmp/extra.pem" "$cid:/x.pem" >/dev/null && dk start -a "$cid" >/dev/null &&
        dk commit "$cid" "$ref" >/dev/null
      dk rm -f "$cid" >/dev/null
      echo "$ref"
    }
    if r=$(poison bundle 'cat /x.pem >>/etc/ssl/certs/ca-certificates.crt; rm /x.pem'); then
      tfm "check.sh fails an image whose bundle holds the host's extra CA" "bundle holds a host-only" "$here/check.sh" --trust-store-only "$r"
    else bad "make poisoned image (bundle)"; fi
    if r=$(poison local 'cp /x.pem /usr/local/share/ca-certificates/x.crt && update-ca-certificates >/dev/null; rm /x.pem'); then
      tfm "check.sh fails an image with the host's CA added by update-ca-certificates" "local CA certificates present" "$here/check.sh" --trust-store-only "$r"
    else bad "make poisoned image (local)"; fi
    if r=$(poison stray 'mkdir -p /opt/tool && mv /x.pem /opt/tool/cacert.pem'); then
      tfm "check.sh fails an image holding a stray copy of the host's CA" "contain a host-only.*|/opt/tool/cacert.pem" "$here/check.sh" --trust-store-only "$r"
    else bad "make poisoned image (stray)"; fi
    cid=$(dk create kiwi/base:bookworm true) && dk commit -c 'ENV NODE_EXTRA_CA_CERTS=/etc/extra.pem' "$cid" "kiwi-test/poisoned-env:$$" >/dev/null
    dk rm -f "$cid" >/dev/null 2>&1; cleanup_images+=("kiwi-test/poisoned-env:$$")
    tfm "check.sh fails an image whose environment names an extra CA bundle" "environment points at a CA" "$here/check.sh" --trust-store-only "kiwi-test/poisoned-env:$$"
  else
    skip "poisoned images" "the host bundle has no certificate beyond Debian's"
  fi
else
  skip "poisoned images" "no docker, no kiwi/base:bookworm or no host CA bundle"
fi

# ------------------------------------------------------------ every image ---

if [[ $with_images == 1 ]]; then
  t "check.sh: every image" "$here/check.sh"
fi

echo "$pass passed, $fail failed${skip:+, $skip skipped}"
[[ $fail -eq 0 ]]
