#!/usr/bin/env bash
# bench/bench_lower.sh: what the kind of lower layer costs a verify. The
# same test command runs in a container over three overlays that differ
# only in their lower layer, interleaved so drift hits all three alike:
#   image  - the snapshot's squashfs image mounted for this run alone (what
#            Kiwi does per sandbox, sandbox/docker/disk.c: a cold file system);
#   shared - the same image mounted once for the whole bench (warm);
#   tree   - the snapshot extracted onto the host's file system (what Kiwi
#            did before images).
# Each overlay is laid and bind-mounted at /kiwi as Kiwi does (upper and
# work on the host, the tree copied over the dependencies); the container
# runs `docker run --rm --network none --user 1000:1000`. Prints each run,
# then the median, mean and minimum of each and the ratios image/tree and
# shared/tree.
#
# Usage: bench/bench_lower.sh [--runs N] [--runtime runc|runsc] [--work DIR]
#                             [--image IMAGE] [--command CMD]
# --work is bench_deps's (default /var/tmp/kiwi-bench-deps): run
# build/bench/bench_deps once first, it leaves snapshot/deps.sqfs, the
# snapshot's tars and the fixture's tree there. Root, dockerd (stack.env).
set -euo pipefail
runs=8 runtime=runc work=/var/tmp/kiwi-bench-deps image=kiwi/node:22 command='npx jest'
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2; shift ;;
    --runtime) runtime=$2; shift ;;
    --work) work=$2; shift ;;
    --image) image=$2; shift ;;
    --command) command=$2; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_lower: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case $runtime in runc|runsc) ;; *) echo "bench_lower: --runtime is runc or runsc, not $runtime" >&2; exit 2 ;; esac
f=${KIWI_STATE_DIR:-/var/lib/kiwi}/stack.env
# shellcheck source=/dev/null # the stack's env file, written by ops/stack.sh
[[ -f $f ]] && { set -a; . "$f"; set +a; }
export DOCKER_HOST=${DOCKER_HOST:-unix://${KIWI_DOCKER_SOCKET:-/var/lib/kiwi/run/docker.sock}}
img=$work/snapshot/deps.sqfs
for need in "$img" "$work/snapshot/src.tar" "$work/tree"; do
  [[ -e $need ]] || { echo "bench_lower: $need is missing: run build/bench/bench_deps first" >&2; exit 1; }
done

b=$(mktemp -d /var/tmp/kiwi-bench-lower.XXXXXX)
cleanup() {
  local m
  for m in "$b/m" "$b/fresh" "$b/shared"; do mountpoint -q "$m" 2>/dev/null && umount "$m"; done
  rm -rf "$b"
}
trap cleanup EXIT
mkdir -p "$b/shared" "$b/fresh" "$b/tree/src" "$b/tree/home"
mount -t squashfs -o loop,ro,nosuid,nodev "$img" "$b/shared"
tar -C "$b/tree" -xf "$work/snapshot/src.tar"
[[ -s $work/snapshot/home.tar ]] && tar -C "$b/tree" -xf "$work/snapshot/home.tar"
chown -R 1000:1000 "$b/tree/src" "$b/tree/home"

# one verify over the lower $1; prints its milliseconds
run() {
  rm -rf "$b/u" "$b/w"
  mkdir -p "$b/u/src" "$b/u/home" "$b/u/tmp" "$b/w" "$b/m"
  chown -R 1000:1000 "$b/u"
  mount -t overlay overlay -o "lowerdir=$1,upperdir=$b/u,workdir=$b/w,nosuid,nodev" "$b/m"
  cp -a "$work/tree/." "$b/m/src/"
  local s e
  s=$(date +%s%N)
  docker run --rm --runtime "$runtime" --network none --user 1000:1000 -e HOME=/kiwi/home -v "$b/m:/kiwi" \
    "$image" sh -c "cd /kiwi/src && $command" >/dev/null 2>&1 || true
  e=$(date +%s%N)
  umount "$b/m"
  echo $(((e - s) / 1000000))
}

echo "runtime $runtime, image $image, command \`$command\`, $runs runs"
results=$b/results
for _ in $(seq "$runs"); do
  mount -t squashfs -o loop,ro,nosuid,nodev "$img" "$b/fresh"
  i=$(run "$b/fresh")
  umount "$b/fresh"
  s=$(run "$b/shared")
  t=$(run "$b/tree")
  echo "image $i shared $s tree $t" | tee -a "$results"
done
python3 - "$results" <<'EOF'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
col = {k: [int(r[i]) for r in rows] for k, i in (("image", 1), ("shared", 3), ("tree", 5))}
for k, v in col.items():
    print(f"{k}: median {st.median(v):.0f} ms, mean {st.mean(v):.0f} ms, min {min(v)} ms")
t = st.median(col["tree"])
print(f"ratio image/tree {st.median(col['image']) / t:.2f}, shared/tree {st.median(col['shared']) / t:.2f} (medians)")
EOF
