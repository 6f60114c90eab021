#!/usr/bin/env bash
# tests/run.sh: the whole test suite on this machine, from nothing.
#
#   1. ops/setup.sh         packages, Kafka jars, sandbox images (idempotent)
#   2. ops/stack.sh up      Kafka (KRaft), Redis, dockerd + runsc
#   3. two builds           build/ (RelWithDebInfo) and build-asan/ (ASan+UBSan)
#   4. ctest in each        unit and integration suites, every service required
#
# Options: --unit (unit suites only, no stack), --no-asan, --keep-going,
#          -R REGEX (passed to ctest), --help.
# Timings for each stage are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
unit_only=0 asan=1 ctest_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --unit) unit_only=1 ;;
    --no-asan) asan=0 ;;
    -R) ctest_extra+=(-R "$2"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "tests/run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

timings=()
stage() { # stage NAME CMD...
  local name=$1; shift
  local t0=$SECONDS
  echo "==> $name"
  if ! "$@"; then
    echo "tests/run.sh: stage '$name' failed" >&2
    exit 1
  fi
  timings+=("$(printf '%-28s %5ds' "$name" $((SECONDS - t0)))")
}

if [ "$unit_only" = 1 ]; then
  stage "setup (packages only)" bash ops/setup.sh --no-images --no-kafka
else
  stage "setup" bash ops/setup.sh
  stage "stack up" bash ops/stack.sh up
  env_file="${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env"
  set -a; . "$env_file"; set +a
  export KIWI_REQUIRE_SERVICES=1
fi

labels=(-L unit)
[ "$unit_only" = 1 ] || labels=()

# failure_digest DIR: after a failed ctest, the reason of each failed test
# in a few lines, printed last so that it survives a log cut in the middle
# (the whole output of every test stays in DIR/Testing/Temporary/LastTest.log)
failure_digest() {
  local dir=$1 log=$1/Testing/Temporary/LastTest.log failed=$1/Testing/Temporary/LastTestsFailed.log
  [ -f "$failed" ] && [ -f "$log" ] || return 0
  echo "==> why each test failed ($dir; the whole output: $log)"
  local name
  while IFS=: read -r _ name; do
    echo "--- $name"
    awk -v t="$name" '
      $0 ~ "^[0-9]+/[0-9]+ Testing: " { inside = ($3 == t); n = 0; err = 0; next }
      !inside || n >= 60 || /^Command: / { next }
      /^\[  ERROR   \]/ { err = 1 }
      err || /^\[  FAILED  \]/ || /^not ok / || /Sanitizer|runtime error|^SUMMARY:|FAIL: |Failure!|Timeout|Segmentation|Test Failed|Exception/ {
        print "  " substr($0, 1, 400); n++
      }
      /^\[   LINE   \]/ { err = 0 }
    ' "$log"
  done <"$failed"
}

build_and_test() { # DIR [cmake args...]
  # explicit checks: errexit does not apply inside a function called from `if`
  local dir=$1; shift
  cmake -S "$root" -B "$root/$dir" -G Ninja "$@" >/dev/null || return 1
  ninja -C "$root/$dir" || return 1
  if ! (cd "$root/$dir" && ctest --output-on-failure --timeout 900 --no-tests=error "${labels[@]}" "${ctest_extra[@]}"); then
    failure_digest "$root/$dir"
    return 1
  fi
}

stage "build+test (release)" build_and_test build
if [ "$asan" = 1 ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  stage "build+test (asan+ubsan)" build_and_test build-asan -DKIWI_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
fi

echo "==> timings"
printf '  %s\n' "${timings[@]}"
