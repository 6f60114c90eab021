#!/usr/bin/env python3
"""The scripted provider: a real HTTP server on loopback that speaks the
Anthropic, OpenAI and Gemini wire formats, replays scripted turns, and checks
every request it receives as strictly as the real services do.

Python 3 standard library only (it runs with Debian's /usr/bin/python3).

    server.py --scripts DIR [--scripts DIR2 ...] [--log FILE] [--port 0]
              [--port-file FILE] [--parent-pid PID] [--max-seconds 900]

It binds 127.0.0.1 (an ephemeral port unless --port), prints the port on a
line of its own on stdout (and writes it to --port-file), and serves until
SIGTERM/SIGINT, until the parent process is gone, or for --max-seconds.

Endpoints, under a script prefix /script/<name> (or with the header
X-Kiwi-Script: <name> and no prefix):
    POST /v1/messages                           Anthropic Messages API
    POST /v1/chat/completions                   OpenAI Chat Completions
    POST /v1beta/models/{model}:generateContent Gemini generateContent
So a client's base URL is http://127.0.0.1:PORT/script/<name> (Anthropic),
.../script/<name>/v1 (OpenAI) or .../script/<name>/v1beta (Gemini).

Control endpoints: GET /_control/health, POST /_control/reset[?script=NAME]
(turn counters back to 0), GET /_control/log (the log as a JSON list).

A script is DIR/<name>.json (see README.md):
    {"provider": "anthropic", "turns": [TURN, ...]}   or just [TURN, ...]
    TURN = {"response": BODY, "status": 200, "headers": {...}, "expect": {...}}
         | {"fault": "429"|"500"|"502"|"503"|"504"|"529"|"400"|"401"|"403"|"404",
            "message": "...", "retry_after": 1, "retry_after_ms": 1500,
            "retry_delay": "1s", "reason": "API_KEY_INVALID", "echo_key": true,
            "repeat": N, "expect": {...}}
         | {"fault": "timeout", "seconds": 30}      (hang, then close)
         | {"fault": "disconnect"}                  (close without a response)
         | {"fault": "malformed", "body": "..."}    (200 with an invalid JSON body)
    Any turn may carry "delay_s": N: played N seconds late (a slow model).

Every request is checked (headers, required fields, tool schemas, message
structure, the turn's "expect"); a request that fails gets a 400 in the
provider's own error format and is recorded as a violation. The log (JSON
lines, --log) has one entry per request: seq, script, provider, turn, status,
fault, violations, the request body. Keys are never written to the log.
"""

import argparse
import email.utils
import json
import os
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_KEYS = {
    "anthropic": "kiwi-test-anthropic-key-7f3a9c",
    "openai": "kiwi-test-openai-key-51d2e8",
    "gemini": "kiwi-test-gemini-key-c04b66",
}
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
GEMINI_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")
MAX_BODY = 32 << 20


class Invalid(Exception):
    """A request the real service would refuse with a 400."""


# ------------------------------------------------------------ error bodies ---

ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "api_error",
    529: "overloaded_error",
}
OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", None),
    504: ("server_error", None),
    529: ("server_error", None),
}
GEMINI_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}
DEFAULT_MESSAGES = {
    400: "Invalid request.",
    401: "invalid x-api-key",
    403: "Your API key does not have permission to use the specified resource.",
    404: "The requested resource could not be found.",
    429: "Number of request tokens has exceeded your per-minute rate limit.",
    500: "Internal server error",
    502: "Bad gateway",
    503: "The model is overloaded. Please try again later.",
    504: "Deadline exceeded",
    529: "Overloaded",
}


def error_body(provider, status, message=None, request_id=None, retry_delay=None, reason=None):
    """The error body the real service sends for `status`, as a dict."""
    message = message if message is not None else DEFAULT_MESSAGES.get(status, "Error")
    if provider == "anthropic":
        body = {
            "type": "error",
            "error": {"type": ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message},
        }
        if request_id:
            body["request_id"] = request_id
        return body
    if provider == "openai":
        etype, code = OPENAI_ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
        return {"error": {"message": message, "type": etype, "param": None, "code": code}}
    details = []
    if reason:
        details.append({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"},
        })
    if retry_delay:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay})
    err = {"code": status, "message": message, "status": GEMINI_STATUSES.get(status, "UNKNOWN")}
    if details:
        err["details"] = details
    return {"error": err}


# -------------------------------------------------------------- validation ---

def _need(cond, msg):
    if not cond:
        raise Invalid(msg)


def _check_tool_name(d, w, names, bad_name, duplicate, no_description, name_re=None):
    """The name and description of the tool definition d at w, refused in
    the provider's words (each a format of w): a name TOOL_NAME_RE (and
    name_re) accepts that no earlier tool of the request has (names: theirs;
    this one is added), and a description that is not empty."""
    name = d.get("name")
    _need(isinstance(name, str) and TOOL_NAME_RE.match(name) and (name_re is None or name_re.match(name)),
          bad_name % w)
    _need(name not in names, duplicate % w)
    names.add(name)
    _need(isinstance(d.get("description"), str) and d["description"], no_description % w)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _unknown(obj, allowed, where):
    extra = sorted(set(obj) - set(allowed))
    _need(not extra, "%s: Extra inputs are not permitted: %s" % (where, ", ".join(extra)))


def check_object_schema(schema, where):
    """A tool's parameters: a JSON schema for an object."""
    _need(isinstance(schema, dict), "%s: must be an object schema" % where)
    _need(schema.get("type") == "object", "%s: type must be \"object\"" % where)
    props = schema.get("properties", {})
    _need(isinstance(props, dict), "%s.properties: must be an object" % where)
    for name, sub in props.items():
        _need(isinstance(sub, dict), "%s.properties.%s: must be a schema object" % (where, name))
    req = schema.get("required", [])
    _need(isinstance(req, list) and all(isinstance(r, str) for r in req),
          "%s.required: must be a list of strings" % where)
    for r in req:
        _need(r in props, "%s.required: '%s' is not a property" % (where, r))


def check_headers_json(headers):
    ctype = headers.get("content-type", "")
    _need(ctype.split(";")[0].strip().lower() == "application/json",
          "content-type must be application/json (got %r)" % ctype)


# Anthropic ---------------------------------------------------------------------

