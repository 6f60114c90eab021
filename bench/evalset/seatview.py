#!/usr/bin/env python3
"""Prints a seat's request for a person to answer, without what the
previous request of the same conversation already showed.

    seatview.py SEAT_DIR [N] [--system]

N: the request (default: the first one not answered yet); waits up to 15
minutes for it to appear. The tool declarations are named, not shown; the
system prompt only with --system. A conversation is the same system prompt
and the same first message (the Architect starts a new one each round).
"""
import argparse
import os
import re
import sys
import time


def blocks(seat, n):
    with open(os.path.join(seat, "%04d-request.txt" % n), encoding="utf-8", errors="replace") as f:
        parts = re.split(r"^(=== .* ===)$", f.read(), flags=re.M)
    return [(parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]


def messages(bl):
    return [b for h, b in bl if h.startswith("=== message")]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seat")
    ap.add_argument("n", nargs="?", type=int)
    ap.add_argument("--system", action="store_true")
    args = ap.parse_args(argv)
    n = args.n
    if n is None:
        n = 1
        while os.path.exists(os.path.join(args.seat, "%04d-answer.json" % n)):
            n += 1
    req = os.path.join(args.seat, "%04d-request.txt" % n)
    deadline = time.monotonic() + 900
    while not os.path.exists(req):
        if time.monotonic() > deadline:
            sys.exit("seatview: no %s" % req)
        time.sleep(0.3)
    time.sleep(0.3)  # the .txt is written after the .json
    cur = blocks(args.seat, n)
    system = cur[0][1] if cur else ""
    seen = 0
    for m in range(n - 1, 0, -1):
        try:
            prev = blocks(args.seat, m)
        except OSError:
            continue
        if prev and prev[0][1] == system:
            pm, cm = messages(prev), messages(cur)
            seen = len(pm) if pm and cm and pm[0] == cm[0] else 0
            break
    who = "Architect" if "You are the Architect" in system else "Implementer"
    size = os.path.getsize(os.path.join(args.seat, "%04d-request.json" % n))
    print("##### request %d (%s), %d bytes; %d messages shown before" % (n, who, size, seen))
    k = 0
    for h, body in cur:
        if h.startswith("=== message"):
            k += 1
            if k > seen:
                print(h)
                print(body.strip("\n"))
        elif h.startswith("=== tools") or (h.startswith("=== system") and args.system):
            print(h)
            if h.startswith("=== system"):
                print(body.strip("\n"))
        elif h.startswith("=== answer"):
            print(h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
