#!/usr/bin/python3
"""crossimpl.py: Kiwi's wire format against an independent msgpack
implementation (Debian's python3-msgpack).

Usage: /usr/bin/python3 crossimpl.py PATH/TO/kiwi-wire-tool

1. The C tool encodes its sample messages; Python decodes each file and
   checks every field value and type, and that the bytes equal Python's own
   packing of the same map (shortest encodings, same key order).
2. The C tool renders its own files as JSON; the JSON must parse strictly
   and match the documented mapping.
3. Python encodes messages of its own -- keys in another order, unknown
   extra keys (top level and nested), and a "wide" form using the largest
   msgpack formats for every value -- which the C tool must decode to the
   expected values.
4. Python encodes invalid messages, which the C tool must refuse with the
   exact error naming the field.
5. The generic renderer (kiwi_msgpack_to_json) on a value with every
   msgpack type.

Any disagreement fails the test (exit 1). Without the msgpack module this
fails too, with a message saying how to install it: it never skips.
"""
import base64
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import msgpack
except ImportError:
    sys.stderr.write(
        "crossimpl: FAIL: %s has no msgpack module; install Debian's python3-msgpack "
        "(apt-get install -y python3-msgpack; ops/setup.sh installs it)\n" % sys.executable)
    sys.exit(1)

SE = "surrogateescape"


def raw(b):
    """A str holding arbitrary bytes, as msgpack's surrogateescape decoding gives them."""
    return b.decode("utf-8", SE)


# ------------------------------------------------------------------ samples
# Mirrors tests/schemas/test_schemas_samples.c, written independently; the key
# order is the order the C encoder writes.

PAYLOAD = {
    "tool": "run", "argv": ["npm", "test"], "exit": -1, "ok": False, "ratio": 0.5,
    "blob": b"\x00\x01\xff", "nested": {"a": {"b": [1, 2, None]}},
    "big": 2**64 - 1, "neg": -2**63, "text": "\u00e9\n\x01",
}

SAMPLES = {
    "task-full": ("task", {
        "v": 1,
        "id": "task-0001:retry.2_x",
        "repo": {"url": "https://git.example.com/acme/widgets.git", "ref": "feature/fix-ci",
                 "subdir": "packages/core"},
        "test_command": "npm test -- --ci",
        "goal": "Make the tests pass. \u00dcn\u00efc\u00f6d\u00e9 \u2713 \"quoted\"\nsecond line\ttab",
        "ci_context": raw(b"FAIL src/a.test.js\n\x1b[31mred\x1b[0m \xff raw byte"),
        "limits": {"max_rounds": 12, "session_budget_tokens": 500000,
                   "session_budget_usd_micros": 2500000, "timeout_seconds": 3600, "disk_mb": 4096},
        "model": {"provider": "anthropic", "name": "claude-sonnet-4-5",
                  "base_url": "http://127.0.0.1:8089/v1"},
        "test_credentials": ["NPM_TOKEN", "DATABASE_URL", "_PRIVATE2"],
        "submitted_at": 1764454462123,
        "source": "ci-event",
    }),
    "task-min": ("task", {
        "v": 1, "id": "t1", "repo": {"url": "https://example.org/r.git", "ref": "main"},
        "test_command": "make test", "goal": "fix the tests",
        "limits": {"max_rounds": 8, "timeout_seconds": 1800, "disk_mb": 2048},
        "submitted_at": 0,
    }),
    "progress-full": ("progress", {
        "v": 1, "task_id": "task-0001:retry.2_x", "seq": 42, "attempt": 2, "round": 3, "phase": "round",
        "kind": "tool_call", "ts": 1764454470000, "worker_id": "worker-a:7", "payload": PAYLOAD,
    }),
    "progress-min": ("progress", {
        "v": 1, "task_id": "t1", "seq": 1, "attempt": 0, "round": 0, "phase": "accepted", "kind": "accepted",
        "ts": 1, "worker_id": "w1",
    }),
    "result-fixed": ("result", {
        "v": 1, "task_id": "task-0001:retry.2_x", "status": "fixed",
        "reason": "tests pass after 2 rounds",
        "diff": raw(b"diff --git a/x.c b/x.c\n--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-int x = 1;\n"
                    b"+int x = 2; /* caf\xe9 latin-1 */\n"),
        "rounds": 2, "tokens_in": 123456, "tokens_out": 7890, "cost_usd_micros": 431000,
        "duration_ms": 98765, "worker_id": "worker-a:7", "finished_at": 1764454562123,
    }),
    "result-not-fixed": ("result", {
        "v": 1, "task_id": "t1", "status": "needs_network",
        "reason": "npm install tried to reach registry.npmjs.org:443 (ENETUNREACH)",
        "rounds": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd_micros": 0,
        "duration_ms": 2**64 - 1, "worker_id": "w1", "finished_at": 2**63 - 1,
    }),
    "heartbeat-full": ("heartbeat", {
        "v": 1, "worker_id": "worker-a:7", "version": "0.1.0+g1a2b3c", "ts": 1764454480000,
        "slots_total": 4, "slots_busy": 3, "tasks_done": 1000, "tasks_failed": 7,
        "cache_hits": 50, "cache_misses": 12, "degraded": True,
        "degraded_reason": "egress check metadata-blocked failed", "redis_ok": False,
        "egress": [
            {"name": "metadata-blocked", "ok": False,
             "detail": "GET http://169.254.169.254/ answered 200", "checked_at": 1764454479000},
            {"name": "https-reachable", "ok": True, "checked_at": 1764454479500},
        ],
    }),
    "heartbeat-min": ("heartbeat", {
        "v": 1, "worker_id": "w1", "version": "0.1.0", "ts": 2, "slots_total": 0, "slots_busy": 0,
        "tasks_done": 0, "tasks_failed": 0, "cache_hits": 0, "cache_misses": 0,
        "degraded": False, "redis_ok": True, "egress": [],
    }),
    "deadletter-full": ("deadletter", {
        "v": 1, "reason": "task.repo: required field missing", "topic": "kiwi.tasks",
        "partition": 3, "offset": 1234567890123, "original": b"\x82\xa1v\x01\xa2id\xa3t-1",
        "key": b"https://git.example.com/acme/widgets.git", "ts": 1764454490000,
        "worker_id": "worker-a:7",
    }),
    "deadletter-min": ("deadletter", {
        "v": 1, "reason": "task: empty message", "topic": "kiwi.tasks", "partition": -1,
        "offset": -1, "original": b"", "ts": 3, "worker_id": "w1",
    }),
}

