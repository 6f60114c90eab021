#!/usr/bin/env python3
"""Tests of the scripted provider itself (server.py), standard library only:
its request validation refuses what the real services refuse and accepts
what they accept, expectations, scripts, routing, and a live server on
loopback answering faults in each provider's format and logging requests.
"""

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import server  # noqa: E402

KEYS = server.DEFAULT_KEYS
TOOL_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}

ANTHROPIC_HEADERS = {"x-api-key": KEYS["anthropic"], "anthropic-version": "2023-06-01",
                     "content-type": "application/json"}
OPENAI_HEADERS = {"authorization": "Bearer " + KEYS["openai"], "content-type": "application/json"}
GEMINI_HEADERS = {"x-goog-api-key": KEYS["gemini"], "content-type": "application/json"}


def anthropic_body():
    return copy.deepcopy({
        "model": "claude-sonnet-4-5", "max_tokens": 100, "system": "sys",
        "tools": [{"name": "read_file", "description": "Read.", "input_schema": TOOL_SCHEMA}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file",
                                               "input": {"path": "a"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]},
        ],
    })


def openai_body():
    return copy.deepcopy({
        "model": "gpt-4.1", "max_completion_tokens": 100,
        "tools": [{"type": "function", "function": {"name": "read_file", "description": "Read.",
                                                    "parameters": TOOL_SCHEMA}}],
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "x"},
        ],
    })


def gemini_body():
    return copy.deepcopy({
        "systemInstruction": {"parts": [{"text": "sys"}]},
        "tools": [{"functionDeclarations": [{"name": "read_file", "description": "Read.", "parameters": TOOL_SCHEMA}]}],
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"path": "a"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "x"}}}]},
        ],
        "generationConfig": {"maxOutputTokens": 100},
    })


