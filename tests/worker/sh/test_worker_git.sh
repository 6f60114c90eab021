#!/usr/bin/env bash
# test_worker_git.sh: git metadata stays out of reach of the model and the
# repository, through the real kiwi-worker (--once), the real Docker
# sandbox and the scripted provider; every check is made from outside, on
# the host: canary files a planted git configuration would create, the work
# tree watched for `.git` while the task runs, the state directory's size.
#
#   gitconfig  the model writes .git/config (core.fsmonitor, hooksPath,
#              pager) by every spelling, and hooks, then fixes the bug: each
#              write is refused, the result is fixed, its diff applies to a
#              fresh clone, no canary, no `.git` in the work tree at any time
#   subdir     a subdir that is a symlink to `.git`, `.git` itself, and a
#              directory laid out as a bare repository with a planted config:
#              refused by name before anything runs, no canary
#   bomb       a git bomb (10^9 paths in a few KB): a named error, nothing
#              checked out, the state directory did not grow
. "$(dirname "$0")/lib.sh"
need_services

STATE="$TMP/state"
mkdir -p "$STATE"
CANARY=/tmp/kiwi-canary-gitconfig-fsmonitor # named in js-sum-gitconfig.json
RCANARY="/tmp/kiwi-canary-$RUN_ID"          # planted by the repositories below
rm -f "$CANARY" "$RCANARY"
on_cleanup() { rm -f "$CANARY" "$RCANARY"; }
provider_serve

# make_src NAME [shell fragment run in it before the commit]: a js-sum
# repository at $TMP/src-NAME
make_src() {
  local name=$1 extra=${2:-:}
  local d="$TMP/src-$name"
  mkdir -p "$d"
  cp -a "$ROOT/tests/fixtures/examples/js-sum/." "$d/"
  (cd "$d" && eval "$extra" && git init -q -b main && git -c user.email=kiwi@test -c user.name=kiwi add -A &&
    git -c user.email=kiwi@test -c user.name=kiwi commit -q -m "$name")
}

# run_once NAME URL SUBDIR SCRIPT: one task with kiwi-worker --once; the
# result's JSON in $TMP/NAME.result.json, events in $TMP/NAME.jsonl
run_once() {
  local name=$1 url=$2 subdir=$3 script=$4
  python3 - "$TMP/$name.task.json" "$name" "$url" "$subdir" "$PROVIDER_PORT" "$script" <<'PY'
import json, sys
path, name, url, subdir, port, script = sys.argv[1:7]
repo = {"url": url, "ref": "main"}
if subdir:
    repo["subdir"] = subdir
json.dump({"id": name, "repo": repo, "test_command": "npm test", "goal": "Make the tests pass.",
           "limits": {"max_rounds": 1},
           "model": {"provider": "anthropic", "name": "claude-sonnet-4-5-20250929",
                     "base_url": f"http://127.0.0.1:{port}/script/{script}"}}, open(path, "w"))
PY
  set +e
  env KIWI_ONCE_EGRESS_UNCHECKED=true KIWI_STATE_DIR="$STATE" KIWI_ALLOW_LOCAL_REPOS=true KIWI_WORKER_ID="$RUN_ID-$name" \
    KIWI_MODEL_BASE_URLS="http://127.0.0.1:$PROVIDER_PORT/" \
    KIWI_IMAGE_CATALOG="$ROOT/ops/images/catalog.local.tsv" KIWI_SANDBOX_RUNTIME="${KIWI_SANDBOX_RUNTIME:-docker}" \
    ANTHROPIC_API_KEY="kiwi-test-anthropic-key-7f3a9c" \
    "$WORKER" --once "$TMP/$name.task.json" >"$TMP/$name.jsonl" 2>"$TMP/$name.log"
  set -e
  python3 - "$TMP/$name.jsonl" "$TMP/$name.result.json" <<'PY'
import json, sys
res = [json.loads(l)["result"] for l in open(sys.argv[1]) if l.startswith('{"type":"result"')]
assert len(res) == 1, f"{len(res)} results"
json.dump(res[0], open(sys.argv[2], "w"))
PY
}

field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]) or "")' "$1" "$2"; }

failures=0
check() { if eval "$2"; then log "ok   $1"; else log "FAIL $1"; failures=$((failures + 1)); fi; }