# ------------------------------------------------------------------ helpers

failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
    return ok


def same(a, b):
    """Equality that also insists on the same types (True is not 1, 1.0 is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True, unicode_errors=SE)


def unpack(data):
    return msgpack.unpackb(data, raw=False, unicode_errors=SE, strict_map_key=False,
                           ext_hook=msgpack.ExtType)


def pack_wide(obj):
    """msgpack with the largest format for every value (legal, never shortest)."""
    if obj is None:
        return b"\xc0"
    if obj is True:
        return b"\xc3"
    if obj is False:
        return b"\xc2"
    if isinstance(obj, int):
        return b"\xcf" + struct.pack(">Q", obj) if obj >= 0 else b"\xd3" + struct.pack(">q", obj)
    if isinstance(obj, float):
        return b"\xcb" + struct.pack(">d", obj)
    if isinstance(obj, str):
        b = obj.encode("utf-8", SE)
        return b"\xdb" + struct.pack(">I", len(b)) + b
    if isinstance(obj, bytes):
        return b"\xc6" + struct.pack(">I", len(obj)) + obj
    if isinstance(obj, list):
        return b"\xdd" + struct.pack(">I", len(obj)) + b"".join(pack_wide(x) for x in obj)
    if isinstance(obj, dict):
        return b"\xdf" + struct.pack(">I", len(obj)) + b"".join(
            pack_wide(k) + pack_wide(v) for k, v in obj.items())
    if isinstance(obj, msgpack.ExtType):
        return b"\xc9" + struct.pack(">Ib", len(obj.data), obj.code) + obj.data
    raise TypeError(type(obj))


def pack_pairs(pairs):
    """A map from a list of (key, value) pairs: allows duplicate keys."""
    return b"\xdf" + struct.pack(">I", len(pairs)) + b"".join(pack(k) + pack(v) for k, v in pairs)


def jsonish(v):
    """The documented msgpack -> JSON mapping, applied to a Python value."""
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, str):
        return v.encode("utf-8", SE).decode("utf-8", "replace")
    if isinstance(v, msgpack.ExtType):
        return {"ext_type": v.code, "data": base64.b64encode(v.data).decode()}
    if isinstance(v, list):
        return [jsonish(x) for x in v]
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            key = jsonish(k) if isinstance(k, str) else json.dumps(jsonish(k), separators=(",", ":"))
            out[key] = jsonish(x)
        return out
    return v


# What kiwi_<type>_to_json prints for a message with these fields.
KNOWN = {
    "task": {"v", "id", "repo", "test_command", "goal", "ci_context", "limits", "model",
             "test_credentials", "submitted_at", "source"},
    "progress": {"v", "task_id", "seq", "attempt", "round", "phase", "kind", "ts", "worker_id", "payload"},
    "result": {"v", "task_id", "status", "reason", "diff", "rounds", "tokens_in", "tokens_out",
               "cost_usd_micros", "duration_ms", "worker_id", "finished_at", "diff_truncated",
               "diff_bytes", "diff_sha256", "diff_location"},
    "heartbeat": {"v", "worker_id", "version", "ts", "slots_total", "slots_busy", "tasks_done",
                  "tasks_failed", "cache_hits", "cache_misses", "degraded", "degraded_reason",
                  "redis_ok", "egress"},
    "deadletter": {"v", "reason", "topic", "partition", "offset", "original", "key", "ts",
                   "worker_id"},
}
KNOWN_NESTED = {
    "repo": {"url", "ref", "subdir"},
    "limits": {"max_rounds", "session_budget_tokens", "session_budget_usd_micros",
               "timeout_seconds", "disk_mb"},
    "model": {"provider", "name", "base_url"},
    "egress": {"name", "ok", "detail", "checked_at"},
}


def expected_json(kind, msg):
    out = {k: v for k, v in msg.items() if k in KNOWN[kind]}
    for k in ("repo", "limits", "model"):
        if kind == "task" and k in out:
            out[k] = {a: b for a, b in out[k].items() if a in KNOWN_NESTED[k]}
    if kind == "task":
        limits = {"max_rounds": 8, "timeout_seconds": 1800, "disk_mb": 2048}
        limits.update(out.get("limits", {}))
        out["limits"] = limits
        out.setdefault("test_credentials", [])
    if kind == "heartbeat":
        out["egress"] = [{a: b for a, b in e.items() if a in KNOWN_NESTED["egress"]}
                         for e in out.get("egress", [])]
    out = jsonish(out)
    if kind == "deadletter" and msg["original"]:
        try:
            out["original_decoded"] = jsonish(unpack(msg["original"]))
        except Exception:
            pass
    return out


def run_tool(*args):
    p = subprocess.run([TOOL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8", "replace").strip()


def c_decode(kind, data, name):
    path = os.path.join(WORK, name + ".py.msgpack")
    with open(path, "wb") as f:
        f.write(data)
    return run_tool("decode", kind, path)


def expect_c_decodes(kind, data, want, name):
    rc, out, err = c_decode(kind, data, name)
    if not check(rc == 0, "%s: C refused Python's message: %s" % (name, err)):
        return
    try:
        got = json.loads(out)
    except ValueError as e:
        check(False, "%s: C printed invalid JSON (%s): %r" % (name, e, out))
        return
    check(same(got, want), "%s: C decoded\n    %s\n  expected\n    %s"
          % (name, json.dumps(got, sort_keys=True), json.dumps(want, sort_keys=True)))


def expect_c_refuses(kind, data, message, name):
    rc, out, err = c_decode(kind, data, name)
    check(rc == 1 and err == message,
          "%s: expected refusal %r, got exit %d, stderr %r, stdout %r" % (name, message, rc, err, out))


def reordered(v, extra):
    """The same map with keys in reverse order (recursively) and extra keys mixed in."""
    if isinstance(v, dict):
        items = [(k, reordered(x, extra)) for k, x in reversed(list(v.items()))]
        if extra:
            items.insert(len(items) // 2, ("zz_unknown_%d" % len(items), {"future": [1, 2.5, None]}))
        return dict(items)
    if isinstance(v, list):
        return [reordered(x, extra) for x in v]
    return v


# ------------------------------------------------------------------ checks

def check_c_encoding():
    rc, out, err = run_tool("encode", WORK)
    if not check(rc == 0, "wire-tool encode failed: %s" % err):
        return
    for name, (kind, want) in SAMPLES.items():
        with open(os.path.join(WORK, name + ".msgpack"), "rb") as f:
            data = f.read()
        try:
            got = unpack(data)
        except Exception as e:
            check(False, "%s: Python cannot decode C's bytes: %r" % (name, e))
            continue
        check(same(got, want), "%s: Python decoded\n    %r\n  expected\n    %r" % (name, got, want))
        for key in want:
            check(key in got and same(got[key], want[key]), "%s.%s: %r != %r"
                  % (kind, key, got.get(key), want[key]))
        check(list(got) == list(want), "%s: key order %s != %s" % (name, list(got), list(want)))
        check(data == pack(want), "%s: C bytes differ from Python's packing:\n    %s\n    %s"
              % (name, data.hex(), pack(want).hex()))
        # C's own JSON of its own message.
        rc, out, err = run_tool("decode", kind, os.path.join(WORK, name + ".msgpack"))
        if check(rc == 0, "%s: C cannot decode its own file: %s" % (name, err)):
            try:
                got_json = json.loads(out)
                check(same(got_json, expected_json(kind, want)), "%s: C JSON\n    %s\n  expected\n    %s"
                      % (name, out.strip(), json.dumps(expected_json(kind, want))))
            except ValueError as e:
                check(False, "%s: C JSON does not parse: %s: %r" % (name, e, out))
        # The generic renderer agrees with Python's view of the same bytes.
        rc, out, err = run_tool("json", os.path.join(WORK, name + ".msgpack"))
        if check(rc == 0, "%s: generic render failed: %s" % (name, err)):
            check(same(json.loads(out), jsonish(want)), "%s: generic JSON %s" % (name, out.strip()))


def check_python_encoding():
    for name, (kind, msg) in SAMPLES.items():
        want = expected_json(kind, msg)
        # Same map, Python's packing, reversed key order ("v" last), unknown keys everywhere.
        odd = reordered(msg, extra=True)
        odd["x-ext"] = msgpack.ExtType(7, b"abc")
        odd[""] = None
        if "payload" in odd:
            odd["payload"] = msg["payload"]  # the payload is opaque: left as it is
        expect_c_decodes(kind, pack(odd), want, name + "-reordered")
        # Largest formats for every integer, string, map and array.
        expect_c_decodes(kind, pack_wide(msg), want, name + "-wide")
        expect_c_decodes(kind, pack_wide(odd), want, name + "-wide-reordered")


def check_refusals():
    task = dict(SAMPLES["task-full"][1])
    data = pack(task)

    def edited(**changes):
        t = json.loads(json.dumps({k: (v if not isinstance(v, bytes) else None) for k, v in task.items()}))
        t["ci_context"] = task["ci_context"]
        t.update(changes)
        return t

    no_url = edited()
    del no_url["repo"]["url"]
    expect_c_refuses("task", pack(no_url), "task.repo.url: required field missing", "no-url")
    expect_c_refuses("task", pack(edited(id=7)), "task.id: expected string, got integer", "int-id")
    expect_c_refuses("task", pack(edited(v=2)), "task.v: version 2 is newer than supported version 1", "v2")
    expect_c_refuses("task", data + b"\x00",
                     "task: trailing bytes after message (%d of %d bytes used)" % (len(data), len(data) + 1),
                     "trailing")
    expect_c_refuses("task", data[:-1], "task: truncated message (%d bytes)" % (len(data) - 1), "truncated")
    expect_c_refuses("task", pack([1, 2]), "task: expected map, got array", "array")
    expect_c_refuses("task", pack_pairs(list(task.items()) + [("id", "again")]), "task.id: duplicate key",
                     "duplicate")
    expect_c_refuses("task", pack(edited(goal=raw(b"bad \xff"))), "task.goal: invalid UTF-8 at byte 4",
                     "bad-utf8")
    expect_c_refuses("task", pack(edited(test_credentials=["A"] * 65)),
                     "task.test_credentials: more than 64 entries", "65-credentials")
    t = edited()
    t["limits"]["max_rounds"] = 101
    expect_c_refuses("task", pack(t), "task.limits.max_rounds: must be between 1 and 100, got 101", "rounds")
    t = edited()
    t["repo"]["subdir"] = "a/../../etc"
    expect_c_refuses("task", pack(t), "task.repo.subdir: must not contain a '..' component", "subdir")
    t = edited()
    t["model"]["provider"] = "mistral"
    expect_c_refuses("task", pack(t), 'task.model.provider: unknown value "mistral" '
                     "(expected anthropic, openai, gemini, scripted)", "provider")

    r = dict(SAMPLES["result-fixed"][1])
    del r["diff"]
    expect_c_refuses("result", pack(r), "result.diff: required when status is fixed", "fixed-no-diff")
    h = json.loads(json.dumps(SAMPLES["heartbeat-full"][1]))
    h["egress"][1]["ok"] = "yes"
    expect_c_refuses("heartbeat", pack(h), "heartbeat.egress[1].ok: expected boolean, got string", "egress-ok")
    d = dict(SAMPLES["deadletter-full"][1])
    d["original"] = "text"
    expect_c_refuses("deadletter", pack(d), "deadletter.original: expected binary, got string", "original-str")
    p = dict(SAMPLES["progress-full"][1])
    p["payload"] = [1, 2]
    expect_c_refuses("progress", pack(p), "progress.payload: expected map, got array", "payload-array")
    p = dict(SAMPLES["progress-full"][1])
    p["attempt"] = -1
    expect_c_refuses("progress", pack(p), "progress.attempt: must not be negative, got -1", "attempt-negative")
    p["attempt"] = 1 << 32
    expect_c_refuses("progress", pack(p), "progress.attempt: out of range: 4294967296 is greater than 4294967295",
                     "attempt-too-big")
    # from a producer older than the field: decoded as attempt 0 (unknown)
    p = dict(SAMPLES["progress-full"][1])
    del p["attempt"]
    want = expected_json("progress", p)
    want["attempt"] = 0
    expect_c_decodes("progress", pack(p), want, "progress-no-attempt")


def check_generic():
    value = {
        "s": "\u00e9\u2028 \"q\" \\ \x01\x7f",
        "bad": raw(b"a\xffb\xe2\x82 \xf0\x9f\x90 \xed\xa0\x80"),
        "b": b"\x00\xff\xfe",
        "i": [0, -1, 127, 128, -32, -33, 2**64 - 1, -2**63],
        "f": [0.5, 1e300, -0.0, 3.0, 1.1],
        "n": None, "t": True, "false": False,
        "e": msgpack.ExtType(5, b"abc"),
        1: "integer key",
        "nested": {"a": [[[]], {}]},
        "deep": [[[[[[[[[[[[[[1]]]]]]]]]]]]]],
    }
    for name, data in (("generic", pack(value)), ("generic-wide", pack_wide(value))):
        path = os.path.join(WORK, name + ".msgpack")
        with open(path, "wb") as f:
            f.write(data)
        rc, out, err = run_tool("json", path)
        if check(rc == 0, "%s: render failed: %s" % (name, err)):
            got = json.loads(out)
            check(same(got, jsonish(value)), "%s: got\n    %s\n  expected\n    %s"
                  % (name, out.strip(), json.dumps(jsonish(value))))
    path = os.path.join(WORK, "too-deep.msgpack")
    with open(path, "wb") as f:
        f.write(pack([[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]))  # 17 levels
    rc, out, err = run_tool("json", path)
    check(rc == 1 and err == "msgpack: nested deeper than 16 levels", "too-deep: exit %d, %r" % (rc, err))


def main():
    global TOOL, WORK
    if len(sys.argv) != 2:
        sys.stderr.write("usage: crossimpl.py PATH/TO/kiwi-wire-tool\n")
        return 2
    TOOL = sys.argv[1]
    print("crossimpl: python %s, msgpack %s from %s" % (
        sys.version.split()[0], ".".join(map(str, msgpack.version)), os.path.dirname(msgpack.__file__)))
    with tempfile.TemporaryDirectory(prefix="kiwi-crossimpl-") as WORK:
        check_c_encoding()
        check_python_encoding()
        check_refusals()
        check_generic()
    for f in failures:
        print("FAIL: " + f)
    print("crossimpl: %d checks, %d failed" % (checks, len(failures)))
    return 1 if failures else 0


TOOL = WORK = None
if __name__ == "__main__":
    sys.exit(main())