class Validation(unittest.TestCase):
    def refused(self, provider, headers, body, fragment, query=None):
        with self.assertRaises(server.Invalid) as cm:
            server.validate(provider, headers, body, KEYS[provider], query)
        self.assertIn(fragment, str(cm.exception))

    def test_valid_requests_pass(self):
        server.validate("anthropic", ANTHROPIC_HEADERS, anthropic_body(), KEYS["anthropic"])
        server.validate("openai", OPENAI_HEADERS, openai_body(), KEYS["openai"])
        server.validate("gemini", GEMINI_HEADERS, gemini_body(), KEYS["gemini"], {})

    def test_anthropic(self):
        h = dict(ANTHROPIC_HEADERS)
        self.refused("anthropic", dict(h, **{"x-api-key": "nope"}), anthropic_body(), "AUTH")
        self.refused("anthropic", {k: v for k, v in h.items() if k != "anthropic-version"}, anthropic_body(),
                     "anthropic-version")
        self.refused("anthropic", dict(h, **{"content-type": "text/plain"}), anthropic_body(), "content-type")
        b = anthropic_body(); del b["max_tokens"]
        self.refused("anthropic", h, b, "max_tokens")
        b = anthropic_body(); b["bogus"] = 1
        self.refused("anthropic", h, b, "Extra inputs")
        b = anthropic_body(); b["tools"][0]["name"] = "read file"
        self.refused("anthropic", h, b, "pattern")
        b = anthropic_body(); b["tools"][0]["input_schema"] = {"type": "string"}
        self.refused("anthropic", h, b, "object")
        b = anthropic_body(); del b["tools"][0]["description"]
        self.refused("anthropic", h, b, "description")
        b = anthropic_body(); b["messages"][2]["content"].append(
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": "y"})
        self.refused("anthropic", h, b, "unexpected `tool_use_id`")
        b = anthropic_body(); b["messages"][2]["content"] = [{"type": "text", "text": "no results"}]
        self.refused("anthropic", h, b, "without `tool_result` blocks")
        b = anthropic_body(); b["messages"][2]["content"].insert(0, {"type": "text", "text": "before"})
        self.refused("anthropic", h, b, "must come before")
        b = anthropic_body(); b["messages"][0]["content"] = [{"type": "text", "text": ""}]
        self.refused("anthropic", h, b, "non-empty")
        b = anthropic_body(); b["messages"] = []
        self.refused("anthropic", h, b, "at least one")
        b = anthropic_body(); b["messages"] = b["messages"][:2]
        self.refused("anthropic", h, b, "without results")
        b = anthropic_body(); b["messages"][0]["role"] = "assistant"
        self.refused("anthropic", h, b, "first message")

    def test_openai(self):
        h = dict(OPENAI_HEADERS)
        self.refused("openai", dict(h, authorization="Bearer x"), openai_body(), "AUTH")
        b = openai_body(); b["max_tokns"] = 1
        self.refused("openai", h, b, "Unrecognized request argument")
        b = openai_body(); b["max_tokens"] = 5
        self.refused("openai", h, b, "mutually exclusive")
        b = openai_body(); b["messages"][3]["tool_call_id"] = "call_9"
        self.refused("openai", h, b, "does not answer")
        b = openai_body(); b["messages"] = b["messages"][:3]
        self.refused("openai", h, b, "did not have response messages")
        b = openai_body(); b["messages"].insert(2, {"role": "tool", "tool_call_id": "call_1", "content": "x"})
        self.refused("openai", h, b, "preceeding message with 'tool_calls'")
        b = openai_body(); b["messages"][2]["tool_calls"][0]["function"]["arguments"] = "{oops"
        self.refused("openai", h, b, "not valid JSON")
        b = openai_body(); b["tools"][0]["function"]["parameters"] = {"type": "object", "required": ["x"]}
        self.refused("openai", h, b, "not a property")
        b = openai_body(); b["messages"] = []
        self.refused("openai", h, b, "empty array")

    def test_gemini(self):
        h = dict(GEMINI_HEADERS)
        self.refused("gemini", h, gemini_body(), "not in the URL", {"key": ["k"]})
        self.refused("gemini", dict(h, **{"x-goog-api-key": "x"}), gemini_body(), "AUTH")
        b = gemini_body(); b["tools"][0]["functionDeclarations"][0]["parameters"]["additionalProperties"] = False
        self.refused("gemini", h, b, "Unknown name \"additionalProperties\"")
        b = gemini_body(); b["contents"][2]["parts"].append(
            {"functionResponse": {"name": "read_file", "response": {"output": "y"}}})
        self.refused("gemini", h, b, "number of function response parts")
        b = gemini_body(); b["contents"][2]["parts"][0]["functionResponse"]["name"] = "other"
        self.refused("gemini", h, b, "do not match")
        b = gemini_body(); b["contents"] = [b["contents"][0], b["contents"][2]]
        self.refused("gemini", h, b, "must follow a model turn")
        b = gemini_body(); b["contents"][1]["role"] = "assistant"
        self.refused("gemini", h, b, "valid role")
        b = gemini_body(); b["contents"][0]["parts"][0]["functionCall"] = {"name": "x"}
        self.refused("gemini", h, b, "exactly one data field")
        b = gemini_body(); b["generationConfig"]["max_tokens"] = 1
        self.refused("gemini", h, b, "Unknown name")
        b = gemini_body(); b["contents"][1]["parts"][0]["functionCall"]["id"] = "fc1"
        self.refused("gemini", h, b, "has no response with that id")

    def test_expectations(self):
        b = anthropic_body()
        raw = json.dumps(b)
        server.check_expect("anthropic", {"tool_result_for": "toolu_1", "contains": "go", "tools": ["read_file"],
                                          "messages": 3, "system_contains": "sys"}, b, raw)
        with self.assertRaises(server.Invalid):
            server.check_expect("anthropic", {"tool_result_for": "toolu_2"}, b, raw)
        with self.assertRaises(server.Invalid):
            server.check_expect("anthropic", {"messages": 1}, b, raw)
        with self.assertRaises(server.Invalid):
            server.check_expect("anthropic", {"tool_error_for": "toolu_1"}, b, raw)
        g = gemini_body()
        server.check_expect("gemini", {"function_response_for": "read_file"}, g, json.dumps(g))
        o = openai_body()
        server.check_expect("openai", {"tool_result_for": "call_1", "system_contains": "sys"}, o, json.dumps(o))

    def test_route(self):
        self.assertEqual(server.route("/script/a-b/v1/messages", {}), ("a-b", "anthropic", None))
        self.assertEqual(server.route("/v1/chat/completions", {"x-kiwi-script": "s"}), ("s", "openai", None))
        self.assertEqual(server.route("/script/s/v1beta/models/gemini-2.5-flash:generateContent", {}),
                         ("s", "gemini", "gemini-2.5-flash"))
        self.assertEqual(server.route("/script/s/v2/other", {})[1], None)

    def test_scripts_load(self):
        p, turns = server.load_script([os.path.join(HERE, "scripts")], "anthropic-500-twice")
        self.assertEqual(p, "anthropic")
        self.assertEqual([t.get("fault") for t in turns], ["500", "500", None])
        self.assertIsNone(server.load_script([os.path.join(HERE, "scripts")], "../etc/passwd"))
        self.assertIsNone(server.load_script([os.path.join(HERE, "scripts")], "absent"))

    def test_error_bodies(self):
        self.assertEqual(server.error_body("anthropic", 529)["error"]["type"], "overloaded_error")
        self.assertEqual(server.error_body("openai", 429)["error"]["code"], "rate_limit_exceeded")
        g = server.error_body("gemini", 429, retry_delay="2s")
        self.assertEqual(g["error"]["status"], "RESOURCE_EXHAUSTED")
        self.assertEqual(g["error"]["details"][0]["retryDelay"], "2s")


class Seat(unittest.TestCase):
    """The model's seat (--seat): answers parsed, turned into each wire
    format, requests written (escapes shown, not sent to a terminal), a live
    request answered from the file a person writes; cache breakpoints
    counted."""

    def test_answers(self):
        self.assertEqual(server.seat_parse_answer(b'"plan"'), ("plan", []))
        self.assertEqual(server.seat_parse_answer(b"just words\n"), ("just words\n", []))
        self.assertEqual(server.seat_parse_answer(b'[{"tool": "run_tests"}]'), (None, [("run_tests", {})]))
        self.assertEqual(server.seat_parse_answer(b'{"text": "t", "tools": [{"tool": "a", "args": {"x": 1}}]}'),
                         ("t", [("a", {"x": 1})]))
        for bad in (b'[{"name": "x"}]', b'[{"tool": "x", "args": []}]', b'{"other": 1}', b'[]', b'""'):
            with self.assertRaises(ValueError):
                server.seat_parse_answer(bad)

    def test_responses_in_each_format(self):
        calls = [("read_file", {"path": "a.js"})]
        a = server.seat_response("anthropic", {"model": "m"}, None, 3, "t", calls)
        self.assertEqual([b["type"] for b in a["content"]], ["text", "tool_use"])
        self.assertEqual(a["stop_reason"], "tool_use")
        o = server.seat_response("openai", {"model": "m"}, None, 3, None, calls)
        fn = o["choices"][0]["message"]["tool_calls"][0]["function"]
        self.assertEqual((fn["name"], json.loads(fn["arguments"])), ("read_file", {"path": "a.js"}))
        g = server.seat_response("gemini", {}, "g", 3, "t", [])
        self.assertEqual(g["candidates"][0]["content"]["parts"], [{"text": "t"}])

    def test_transcript_shows_escapes(self):
        t = server.seat_transcript("anthropic", {"system": "S", "messages": [
            {"role": "user", "content": "x\x1b]0;title\x07y\x9b2J"}]})
        self.assertNotIn("\x1b", t)
        self.assertNotIn("\x07", t)
        self.assertNotIn("\x9b", t)
        self.assertIn("x\\x1b]0;title\\x07y\\x9b2J", t)

    def test_cache_breakpoints(self):
        body = anthropic_body()
        body["system"] = [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]
        server.validate("anthropic", ANTHROPIC_HEADERS, body, KEYS["anthropic"])
        body["messages"][0]["content"] = [{"type": "text", "text": "t%d" % i, "cache_control": {"type": "ephemeral"}}
                                          for i in range(4)]
        with self.assertRaises(server.Invalid) as cm:
            server.validate("anthropic", ANTHROPIC_HEADERS, body, KEYS["anthropic"])
        self.assertIn("A maximum of 4 blocks with cache_control", str(cm.exception))

    def test_live(self):
        seat = tempfile.mkdtemp(prefix="kiwi-seat-test-")
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "server.py"), "--seat", seat, "--parent-pid",
                                 str(os.getpid()), "--max-seconds", "60"], stdout=subprocess.PIPE, text=True)
        try:
            port = int(proc.stdout.readline())
            out = {}

            def ask():
                req = urllib.request.Request("http://127.0.0.1:%d/v1/messages" % port,
                                             data=json.dumps(anthropic_body()).encode(), headers=ANTHROPIC_HEADERS,
                                             method="POST")
                with urllib.request.urlopen(req, timeout=30) as r:
                    out["body"] = json.loads(r.read())

            th = threading.Thread(target=ask)
            th.start()
            while not os.path.exists(os.path.join(seat, "0001-request.txt")):
                self.assertTrue(th.is_alive())
                time.sleep(0.05)
            with open(os.path.join(seat, "0001-request.json"), "rb") as f:
                self.assertEqual(json.loads(f.read()), anthropic_body())
            with open(os.path.join(seat, "0001-answer.json.tmp"), "w") as f:
                json.dump([{"tool": "run_tests", "args": {}}], f)
            os.replace(os.path.join(seat, "0001-answer.json.tmp"), os.path.join(seat, "0001-answer.json"))
            th.join(30)
            self.assertEqual(out["body"]["content"][0]["name"], "run_tests")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            proc.stdout.close()
            shutil.rmtree(seat)