ANTHROPIC_TOP = {"model", "messages", "max_tokens", "system", "tools", "tool_choice", "temperature", "top_p", "top_k",
                 "stop_sequences", "stream", "metadata", "thinking", "service_tier", "container", "mcp_servers"}


def _anthropic_blocks(content, where):
    if isinstance(content, str):
        _need(content != "", "%s: content must be non-empty" % where)
        return [{"type": "text", "text": content}]
    _need(isinstance(content, list), "%s: content must be a string or a list of blocks" % where)
    for k, b in enumerate(content):
        bw = "%s.content.%d" % (where, k)
        _need(isinstance(b, dict) and isinstance(b.get("type"), str), "%s: a block needs a type" % bw)
        t = b["type"]
        if t == "text":
            _unknown(b, {"type", "text", "cache_control", "citations"}, bw)
            _need(isinstance(b.get("text"), str), "%s.text: Field required" % bw)
            _need(b["text"] != "", "%s: text content blocks must be non-empty" % bw)
        elif t == "tool_use":
            _unknown(b, {"type", "id", "name", "input", "cache_control"}, bw)
            _need(isinstance(b.get("id"), str) and b["id"], "%s.id: Field required" % bw)
            _need(isinstance(b.get("name"), str) and TOOL_NAME_RE.match(b["name"]), "%s.name: invalid" % bw)
            _need(isinstance(b.get("input"), dict), "%s.input: Input should be a valid dictionary" % bw)
        elif t == "tool_result":
            _unknown(b, {"type", "tool_use_id", "content", "is_error", "cache_control"}, bw)
            _need(isinstance(b.get("tool_use_id"), str) and b["tool_use_id"], "%s.tool_use_id: Field required" % bw)
            c = b.get("content", "")
            if isinstance(c, list):
                for j, cb in enumerate(c):
                    _need(isinstance(cb, dict) and cb.get("type") in ("text", "image", "document"),
                          "%s.content.%d: invalid block" % (bw, j))
            else:
                _need(isinstance(c, str), "%s.content: must be a string or a list of blocks" % bw)
            _need(isinstance(b.get("is_error", False), bool), "%s.is_error: must be a boolean" % bw)
        elif t in ("image", "document", "thinking", "redacted_thinking"):
            pass
        else:
            raise Invalid("%s: unknown block type %r" % (bw, t))
    return content


def validate_anthropic(headers, body, key):
    _need(headers.get("x-api-key") == key, "AUTH")
    _need(headers.get("anthropic-version") == ANTHROPIC_VERSION,
          "anthropic-version: header is required (%s)" % ANTHROPIC_VERSION)
    check_headers_json(headers)
    _need(isinstance(body, dict), "body must be a JSON object")
    _unknown(body, ANTHROPIC_TOP, "body")
    _need(isinstance(body.get("model"), str) and body["model"], "model: Field required")
    _need(_is_int(body.get("max_tokens")) and body["max_tokens"] >= 1, "max_tokens: Field required (an integer >= 1)")
    if "temperature" in body:
        _need(_is_num(body["temperature"]) and 0 <= body["temperature"] <= 1, "temperature: must be within 0..1")
    if "system" in body:
        s = body["system"]
        _need(isinstance(s, str) or (isinstance(s, list) and all(isinstance(b, dict) and b.get("type") == "text"
                                                                  for b in s)),
              "system: must be a string or a list of text blocks")
    names = set()
    tools = body.get("tools", [])
    _need(isinstance(tools, list), "tools: must be a list")
    for i, t in enumerate(tools):
        w = "tools.%d" % i
        _need(isinstance(t, dict), "%s: must be an object" % w)
        _unknown(t, {"name", "description", "input_schema", "cache_control", "type"}, w)
        _check_tool_name(t, w, names, "%s.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'",
                         "%s.name: tool names must be unique", "%s.description: Field required")
        check_object_schema(t.get("input_schema"), w + ".input_schema")
    msgs = body.get("messages")
    _need(isinstance(msgs, list) and msgs, "messages: at least one message is required")
    prev_ids = []
    seen_ids = set()
    for i, m in enumerate(msgs):
        w = "messages.%d" % i
        _need(isinstance(m, dict), "%s: must be an object" % w)
        _unknown(m, {"role", "content"}, w)
        role = m.get("role")
        _need(role in ("user", "assistant"), "%s.role: Input should be 'user' or 'assistant'" % w)
        if i == 0:
            _need(role == "user", "messages: first message must use the \"user\" role")
        blocks = _anthropic_blocks(m.get("content"), w)
        _need(blocks or (role == "assistant" and i == len(msgs) - 1), "%s: all messages must have non-empty content" % w)
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        if prev_ids:
            missing = [x for x in prev_ids if x not in results]
            _need(role == "user" and not missing,
                  "%s: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` "
                  "block must have a corresponding `tool_result` block in the next message."
                  % (w, ", ".join(missing or prev_ids)))
        for x in results:
            _need(x in prev_ids,
                  "%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have "
                  "a corresponding `tool_use` block in the previous message." % (w, x))
        if results:
            first_other = next((k for k, b in enumerate(blocks) if b["type"] != "tool_result"), len(blocks))
            _need(all(b["type"] != "tool_result" for b in blocks[first_other:]),
                  "%s: tool_result blocks must come before any other content" % w)
        _need(role == "assistant" or not any(b["type"] == "tool_use" for b in blocks),
              "%s: tool_use blocks are only allowed in assistant messages" % w)
        _need(role == "user" or not results, "%s: tool_result blocks are only allowed in user messages" % w)
        prev_ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
        for x in prev_ids:
            _need(x not in seen_ids, "%s: `tool_use` ids must be unique: %s" % (w, x))
            seen_ids.add(x)
    _need(not prev_ids, "messages: the last message has tool_use blocks without results")
    marks = _cache_marks(body)
    _need(marks <= 4, "A maximum of 4 blocks with cache_control may be provided. Found %d." % marks)
    return body


def _cache_marks(body):
    """The prompt-cache breakpoints of an Anthropic request (each checked)."""
    places = list(body.get("tools", []))
    if isinstance(body.get("system"), list):
        places += body["system"]
    for m in body.get("messages", []):
        if isinstance(m.get("content"), list):
            places += m["content"]
    n = 0
    for p in places:
        if isinstance(p, dict) and "cache_control" in p:
            cc = p["cache_control"]
            _need(isinstance(cc, dict) and cc.get("type") == "ephemeral" and set(cc) <= {"type", "ttl"},
                  "cache_control: Input tag does not match the expected tag 'ephemeral'")
            n += 1
    return n


