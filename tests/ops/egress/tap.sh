# tests/ops/egress/tap.sh: the TAP helpers of the egress scripts' tests
# (sourced): ok/notok/check count and print test points, note and indent
# print comments, bail ends the run, skip_or_fail skips (exit 77) or, with
# KIWI_REQUIRE_SERVICES=1 (the full suite), fails. The caller prints the
# plan ("1..$n") and decides its exit status from $failed (tap_finish RC
# does both).
# shellcheck shell=bash
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else notok "$d"; fi; }
note() { echo "# $*"; }
indent() { sed 's/^/#   /'; }
bail() { echo "Bail out! $*"; exit 1; }
skip_or_fail() {
  if [[ ${KIWI_REQUIRE_SERVICES:-0} == 1 ]]; then echo "Bail out! required: $*"; exit 1; fi
  echo "1..0 # SKIP $* (set KIWI_REQUIRE_SERVICES=1 to fail instead)"; exit 77
}
# tap_finish RC: the plan, the count of failures, and the exit (1 when a
# point failed, else RC)
tap_finish() {
  local rc=$1
  echo "1..$n"
  if ((failed > 0 || rc != 0)); then [[ $rc == 0 ]] && rc=1; echo "# $failed of $n failed"; fi
  exit "$rc"
}
