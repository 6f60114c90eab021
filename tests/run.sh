#!/usr/bin/env bash
# tests/run.sh: the whole test suite on this machine, from nothing.
#
#   1. ops/setup.sh         packages, Kafka jars, sandbox images (idempotent)
#   2. ops/stack.sh up      Kafka (KRaft), Redis, dockerd + runsc
#   3. two builds           build/ (RelWithDebInfo) and build-asan/ (ASan+UBSan),
#                           and build-release/ (Release) compiled, not tested
#   4. ctest in each        unit and integration suites, every service required
#
# Tests run side by side (ctest -j, KIWI_TEST_JOBS, default twice the cores:
# most of a test's time is spent waiting on Docker, Kafka and registries),
# sharing the stack's services and the host's network as ctest resources
# (tests/resources.json): those labelled `exclusive` stop a service or
# change the host's egress rules, and run while no other test uses that
# resource (tests/CMakeLists.txt says which and why).
# The sanitizer stage runs every unit test and every integration test that
# drives Kiwi's C code, except those labelled `release-only` (each says why
# in tests/CMakeLists.txt: a gVisor variant of a runc suite, a test of the
# ops scripts alone, a part that kill -9s the worker under test, a lint of
# the source tree); its corpus
# lays the snapshots the release stage installed (one install cache for the
# whole run, KIWI_TEST_INSTALL_CACHE) instead of installing them again, as
# the release stage's gVisor corpus lays its runc corpus's, but for one
# repository per package manager (test_corpus.c, KIWI_CORPUS_LAY_FROM).
#
# Options: --unit (unit suites only, no stack), --no-asan,
#          -R REGEX (passed to ctest), -j N (tests side by side), --help.
# Printed at the end, whatever happened: every skipped test with its
# reasons and the count, each test's time (slowest first), each suite's
# total, each stage's time. Each stage's times are also kept in
# BUILD/Testing/test-times.tsv (seconds, stage, test, status). The full
# suite fails on a skip that is not in ALLOWED_SKIPS below, and any run
# fails on a test that skipped a case but exited as passed (a skip nobody
# would see).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() { sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; }
unit_only=0 asan=1 ctest_extra=()
jobs=${KIWI_TEST_JOBS:-$(($(nproc) * 2))}
while [ $# -gt 0 ]; do
  case "$1" in
    --unit) unit_only=1 ;;
    --no-asan) asan=0 ;;
    -R) ctest_extra+=(-R "$2"); shift ;;
    -j) jobs=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "tests/run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$jobs" in
  '' | *[!0-9]* | 0) echo "tests/run.sh: -j / KIWI_TEST_JOBS must be a number of tests, at least 1 (got '$jobs')" >&2; exit 2 ;;
esac

# Skips the full suite allows: what this machine cannot have. One per line:
# TEST_NAME, a space, an extended regex that its SKIP reason matches.
ALLOWED_SKIPS='
test_firecracker_api no firecracker binary
test_firecracker_api KVM is not available
'

timings=()
skip_bad=0
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
  set -a
  # shellcheck source=/dev/null # written by ops/stack.sh, just above
  . "$env_file"
  set +a
  export KIWI_REQUIRE_SERVICES=1
  # one install cache for the run's corpus (test_corpus.c): shared by its
  # shards, laid by the gVisor shards and the sanitizer stage; removed at
  # the end
  export KIWI_TEST_INSTALL_CACHE="${KIWI_STATE_DIR:-/var/lib/kiwi}/cache/suite-$$"
fi

final_report() {
  local rc=$?
  if [ -s "$report_dir/times" ]; then
    echo "==> test times, slowest first (build, test, status)"
    sort -t $'\t' -k1,1 -rn "$report_dir/times" | awk -F '\t' '{ printf "  %9.2f s  %-8s %-34s %s\n", $1, $2, $3, $4 }'
    [ -s "$report_dir/totals" ] && sed 's/^/  /' "$report_dir/totals"
  fi
  if [ "${#timings[@]}" -gt 0 ]; then
    echo "==> timings"
    printf '  %s\n' "${timings[@]}"
  fi
  if [ -s "$report_dir/skips" ]; then
    echo "==> skipped: $(cut -f1,2 "$report_dir/skips" | sort -u | wc -l) test(s) ($(grep -c $'\tallowed$' "$report_dir/skips" || true) reason(s) allowed, $skip_bad not)"
    awk -F '\t' '{ printf "  %-8s %-28s %s%s\n", $1, $2, ($4 == "allowed" ? "" : "[" $4 "] "), $3 }' "$report_dir/skips"
  else
    echo "==> skipped: 0 tests"
  fi
  rm -rf "$report_dir"
  [ -z "${KIWI_TEST_INSTALL_CACHE:-}" ] || rm -rf "$KIWI_TEST_INSTALL_CACHE"
  # the suites' topics, so that the broker's partitions do not pile up
  # from run to run (a failure here fails nothing: it is said)
  if [ "$unit_only" != 1 ] && [ -n "${KIWI_KAFKA_BROKERS:-}" ] && [ -x "$root/build/tests/kiwi-test-topics-clean" ]; then
    "$root/build/tests/kiwi-test-topics-clean" "$KIWI_KAFKA_BROKERS" || echo "tests/run.sh: the suites' topics were not deleted (see above)" >&2
  fi
  if [ "$rc" = 0 ] && [ "$skip_bad" != 0 ]; then
    echo "tests/run.sh: $skip_bad unexpected or invisible skip(s), see above" >&2
    rc=1
  fi
  exit "$rc"
}
report_dir=$(mktemp -d /tmp/kiwi-run-XXXXXX)
trap final_report EXIT

