# shellcheck shell=bash
# ops/images/lib/common.sh: shared by build.sh, check.sh and tests/.
# Source it; it defines variables and functions and changes nothing else.
#
# Not part of the recipe hash: nothing here decides what goes into an image
# (that is lib/rootfs.sh and recipes/*.sh).

KIWI_IMAGES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KIWI_IMAGES_LOG_NAME=${KIWI_IMAGES_LOG_NAME:-images}

# Images in build order. The name is the recipe file recipes/NAME.sh.
KIWI_IMAGE_NAMES=(base node18 node20 node22 python3.11 python3.13 go1.19 go1.27 rust1.63 rust1.96 ruby3.1 php8.2
  java17 java21)

# Checks of every image, run before the recipe's own (NAME|REGEX|COMMAND):
# nothing left in the temporary directories, the workspace or kiwi's home by
# the build (a sandbox starts from a clean home).
# shellcheck disable=SC2034 # read by build.sh, which sources this file
KIWI_COMMON_CHECKS=(
  "pristine|^$|find /tmp /var/tmp /workspace /home/kiwi -mindepth 1 -maxdepth 1 ! -path /home/kiwi/.bashrc ! -path /home/kiwi/.profile ! -path /home/kiwi/.bash_logout | head -n 5 | tr '\\n' ' '"
)

KIWI_STATE_DIR=${KIWI_STATE_DIR:-/var/lib/kiwi}
KIWI_STATE_DIR=${KIWI_STATE_DIR%/}
# shellcheck disable=SC2034 # read by build.sh, which sources this file
KIWI_IMAGES_STATE=$KIWI_STATE_DIR/images

