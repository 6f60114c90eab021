#!/usr/bin/env bash
# bench/bench_go_std.sh: what the Go image's compiled standard library saves
# a Go repository's Phase B. The corpus's Go repositories (test_corpus,
# KIWI_CORPUS_ONLY) run through the real inspection, Phase A and step 0,
# each round twice, interleaved so drift hits both alike:
#   std    - the catalogue as it is: kiwi/go:1.27 with /usr/local/go-cache,
#            which Phase B's prelude links into the sandbox's build cache;
#   bare   - the same image with that folder removed (built here as
#            kiwi/go:1.27-bench-bare, removed at the end), as a Go image
#            without a compiled standard library is: every package the
#            tests import is compiled from source in every sandbox.
# Same binary, same installs (the runs share nothing else: each test_corpus
# run installs for itself). Prints each round's per-repository seconds, then
# the median of each and the ratio bare/std.
#
# Usage: bench/bench_go_std.sh [--rounds N] [--only a,b,...] [--build DIR]
#   --rounds  rounds of both (default 3)
#   --only    the corpus repositories (default the four Go ones)
#   --build   the build tree whose tests/test_corpus runs (default build)
# Root, the stack (ops/stack.sh up; its env file is read), the images built.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 only=go-too-new,go-workspace,go-service-frontend,go-toolchain-dep build=build
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --only) only=$2; shift ;;
    --build) build=$2; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_go_std: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench_go_std: --rounds is a number of rounds, not '$rounds'" >&2; exit 2; }
corpus=$PWD/$build/tests/test_corpus
[[ -x $corpus ]] || { echo "bench_go_std: $corpus is missing: cmake -S . -B $build -G Ninja && ninja -C $build" >&2; exit 1; }
f=${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env
[[ -f $f ]] || { echo "bench_go_std: $f is missing: bash ops/stack.sh up" >&2; exit 1; }
set -a
# shellcheck source=/dev/null # the stack's env file, written by ops/stack.sh
. "$f"
set +a
export KIWI_REQUIRE_SERVICES=1
docker image inspect kiwi/go:1.27 >/dev/null 2>&1 || { echo "bench_go_std: kiwi/go:1.27 is not built: bash ops/images/build.sh go1.27" >&2; exit 1; }
if ! docker run --rm --network none kiwi/go:1.27 test -d /usr/local/go-cache; then
  echo "bench_go_std: kiwi/go:1.27 has no /usr/local/go-cache: it predates the compiled standard library (bash ops/images/build.sh go1.27)" >&2
  exit 1
fi

bare=kiwi/go:1.27-bench-bare
b=$(mktemp -d /var/tmp/kiwi-bench-go-std.XXXXXX)
cleanup() { docker rmi "$bare" >/dev/null 2>&1 || true; rm -rf "$b"; }
trap cleanup EXIT
printf 'FROM kiwi/go:1.27\nUSER root\nRUN rm -rf /usr/local/go-cache\nUSER kiwi\n' >"$b/Dockerfile"
docker build -q -t "$bare" "$b" >"$b/build.log" 2>&1 || { cat "$b/build.log" >&2; exit 1; }
std_catalog=$PWD/ops/images/catalog.local.tsv
sed 's#kiwi/go:1\.27$#'"$bare"'#' "$std_catalog" >"$b/bare.tsv"
grep -q "$bare" "$b/bare.tsv" || { echo "bench_go_std: the catalogue has no kiwi/go:1.27 row" >&2; exit 1; }

# one run of the corpus subset under catalogue $2, labelled $1: prints
# "LABEL ROUND repository=seconds ..." and keeps the total in $b/LABEL.times
run() {
  local label=$1 catalog=$2 round=$3 log=$b/$1-$3.log
  if ! (cd "$(dirname "$corpus")" && KIWI_IMAGE_CATALOG=$catalog KIWI_CORPUS_ONLY=$only "$corpus") >"$log" 2>&1; then
    # the bare runs name another image than expect.json: a mismatch there is
    # the image's name; any other failure is the bench's
    if [[ $label == std ]] || ! grep -q '^corpus: ' "$log"; then
      tail -n 30 "$log" >&2
      echo "bench_go_std: the $label run failed (log above)" >&2
      exit 1
    fi
  fi
  local total
  total=$(awk '/^corpus: / { sub(/s$/, "", $4); t += $4 } END { printf "%.1f", t }' "$log")
  echo "$total" >>"$b/$label.times"
  echo "$label round $round: $(awk '/^corpus: / { printf "%s=%s ", $2, $4 }' "$log")total ${total}s"
}

for r in $(seq 1 "$rounds"); do
  run bare "$b/bare.tsv" "$r"
  run std "$std_catalog" "$r"
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
m_bare=$(median "$b/bare.times") m_std=$(median "$b/std.times")
echo "median of $rounds round(s): bare ${m_bare}s, std ${m_std}s, ratio bare/std $(awk -v a="$m_bare" -v b="$m_std" 'BEGIN { printf "%.2f", a / b }')"
