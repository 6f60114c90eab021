#!/usr/bin/env python3
"""Sits in the model's seat from a script: for the k-th answer of ANSWERS (a
JSON list, each one answer in the seat's format), waits for
DIR/NNNN-request.json (NNNN = k) and writes DIR/NNNN-answer.json (through a
rename, so the server never reads half of it). Exits 0 once every answer is
written, 1 when a request does not come within --max-seconds.

    seat-answers.py DIR ANSWERS.json [--max-seconds 300]
"""
import argparse
import json
import os
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("answers")
    ap.add_argument("--max-seconds", type=float, default=300.0)
    args = ap.parse_args(argv)
    with open(args.answers, encoding="utf-8") as f:
        answers = json.load(f)
    deadline = time.monotonic() + args.max_seconds
    for k, answer in enumerate(answers, 1):
        req = os.path.join(args.dir, "%04d-request.json" % k)
        while not os.path.exists(req):
            if time.monotonic() > deadline:
                sys.stderr.write("seat-answers: no %s within %.0f s\n" % (req, args.max_seconds))
                return 1
            time.sleep(0.1)
        out = os.path.join(args.dir, "%04d-answer.json" % k)
        with open(out + ".tmp", "w", encoding="utf-8") as f:
            json.dump(answer, f)
        os.replace(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
