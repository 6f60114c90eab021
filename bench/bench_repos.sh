#!/usr/bin/env bash
# bench/bench_repos.sh: real public repositories through `kiwi-worker --once`
# as a new user meets them: does each get a working environment, or a true,
# actionable stop? Prints a row per repository, the rate per ecosystem and
# the median Phase A and step-0 times. Asserts nothing.
#
# Usage: bench/bench_repos.sh --list FILE --mirrors FILE [--out DIR]
#                              [--only REPO,REPO...] [--open-egress | --internal]
#        bench/bench_repos.sh --list FILE --out DIR --report
#   --list FILE     repositories, tab-separated with a header line:
#                   repo commit ecosystem test_command notes
#                   (bench/repos.tsv is the project's list)
#   --mirrors FILE  where the clones are: `owner/name<TAB>GIT_DIR` per line,
#                   a bare repository or a clone holding the commit. The
#                   repositories' code never enters this project: bring
#                   them yourself (git clone --bare URL DIR). A mirror
#                   lacking some of the commit's files (a snapshot without
#                   its largest blobs) gives a stand-in commit: the same
#                   tree with each absent file a line saying so, no
#                   history; the log names the files
#   --out DIR       keeps each run's output (events, worker log) and the
#                   report (report.tsv, report.txt); a temporary folder
#                   otherwise
#   --only LIST     those repositories only
#   --keep-state    keeps each run's state directory (runs/NAME/state: the
#                   workspace, the snapshot, the mirror; up to a few GB a
#                   repository); removed once the run ends otherwise
#   --open-egress   Phase A without the host's egress rules
#                   (KIWI_ONCE_EGRESS_UNCHECKED=true): the report then says
#                   it was not made in the production configuration
#   --report        runs nothing: the report of what DIR's runs hold (a
#                   run that was stopped part way; repositories not run yet
#                   are left out)
#   --internal      Phase A through the worker's egress proxy as in
#                   production, with the host's rules untouched: the install
#                   bridge's network (KIWI_BENCH_BRIDGE, kiwi-install13 by
#                   default) is made an internal Docker network, which has
#                   no way out but the proxy on its gateway. For a machine
#                   where other work runs (applying the rules would change
#                   its Phase A too); the report says which configuration
#
# Production configuration by default: KIWI_EGRESS_APPLY=true (the worker
# applies the host's egress rules: run as root), Phase A through the
# worker's egress proxy, and an empty cache (Redis is pointed at a port
# nobody listens on, so every install and every step 0 runs for real; no
# artifact store), the CA bundle KIWI_CA_BUNDLE names (the system's when
# unset). Each task names the commit of the list; the model's
# address is one nobody answers (127.0.0.1:9): a task whose step 0 fails
# for a code reason then ends with a model error, which the report does
# not count against the environment.
#
# Verdicts, from the task's own events:
#   env      step 0 ran the tests: they passed, or failed as code fails
#   stopped  step 0 stopped and named the cause (a version, a service, a
#            host, a tool): a true stop if the cause is right (read it)
#   setup    the install failed, or step 0 could not run the tests
#   error    Kiwi's own fault (clone, sandbox, Docker)
# Needs the stack (dockerd): set -a; . /var/lib/kiwi/stack.env; set +a.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tests/worker/sh/lib.sh"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
LIST="" MIRRORS="" OUT="" ONLY="" OPEN=0 INTERNAL=0 REPORT=0 KEEP_STATE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --list) LIST=$2; shift 2 ;;
    --mirrors) MIRRORS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --open-egress) OPEN=1; shift ;;
    --internal) INTERNAL=1; shift ;;
    --report) REPORT=1; shift ;;
    --keep-state) KEEP_STATE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench_repos: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$LIST" ] && [ -f "$LIST" ] || { echo "bench_repos: --list FILE is required (bench/repos.tsv)" >&2; exit 2; }