# ---- gitconfig -------------------------------------------------------------
make_src gitconfig
# watch the work trees for a `.git` entry while the task runs
( set +e; while :; do find "$STATE/work" -iname .git 2>/dev/null; sleep 0.05; done ) >"$TMP/dotgit-seen.txt" &
watcher=$!
PIDS+=("$watcher")
run_once gitconfig "$TMP/src-gitconfig" "" js-sum-gitconfig
kill "$watcher" 2>/dev/null || true
r="$TMP/gitconfig.result.json"
check "gitconfig: fixed" '[ "$(field "$r" status)" = fixed ] || { log "$(field "$r" status): $(field "$r" reason)"; false; }'
refused_writes() {
  python3 - "$TMP/gitconfig.jsonl" <<'PY'
import json, sys
evs = [json.loads(l)["event"] for l in open(sys.argv[1]) if l.startswith('{"type":"progress"')]
acts = [a for e in evs if e["kind"] == "round" for a in e["payload"]["actions"]]
refused = [a for a in acts if a.startswith("refused write_file")]
assert len(refused) == 7, acts
assert any(a.startswith("edit sum.js") for a in acts), acts
PY
}
check "gitconfig: every .git write refused" refused_writes
check "gitconfig: no canary" '[ ! -e "$CANARY" ]'
check "gitconfig: no .git in the work tree while the task ran" '[ ! -s "$TMP/dotgit-seen.txt" ] || { cat "$TMP/dotgit-seen.txt" >&2; false; }'
field "$r" diff >"$TMP/gitconfig.diff"
check "gitconfig: the diff applies to a fresh clone" \
  'git clone -q "$TMP/src-gitconfig" "$TMP/fresh" && git -C "$TMP/fresh" apply --check --binary "$TMP/gitconfig.diff" && grep -q "^+  return a + b;" "$TMP/gitconfig.diff" && ! grep -qi "\.git/" "$TMP/gitconfig.diff"'

# ---- subdir ----------------------------------------------------------------
planted="[core]\n\tfsmonitor = \"touch $RCANARY\"\n\tbare = false\n\tworktree = .\n\thooksPath = hooks\n\tpager = touch $RCANARY\n"
make_src subdir "ln -s .git lnk && mkdir -p pkg && ln -s ../.git pkg/up && mkdir -p bare/objects/info bare/refs/heads bare/hooks &&
  printf '$planted' >bare/config && echo 'ref: refs/heads/main' >bare/HEAD && touch bare/objects/info/keep bare/refs/heads/keep &&
  printf '#!/bin/sh\ntouch $RCANARY\n' >bare/hooks/post-index-change && chmod +x bare/hooks/post-index-change"
declare -A want=([lnk]="symlink" [pkg/up]="symlink" [.git]="git metadata" [./.GIT]="git metadata" [bare]="laid out as a git directory")
i=0
for sub in "${!want[@]}"; do
  i=$((i + 1))
  run_once "subdir$i" "$TMP/src-subdir" "$sub" js-sum-one-round
  r="$TMP/subdir$i.result.json"
  check "subdir $sub: refused (${want[$sub]})" \
    '[ "$(field "$r" status)" = error ] && field "$r" reason | grep >/dev/null "${want[$sub]}" || { log "$(field "$r" status): $(field "$r" reason)"; false; }'
  check "subdir $sub: nothing ran in a sandbox" '! grep -q "\"phase\":\"step0\"" "$TMP/subdir$i.jsonl"'
done
check "subdir: no canary" '[ ! -e "$RCANARY" ]'

# ---- bomb ------------------------------------------------------------------
bomb="$TMP/bomb.git"
git init -q --bare "$bomb"
(
  cd "$bomb"
  t=$(echo boom | git hash-object -w --stdin) kind=blob mode=100644
  for _ in 1 2 3 4 5 6 7 8 9; do
    t=$(for i in 0 1 2 3 4 5 6 7 8 9; do printf '%s %s %s\td%s\n' $mode $kind "$t" $i; done | git mktree)
    kind=tree mode=040000
  done
  c=$(git -c user.email=kiwi@test -c user.name=kiwi commit-tree -m bomb "$t")
  git update-ref refs/heads/main "$c"
  git symbolic-ref HEAD refs/heads/main
)
before=$(du -sk "$STATE" | cut -f1)
run_once bomb "$bomb" "" js-sum-one-round
after=$(du -sk "$STATE" | cut -f1)
r="$TMP/bomb.result.json"
check "bomb: a named error" \
  'field "$r" reason | grep >/dev/null "more than 200000 files.*KIWI_CHECKOUT_MAX_FILES" || { log "$(field "$r" status): $(field "$r" reason)"; false; }'
check "bomb: the state directory did not grow (${before} KB -> ${after} KB)" '[ $((after - before)) -lt 1024 ]'
check "bomb: nothing left in the work directory" '[ -z "$(ls -A "$STATE/work")" ]'

[ "$failures" = 0 ] || fail "$failures check(s) failed"
echo "all passed"
