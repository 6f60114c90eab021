#!/usr/bin/env bash
# install-layout.sh BUILD_DIR: `cmake --install` of the build into a prefix
# of its own puts kiwi and kiwi-worker in bin/ and the egress scripts and
# kiwi-fetch-digest in libexec/kiwi/, and the installed kiwi-worker takes its scripts from there
# (--print-config), not from the checkout it was built in.
set -euo pipefail
build=${1:?usage: install-layout.sh BUILD_DIR}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$prefix.log" 2>&1 || { cat "$prefix.log" >&2; fail "cmake --install"; }
rm -f "$prefix.log"
for f in bin/kiwi bin/kiwi-worker libexec/kiwi/egress.sh libexec/kiwi/proxy.sh libexec/kiwi/kiwi-fetch-digest; do
  [ -x "$prefix/$f" ] || fail "$f not installed (or not executable) under the prefix"
done
cfg=$(env -u KIWI_EGRESS_SCRIPT -u KIWI_EGRESS_PROXY_SCRIPT "$prefix/bin/kiwi-worker" --print-config)
for key in script proxy_script; do
  name=egress.sh
  [ "$key" = proxy_script ] && name=proxy.sh
  got=$(sed -n "s/^egress\.$key = //p" <<<"$cfg")
  [ "$got" = "$prefix/bin/../libexec/kiwi/$name" ] \
    || fail "egress.$key of the installed kiwi-worker is '$got', not beside it"
  [ -x "$got" ] || fail "egress.$key '$got' does not exist"
done
bash "$prefix/libexec/kiwi/egress.sh" --help >/dev/null || fail "the installed egress.sh does not run"
"$prefix/libexec/kiwi/kiwi-fetch-digest" --help >/dev/null || fail "the installed kiwi-fetch-digest does not run"
echo "ok: bin/kiwi, bin/kiwi-worker, libexec/kiwi/{egress,proxy}.sh and kiwi-fetch-digest; the installed worker's scripts are beside it"