def anthropic_tool_results(body):
    out = []
    for m in body.get("messages", []):
        if isinstance(m.get("content"), list):
            out += [b for b in m["content"] if b.get("type") == "tool_result"]
    return [{"id": b.get("tool_use_id"), "content": json.dumps(b.get("content", "")),
             "is_error": bool(b.get("is_error"))} for b in out]


# OpenAI ------------------------------------------------------------------------

OPENAI_TOP = {"model", "messages", "tools", "tool_choice", "max_tokens", "max_completion_tokens", "temperature",
              "top_p", "n", "stream", "stream_options", "stop", "parallel_tool_calls", "user", "seed",
              "response_format", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs",
              "reasoning_effort", "metadata", "store", "service_tier", "prediction", "modalities", "audio",
              "logit_bias", "verbosity", "safety_identifier", "prompt_cache_key"}


def _openai_text(content, where, allow_null=False):
    if content is None:
        _need(allow_null, "%s.content: Field required" % where)
        return
    if isinstance(content, str):
        return
    _need(isinstance(content, list), "%s.content: must be a string or a list of parts" % where)
    for j, p in enumerate(content):
        _need(isinstance(p, dict) and p.get("type") in ("text", "image_url", "input_audio", "file", "refusal"),
              "%s.content.%d: invalid part" % (where, j))