class Live(unittest.TestCase):
    """A real server process on loopback."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kiwi-scripted-test-")
        with open(os.path.join(cls.dir, "t.json"), "w") as f:
            json.dump({"provider": "openai", "turns": [
                {"fault": "429", "retry_after": 2},
                {"fault": "malformed"},
                {"expect": {"contains": "needle"}, "response": {"ok": 1}},
            ]}, f)
        with open(os.path.join(cls.dir, "slow.json"), "w") as f:
            json.dump({"provider": "openai", "turns": [{"delay_s": 0.5, "response": {"ok": 2}}]}, f)
        cls.log = os.path.join(cls.dir, "log.jsonl")
        cls.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "server.py"), "--scripts", cls.dir,
                                     "--log", cls.log, "--parent-pid", str(os.getpid()), "--max-seconds", "60"],
                                    stdout=subprocess.PIPE, text=True)
        cls.port = int(cls.proc.stdout.readline())

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(timeout=10)
        cls.proc.stdout.close()
        shutil.rmtree(cls.dir)

    def post(self, path, body, headers=OPENAI_HEADERS):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def test_sequence(self):
        self.post("/_control/reset", {})
        body = openai_body()
        st, hd, data = self.post("/script/t/v1/chat/completions", body)
        self.assertEqual(st, 429)
        self.assertEqual(hd.get("retry-after"), "2")
        self.assertEqual(json.loads(data)["error"]["code"], "rate_limit_exceeded")
        st, _, data = self.post("/script/t/v1/chat/completions", body)
        self.assertEqual(st, 200)
        with self.assertRaises(ValueError):
            json.loads(data)
        # an expectation not met: 400, recorded, the turn not consumed
        st, _, data = self.post("/script/t/v1/chat/completions", body)
        self.assertEqual(st, 400)
        self.assertIn("needle", json.loads(data)["error"]["message"])
        body["messages"][1]["content"] = "needle"
        st, _, data = self.post("/script/t/v1/chat/completions", body)
        self.assertEqual((st, json.loads(data)), (200, {"ok": 1}))
        # past the end of the script
        st, _, data = self.post("/script/t/v1/chat/completions", body)
        self.assertEqual(st, 400)
        self.assertIn("has 3 turns", json.loads(data)["error"]["message"])
        # the wrong wire format for this script
        st, _, _ = self.post("/script/t/v1/messages", anthropic_body(), ANTHROPIC_HEADERS)
        self.assertEqual(st, 400)
        time.sleep(0.1)
        with open(self.log) as f:
            entries = [json.loads(line) for line in f]
        kinds = [[v["kind"] for v in e["violations"]] for e in entries if e["script"] == "t"]
        self.assertEqual(kinds, [[], [], ["expectation"], [], ["script_exhausted"], ["wrong_provider"]])
        with open(self.log) as f:
            self.assertNotIn(KEYS["openai"], f.read())

    def test_delay(self):
        # a turn with delay_s is logged once on arrival (fault "delay"), then
        # played: the log shows the request in flight before its answer
        st, _, data = self.post("/script/slow/v1/chat/completions", openai_body())
        self.assertEqual((st, json.loads(data)), (200, {"ok": 2}))
        time.sleep(0.1)
        with open(self.log) as f:
            entries = [json.loads(line) for line in f if json.loads(line)["script"] == "slow"]
        self.assertEqual([(e["fault"], e["status"], e["turn"]) for e in entries], [("delay", None, 0), (None, 200, 0)])
        self.assertEqual(entries[0]["delay_s"], 0.5)
        self.assertLess(entries[0]["seq"], entries[1]["seq"])
        self.assertEqual([e["violations"] for e in entries], [[], []])

    def test_wrong_key(self):
        h = dict(OPENAI_HEADERS, authorization="Bearer sk-wrong-123456")
        st, _, data = self.post("/script/t/v1/chat/completions", openai_body(), h)
        self.assertEqual(st, 401)
        self.assertEqual(json.loads(data)["error"]["code"], "invalid_api_key")
        h = dict(GEMINI_HEADERS, **{"x-goog-api-key": "nope"})
        st, _, data = self.post("/script/t/v1beta/models/g:generateContent", gemini_body(), h)
        self.assertEqual(st, 400)
        self.assertEqual(json.loads(data)["error"]["details"][0]["reason"], "API_KEY_INVALID")


if __name__ == "__main__":
    unittest.main(verbosity=2)
