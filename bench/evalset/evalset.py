#!/usr/bin/env python3
"""The evaluation set's checks: validate the set, grade a diff, make the report.

    evalset.py validate [--runner host|docker] [ID ...]
        each bug's bug.json is complete; its tests fail as it is; its
        solution.diff makes them pass and passes the root-cause check; its
        symptom.diff (when there is one) passes the tests and FAILS the
        root-cause check; its obvious.diff (when there is one) fails the
        tests. The set's own files only, so `host` (the default) is safe.
    evalset.py grade ID DIFF [--runner docker|host] [--json OUT]
        applies DIFF (a result's diff) to a fresh copy of ID's repository,
        runs its check command, copies hidden/ in and runs the root-cause
        command, and compares the protected files. A model's diff is hostile:
        grade it with `docker` (the default), which runs each command in the
        ecosystem's sandbox image with no network, no capabilities and
        bounded memory, processes and time.
    evalset.py report RUNS_DIR
        the table of a bench_evalset.sh run (RUNS_DIR/<id>/ each).

Docker: the socket of KIWI_DOCKER_SOCKET (/var/run/docker.sock by default).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGES = {"python": "kiwi/python:3.11", "node": "kiwi/node:20", "go": "kiwi/go:1.27"}
FIELDS = ("id", "ecosystem", "test_command", "goal", "kinds", "root_cause", "check")
# a check's wall clock: Go compiles its standard library afresh in each
# check's sandbox, which took over 120 s on a loaded two-core machine
CHECK_SECONDS = 600


class EvalError(Exception):
    pass


def load_bug(bug_id):
    path = os.path.join(HERE, bug_id, "bug.json")
    try:
        with open(path, encoding="utf-8") as f:
            bug = json.load(f)
    except (OSError, ValueError) as e:
        raise EvalError("%s: %s" % (path, e))
    missing = [k for k in FIELDS if k not in bug]
    if missing:
        raise EvalError("%s: missing %s" % (path, ", ".join(missing)))
    if bug["id"] != bug_id:
        raise EvalError("%s: id %r is not its folder's name" % (path, bug["id"]))
    if bug["ecosystem"] not in IMAGES:
        raise EvalError("%s: ecosystem %r is not one of %s" % (path, bug["ecosystem"], ", ".join(IMAGES)))
    rc = bug["root_cause"]
    if not isinstance(rc, dict) or not rc.get("file") or not rc.get("what"):
        raise EvalError("%s: root_cause needs file and what" % path)
    if not os.path.isfile(os.path.join(HERE, bug_id, "repo", rc["file"])):
        raise EvalError("%s: root_cause.file %s is not in repo/" % (path, rc["file"]))
    ck = bug["check"]
    for k in ("command", "root_cause_command", "protected"):
        if k not in ck:
            raise EvalError("%s: check needs %s" % (path, k))
    if not os.path.isdir(os.path.join(HERE, bug_id, "hidden")):
        raise EvalError("%s: no hidden/ folder (the root-cause check)" % path)
    return bug


def all_ids():
    return sorted(d for d in os.listdir(HERE) if os.path.isfile(os.path.join(HERE, d, "bug.json")))


def run_check(bug, work, command, runner):
    """(exit status, output tail) of `command` in `work`."""
    if runner == "host":
        argv = ["sh", "-c", command]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", NO_COLOR="1", GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
        cwd = work
    else:
        sock = os.environ.get("KIWI_DOCKER_SOCKET", "/var/run/docker.sock")
        image = bug.get("image") or IMAGES[bug["ecosystem"]]
        argv = ["docker", "-H", "unix://" + sock, "run", "--rm", "--network", "none", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--memory", "1g", "--pids-limit", "256", "--cpus", "1",
                "--user", "%d:%d" % (os.getuid(), os.getgid()), "-e", "HOME=/tmp", "-e", "NO_COLOR=1",
                "-e", "PYTHONDONTWRITEBYTECODE=1", "-e", "GOTOOLCHAIN=local", "-e", "GOFLAGS=-mod=mod",
                "--tmpfs", "/tmp:rw,exec,size=512m", "-v", work + ":/w", "-w", "/w", "--label", "org.kiwi.bench=evalset",
                image, "sh", "-c", command]
        env, cwd = None, None
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=CHECK_SECONDS)
    except subprocess.TimeoutExpired:
        return 124, "timed out after %d s" % CHECK_SECONDS
    out = p.stdout.decode("utf-8", "replace")
    return p.returncode, out[-3000:]


def snapshot(root, names):
    out = {}
    for n in names:
        try:
            with open(os.path.join(root, n), "rb") as f:
                out[n] = f.read()
        except OSError:
            out[n] = None
    return out


def grade(bug, diff_text, runner, keep=None):
    """What a diff does to the bug: applied, fixed, root_cause and why."""
    res = {"id": bug["id"], "applied": False, "fixed": False, "root_cause": False, "protected_changed": [],
           "check_exit": None, "root_cause_exit": None, "note": ""}
    tmp = tempfile.mkdtemp(prefix="evalset-")
    os.chmod(tmp, 0o755)
    try:
        work = os.path.join(tmp, "w")
        shutil.copytree(os.path.join(HERE, bug["id"], "repo"), work)
        before = snapshot(work, bug["check"]["protected"])
        if not diff_text or not diff_text.strip():
            res["note"] = "no diff"
            return res
        patch = os.path.join(tmp, "result.diff")
        with open(patch, "w", encoding="utf-8") as f:
            f.write(diff_text if diff_text.endswith("\n") else diff_text + "\n")
        p = subprocess.run(["git", "apply", "--binary", "--whitespace=nowarn", patch], cwd=work,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            res["note"] = "the diff does not apply: " + p.stdout.decode("utf-8", "replace").strip()[:300]
            return res
        res["applied"] = True
        after = snapshot(work, bug["check"]["protected"])
        res["protected_changed"] = [n for n in bug["check"]["protected"] if before[n] != after[n]]
        code, tail = run_check(bug, work, bug["check"]["command"], runner)
        res["check_exit"] = code
        res["fixed"] = code == 0
        if not res["fixed"]:
            res["note"] = "the check failed: " + tail.strip().splitlines()[-1][:200] if tail.strip() else "the check failed"
            return res
        hidden = os.path.join(HERE, bug["id"], "hidden")
        shutil.copytree(hidden, work, dirs_exist_ok=True)
        code, tail = run_check(bug, work, bug["check"]["root_cause_command"], runner)
        res["root_cause_exit"] = code
        res["root_cause"] = code == 0 and not res["protected_changed"]
        if code != 0:
            res["note"] = "the root-cause check failed (a symptom fix?)"
        elif res["protected_changed"]:
            res["note"] = "protected files changed: " + ", ".join(res["protected_changed"])
        return res
    finally:
        if keep:
            shutil.copytree(tmp, keep, dirs_exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


def cmd_validate(args):
    ids = args.ids or all_ids()
    bad = 0
    for bug_id in ids:
        try:
            bug = load_bug(bug_id)
        except EvalError as e:
            print("FAIL %s" % e)
            bad += 1
            continue
        problems = []
        # the tests fail as the repository is: grade the empty change by hand
        tmp = tempfile.mkdtemp(prefix="evalset-")
        try:
            work = os.path.join(tmp, "w")
            shutil.copytree(os.path.join(HERE, bug_id, "repo"), work)
            code, _ = run_check(bug, work, bug["check"]["command"], args.runner)
            if code == 0:
                problems.append("its tests pass without a fix")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        want = {"solution": (True, True), "symptom": (True, False), "obvious": (False, False)}
        for name, (fixed, root) in want.items():
            path = os.path.join(HERE, bug_id, name + ".diff")
            if not os.path.exists(path):
                if name == "solution":
                    problems.append("no solution.diff")
                continue
            with open(path, encoding="utf-8") as f:
                r = grade(bug, f.read(), args.runner)
            if (r["fixed"], r["root_cause"]) != (fixed, root):
                problems.append("%s.diff: fixed %s, root cause %s (want %s, %s): %s" % (
                    name, r["fixed"], r["root_cause"], fixed, root, r["note"]))
        print("%s %s%s" % ("FAIL" if problems else "ok  ", bug_id, "".join("\n     " + p for p in problems)))
        bad += bool(problems)
    print("%d of %d bugs valid" % (len(ids) - bad, len(ids)))
    return 1 if bad else 0


def cmd_grade(args):
    bug = load_bug(args.id)
    with open(args.diff, encoding="utf-8") as f:
        r = grade(bug, f.read(), args.runner)
    text = json.dumps(r, sort_keys=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return 0


def read_run(run):
    """A bench_evalset.sh run folder as one row (dict)."""
    row = {"id": os.path.basename(run), "status": "-", "rounds": 0, "requests": 0, "bytes_sent": 0,
           "max_request": 0, "answer_bytes": 0, "tokens_in": 0, "tokens_out": 0, "wall_s": 0.0,
           "fixed": False, "root_cause": False, "note": ""}
    try:
        for line in open(os.path.join(run, "once.jsonl"), encoding="utf-8", errors="replace"):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("type") == "result":
                r = j["result"]
                row.update(status=r.get("status", "-"), rounds=r.get("rounds", 0),
                           tokens_in=r.get("tokens_in", 0), tokens_out=r.get("tokens_out", 0))
            elif j.get("type") == "bench":
                row["wall_s"] = j.get("wall_ms", 0) / 1000.0
    except OSError:
        row["note"] = "no once.jsonl"
    seat = os.path.join(run, "seat")
    if os.path.isdir(seat):
        for n in sorted(os.listdir(seat)):
            p = os.path.join(seat, n)
            if n.endswith("-request.json"):
                size = os.path.getsize(p)
                row["requests"] += 1
                row["bytes_sent"] += size
                row["max_request"] = max(row["max_request"], size)
            elif n.endswith("-answer.json"):
                row["answer_bytes"] += os.path.getsize(p)
    try:
        with open(os.path.join(run, "grade.json"), encoding="utf-8") as f:
            g = json.load(f)
        row.update(fixed=g["fixed"], root_cause=g["root_cause"], note=g.get("note", ""))
    except (OSError, ValueError, KeyError):
        pass
    # The seat's responses report 0 tokens; then the bytes say it, at the
    # usual 4 bytes a token (marked ~)
    row["est"] = not row["tokens_in"] and row["bytes_sent"] > 0
    if row["est"]:
        row["tokens_in"] = row["bytes_sent"] // 4
        row["tokens_out"] = row["answer_bytes"] // 4
    return row


def cmd_report(args):
    runs = sorted(d for d in (os.path.join(args.dir, n) for n in os.listdir(args.dir))
                  if os.path.isdir(d) and os.path.exists(os.path.join(d, "task.json")))
    if not runs:
        print("evalset: no runs in %s" % args.dir, file=sys.stderr)
        return 2
    head = ["bug", "status", "fixed", "root", "rounds", "requests", "bytes_sent", "max_req", "tokens_in",
            "tokens_out", "wall_s", "note"]
    rows = []
    for run in runs:
        r = read_run(run)
        t = "~" if r["est"] else ""
        rows.append([r["id"], r["status"], "y" if r["fixed"] else "n", "y" if r["root_cause"] else "n",
                     str(r["rounds"]), str(r["requests"]), str(r["bytes_sent"]), str(r["max_request"]),
                     t + str(r["tokens_in"]), t + str(r["tokens_out"]), "%.0f" % r["wall_s"], r["note"][:80]])
    w = [max(len(x[i]) for x in rows + [head]) for i in range(len(head) - 1)]
    lines = ["  ".join(x[i].ljust(w[i]) for i in range(len(w))) + "  " + x[-1] for x in [head] + rows]
    n = len(rows)
    lines.append("")
    lines.append("%d bugs: %d fixed, %d at the root cause; %d requests, %d bytes sent" % (
        n, sum(x[2] == "y" for x in rows), sum(x[3] == "y" for x in rows), sum(int(x[5]) for x in rows),
        sum(int(x[6]) for x in rows)))
    if any(x[8].startswith("~") for x in rows):
        lines.append("~ tokens estimated from the bytes (4 a token): the seat's responses report none")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.dir, "report.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text, end="")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate")
    v.add_argument("ids", nargs="*")
    v.add_argument("--runner", choices=("host", "docker"), default="host")
    g = sub.add_parser("grade")
    g.add_argument("id")
    g.add_argument("diff")
    g.add_argument("--runner", choices=("host", "docker"), default="docker")
    g.add_argument("--json")
    r = sub.add_parser("report")
    r.add_argument("dir")
    args = ap.parse_args(argv)
    try:
        return {"validate": cmd_validate, "grade": cmd_grade, "report": cmd_report}[args.cmd](args)
    except EvalError as e:
        print("evalset: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