if [ "$REPORT" = 1 ]; then
  [ -n "$OUT" ] && [ -d "$OUT/runs" ] || { echo "bench_repos: --report needs --out DIR of a run (with DIR/runs)" >&2; exit 2; }
  config=$(cat "$OUT/config.txt" 2>/dev/null || echo "configuration not recorded")
else
[ -n "$MIRRORS" ] && [ -f "$MIRRORS" ] || { echo "bench_repos: --mirrors FILE is required (see --help)" >&2; exit 2; }
[ -x "$WORKER" ] || { echo "bench_repos: $WORKER is not built (cmake --build build)" >&2; exit 2; }
[ "$OPEN$INTERNAL" != 11 ] || { echo "bench_repos: --open-egress and --internal exclude each other" >&2; exit 2; }
if [ "$OPEN" = 0 ] && [ "$(id -u)" != 0 ]; then
  echo "bench_repos: the production configuration applies the host's egress rules: run as root, or pass --open-egress" >&2
  exit 2
fi
OUT=${OUT:-$TMP/out}
mkdir -p "$OUT/runs" "$TMP/git"
chmod 755 "$OUT" "$OUT/runs"

# each listed commit in a bare repository of its own whose main branch it
# is, all served by one git daemon on loopback as owner+name.git
mirror_of() { awk -F'\t' -v r="$1" '$1 == r { print $2; exit }' "$MIRRORS"; }
# stand_in MIRROR COMMIT BARE NAME: a mirror whose snapshot left out some
# of the commit's files (a snapshot drops its largest blobs: a website's
# images, a big fixture) cannot give the commit itself. BARE then gets a
# stand-in: a commit without parents, with the same message, author and
# dates, whose tree is the commit's with each absent file replaced by a
# line saying so; its id goes to $TMP/git/NAME.commit (the task names it)
# and the log lists the files. Fails when the commit's trees are absent too.
stand_in() {
  local mirror commit=$2 bare=$3 name=$4 missing n=0 h meta path
  mirror=$(git -C "$1" rev-parse --absolute-git-dir 2>>"$TMP/prep.log") || return 1
  git --git-dir="$mirror" ls-tree -r "$commit" >"$TMP/stand-in.tree" 2>>"$TMP/prep.log" || return 1
  rm -rf "$bare" && git init -q --bare "$bare"
  printf '%s/objects\n' "$mirror" >"$bare/objects/info/alternates"
  missing=$(awk '$2 == "blob" { print $3 }' "$TMP/stand-in.tree" | git --git-dir="$bare" cat-file --batch-check |
    awk '$2 == "missing" { print $1 }')
  local idx="$TMP/stand-in.index" blob
  rm -f "$idx"
  GIT_INDEX_FILE=$idx git --git-dir="$bare" read-tree "$commit" || return 1
  blob=$(printf 'kiwi bench: this file was absent from the mirror\n' | git --git-dir="$bare" hash-object -w --stdin)
  for h in $missing; do
    while IFS=$'\t' read -r meta path; do
      GIT_INDEX_FILE=$idx git --git-dir="$bare" update-index --cacheinfo "${meta%% *},$blob,$path" || return 1
      log "$name: absent from the mirror, replaced by a line saying so: $path"
      n=$((n + 1))
    done < <(awk -v h="$h" '$3 == h' "$TMP/stand-in.tree")
  done
  local tree new f
  tree=$(GIT_INDEX_FILE=$idx git --git-dir="$bare" write-tree) || return 1
  f() { git --git-dir="$mirror" log -1 --format="$1" "$commit"; }
  new=$(f %B | GIT_AUTHOR_NAME=$(f %an) GIT_AUTHOR_EMAIL=$(f %ae) GIT_AUTHOR_DATE=$(f %aI) \
    GIT_COMMITTER_NAME=$(f %cn) GIT_COMMITTER_EMAIL=$(f %ce) GIT_COMMITTER_DATE=$(f %cI) \
    git --git-dir="$bare" commit-tree "$tree") || return 1
  # its own objects, no alternates: git daemon serves it alone
  git --git-dir="$bare" repack -q -a -d && rm -f "$bare/objects/info/alternates" || return 1
  git --git-dir="$bare" update-ref refs/heads/main "$new"
  git --git-dir="$bare" symbolic-ref HEAD refs/heads/main
  printf '%s\n' "$new" >"$TMP/git/$name.commit"
  log "$name: $commit lacks $n file(s) in $1: the task names a stand-in commit $new (its tree but those, no history)"
}
tail -n +2 "$LIST" | while IFS=$'\t' read -r repo commit _rest; do
  [ -n "$repo" ] || continue
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$repo,"* ]]; then continue; fi
  dir=$(mirror_of "$repo")
  [ -n "$dir" ] && [ -d "$dir" ] || { log "no mirror for $repo in $MIRRORS: it will be an error row"; continue; }
  bare="$TMP/git/${repo/\//+}.git"
  git init -q --bare "$bare"
  # the commit with its history and the tags, as a user's clone has them:
  # a project's version from git (setuptools-scm, hatch-vcs) is read from
  # the tags, which a shallow copy of the commit alone lacks. A mirror that
  # lacks objects of older history (a snapshot leaves large ones out) gives
  # the commit alone (depth 1, in a new bare repository), said in the log:
  # its version from git is then unknown, as in a shallow CI checkout
  if ! git -C "$bare" fetch -q "file://$(cd "$dir" && pwd)" "$commit" '+refs/tags/*:refs/tags/*' 2>"$TMP/prep.log"; then
    rm -rf "$bare" && git init -q --bare "$bare"
    if git -C "$bare" fetch -q --depth 1 "file://$(cd "$dir" && pwd)" "$commit" 2>>"$TMP/prep.log"; then
      log "$repo: the history of $commit is incomplete in $dir ($(sed -n 1p "$TMP/prep.log")): the commit alone, no tags"
    elif stand_in "$dir" "$commit" "$bare" "${repo/\//+}"; then
      continue
    else
      log "$repo: $commit is not in $dir: $(tail -n 1 "$TMP/prep.log")"
      rm -rf "$bare"
      continue
    fi
  fi
  git -C "$bare" update-ref refs/heads/main "$commit"
  git -C "$bare" symbolic-ref HEAD refs/heads/main