def validate_openai(headers, body, key):
    _need(headers.get("authorization") == "Bearer " + key, "AUTH")
    check_headers_json(headers)
    _need(isinstance(body, dict), "body must be a JSON object")
    extra = sorted(set(body) - OPENAI_TOP)
    _need(not extra, "Unrecognized request argument supplied: %s" % ", ".join(extra))
    _need(isinstance(body.get("model"), str) and body["model"], "you must provide a model parameter")
    for k in ("max_tokens", "max_completion_tokens"):
        if k in body:
            _need(_is_int(body[k]) and body[k] >= 1, "Invalid '%s': must be an integer >= 1" % k)
    _need(not ("max_tokens" in body and "max_completion_tokens" in body),
          "max_tokens and max_completion_tokens are mutually exclusive")
    if "temperature" in body:
        _need(_is_num(body["temperature"]) and 0 <= body["temperature"] <= 2, "Invalid 'temperature'")
    names = set()
    tools = body.get("tools", [])
    _need(isinstance(tools, list), "Invalid 'tools': must be an array")
    for i, t in enumerate(tools):
        w = "tools[%d]" % i
        _need(isinstance(t, dict) and t.get("type") == "function", "Invalid '%s.type': expected 'function'" % w)
        _unknown(t, {"type", "function"}, w)
        fn = t.get("function")
        _need(isinstance(fn, dict), "Missing required parameter: '%s.function'" % w)
        _unknown(fn, {"name", "description", "parameters", "strict"}, w + ".function")
        _check_tool_name(fn, w + ".function", names,
                         "Invalid '%s.name': string does not match pattern '^[a-zA-Z0-9_-]+$'",
                         "%s.name: duplicate tool name", "%s.description: required")
        check_object_schema(fn.get("parameters"), w + ".function.parameters")
    msgs = body.get("messages")
    _need(isinstance(msgs, list) and msgs, "Invalid 'messages': empty array. Expected an array with minimum length 1")
    pending = []
    answered_any = False
    for i, m in enumerate(msgs):
        w = "messages[%d]" % i
        _need(isinstance(m, dict), "Invalid '%s': must be an object" % w)
        role = m.get("role")
        _need(role in ("system", "developer", "user", "assistant", "tool"),
              "Invalid value for '%s.role': %r" % (w, role))
        if role != "tool" and pending:
            raise Invalid("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                          "each 'tool_call_id'. The following tool_call_ids did not have response messages: %s"
                          % ", ".join(pending))
        if role in ("system", "developer", "user"):
            _unknown(m, {"role", "content", "name"}, w)
            _openai_text(m.get("content"), w)
        elif role == "assistant":
            _unknown(m, {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"}, w)
            calls = m.get("tool_calls")
            _openai_text(m.get("content"), w, allow_null=bool(calls))
            if calls is not None:
                _need(isinstance(calls, list) and calls, "Invalid '%s.tool_calls': empty array" % w)
                for j, c in enumerate(calls):
                    cw = "%s.tool_calls[%d]" % (w, j)
                    _need(isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"],
                          "Missing required parameter: '%s.id'" % cw)
                    _need(c.get("type") == "function", "Invalid '%s.type'" % cw)
                    fn = c.get("function")
                    _need(isinstance(fn, dict) and isinstance(fn.get("name"), str)
                          and isinstance(fn.get("arguments"), str),
                          "Missing required parameter: '%s.function' (name, arguments)" % cw)
                    try:
                        args = json.loads(fn["arguments"])
                    except ValueError:
                        raise Invalid("Invalid '%s.function.arguments': not valid JSON" % cw)
                    _need(isinstance(args, dict), "Invalid '%s.function.arguments': not a JSON object" % cw)
                pending = [c["id"] for c in calls]
                answered_any = False
        else:
            _unknown(m, {"role", "content", "tool_call_id"}, w)
            tcid = m.get("tool_call_id")
            _need(isinstance(tcid, str) and tcid, "Missing required parameter: '%s.tool_call_id'" % w)
            _need(pending or answered_any,
                  "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                  "'tool_calls'.")
            _need(tcid in pending, "Invalid parameter: '%s.tool_call_id' %s does not answer a tool call of the "
                  "preceding assistant message" % (w, tcid))
            _openai_text(m.get("content"), w)
            pending.remove(tcid)
            answered_any = True
    _need(not pending, "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
          "'tool_call_id'. The following tool_call_ids did not have response messages: %s" % ", ".join(pending))
    _need(any(m.get("role") != "system" for m in msgs), "messages: only system messages")
    return body


def openai_tool_results(body):
    return [{"id": m.get("tool_call_id"), "content": m.get("content") if isinstance(m.get("content"), str)
             else json.dumps(m.get("content")), "is_error": False}
            for m in body.get("messages", []) if m.get("role") == "tool"]


# Gemini ------------------------------------------------------------------------

GEMINI_TOP = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings",
              "cachedContent"}
GEMINI_GEN = {"maxOutputTokens", "temperature", "topP", "topK", "candidateCount", "stopSequences",
              "responseMimeType", "responseSchema", "presencePenalty", "frequencyPenalty", "seed", "thinkingConfig",
              "responseModalities", "responseLogprobs", "logprobs"}
GEMINI_SCHEMA_KEYS = {"type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
                      "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
                      "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum"}
GEMINI_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}
GEMINI_PART_DATA = {"text", "functionCall", "functionResponse", "inlineData", "fileData", "executableCode",
                    "codeExecutionResult"}


def check_gemini_schema(s, where, depth=0):
    _need(depth < 32, "%s: schema nested too deeply" % where)
    _need(isinstance(s, dict), "%s: must be a schema object" % where)
    for k in s:
        _need(k in GEMINI_SCHEMA_KEYS, "Invalid JSON payload received. Unknown name \"%s\" at '%s': Cannot find field."
              % (k, where))
    if "type" in s:
        _need(isinstance(s["type"], str) and s["type"].lower() in GEMINI_TYPES,
              "%s.type: invalid value %r" % (where, s["type"]))
    for name, sub in s.get("properties", {}).items():
        check_gemini_schema(sub, "%s.properties[%s].value" % (where, name), depth + 1)
    if "items" in s:
        check_gemini_schema(s["items"], where + ".items", depth + 1)
    for j, sub in enumerate(s.get("anyOf", [])):
        check_gemini_schema(sub, "%s.any_of[%d]" % (where, j), depth + 1)


def validate_gemini(headers, body, key, query):
    _need("key" not in query, "the API key must travel in x-goog-api-key, not in the URL")
    _need(headers.get("x-goog-api-key") == key, "AUTH")
    check_headers_json(headers)
    _need(isinstance(body, dict), "body must be a JSON object")
    for k in body:
        _need(k in GEMINI_TOP, "Invalid JSON payload received. Unknown name \"%s\": Cannot find field." % k)
    gc = body.get("generationConfig", {})
    _need(isinstance(gc, dict), "generationConfig: must be an object")
    for k in gc:
        _need(k in GEMINI_GEN, "Invalid JSON payload received. Unknown name \"%s\" at 'generation_config'." % k)
    if "maxOutputTokens" in gc:
        _need(_is_int(gc["maxOutputTokens"]) and gc["maxOutputTokens"] >= 1, "generationConfig.maxOutputTokens")
    if "temperature" in gc:
        _need(_is_num(gc["temperature"]) and 0 <= gc["temperature"] <= 2, "generationConfig.temperature")
    if "systemInstruction" in body:
        si = body["systemInstruction"]
        _need(isinstance(si, dict) and isinstance(si.get("parts"), list) and si["parts"]
              and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in si["parts"]),
              "systemInstruction: must be a Content with text parts")
        _unknown(si, {"parts", "role"}, "systemInstruction")
    names = set()
    tools = body.get("tools", [])
    _need(isinstance(tools, list), "tools: must be a list")
    for i, t in enumerate(tools):
        w = "tools[%d]" % i
        _need(isinstance(t, dict), "%s: must be an object" % w)
        for k in t:
            _need(k in ("functionDeclarations", "codeExecution", "googleSearch", "urlContext"),
                  "Invalid JSON payload received. Unknown name \"%s\" at '%s'." % (k, w))
        for j, d in enumerate(t.get("functionDeclarations", [])):
            dw = "%s.function_declarations[%d]" % (w, j)
            _need(isinstance(d, dict), "%s: must be an object" % dw)
            for k in d:
                _need(k in ("name", "description", "parameters", "parametersJsonSchema", "response", "behavior"),
                      "Invalid JSON payload received. Unknown name \"%s\" at '%s'." % (k, dw))
            _check_tool_name(d, dw, names, "%s.name: invalid function name", "%s.name: duplicate function name",
                             "%s.description: required", GEMINI_NAME_RE)
            _need("parameters" in d or "parametersJsonSchema" in d, "%s.parameters: required" % dw)
            if "parameters" in d:
                check_object_schema(d["parameters"], dw + ".parameters")
                check_gemini_schema(d["parameters"], dw + ".parameters")
            else:
                check_object_schema(d["parametersJsonSchema"], dw + ".parametersJsonSchema")
    contents = body.get("contents")
    _need(isinstance(contents, list) and contents, "* GenerateContentRequest.contents: contents is not specified")
    pending = None
    for i, c in enumerate(contents):
        w = "contents[%d]" % i
        _need(isinstance(c, dict), "%s: must be an object" % w)
        _unknown(c, {"role", "parts"}, w)
        role = c.get("role")
        _need(role in ("user", "model"), "%s.role: Please use a valid role: user, model." % w)
        parts = c.get("parts")
        _need(isinstance(parts, list) and parts, "* GenerateContentRequest.%s.parts: contents.parts must not be empty."
              % w)
        calls, responses = [], []
        for j, p in enumerate(parts):
            pw = "%s.parts[%d]" % (w, j)
            _need(isinstance(p, dict), "%s: must be an object" % pw)
            for k in p:
                _need(k in GEMINI_PART_DATA or k in ("thought", "thoughtSignature", "videoMetadata"),
                      "Invalid JSON payload received. Unknown name \"%s\" at '%s'." % (k, pw))
            data = [k for k in p if k in GEMINI_PART_DATA]
            _need(len(data) == 1, "%s: a part must have exactly one data field (has %s)" % (pw, data or "none"))
            if "text" in p:
                _need(isinstance(p["text"], str), "%s.text: must be a string" % pw)
            if "functionCall" in p:
                fc = p["functionCall"]
                _need(role == "model", "%s: functionCall only in a model turn" % pw)
                _need(isinstance(fc, dict) and isinstance(fc.get("name"), str) and fc["name"],
                      "%s.function_call.name: required" % pw)
                _unknown(fc, {"name", "args", "id"}, pw + ".function_call")
                _need(isinstance(fc.get("args", {}), dict), "%s.function_call.args: must be an object" % pw)
                calls.append(fc)
            if "functionResponse" in p:
                fr = p["functionResponse"]
                _need(role == "user", "%s: functionResponse only in a user turn" % pw)
                _need(isinstance(fr, dict) and isinstance(fr.get("name"), str) and fr["name"],
                      "%s.function_response.name: required" % pw)
                _unknown(fr, {"name", "response", "id", "parts", "willContinue", "scheduling"},
                         pw + ".function_response")
                _need(isinstance(fr.get("response"), dict), "%s.function_response.response: must be an object" % pw)
                responses.append(fr)
        if pending is not None:
            _need(role == "user" and len(responses) == len(pending),
                  "Please ensure that the number of function response parts is equal to the number of function call "
                  "parts of the function call turn. (%s)" % w)
            want = sorted(fc["name"] for fc in pending)
            got = sorted(fr["name"] for fr in responses)
            _need(want == got, "%s: function response names %s do not match the function calls %s" % (w, got, want))
            ids = {fc["id"] for fc in pending if "id" in fc}
            for fr in responses:
                if "id" in fr:
                    _need(fr["id"] in ids, "%s: function response id %s answers no function call" % (w, fr["id"]))
            for fc in pending:
                if "id" in fc:
                    _need(any(fr.get("id") == fc["id"] for fr in responses),
                          "%s: function call id %s has no response with that id" % (w, fc["id"]))
        else:
            _need(not responses, "%s: functionResponse parts must follow a model turn with functionCall parts" % w)
        pending = calls if calls else None
    _need(pending is None, "contents: the last turn has function calls without responses")
    _need(contents[-1].get("role") == "user", "contents: the last turn must be a user turn")
    return body