# The host's CA bundle: it may carry a TLS-intercepting proxy's CA. It is used
# (read-only) for downloads during a build and never copied into an image.
KIWI_HOST_CA_BUNDLE=${KIWI_HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

export DOCKER_HOST=${DOCKER_HOST:-unix:///var/lib/kiwi/run/docker.sock}
if [[ -z ${KIWI_DOCKER:-} ]]; then
  if command -v docker >/dev/null 2>&1; then KIWI_DOCKER=$(command -v docker)
  elif [[ -x /usr/local/bin/docker ]]; then KIWI_DOCKER=/usr/local/bin/docker
  else KIWI_DOCKER=docker
  fi
fi

# ---------------------------------------------------------------- logging ---

img_ts()  { date +%H:%M:%S; }
img_log() { printf '%s %s: %s\n' "$(img_ts)" "$KIWI_IMAGES_LOG_NAME" "$*" >&2; }
img_warn() { printf '%s %s: warning: %s\n' "$(img_ts)" "$KIWI_IMAGES_LOG_NAME" "$*" >&2; }
img_die() { printf '%s %s: error: %s\n' "$(img_ts)" "$KIWI_IMAGES_LOG_NAME" "$*" >&2; exit 1; }

dk() { "$KIWI_DOCKER" "$@"; }

# ---------------------------------------------------------------- recipes ---

# img_known NAME: true if NAME is one of the images.
img_known() {
  local n
  for n in "${KIWI_IMAGE_NAMES[@]}"; do [[ $n == "$1" ]] && return 0; done
  return 1
}

# img_resolve ARG: prints the image name for a name ("node20") or a reference
# ("kiwi/node:20"); fails for anything else.
img_resolve() {
  local arg=$1 n
  if img_known "$arg"; then echo "$arg"; return 0; fi
  for n in "${KIWI_IMAGE_NAMES[@]}"; do
    if [[ $(recipe_get "$n" REF) == "$arg" ]]; then echo "$n"; return 0; fi
  done
  return 1
}

# recipe_load NAME: sources recipes/NAME.sh into the current shell after
# clearing the variables a recipe sets. Call it in a subshell when more than
# one recipe is used in the same process.
recipe_load() {
  local f=$KIWI_IMAGES_DIR/recipes/$1.sh
  [[ -f $f ]] || { img_warn "no recipe $f"; return 1; }
  unset NAME REF RUNTIME VERSION DESCRIPTION APT_PACKAGES DOWNLOADS IMAGE_ENV CHECKS SUITE BASE
  unset -f recipe_install
  # shellcheck disable=SC1090
  . "$f"
  [[ $NAME == "$1" ]] || { img_warn "$f sets NAME=$NAME, expected $1"; return 1; }
}

# recipe_get NAME VAR [DEFAULT]: prints one scalar variable of a recipe
# (DEFAULT when the recipe leaves it unset).
recipe_get() { ( recipe_load "$1" >/dev/null && eval "printf '%s\n' \"\${$2-${3:-}}\"" ); }

# recipe_base NAME: the base stage an image starts from: the recipe's BASE
# (default "base", Debian bookworm); a base stage (RUNTIME=base) is its own.
recipe_base() {
  if [[ $(recipe_get "$1" RUNTIME) == base ]]; then echo "$1"; else recipe_get "$1" BASE base; fi
}

# recipe_suite NAME: the Debian suite of an image: the SUITE of its base
# stage (default bookworm).
recipe_suite() { recipe_get "$(recipe_base "$1")" SUITE "$KIWI_DEBIAN_DEFAULT_SUITE"; }

# recipe_hash NAME: sha256 of everything that decides an image's content:
# the recipe format, the Debian suite, lib/rootfs.sh (the build steps), the
# base stage's recipe and, for the other images, the image's own recipe.
KIWI_RECIPE_FORMAT=1
KIWI_DEBIAN_DEFAULT_SUITE=bookworm
# The suite being built (lib/rootfs.sh reads it; build.sh sets it per image).
# shellcheck disable=SC2034 # read by lib/rootfs.sh, which the build sources after this file
KIWI_DEBIAN_SUITE=$KIWI_DEBIAN_DEFAULT_SUITE
recipe_hash() {
  local name=$1 base
  base=$(recipe_base "$name")
  {
    printf 'kiwi-images recipe format %s\nsuite %s\n' "$KIWI_RECIPE_FORMAT" "$(recipe_suite "$name")"
    cat "$KIWI_IMAGES_DIR/lib/rootfs.sh" "$KIWI_IMAGES_DIR/recipes/$base.sh"
    [[ $name == "$base" ]] || cat "$KIWI_IMAGES_DIR/recipes/$name.sh"
  } | sha256sum | cut -d' ' -f1
}

# image_label REF KEY: prints a label of a local image, nothing if absent.
image_label() {
  dk image inspect -f "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null | sed 's/^<no value>$//'
}

# ------------------------------------------------------- certificate sets ---
# A certificate is identified by its base64 body with whitespace removed:
# the same DER gives the same line whatever the PEM line wrapping.

# pem_set [FILE...]: one line per certificate (reads stdin without FILE),
# sorted and unique.
pem_set() {
  awk '/-----BEGIN (TRUSTED )?CERTIFICATE-----/ { c = ""; f = 1; next }
       /-----END (TRUSTED )?CERTIFICATE-----/   { if (f && c != "") print c; f = 0; next }
       f { gsub(/[ \t\r]/, ""); c = c $0 }' "$@" | LC_ALL=C sort -u
}

# pem_subjects: reads pem_set lines, prints each certificate's subject (needs
# openssl; prints the first 40 base64 characters when openssl is missing).
pem_subjects() {
  local line
  while IFS= read -r line; do
    if command -v openssl >/dev/null 2>&1; then
      printf -- '-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----\n' "$(fold -w 64 <<<"$line")" |
        openssl x509 -noout -subject 2>/dev/null || echo "${line:0:40}..."
    else
      echo "${line:0:40}..."
    fi
  done
}

# pem_grep_patterns: reads pem_set lines, prints one fixed-string pattern per
# certificate: its last full 64-character line of base64 (PEM wraps at 64),
# which lies in the signature and so is unique to that certificate (earlier
# lines hold issuer and subject, shared by re-issued certificates).
pem_grep_patterns() {
  local line n
  while IFS= read -r line; do
    n=$(( ${#line} / 64 ))
    [[ $n -ge 2 ]] && printf '%s\n' "${line:$(( (n - 1) * 64 )):64}"
  done
}

# host_ca_collect DIR: the host's bundle (host.pem) and, when the host is a
# Debian system, the certificates its own ca-certificates enables
# (hostdeb.pem): the difference is what the host trusts beyond Debian, such
# as a TLS-intercepting proxy's CA.
host_ca_collect() {
  local d=$1 line
  cp "$KIWI_HOST_CA_BUNDLE" "$d/host.pem" 2>/dev/null || : >"$d/host.pem"
  rm -f "$d/hostdeb.pem"
  if [[ -f /etc/ca-certificates.conf && -d /usr/share/ca-certificates ]]; then
    : >"$d/hostdeb.pem"
    while IFS= read -r line; do
      case $line in ''|'#'*|'!'*) continue ;; esac
      [[ -f /usr/share/ca-certificates/$line ]] && { cat "/usr/share/ca-certificates/$line"; echo; } >>"$d/hostdeb.pem"
    done </etc/ca-certificates.conf
  fi
}

# ca_host_only DIR: writes DIR/hostonly.set, the certificates the host trusts
# and the image must not: those in host.pem that are neither in the image's
# Debian set (debian.pem) nor in the host's own Debian set (hostdeb.pem, when
# the host is Debian) -- a TLS-intercepting proxy's CA, a corporate CA.
# (Without hostdeb.pem, older Mozilla roots that a newer ca-certificates
# dropped count too.)
ca_host_only() {
  local d=$1
  pem_set "$d/host.pem" >"$d/host.set"
  pem_set "$d/debian.pem" >"$d/debian.set"
  if [[ -f $d/hostdeb.pem ]]; then
    pem_set "$d/hostdeb.pem" >"$d/hostdeb.set"
  else
    : >"$d/hostdeb.set"
  fi
  LC_ALL=C comm -23 "$d/host.set" "$d/debian.set" | LC_ALL=C comm -23 - "$d/hostdeb.set" >"$d/hostonly.set"
}

# ca_compare DIR: the trust-store verdict, used for a root file system at
# build time and for a running image by check.sh. DIR holds, as collected
# from the image:
#   bundle.pem    /etc/ssl/certs/ca-certificates.crt
#   debian.pem    the certificates ca-certificates ships and enables
#                 (/usr/share/ca-certificates/<each line of /etc/ca-certificates.conf>)
#   local.list    files under /usr/local/share/ca-certificates (must be empty)
#   certs.list    'TYPE PATH -> TARGET' for everything under /etc/ssl/certs
#   java.pem      optional: the Java trust store (keytool -list -rfc)
#   found.list    optional: files anywhere in the image that contain one of
#                 the host-only certificates (ca_host_only; must be empty)
# and host.pem, hostdeb.pem from host_ca_collect. Prints findings; fails if the image trusts
# anything but Debian's own certificates or holds a host-only certificate.
ca_compare() {
  local d=$1 bad=0 n_extra n_img n_deb
  ca_host_only "$d"
  pem_set "$d/bundle.pem" >"$d/bundle.set"
  n_extra=$(wc -l <"$d/hostonly.set"); n_img=$(wc -l <"$d/bundle.set"); n_deb=$(wc -l <"$d/debian.set")
  echo "ca: image bundle $n_img certificates, Debian's ca-certificates $n_deb, host-only (proxy) certificates $n_extra"
  pem_subjects <"$d/hostonly.set" | sed 's/^/ca:   host-only: /'
  if [[ $n_deb -lt ${KIWI_CA_MIN_DEBIAN:-50} ]]; then
    echo "ca: FAIL: only $n_deb Debian certificates found: is ca-certificates installed?"; bad=1
  fi
  if ! LC_ALL=C cmp -s "$d/bundle.set" "$d/debian.set"; then
    echo "ca: FAIL: /etc/ssl/certs/ca-certificates.crt differs from Debian's ca-certificates:"
    LC_ALL=C comm -23 "$d/bundle.set" "$d/debian.set" | pem_subjects | sed 's/^/ca:   extra: /'
    LC_ALL=C comm -13 "$d/bundle.set" "$d/debian.set" | pem_subjects | sed 's/^/ca:   missing: /'
    bad=1
  fi
  if LC_ALL=C comm -12 "$d/bundle.set" "$d/hostonly.set" | grep >/dev/null .; then
    echo "ca: FAIL: the image's bundle holds a host-only (proxy) certificate:"
    LC_ALL=C comm -12 "$d/bundle.set" "$d/hostonly.set" | pem_subjects | sed 's/^/ca:   /'
    bad=1
  fi
  if [[ -s $d/local.list ]]; then
    echo "ca: FAIL: local CA certificates present:"; sed 's/^/ca:   /' "$d/local.list"; bad=1
  fi
  # /etc/ssl/certs: the bundle, hash links and links into Debian's store,
  # and Java's store directory. Nothing else.
  local unexpected
  unexpected=$(awk '
      $1 == "f" && $2 == "/etc/ssl/certs/ca-certificates.crt" { next }
      $1 == "d" && ($2 == "/etc/ssl/certs/java") { next }
      $1 == "f" && $2 == "/etc/ssl/certs/java/cacerts" { next }
      $1 == "l" && ($4 ~ "^/usr/share/ca-certificates/" || $4 !~ "/") { next }
      { print }' "$d/certs.list")
  if [[ -n $unexpected ]]; then
    echo "ca: FAIL: unexpected entries in /etc/ssl/certs:"; sed 's/^/ca:   /' <<<"$unexpected"; bad=1
  fi
  if [[ -f $d/java.pem ]]; then
    pem_set "$d/java.pem" >"$d/java.set"
    echo "ca: Java trust store $(wc -l <"$d/java.set") certificates"
    if LC_ALL=C comm -23 "$d/java.set" "$d/debian.set" | grep >/dev/null .; then
      echo "ca: FAIL: the Java trust store holds certificates that are not Debian's:"
      LC_ALL=C comm -23 "$d/java.set" "$d/debian.set" | pem_subjects | sed 's/^/ca:   /'
      bad=1
    fi
  fi
  if [[ -s $d/found.list ]]; then
    echo "ca: FAIL: files in the image contain a host-only (proxy) certificate:"
    sed 's/^/ca:   /' "$d/found.list"; bad=1
  fi
  if [[ $n_extra -eq 0 ]]; then
    echo "ca: note: the host bundle has no certificate beyond Debian's, so the proxy check compared nothing"
  fi
  [[ $bad -eq 0 ]] && echo "ca: ok: the image trusts exactly Debian's ca-certificates"
  return "$bad"
}