# test_outputs DIR: "TEST<TAB>LINE" for every line of every test's output in
# DIR's LastTest.log.
test_outputs() {
  awk '
    /^[0-9]+\/[0-9]+ Testing: / { t = $3; inside = 0; next }
    t != "" && /^Output:$/ { inside = 1; next }
    /^<end of output>$/ { inside = 0; t = ""; next }
    inside && t != "" { print t "\t" $0 }
  ' "$1/Testing/Temporary/LastTest.log"
}

# test_report DIR LABEL: after ctest in DIR, from its console output
# (DIR/Testing/Temporary/ctest-console.log) and LastTest.log: each test's
# time and status, the suite's total, and every skip with its reasons.
test_report() {
  local dir=$1 label=$2 console=$1/Testing/Temporary/ctest-console.log name status reasons why
  [ -f "$console" ] && [ -f "$dir/Testing/Temporary/LastTest.log" ] || return 0
  # "  3/61 Test  #3: test_phases_env ......   Passed    0.02 sec"
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.*( |\*\*\*)(.*[^ ]) +([0-9.]+) sec$/\4\t'"$label"'\t\1\t\3/p' "$console" \
    | sed -E 's/\t +/\t/' >"$report_dir/times.$label"
  cat "$report_dir/times.$label" >>"$report_dir/times"
  sort -t $'\t' -k1,1 -rn "$report_dir/times.$label" >"$dir/Testing/test-times.tsv"
  sed -nE 's/^Total Test time \(real\) = *([0-9.]+) sec$/'"$label"': suite total \1 s/p' "$console" >>"$report_dir/totals"
  test_outputs "$dir" >"$report_dir/out-$label"
  # skips: the test's SKIP: lines and TAP SKIP directives are its reasons
  while IFS=$'\t' read -r _ _ name status; do
    reasons=$(awk -F '\t' -v t="$name" '$1 == t { sub(/^[^\t]*\t/, ""); print }' "$report_dir/out-$label" \
      | sed -nE 's/^SKIP: (.*)/\1/p; s/^(1\.\.0|(not )?ok [0-9]+)[^#]*# SKIP:? *(.*)/\3/p' | sort | uniq -c | sed -E 's/^ *1 //; s/^ *([0-9]+) (.*)/\2 (x\1)/')
    if [ "$status" = Skipped ]; then
      [ -n "$reasons" ] || reasons="(no SKIP line in its output)"
      while IFS= read -r why; do
        if skip_allowed "$name" "$why"; then
          printf '%s\t%s\t%s\tallowed\n' "$label" "$name" "$why" >>"$report_dir/skips"
        elif [ "$unit_only" = 1 ]; then
          printf '%s\t%s\t%s\tnot allowed in the full suite\n' "$label" "$name" "$why" >>"$report_dir/skips"
        else
          printf '%s\t%s\t%s\tUNEXPECTED\n' "$label" "$name" "$why" >>"$report_dir/skips"
          skip_bad=$((skip_bad + 1))
        fi
      done <<<"$reasons"
    elif [ "$status" = Passed ] && { [ -n "$reasons" ] \
      || awk -F '\t' -v t="$name" '$1 == t && $2 ~ /^\[  SKIPPED \] /' "$report_dir/out-$label" | grep >/dev/null .; }; then
      printf '%s\t%s\t%s\tINVISIBLE: passed with a skip\n' "$label" "$name" "${reasons:-a cmocka case skipped}" \
        >>"$report_dir/skips"
      skip_bad=$((skip_bad + 1))
    fi
  done <"$report_dir/times.$label"
}

# skip_allowed TEST REASON: whether ALLOWED_SKIPS has it.
skip_allowed() {
  local t re
  while read -r t re; do
    [ -n "$t" ] && [ "$t" = "$1" ] && grep -qE -- "$re" <<<"$2" && return 0
  done <<<"$ALLOWED_SKIPS"
  return 1
}

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

