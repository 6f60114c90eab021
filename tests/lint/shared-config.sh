#!/usr/bin/env bash
# shared-config.sh BUILD_DIR: one config file, both programs started on it.
# `kiwi config` and `kiwi-worker --print-config` (each given the file with
# KIWI_CONFIG, then with --config) show the shared keys' values, each its
# own key's, and neither stops on the other's key; a key neither reads
# stops both, naming the file's line. Needs no service: neither command
# connects to anything.
set -euo pipefail
build=${1:?usage: shared-config.sh BUILD_DIR}
kiwi="$build/producer/kiwi" worker="$build/worker/kiwi-worker"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$tmp/fleet.conf" <<'CONF'
# shared by kiwi and kiwi-worker
kafka.brokers = 10.0.0.5:9092
topic.tasks = acme.tasks
topic.results = 'acme.results'
kafka.delivery_timeout = 45
worker.slots = 6
ci.goal = fix {name}
CONF
# the stack's env file must not supply the brokers here
export KIWI_STACK_ENV="$tmp/none.env"
unset KIWI_KAFKA_BROKERS KIWI_TOPIC_TASKS KIWI_TOPIC_RESULTS KIWI_DELIVERY_TIMEOUT KIWI_SLOTS KIWI_CI_GOAL

expect() { # OUTPUT-FILE LINE...
  local f=$1 l; shift
  for l in "$@"; do grep -qxF -- "$l" "$f" || fail "$(basename "$f"): no line '$l'"; done
}
for how in env flag; do
  if [ $how = env ]; then
    KIWI_CONFIG="$tmp/fleet.conf" "$kiwi" config >"$tmp/kiwi.out" 2>"$tmp/kiwi.err" || fail "kiwi config ($how): $(cat "$tmp/kiwi.err")"
    KIWI_CONFIG="$tmp/fleet.conf" "$worker" --print-config >"$tmp/worker.out" 2>"$tmp/worker.err" \
      || fail "kiwi-worker --print-config ($how): $(cat "$tmp/worker.err")"
  else
    "$kiwi" config --config "$tmp/fleet.conf" >"$tmp/kiwi.out" 2>"$tmp/kiwi.err" || fail "kiwi config ($how): $(cat "$tmp/kiwi.err")"
    "$worker" --config "$tmp/fleet.conf" --print-config >"$tmp/worker.out" 2>"$tmp/worker.err" \
      || fail "kiwi-worker --print-config ($how): $(cat "$tmp/worker.err")"
  fi
  expect "$tmp/kiwi.out" "kafka.brokers = 10.0.0.5:9092" "topic.tasks = acme.tasks" "topic.results = acme.results" \
    "kafka.delivery_timeout = 45" "ci.goal = fix {name}"
  expect "$tmp/worker.out" "kafka.brokers = 10.0.0.5:9092" "topic.tasks = acme.tasks" "topic.results = acme.results" \
    "kafka.delivery_timeout = 45" "worker.slots = 6"
done

echo "topic.taks = typo" >>"$tmp/fleet.conf"
if KIWI_CONFIG="$tmp/fleet.conf" "$kiwi" config >/dev/null 2>"$tmp/kiwi.err"; then fail "kiwi took a key neither program reads"; fi
if KIWI_CONFIG="$tmp/fleet.conf" "$worker" --print-config >/dev/null 2>"$tmp/worker.err"; then
  fail "kiwi-worker took a key neither program reads"
fi
for f in kiwi worker; do
  grep -qF "fleet.conf:8: unknown key \`topic.taks\`" "$tmp/$f.err" || fail "$f's error does not name the line: $(cat "$tmp/$f.err")"
done
echo "ok: one file, both programs: shared keys in both, each program's own key ignored by the other, a typo refused by both at its line"