def gemini_tool_results(body):
    out = []
    for c in body.get("contents", []):
        for p in c.get("parts", []):
            fr = p.get("functionResponse")
            if isinstance(fr, dict):
                resp = fr.get("response", {})
                out.append({"id": fr.get("id"), "name": fr.get("name"), "content": json.dumps(resp),
                            "is_error": isinstance(resp, dict) and "error" in resp})
    return out


def gemini_signatures(body):
    sigs = set()
    for c in body.get("contents", []):
        for p in c.get("parts", []):
            if isinstance(p, dict) and isinstance(p.get("thoughtSignature"), str):
                sigs.add(p["thoughtSignature"])
    return sigs


PROVIDERS = {
    "anthropic": (validate_anthropic, anthropic_tool_results),
    "openai": (validate_openai, openai_tool_results),
    "gemini": (validate_gemini, gemini_tool_results),
}


def validate(provider, headers, body, key, query=None):
    """Raises Invalid when the real service would refuse the request."""
    if provider == "gemini":
        return validate_gemini(headers, body, key, query or {})
    return PROVIDERS[provider][0](headers, body, key)


def tool_names(provider, body):
    if provider == "anthropic":
        return sorted(t["name"] for t in body.get("tools", []))
    if provider == "openai":
        return sorted(t["function"]["name"] for t in body.get("tools", []))
    return sorted(d["name"] for t in body.get("tools", []) for d in t.get("functionDeclarations", []))


def message_count(provider, body):
    if provider == "gemini":
        return len(body.get("contents", []))
    return len(body.get("messages", []))


def system_text(provider, body):
    if provider == "anthropic":
        s = body.get("system", "")
        return s if isinstance(s, str) else "\n".join(b.get("text", "") for b in s)
    if provider == "openai":
        return "\n".join(m.get("content", "") for m in body.get("messages", [])
                         if m.get("role") in ("system", "developer") and isinstance(m.get("content"), str))
    si = body.get("systemInstruction", {})
    return "\n".join(p.get("text", "") for p in si.get("parts", []))


def check_expect(provider, expect, body, raw):
    """Raises Invalid when the request does not carry what the turn expects."""
    if not expect:
        return
    for s in _as_list(expect.get("contains")):
        _need(s in raw, "expect: the request does not contain %r" % s)
    for s in _as_list(expect.get("not_contains")):
        _need(s not in raw, "expect: the request contains %r" % s)
    results = PROVIDERS[provider][1](body)
    for cid in _as_list(expect.get("tool_result_for")):
        _need(any(r["id"] == cid for r in results), "expect: no tool result answers call id %r (results: %s)"
              % (cid, [r["id"] for r in results]))
    for name in _as_list(expect.get("function_response_for")):
        _need(any(r.get("name") == name for r in results), "expect: no functionResponse for %r" % name)
    for cid in _as_list(expect.get("tool_error_for")):
        _need(any(r["id"] == cid and (r["is_error"] or "error" in r["content"]) for r in results),
              "expect: the tool result for %r is not marked as an error" % cid)
    if "tools" in expect:
        _need(tool_names(provider, body) == sorted(expect["tools"]),
              "expect: tools %s, the request has %s" % (sorted(expect["tools"]), tool_names(provider, body)))
    if "messages" in expect:
        _need(message_count(provider, body) == expect["messages"],
              "expect: %d messages, the request has %d" % (expect["messages"], message_count(provider, body)))
    if "model" in expect and provider != "gemini":
        _need(body.get("model") == expect["model"], "expect: model %r, got %r" % (expect["model"], body.get("model")))
    if "system_contains" in expect:
        _need(expect["system_contains"] in system_text(provider, body),
              "expect: the system prompt does not contain %r" % expect["system_contains"])


def _as_list(v):
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


# -------------------------------------------------------------------- seat ---
# The model's seat as a tool (--seat DIR): every request is written to DIR as
# NNNN-request.json (the body as received) and NNNN-request.txt (what a person
# reads), and the answer is read from NNNN-answer.json, which a person (or a
# helper) writes: a JSON string (text), a list of tool calls
# [{"tool": NAME, "args": {...}}, ...], or {"text": "...", "tools": [...]};
# a file that is not JSON is taken as plain text once it has stopped growing.
# The server turns the answer into the provider's own response body.

SEAT_POLL_S = 0.2


