#!/usr/bin/env python3
"""test_worker_faults_malformed.py OUTDIR N: N malformed task messages for the dead-letter
fault test (test_worker_faults.sh), each certain to be refused by the task
decoder (schemas/task.md, schemas/README.md):

  random   random bytes
  trunc    a valid task's msgpack cut short
  trail    a valid task's msgpack with bytes after it
  types    a msgpack task with one field of the wrong type, out of its
           range, missing, duplicated, or not a map at all
  json     the task as a JSON object instead of msgpack
  big      a field over its byte limit

Writes OUTDIR/files/NNNN.bin (one message each, produced by kcat without a
key), OUTDIR/keyed.txt (KEY<TAB>VALUE lines, produced with kcat -K: JSON
objects, empty values), OUTDIR/null.txt (KEY<TAB> lines, produced with
kcat -K -Z: NULL values) and OUTDIR/manifest.json ([{"kind", "sha256",
"len", "key"}...], one entry per message, the key null when none).
Deterministic (seeded).
"""
import hashlib
import json
import os
import random
import struct
import sys


def mp(v):
    """A small msgpack encoder: enough for tasks (nil, bool, int, str, bin
    as bytes, list, dict with any keys, and raw bytes via Raw)."""
    if isinstance(v, Raw):
        return v.b
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if -32 <= v < 0:
            return struct.pack("b", v)
        if 0 <= v < 2**32:
            return b"\xce" + struct.pack(">I", v)
        if 0 <= v < 2**64:
            return b"\xcf" + struct.pack(">Q", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode()
        if len(b) < 32:
            return bytes([0xA0 | len(b)]) + b
        if len(b) < 256:
            return b"\xd9" + bytes([len(b)]) + b
        if len(b) < 65536:
            return b"\xda" + struct.pack(">H", len(b)) + b
        return b"\xdb" + struct.pack(">I", len(b)) + b
    if isinstance(v, bytes):
        return b"\xc6" + struct.pack(">I", len(v)) + v
    if isinstance(v, list):
        h = bytes([0x90 | len(v)]) if len(v) < 16 else b"\xdc" + struct.pack(">H", len(v))
        return h + b"".join(mp(x) for x in v)
    if isinstance(v, (dict, Pairs)):
        items = v.items()
        n = len(items)
        h = bytes([0x80 | n]) if n < 16 else b"\xde" + struct.pack(">H", n)
        return h + b"".join(mp(k) + mp(x) for k, x in items)
    raise TypeError(type(v))


class Raw:
    def __init__(self, b):
        self.b = b


class Pairs:
    """A map that may repeat a key."""

    def __init__(self, pairs):
        self.pairs = pairs

    def items(self):
        return self.pairs


def task(i):
    return {
        "v": 1,
        "id": f"malformed-{i:04d}",
        "repo": {"url": "git://127.0.0.1:9/never.git", "ref": "main"},
        "test_command": "npm test",
        "goal": "Make the tests pass.",
        "submitted_at": 1700000000000 + i,
        "limits": {"max_rounds": 3, "timeout_seconds": 60, "disk_mb": 256},
    }


def mutations(i):
    """Each returns an object certain to be refused."""
    t = task(i)

    def setp(path, val):
        d = json.loads(json.dumps(t))
        cur = d
        for p in path[:-1]:
            cur = cur[p]
        cur[path[-1]] = val
        return d

    def delp(path):
        d = json.loads(json.dumps(t))
        cur = d
        for p in path[:-1]:
            cur = cur[p]
        del cur[path[-1]]
        return d

    return [
        setp(["id"], 12345),                      # wrong type
        setp(["id"], "has space"),                # bad characters
        setp(["id"], None),                       # nil is not absence
        setp(["v"], 2),                           # newer version
        setp(["v"], "1"),                         # wrong type
        delp(["v"]),                              # missing
        setp(["repo"], "git://x/y.git"),          # map expected
        delp(["repo", "url"]),                    # missing
        setp(["repo", "url"], "-uhello"),         # starts with -
        setp(["repo", "ref"], 7),
        delp(["test_command"]),
        setp(["test_command"], ""),               # 1..8192 bytes
        delp(["goal"]),
        setp(["submitted_at"], "yesterday"),
        setp(["submitted_at"], -5),
        setp(["limits", "max_rounds"], 0),        # 1..100
        setp(["limits", "max_rounds"], 1.5),      # float for an integer
        setp(["limits", "timeout_seconds"], 999999),
        setp(["limits", "disk_mb"], 1),
        setp(["model"], {"provider": "nope", "name": "m"}),
        setp(["test_credentials"], ["lower_case"]),
        setp(["source"], "bad source!"),
        [t],                                      # array at the top
        "a string",                               # str at the top
        42,                                       # int at the top
        Pairs(list(t.items()) + [("id", f"dup-{i}")]),  # duplicate key
        Pairs([(1, "int key")] + list(t.items())),      # non-string key
    ]


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    rnd = random.Random(20261129)
    os.makedirs(os.path.join(out, "files"), exist_ok=True)
    msgs = []  # (kind, bytes, key or None)
    # keyed: empty values, then JSON objects (no tab or newline in them)
    for i in range(5):
        msgs.append(("empty", b"", f"empty-{i}"))
    nulls = [f"null-{i}" for i in range(5)]
    kinds = ["random", "trunc", "trail", "types", "json", "big"]
    i = 0
    while len(msgs) < n - len(nulls):
        kind = kinds[i % len(kinds)]
        if kind == "random":
            b = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300)))
            b += struct.pack(">I", i)  # unique
            msgs.append((kind, b, None))
        elif kind == "trunc":
            full = mp(task(i))
            msgs.append((kind, full[: rnd.randrange(1, len(full))], None))
        elif kind == "trail":
            msgs.append((kind, mp(task(i)) + bytes([rnd.randrange(256) for _ in range(rnd.randrange(1, 9))]), None))
        elif kind == "types":
            ms = mutations(i)
            msgs.append((kind, mp(ms[(i // len(kinds)) % len(ms)]), None))
        elif kind == "json":
            msgs.append((kind, json.dumps(task(i), separators=(",", ":")).encode(), f"json-key-{i}"))
        elif kind == "big":
            t = task(i)
            which = (i // len(kinds)) % 3
            if which == 0:
                t["goal"] = "g" * 65537                 # 1..65536 bytes
            elif which == 1:
                t["id"] = "x" * 129                     # 1..128 bytes
            else:
                t["test_command"] = "t" * 8193          # 1..8192 bytes
            msgs.append((kind, mp(t), None))
        i += 1
    rnd.shuffle(msgs)
    manifest = []
    keyed = []
    nfile = 0
    for kind, b, key in msgs:
        if key is None:
            with open(os.path.join(out, "files", f"{nfile:04d}.bin"), "wb") as f:
                f.write(b)
            nfile += 1
        else:
            assert b"\t" not in b and b"\n" not in b
            keyed.append(key.encode() + b"\t" + b + b"\n")
        manifest.append({"kind": kind, "sha256": hashlib.sha256(b).hexdigest(), "len": len(b), "key": key})
    for key in nulls:
        manifest.append({"kind": "null", "sha256": hashlib.sha256(b"").hexdigest(), "len": 0, "key": key})
    with open(os.path.join(out, "null.txt"), "w") as f:
        f.write("".join(k + "\t\n" for k in nulls))
    with open(os.path.join(out, "keyed.txt"), "wb") as f:
        f.write(b"".join(keyed))
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    counts = {}
    for m in manifest:
        counts[m["kind"]] = counts.get(m["kind"], 0) + 1
    print(json.dumps(counts, sort_keys=True))


if __name__ == "__main__":
    main()