build_and_test() { # DIR LABEL [cmake args...]
  # explicit checks: errexit does not apply inside a function called from `if`
  local dir=$1 label=$2 rc=0 left='' excl stage_labels=("${labels[@]}"); shift 2
  # the sanitizer stage leaves out the tests labelled release-only (each
  # says why in its CMake file), and says which
  if [ "$label" = asan ]; then
    stage_labels+=(-LE release-only)
  fi
  cmake -S "$root" -B "$root/$dir" -G Ninja "$@" >/dev/null || return 1
  ninja -C "$root/$dir" || return 1
  mkdir -p "$root/$dir/Testing/Temporary"
  [ "$unit_only" = 1 ] || watch_start "$root/$dir/Testing/Temporary/containers.jsonl"
  # every test has its own TIMEOUT (kiwi_add_test; checked at configure time)
  if [ "$label" = asan ] && [ "$unit_only" != 1 ]; then
    left=$(cd "$root/$dir" && ctest -N -L release-only | sed -nE 's/^ *Test +#[0-9]+: //p' | tr '\n' ' ')
    echo "tests/run.sh: left out of the sanitizer stage (label release-only, run in the release stage): ${left:-none}"
  fi
  excl=$(cd "$root/$dir" && ctest -N -L exclusive "${stage_labels[@]}" "${ctest_extra[@]}" | sed -nE 's/^ *Test +#[0-9]+: //p' | tr '\n' ' ')
  echo "tests/run.sh: up to $jobs test(s) side by side; each alone on its resource (label exclusive): ${excl:-none}"
  (cd "$root/$dir" && ctest --output-on-failure --no-tests=error -j "$jobs" --resource-spec-file "$root/tests/resources.json" "${stage_labels[@]}" "${ctest_extra[@]}") 2>&1 \
    | tee "$root/$dir/Testing/Temporary/ctest-console.log" || rc=$?
  test_report "$root/$dir" "$label"
  if [ "$unit_only" != 1 ] && ! watch_check "$root/$dir/Testing/Temporary/containers.jsonl"; then
    echo "tests/run.sh: a sandbox broke an isolation rule, seen by the container watcher (above)" >&2
    rc=1
  fi
  if [ "$rc" != 0 ]; then
    failure_digest "$root/$dir"
    return 1
  fi
}

# The independent container watcher (tests/support/container_watch.py):
# Docker's own inspect of every container the suite's workers create,
# checked against the isolation rules from outside Kiwi's code.
watch_pid=
watch_start() { # RECORDS
  rm -f "$1" "$1.ready"
  python3 "$root/tests/support/container_watch.py" watch --out "$1" --ready "$1.ready" &
  watch_pid=$!
  for _ in $(seq 1 50); do [ -s "$1.ready" ] && return 0; sleep 0.1; done
  echo "tests/run.sh: the container watcher did not start" >&2
  return 1
}
watch_check() { # RECORDS
  local min=1
  [ "${#ctest_extra[@]}" -eq 0 ] || min=0 # a subset may start no sandbox
  [ -n "$watch_pid" ] && { kill "$watch_pid" 2>/dev/null || true; wait "$watch_pid" 2>/dev/null || true; }
  watch_pid=
  python3 "$root/tests/support/container_watch.py" check "$1" --min "$min"
}

# The Release build type compiles too (-O3 finds warnings -O2 does not, and
# -Werror makes them errors): in build-release/, niced, in the background
# of the sanitizer stage (whose time goes mostly to waiting); the run fails
# if it does not build.
release_pid=
release_compile() {
  cmake -S "$root" -B "$root/build-release" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null \
    && nice -n 19 ninja -C "$root/build-release"
}
release_compile_wait() {
  [ -n "$release_pid" ] || return 0
  local t0=$SECONDS rc=0
  wait "$release_pid" || rc=$?
  release_pid=
  if [ "$rc" != 0 ]; then
    tail -n 40 "$root/build-release/compile.log" >&2
    echo "tests/run.sh: the Release build type does not compile (the whole log: build-release/compile.log; again: cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build-release)" >&2
    return 1
  fi
  echo "tests/run.sh: the Release build type compiles (waited $((SECONDS - t0)) s for it)"
}

stage "build+test (release)" build_and_test build release
if [ "$unit_only" != 1 ] && [ "${#ctest_extra[@]}" -eq 0 ]; then
  mkdir -p "$root/build-release"
  release_compile >"$root/build-release/compile.log" 2>&1 &
  release_pid=$!
fi
if [ "$asan" = 1 ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  stage "build+test (asan+ubsan)" build_and_test build-asan asan -DKIWI_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
fi
stage "compile (Release)" release_compile_wait