def _seat_text_of(content):
    """The text of an Anthropic/OpenAI content value (a string or blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return "" if content is None else json.dumps(content)


def seat_transcript(provider, body, answer_name="NNNN-answer.json"):
    """The request as a person reads it: the system prompt, then each message's
    text, tool calls and tool results, in order; tool declarations by name."""
    out = ["=== system ===", system_text(provider, body), "", "=== tools: %s ===" % ", ".join(tool_names(provider, body))]
    if provider == "anthropic":
        for i, m in enumerate(body.get("messages", [])):
            out.append("")
            out.append("=== message %d: %s ===" % (i + 1, m.get("role")))
            c = m.get("content")
            blocks = [{"type": "text", "text": c}] if isinstance(c, str) else (c or [])
            for b in blocks:
                t = b.get("type")
                if t == "text":
                    out.append(b.get("text", ""))
                elif t == "tool_use":
                    out.append("[tool call %s] %s %s" % (b.get("id"), b.get("name"), json.dumps(b.get("input"))))
                elif t == "tool_result":
                    out.append("[tool result %s%s]" % (b.get("tool_use_id"), ", error" if b.get("is_error") else ""))
                    out.append(_seat_text_of(b.get("content")))
    elif provider == "openai":
        for i, m in enumerate(body.get("messages", [])):
            role = m.get("role")
            if role in ("system", "developer"):
                continue
            out.append("")
            out.append("=== message %d: %s ===" % (i + 1, role))
            if role == "tool":
                out.append("[tool result %s]" % m.get("tool_call_id"))
            text = _seat_text_of(m.get("content"))
            if text:
                out.append(text)
            for c in m.get("tool_calls") or []:
                fn = c.get("function", {})
                out.append("[tool call %s] %s %s" % (c.get("id"), fn.get("name"), fn.get("arguments")))
    else:
        for i, c in enumerate(body.get("contents", [])):
            out.append("")
            out.append("=== message %d: %s ===" % (i + 1, c.get("role")))
            for p in c.get("parts", []):
                if "text" in p:
                    out.append(p["text"])
                elif "functionCall" in p:
                    fc = p["functionCall"]
                    out.append("[tool call %s] %s %s" % (fc.get("id", "-"), fc.get("name"), json.dumps(fc.get("args"))))
                elif "functionResponse" in p:
                    fr = p["functionResponse"]
                    out.append("[tool result %s %s]" % (fr.get("id", "-"), fr.get("name")))
                    resp = fr.get("response", {})
                    vals = list(resp.values()) if isinstance(resp, dict) else []
                    out.append(vals[0] if len(vals) == 1 and isinstance(vals[0], str) else json.dumps(resp))
    out.append("")
    out.append("=== answer: write %s (see tests/scripted_provider/README.md) ===" % answer_name)
    return _seat_visible("\n".join(str(x) for x in out) + "\n")


def _seat_visible(text):
    """text with every control character (C0, DEL, C1) but newline and tab
    shown as \\xNN, so a repository's escape sequences reach the person's
    terminal as text, never as commands."""
    return "".join(c if c in "\n\t" or (ord(c) >= 0x20 and not 0x7f <= ord(c) <= 0x9f) else "\\x%02x" % ord(c)
                   for c in text)


def seat_parse_answer(raw):
    """(text, [(name, args)]) from an answer file's bytes, or raises ValueError
    (the message says what is wrong). None for text means no text."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return raw.decode("utf-8", errors="replace"), []
    text, calls = None, []
    if isinstance(doc, str):
        text = doc
    elif isinstance(doc, list):
        calls = doc
    elif isinstance(doc, dict) and set(doc) <= {"text", "tools"}:
        text, calls = doc.get("text"), doc.get("tools", [])
        if text is not None and not isinstance(text, str):
            raise ValueError("\"text\" must be a string")
        if not isinstance(calls, list):
            raise ValueError("\"tools\" must be a list")
    else:
        raise ValueError("an answer is a string, a list of tool calls, or {\"text\", \"tools\"}")
    out = []
    for k, c in enumerate(calls):
        if not (isinstance(c, dict) and isinstance(c.get("tool"), str) and TOOL_NAME_RE.match(c["tool"])
                and set(c) <= {"tool", "args"} and isinstance(c.get("args", {}), dict)):
            raise ValueError("tool call %d: must be {\"tool\": NAME, \"args\": {...}}" % (k + 1))
        out.append((c["tool"], c.get("args", {})))
    if not text and not out:
        raise ValueError("the answer has neither text nor tool calls")
    return text or None, out


