#!/usr/bin/env bash
# ops/demo.sh: Kiwi's main job, end to end, on this machine.
#
#   1. set-up (packages, Kafka jars, sandbox images)    ops/setup.sh
#   2. the stack (Kafka, Redis, dockerd + runsc)          ops/stack.sh up
#   3. the build                                          build/
#   4. a worker, a task for an example repository with a really failing
#      test, its progress streamed, its result and diff printed
#
# Options: --help.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
case "${1:-}" in
  -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "ops/demo.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac

say() { printf '\n== %s\n' "$*"; }

say "set-up"
bash ops/setup.sh
say "stack"
bash ops/stack.sh up
set -a; . "${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env"; set +a
say "build"
cmake -S "$root" -B "$root/build" -G Ninja >/dev/null
ninja -C "$root/build" >/dev/null
echo "built: $root/build"

if [ ! -x "$root/build/worker/kiwi-worker" ]; then
  say "stopping here"
  echo "The stack is up and Kiwi is built; the worker (kiwi-worker) does not exist yet,"
  echo "so there is no task to run. Addresses: ${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env"
  exit 0
fi
