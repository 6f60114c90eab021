#!/usr/bin/env python3
"""Turns a recorded seat (the NNNN-request.json and NNNN-answer.json files
of a `--seat DIR` run) into a script of the Anthropic wire format that
test_session replays: one turn per answer, its response made as the seat
made it, each request expected to come from the same model (the system
prompt's "You are the Architect" / "You are the Implementer", or "You are
the engineer" of KIWI_SESSION_AGENTS=one), after a
turn of tool calls in the same conversation to answer those calls, and
the Implementer's first request after a plan to carry the plan's opening
words. Usage
counts are the request's bytes / 4 and the answer's bytes / 4 (the seat
reports none), so a replay's tokens say how big the run was.

    seat-to-script.py SEAT_DIR OUT.json --name NAME [--answers OUT_ANSWERS.json]

NAME (letters, digits, '-') goes into the response and tool-call ids.
--answers also writes the answers as a list (seat-answers.py's input,
bench_evalset.sh --answers).
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server  # noqa: E402  (seat_parse_answer, seat_response: the seat's own conversion)

ROLES = ("You are the Architect", "You are the Implementer", "You are the engineer")  # the last: one agent


def role_of(body):
    text = server.system_text("anthropic", body)
    for r in ROLES:
        if r in text:
            return r
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seat")
    ap.add_argument("out")
    ap.add_argument("--name", required=True)
    ap.add_argument("--answers")
    args = ap.parse_args(argv)
    if not re.match(r"^[A-Za-z0-9-]{1,40}$", args.name):
        ap.error("--name: letters, digits and '-' only, at most 40")
    tag = args.name.replace("-", "")
    turns, answers, prev, plan = [], [], None, None
    n = 1
    while True:
        req = os.path.join(args.seat, "%04d-request.json" % n)
        ans = os.path.join(args.seat, "%04d-answer.json" % n)
        if not (os.path.exists(req) and os.path.exists(ans)):
            break
        with open(req, "rb") as f:
            raw_req = f.read()
        body = json.loads(raw_req)
        with open(ans, "rb") as f:
            raw_ans = f.read()
        try:
            text, calls = server.seat_parse_answer(raw_ans)
        except ValueError as e:
            sys.exit("seat-to-script: %s: %s" % (ans, e))
        answers.append(json.loads(raw_ans))
        resp = server.seat_response("anthropic", body, body.get("model", ""), n, text, calls)
        resp["id"] = "msg_%s%04d" % (tag, n)
        for b in resp["content"]:
            if b["type"] == "tool_use":
                b["id"] = b["id"].replace("toolu_seat", "toolu_%s" % tag)
        resp["usage"] = {"input_tokens": len(raw_req) // 4, "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": 0, "output_tokens": max(1, len(raw_ans) // 4),
                         "service_tier": "standard"}
        role = role_of(body)
        expect = {}
        if role:
            expect["system_contains"] = role
        if prev and prev[0] == role and prev[1]:
            expect["tool_result_for"] = prev[1]
        if plan and role == ROLES[1] and (not prev or prev[0] != role):
            expect["contains"] = plan  # the Implementer is handed the plan
        if role == ROLES[0] and text and not calls:
            # the plan's opening words as they stand in the JSON body
            plan = json.dumps(text[:60], ensure_ascii=False)[1:-1]
        turn = {"expect": expect, "response": resp} if expect else {"response": resp}
        turns.append(turn)
        prev = (role, [b["id"] for b in resp["content"] if b["type"] == "tool_use"])
        n += 1
    if not turns:
        sys.exit("seat-to-script: no answered request in %s" % args.seat)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"provider": "anthropic", "turns": turns}, f, indent=2, ensure_ascii=False)
        f.write("\n")
    if args.answers:
        with open(args.answers, "w", encoding="utf-8") as f:
            json.dump(answers, f, indent=1, ensure_ascii=False)
            f.write("\n")
    print("%s: %d turns" % (args.out, len(turns)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