done
gport=$(free_port)
git daemon --reuseaddr --base-path="$TMP/git" --export-all --listen=127.0.0.1 --port="$gport" "$TMP/git" \
  >"$TMP/git-daemon.log" 2>&1 &
PIDS+=($!)
sleep 0.5

dead_port=$(free_port) # Redis nobody answers: an empty cache
# Phase A trusts the operator's CA bundle (a TLS-intercepting proxy's CA):
# the system's when KIWI_CA_BUNDLE is unset
if [ -z "${KIWI_CA_BUNDLE:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  export KIWI_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
fi
log "CA bundle for Phase A: ${KIWI_CA_BUNDLE:-none}"
egress_env=(KIWI_EGRESS_APPLY=true)
[ "$OPEN" = 1 ] && egress_env=(KIWI_EGRESS_APPLY=false KIWI_ONCE_EGRESS_UNCHECKED=true)
config="production configuration (egress rules applied, Phase A through the proxy, empty cache)"
[ "$OPEN" = 1 ] && config="NOT the production configuration: --open-egress (no egress rules), empty cache"
if [ "$INTERNAL" = 1 ]; then
  # the install network made internal on a bridge of the bench's; each
  # --once run starts its proxy on that bridge's gateway
  BRIDGE=${KIWI_BENCH_BRIDGE:-kiwi-install13}
  case "$BRIDGE" in kiwi-install[1-9] | kiwi-install1[0-5]) ;; *)
    echo "bench_repos: KIWI_BENCH_BRIDGE must be kiwi-install1 .. kiwi-install15 (kiwi-install0 is every test's)" >&2
    exit 2 ;;
  esac
  "${DOCKER[@]}" network rm "$BRIDGE" >/dev/null 2>&1 || true
  "${DOCKER[@]}" network create --internal -o com.docker.network.bridge.enable_icc=false \
    -o com.docker.network.bridge.name="$BRIDGE" -o com.docker.network.bridge.enable_ip_masquerade=false \
    --label org.kiwi.network=install-internal "$BRIDGE" >/dev/null
  on_cleanup() { "${DOCKER[@]}" network rm "$BRIDGE" >/dev/null 2>&1 || true; }
  egress_env=(KIWI_EGRESS_APPLY=false KIWI_ONCE_EGRESS_UNCHECKED=true KIWI_INSTALL_BRIDGE="$BRIDGE")
  config="production-equivalent: Phase A only through the egress proxy (an internal install network on $BRIDGE instead of the host's rules), empty cache"
