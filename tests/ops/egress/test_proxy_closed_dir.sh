#!/usr/bin/env bash
# tests/ops/egress/test_proxy_closed_dir.sh: proxy.sh run refuses a
# kiwi-fetch-digest that Squid's user cannot reach (a build under a
# mode-700 folder, as mktemp -d makes) with the folders and the chmod that
# opens them, where the digest service died unexplained and every Squid
# start failed; after that chmod, run starts. Root and Squid's user
# `proxy` (Debian's squid-openssl) are needed (TAP; 77 = skip).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tap.sh
. "$here/tap.sh"
PROXY=${KIWI_EGRESS_DIR:-$here/../../../ops/egress}/proxy.sh
DIGEST=${KIWI_FETCH_DIGEST:?KIWI_FETCH_DIGEST names the kiwi-fetch-digest binary}
[[ $(id -u) == 0 ]] || skip_or_fail "needs root (Squid's user runs the digest service)"
id proxy >/dev/null 2>&1 || skip_or_fail "no user proxy (Debian's squid-openssl)"

tmp=$(mktemp -d /tmp/kiwi-proxy-closed.XXXXXX) # mode 700: closed to proxy
conf=$(mktemp -d /tmp/kiwi-proxy-conf.XXXXXX)
pid=''
# Squid (run's pid, after its exec) stopped, and its watcher, which ends
# within a second of it, waited for
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  for _ in $(seq 1 50); do pgrep -f -- "$conf" >/dev/null || break; sleep 0.1; done
  pkill -9 -f -- "$conf" 2>/dev/null
  rm -rf "$tmp" "$conf"
}
trap cleanup EXIT
chmod 755 "$conf"
mkdir -p "$tmp/build/bin"
cp "$DIGEST" "$tmp/build/bin/kiwi-fetch-digest"
bin=$tmp/build/bin/kiwi-fetch-digest
port=$((20000 + RANDOM % 20000))
"$PROXY" conf --dir "$conf" --listen 127.0.0.1 --ports "$port,$((port + 1)),$((port + 2))" --ecosystem npm \
  --digest "$bin" >/dev/null || bail "proxy.sh conf failed"

out=$(timeout 30 "$PROXY" run --dir "$conf" --digest "$bin" 2>&1)
rc=$?
refused() { [[ $rc != 0 && $rc != 124 ]]; }
check "run refuses a digest binary under a closed folder (exit $rc; 124: still running after 30 s)" refused
want="these folders are closed to it: $tmp; open them with: chmod o+x '$tmp'"
if grep -qF -- "$want" <<<"$out"; then ok "the error names the folder and the chmod"
else notok "the error names the folder and the chmod"; indent <<<"$out"; fi

# the hint, run as printed, is enough
eval "${out##*open them with: }"
"$PROXY" run --dir "$conf" --digest "$bin" >"$conf/run.log" 2>&1 &
pid=$!
started=0
for _ in $(seq 1 100); do
  [[ -s $conf/digest.port ]] && pgrep -f -- "-f $conf/squid.conf" >/dev/null && { started=1; break; }
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if ((started)); then ok "after the chmod, run starts the digest service and Squid"
else notok "after the chmod, run starts the digest service and Squid"; indent <"$conf/run.log"; fi
tap_finish 0
