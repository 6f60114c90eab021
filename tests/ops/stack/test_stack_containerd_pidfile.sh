#!/usr/bin/env bash
# test_stack_containerd_pidfile.sh: before ops/stack.sh starts dockerd it
# removes the pidfile of dockerd's containerd (under the exec-root) unless
# that names the containerd run with the containerd.toml beside it. dockerd
# takes any live pid there for its containerd (kill -0, which a thread id
# passes too) and exits after waiting on a socket nobody serves: on a
# machine brought back from a snapshot the old pid was a thread of Kafka.
# Real processes and a real thread, in a directory of the test's own; no
# dockerd is started. The processes write to /dev/null: a sleep left past
# the test would hold ctest's output pipe open.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=ops/lib.sh
. "$ROOT/ops/lib.sh"
# shellcheck source=ops/stack-docker.sh
. "$ROOT/ops/stack-docker.sh"
log() { echo "stack: $*" >>"$TMP/log"; } # stack.sh's log, kept for the check

dir="$TMP/docker-exec/containerd"
pf="$dir/containerd.pid"
mkdir -p "$dir"
check() { # check WHAT PID kept|removed
  echo "$2" >"$pf"
  containerd_pidfile_clear "$pf"
  if [ "$3" = kept ]; then
    [ -f "$pf" ] || fail "$1: the pidfile was removed"
  else
    [ ! -e "$pf" ] || fail "$1: the pidfile (pid $2) was kept"
  fi
  echo "ok: $1: $3"
}

# a thread of another live process (not its main thread)
python3 -c 'import threading, time; threading.Thread(target=time.sleep, args=(600,), daemon=True).start(); time.sleep(600)' </dev/null >/dev/null 2>&1 &
py=$!
PIDS+=("$py")
tid=""
for _ in $(seq 1 50); do
  tid=$(find "/proc/$py/task" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | grep -vx "$py" | head -1 || true)
  [ -n "$tid" ] && break
  sleep 0.1
done
[ -n "$tid" ] || fail "no second thread in pid $py"
kill -0 "$tid" || fail "kill -0 $tid fails: the case would not show what dockerd sees"
check "a live thread of another process" "$tid" removed
check "another live process" "$py" removed

# a pid nobody has
sh -c 'exit 0' &
dead=$!
wait "$dead"
check "a dead pid" "$dead" removed

# a containerd of another exec-root
sh -c 'sleep 600; :' containerd --config "$TMP/other/containerd.toml" </dev/null >/dev/null 2>&1 &
PIDS+=($!)
check "another exec-root's containerd" "$!" removed

# its own containerd, alive: dockerd reuses it
sh -c 'sleep 600; :' containerd --config "$dir/containerd.toml" </dev/null >/dev/null 2>&1 &
PIDS+=($!)
check "its own containerd" "$!" kept

# garbage and no file: nothing to do, no error
echo 'not a pid' >"$pf"
containerd_pidfile_clear "$pf" || fail "a pidfile without a pid: error"
rm -f "$pf"
containerd_pidfile_clear "$pf" || fail "no pidfile: error"
grep -q "pid $tid is not its containerd" "$TMP/log" || fail "the removal is not logged: $(cat "$TMP/log")"
echo "PASS"