fi
log "$config"
printf '%s\n' "$config" >"$OUT/config.txt"

tail -n +2 "$LIST" | while IFS=$'\t' read -r repo commit eco cmd _notes; do
  [ -n "$repo" ] || continue
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$repo,"* ]]; then continue; fi
  name=${repo/\//+}
  run="$OUT/runs/$name"
  mkdir -p "$run"
  if [ ! -e "$TMP/git/$name.git" ]; then
    printf '{"type":"bench","verdict":"error","reason":"no mirror"}\n' >"$run/once.jsonl"
    continue
  fi
  ref=$commit
  [ -f "$TMP/git/$name.commit" ] && ref=$(cat "$TMP/git/$name.commit")
  python3 - "$run/task.json" "$repo" "$ref" "$cmd" "git://127.0.0.1:$gport/$name.git" <<'PY'
import json, sys
out, repo, commit, cmd, url = sys.argv[1:6]
json.dump({"id": "bench-" + repo.replace("/", "-") + "-" + commit[:12], "repo": {"url": url, "ref": commit},
           "test_command": cmd, "goal": "Make the tests pass.", "limits": {"max_rounds": 1},
           "model": {"provider": "anthropic", "name": "claude-sonnet-4-5", "base_url": "http://127.0.0.1:9/"}},
          open(out, "w"))
PY
  log "$repo ($eco): $cmd"
  start=$(date +%s%3N)
  set +e
  env -u KIWI_STORE_URL "${egress_env[@]}" KIWI_STATE_DIR="$run/state" KIWI_WORKER_ID="bench-$$-${name//+/-}" \
    KIWI_REDIS_HOST=127.0.0.1 KIWI_REDIS_PORT="$dead_port" \
    KIWI_REPO_SCHEMES=https,ssh,git KIWI_MODEL_BASE_URLS=http://127.0.0.1:9/ ANTHROPIC_API_KEY=kiwi-bench-no-model \
    KIWI_IMAGE_CATALOG="${KIWI_IMAGE_CATALOG:-$ROOT/ops/images/catalog.local.tsv}" \
    timeout 3600 "$WORKER" --once "$run/task.json" >"$run/once.jsonl" 2>"$run/worker.log"
  rc=$?
  set -e
  printf '{"type":"bench","exit":%d,"wall_ms":%d}\n' "$rc" "$(($(date +%s%3N) - start))" >>"$run/once.jsonl"
  [ "$KEEP_STATE" = 1 ] || rm -rf "$run/state"
done
fi

python3 - "$LIST" "$OUT" "$config" "$ONLY" "$REPORT" <<'PY'
import json, os, statistics, sys
lst, out, config, only, report_only = sys.argv[1:6]
rows, per = [], {}
for line in open(lst).read().splitlines()[1:]:
    f = line.split("\t")
    if len(f) < 4 or (only and f[0] not in only.split(",")):
        continue
    repo, commit, eco, cmd = f[:4]
    path = os.path.join(out, "runs", repo.replace("/", "+"), "once.jsonl")
    if report_only == "1" and not os.path.exists(path):
        continue
    ev = {"install": None, "step0": None, "result": None, "wall_ms": None}
    try:
        for l in open(path):
            try:
                j = json.loads(l)
            except ValueError:
                continue
            if j.get("type") == "progress" and j["event"]["kind"] in ("install", "step0"):
                ev[j["event"]["kind"]] = j["event"].get("payload", {})
            elif j.get("type") == "result":
                ev["result"] = j["result"]
            elif j.get("type") == "bench":
                ev["wall_ms"] = j.get("wall_ms")
    except OSError:
        pass
    s0, ins, res = ev["step0"] or {}, ev["install"] or {}, ev["result"] or {}
    st = s0.get("status")
    if st in ("passed", "failed"):
        verdict = "env"
    elif st == "stopped":
        verdict = "stopped"
    elif st == "install_failed" or ins.get("status") == "failed":
        verdict = "setup"
    else:
        verdict = "error"
    reason = s0.get("reason") or ins.get("reason") or res.get("reason") or ""
    if not reason:  # no event: the worker's last words
        try:
            reason = open(os.path.join(os.path.dirname(path), "worker.log")).read().strip().splitlines()[-1]
        except (OSError, IndexError):
            pass
    reason = reason.replace("\n", " ").replace("\t", " ")
    cls = (s0.get("classification") or {}).get("class", "-")
    rows.append([repo, eco, verdict, (st or "-") + "/" + cls, s0.get("image", "-"), ins.get("command", "-"),
                 "%.1f" % (ins.get("duration_ms", 0) / 1000) if ins.get("duration_ms") is not None else "-",
                 "%.1f" % (s0.get("duration_ms", 0) / 1000) if s0.get("duration_ms") is not None else "-",
                 "%.0f" % ((ev["wall_ms"] or 0) / 1000), reason[:300]])
    per.setdefault(eco, []).append(verdict)
head = ["repo", "ecosystem", "verdict", "step0/class", "image", "install", "install_s", "step0_s", "wall_s", "reason"]
with open(os.path.join(out, "report.tsv"), "w") as f:
    f.write("\t".join(head) + "\n" + "".join("\t".join(r) + "\n" for r in rows))
lines = ["bench_repos: " + config, ""]
w = [max(len(str(r[i])) for r in rows + [head]) for i in range(9)]
for r in [head] + rows:
    lines.append("  ".join(str(r[i]).ljust(w[i]) for i in range(9)) + "  " + r[9][:120])
lines.append("")
tot = {k: 0 for k in ("env", "stopped", "setup", "error")}
for eco in sorted(per):
    v = per[eco]
    for k in tot:
        tot[k] += v.count(k)
    lines.append("%-10s %2d repositories: %d env, %d stopped, %d setup, %d error" % (
        eco, len(v), v.count("env"), v.count("stopped"), v.count("setup"), v.count("error")))
n = len(rows)
if n:
    lines.append("all        %2d repositories: %d env (%.0f%%), %d stopped (%.0f%%), %d setup, %d error" % (
        n, tot["env"], 100.0 * tot["env"] / n, tot["stopped"], 100.0 * tot["stopped"] / n, tot["setup"], tot["error"]))
    for i, what in ((6, "Phase A"), (7, "step 0")):
        xs = [float(r[i]) for r in rows if r[i] != "-"]
        if xs:
            lines.append("median %s: %.1f s over %d repositories" % (what, statistics.median(xs), len(xs)))
text = "\n".join(lines) + "\n"
open(os.path.join(out, "report.txt"), "w").write(text)
print(text, end="")
PY
log "report: $OUT/report.txt"
