#!/usr/bin/env bash
# test_worker_sessions.sh: the session's outcomes through the real Kafka,
# Redis and Docker: tasks submitted with `kiwi submit`, worked by a
# kiwi-worker against the scripted provider, results read with `kiwi wait`
# and events with `kiwi tail`. One task fixed in one round, one needing two,
# one that exhausts max-rounds, one that exhausts the budget, one whose
# provider keeps failing, one whose model tries to write outside the
# workspace; each must end with its status and the right events.
. "$(dirname "$0")/lib.sh"
need_services

# the escape script writes through `evil`: a link out of the repository
outside="$TMP/outside"
mkdir -p "$outside"
GIT_SERVE_LINK="js-sum:evil:$outside" git_serve js-sum
provider_serve
worker_start a KIWI_SLOTS=3 KIWI_EGRESS_STOP_WHEN_DEGRADED=false

declare -A want rounds_flag budget_flag
want[js-sum-one-round]=fixed;        rounds_flag[js-sum-one-round]=3
want[js-sum-two-rounds]=fixed;       rounds_flag[js-sum-two-rounds]=3
want[js-sum-never]=max_rounds;       rounds_flag[js-sum-never]=2
want[js-sum-budget]=budget_exhausted; rounds_flag[js-sum-budget]=3; budget_flag[js-sum-budget]=100000
want[js-sum-provider-down]=error;    rounds_flag[js-sum-provider-down]=3
want[js-sum-escape]=max_rounds;      rounds_flag[js-sum-escape]=1

declare -A ids
for script in "${!want[@]}"; do
  extra=(--max-rounds "${rounds_flag[$script]}")
  [ -n "${budget_flag[$script]:-}" ] && extra+=(--budget-tokens "${budget_flag[$script]}")
  ids[$script]=$(submit_fix js-sum "$script" "${extra[@]}")
  log "$script: ${ids[$script]}"
done

failures=0
for script in "${!want[@]}"; do
  id=${ids[$script]}
  set +e
  kiwi_cli wait "$id" --timeout 300 >"$TMP/$script.result.json"
  set -e
  kiwi_cli tail progress --task "$id" >"$TMP/$script.events.jsonl"
  if python3 - "$script" "${want[$script]}" "$TMP/$script.result.json" "$TMP/$script.events.jsonl" <<'PY'
import json, sys
script, want, rpath, epath = sys.argv[1:5]
r = json.load(open(rpath))
evs = [json.loads(l) for l in open(epath) if l.strip()]
assert r["status"] == want, f"{script}: status {r['status']} (want {want}): {r.get('reason')}"
seqs = [e["seq"] for e in evs]
assert seqs == list(range(1, len(seqs) + 1)), f"{script}: seq {seqs}"
phases = [e["phase"] for e in evs]
assert phases[0] == "accepted" and phases[-1] == "finished", f"{script}: {phases}"
assert evs[-1]["payload"]["status"] == want, evs[-1]
rounds = [e for e in evs if e["phase"] == "round"]
if want == "fixed":
    assert "+  return a + b;" in r["diff"], r
    n = 2 if script == "js-sum-two-rounds" else 1
    assert len(rounds) == n and r["rounds"] == n, (len(rounds), r["rounds"])
    assert rounds[-1]["payload"]["verify"]["passed"] is True
    if n == 2:
        assert rounds[0]["payload"]["verify"]["passed"] is False
elif want == "max_rounds":
    assert "diff" not in r or r["diff"] is None, r
    assert len(rounds) == r["rounds"], (len(rounds), r)
    if script == "js-sum-escape":
        acts = rounds[0]["payload"]["actions"]
        assert sum(a.startswith("refused write_file") for a in acts) == 3, acts
elif want == "budget_exhausted":
    assert r["tokens_in"] + r["tokens_out"] >= 100000, r
    assert rounds[-1]["payload"]["ended"] == "budget_exhausted", rounds[-1]
elif want == "error":
    assert "model provider failed" in r["reason"] and "500" in r["reason"], r["reason"]
    assert rounds[-1]["payload"]["ended"] == "provider_error", rounds[-1]
print(f"ok   {script:22} {r['status']:17} rounds {r['rounds']}  events {len(evs)}")
PY
  then :; else failures=$((failures + 1)); fi
done
for f in /etc/kiwi-escape /tmp/kiwi-escape "$outside/kiwi-escape"; do [ ! -e "$f" ] || fail "$f was written"; done
[ "$failures" = 0 ] || fail "$failures session outcome(s) wrong"
echo "6 passed, 0 failed"