def seat_response(provider, body, model, n, text, calls):
    """The provider's response body for an answer (text, [(name, args)])."""
    usage_in, usage_out = 0, 0
    if provider == "anthropic":
        content = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": "toolu_seat%04d_%d" % (n, k), "name": name, "input": args}
                    for k, (name, args) in enumerate(calls)]
        return {"id": "msg_seat%04d" % n, "type": "message", "role": "assistant", "model": body.get("model", ""),
                "content": content, "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": usage_in, "output_tokens": usage_out}}
    if provider == "openai":
        msg = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            msg["tool_calls"] = [{"id": "call_seat%04d_%d" % (n, k), "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}
                                 for k, (name, args) in enumerate(calls)]
        return {"id": "chatcmpl-seat%04d" % n, "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", ""), "choices": [{"index": 0, "message": msg, "logprobs": None,
                                                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": usage_in, "completion_tokens": usage_out, "total_tokens": 0}}
    parts = [{"text": text}] if text else []
    parts += [{"functionCall": {"name": name, "args": args}} for name, args in calls]
    return {"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": usage_in, "candidatesTokenCount": usage_out, "totalTokenCount": 0},
            "modelVersion": model or "", "responseId": "seat%04d" % n}


def seat_wait_answer(path, stopping):
    """The answer file's bytes once it is complete: JSON that parses, or
    other text unchanged over one poll. None when the server stops."""
    last = None
    while not stopping.is_set():
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raw = None
        if raw:
            try:
                json.loads(raw.decode("utf-8"))
                return raw
            except (UnicodeDecodeError, ValueError):
                if raw == last:
                    return raw
            last = raw
        time.sleep(SEAT_POLL_S)
    return None


# ------------------------------------------------------------------ scripts ---

def load_script(dirs, name):
    """(provider or None, [turns]) for script `name`, or None when absent."""
    if not re.match(r"^[A-Za-z0-9_.-]{1,128}$", name) or name.startswith("."):
        return None
    for d in dirs:
        path = os.path.join(d, name + ".json")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            provider, turns = None, doc
            if isinstance(doc, dict):
                provider, turns = doc.get("provider"), doc.get("turns", [])
            expanded = []
            for t in turns:
                for _ in range(int(t.get("repeat", 1)) if isinstance(t, dict) else 1):
                    expanded.append(t)
            return provider, expanded
    return None


def route(path, headers):
    """(script, provider, model) from the request path, or raises Invalid."""
    script = None
    m = re.match(r"^/script/([^/]+)(/.*)$", path)
    if m:
        script, path = m.group(1), m.group(2)
    else:
        script = headers.get("x-kiwi-script")
    if path == "/v1/messages":
        return script, "anthropic", None
    if path == "/v1/chat/completions":
        return script, "openai", None
    m = re.match(r"^/v1beta/models/([A-Za-z0-9._-]+):generateContent$", path)
    if m:
        return script, "gemini", m.group(1)
    return script, None, None


# ------------------------------------------------------------------- server ---

class State:
    def __init__(self, dirs, log_path, keys, seat=None):
        self.dirs = dirs
        self.seat = seat        # the seat's directory (--seat), or None
        self.seat_n = 0
        self.log_path = log_path
        self.keys = keys
        self.lock = threading.Lock()
        self.turn = {}          # script -> next turn index
        self.signatures = {}    # script -> thoughtSignatures sent so far
        self.entries = []
        self.seq = 0
        self.stopping = threading.Event()

    def record(self, entry):
        with self.lock:
            self.seq += 1
            entry["seq"] = self.seq
            entry["time"] = round(time.time(), 3)
            self.entries.append(entry)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry, sort_keys=True) + "\n")
            return self.seq


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kiwi-scripted-provider/1"

    def log_message(self, fmt, *args):  # the JSON log says it all
        pass

    @property
    def state(self):
        return self.server.state

    def _send(self, status, body, headers=None, raw=None):
        data = raw if raw is not None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = urlsplit(self.path).path
        if path == "/_control/health":
            return self._send(200, {"ok": True})
        if path == "/_control/log":
            with self.state.lock:
                entries = list(self.state.entries)
            return self._send(200, entries)
        self._send(404, {"error": "not found"})

    def do_POST(self):
        url = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        length = int(headers.get("content-length", "0") or "0")
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            return self._send(413, {"error": "body too large"})
        raw = self.rfile.read(length) if length else b""
        if url.path == "/_control/reset":
            which = parse_qs(url.query).get("script", [None])[0]
            with self.state.lock:
                for d in (self.state.turn, self.state.signatures):
                    if which:
                        d.pop(which, None)
                    else:
                        d.clear()
            return self._send(200, {"ok": True})
        script, provider, model = route(url.path, headers)
        entry = {"script": script, "provider": provider, "path": url.path, "model": model, "violations": [],
                 "turn": None, "fault": None}
        if provider is None:
            entry["violations"].append({"kind": "unknown_endpoint", "message": "no endpoint %s" % url.path})
            entry["status"] = 404
            self.state.record(entry)
            return self._send(404, {"error": {"message": "Unknown endpoint %s" % url.path, "type": "not_found"}})
        text = raw.decode("utf-8", errors="replace")
        try:
            body = json.loads(text)
        except ValueError as e:
            body = None
            entry["violations"].append({"kind": "invalid_request", "message": "body is not JSON: %s" % e})
        entry["request"] = body
        key = self.state.keys[provider]
        query = parse_qs(url.query)
        if body is not None:
            try:
                validate(provider, headers, body, key, query)
            except Invalid as e:
                if str(e) == "AUTH":
                    return self._auth_failure(provider, headers, entry)
                entry["violations"].append({"kind": "invalid_request", "message": str(e)})
        if entry["violations"]:
            return self._reject(provider, entry, 400, entry["violations"][0]["message"])
        if self.state.seat:
            return self._seat(provider, model, body, raw, entry)

        if not script:
            entry["violations"].append({"kind": "no_script", "message": "no /script/<name> prefix or X-Kiwi-Script"})
            return self._reject(provider, entry, 404, "scripted provider: no script named")
        try:
            loaded = load_script(self.state.dirs, script)
        except (OSError, ValueError) as e:
            loaded = None
            entry["violations"].append({"kind": "bad_script", "message": "script %s: %s" % (script, e)})
        if loaded is None:
            if not entry["violations"]:
                entry["violations"].append({"kind": "unknown_script", "message": "no script %s" % script})
            return self._reject(provider, entry, 404, "scripted provider: no script %s" % script)
        sprov, turns = loaded
        if sprov and sprov != provider:
            entry["violations"].append({"kind": "wrong_provider",
                                        "message": "script %s speaks %s, the request came as %s"
                                        % (script, sprov, provider)})
            return self._reject(provider, entry, 400, entry["violations"][0]["message"])

        with self.state.lock:
            n = self.state.turn.get(script, 0)
            sent_sigs = set(self.state.signatures.get(script, set()))
        entry["turn"] = n
        if n >= len(turns):
            entry["violations"].append({"kind": "script_exhausted",
                                        "message": "script %s has %d turns; this is request %d"
                                        % (script, len(turns), n + 1)})
            return self._reject(provider, entry, 400, entry["violations"][0]["message"])
        turn = turns[n]
        try:
            if provider == "gemini":
                missing = sorted(sent_sigs - gemini_signatures(body))
                _need(not missing, "Function call is missing a thought_signature in functionCall parts (%s)"
                      % ", ".join(missing))
            check_expect(provider, turn.get("expect"), body, text)
        except Invalid as e:
            entry["violations"].append({"kind": "expectation", "message": str(e)})
            return self._reject(provider, entry, 400, str(e))
        with self.state.lock:
            self.state.turn[script] = n + 1
        return self._play(provider, script, turn, entry)

    def _seat(self, provider, model, body, raw, entry):
        """The request to the seat's directory, the answer from it."""
        with self.state.lock:
            self.state.seat_n += 1
            n = self.state.seat_n
        entry["turn"] = n - 1
        base = os.path.join(self.state.seat, "%04d-" % n)
        with open(base + "request.json.tmp", "wb") as f:
            f.write(raw)
        os.replace(base + "request.json.tmp", base + "request.json")
        with open(base + "request.txt.tmp", "w", encoding="utf-8") as f:
            f.write(seat_transcript(provider, body, os.path.basename(base) + "answer.json"))
        os.replace(base + "request.txt.tmp", base + "request.txt")
        answer = seat_wait_answer(base + "answer.json", self.state.stopping)
        if answer is None:
            self.close_connection = True
            return
        try:
            text, calls = seat_parse_answer(answer)
        except ValueError as e:
            entry["violations"].append({"kind": "bad_answer", "message": "%sanswer.json: %s" % (base, e)})
            return self._reject(provider, entry, 400, entry["violations"][0]["message"])
        entry["status"] = 200
        seq = self.state.record(entry)
        return self._send(200, seat_response(provider, body, model, n, text, calls), self._id_headers(provider, seq))

    def _sent_key(self):
        headers = {k.lower(): v for k, v in self.headers.items()}
        return (headers.get("x-api-key") or headers.get("x-goog-api-key")
                or headers.get("authorization", "").replace("Bearer ", "", 1))

    def _auth_failure(self, provider, headers, entry):
        entry["violations"].append({"kind": "auth", "message": "missing or wrong API key"})
        entry["status"] = 401
        seq = self.state.record(entry)
        sent = self._sent_key()
        if provider == "gemini":
            status, body = 400, error_body("gemini", 400, "API key not valid. Please pass a valid API key.",
                                           reason="API_KEY_INVALID")
        elif provider == "openai":
            # The real service masks the key; this one echoes it whole so that
            # tests prove the client scrubs it from its messages.
            status, body = 401, error_body("openai", 401, "Incorrect API key provided: %s. You can find your API "
                                           "key at https://platform.openai.com/account/api-keys." % sent)
        else:
            status, body = 401, error_body("anthropic", 401, "invalid x-api-key", request_id="req_scripted_%d" % seq)
        return self._send(status, body, self._id_headers(provider, seq))

    def _id_headers(self, provider, seq):
        if provider == "anthropic":
            return {"request-id": "req_scripted_%d" % seq}
        if provider == "openai":
            return {"x-request-id": "req_scripted_%d" % seq}
        return {}

    def _reject(self, provider, entry, status, message):
        entry["status"] = status
        seq = self.state.record(entry)
        body = error_body(provider, status, "scripted provider: " + message if not message.startswith("scripted")
                          else message, request_id="req_scripted_%d" % seq if provider == "anthropic" else None)
        return self._send(status, body, self._id_headers(provider, seq))

    def _play(self, provider, script, turn, entry):
        delay = float(turn.get("delay_s", 0) or 0)
        if delay > 0:
            # a slow model: the request is logged at once (so a test sees the
            # round in flight), answered after the delay
            self.state.record({"script": script, "provider": provider, "path": entry["path"], "turn": entry["turn"],
                               "violations": [], "fault": "delay", "status": None, "delay_s": delay})
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline and not self.state.stopping.is_set():
                time.sleep(0.05)
        fault = turn.get("fault")
        entry["fault"] = fault
        if fault == "timeout":
            entry["status"] = None
            self.state.record(entry)
            deadline = time.monotonic() + float(turn.get("seconds", 30))
            while time.monotonic() < deadline and not self.state.stopping.is_set():
                time.sleep(0.05)
            self.close_connection = True
            return
        if fault == "disconnect":
            entry["status"] = None
            self.state.record(entry)
            self.close_connection = True
            return
        if fault == "malformed":
            entry["status"] = 200
            seq = self.state.record(entry)
            raw = turn.get("body", '{"id": "truncated", "content": [{"type": "text", "te').encode()
            return self._send(200, None, self._id_headers(provider, seq), raw=raw)
        if fault is not None:
            status = int(fault)
            entry["status"] = status
            seq = self.state.record(entry)
            headers = self._id_headers(provider, seq)
            if "retry_after" in turn:
                headers["retry-after"] = turn["retry_after"]
            if "retry_after_ms" in turn:
                headers["retry-after-ms"] = turn["retry_after_ms"]
            if "retry_after_date" in turn:
                headers["retry-after"] = email.utils.formatdate(time.time() + float(turn["retry_after_date"]),
                                                                usegmt=True)
            headers.update(turn.get("headers", {}))
            message = turn.get("message")
            if turn.get("echo_key"):
                # a provider that quotes the key back: the client must scrub it
                message = "%s (the key sent: %s)" % (message or DEFAULT_MESSAGES.get(status, "Error"),
                                                     self._sent_key())
            body = error_body(provider, status, message,
                              request_id="req_scripted_%d" % seq if provider == "anthropic" else None,
                              retry_delay=turn.get("retry_delay"), reason=turn.get("reason"))
            return self._send(status, body, headers)
        status = int(turn.get("status", 200))
        entry["status"] = status
        seq = self.state.record(entry)
        response = turn.get("response")
        if provider == "gemini" and isinstance(response, dict):
            sigs = {p["thoughtSignature"] for c in response.get("candidates", [])
                    for p in (c.get("content") or {}).get("parts", []) if isinstance(p.get("thoughtSignature"), str)}
            if sigs:
                with self.state.lock:
                    self.state.signatures.setdefault(script, set()).update(sigs)
        headers = self._id_headers(provider, seq)
        headers.update(turn.get("headers", {}))
        return self._send(status, response, headers)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scripts", action="append", default=[], help="a directory of <name>.json scripts")
    ap.add_argument("--seat", help="the model's seat: write each request to this directory and answer with the "
                    "NNNN-answer.json a person writes there (scripts are not used)")
    ap.add_argument("--log", help="append one JSON line per request here")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    ap.add_argument("--max-seconds", type=float, default=900.0, help="exit after this long in any case")
    for p in DEFAULT_KEYS:
        ap.add_argument("--%s-key" % p, default=os.environ.get("KIWI_SCRIPTED_%s_KEY" % p.upper(), DEFAULT_KEYS[p]))
    args = ap.parse_args(argv)
    if not args.scripts and not args.seat:
        ap.error("--scripts or --seat is required")
    if args.seat:
        os.makedirs(args.seat, exist_ok=True)
    keys = {p: getattr(args, "%s_key" % p) for p in DEFAULT_KEYS}
    state = State([os.path.abspath(d) for d in args.scripts], args.log, keys,
                  os.path.abspath(args.seat) if args.seat else None)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.state = state
    port = server.server_address[1]

    def stop(*_):
        if not state.stopping.is_set():
            state.stopping.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def watchdog():
        started = time.monotonic()
        while not state.stopping.wait(0.2):
            if args.parent_pid and not _alive(args.parent_pid):
                stop()
            if time.monotonic() - started > args.max_seconds:
                stop()

    threading.Thread(target=watchdog, daemon=True).start()
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.port_file)
    sys.stdout.write("%d\n" % port)
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
    return 0


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


if __name__ == "__main__":
    sys.exit(main())
