#!/usr/bin/env python3
"""Checks that the scripted provider's fixtures are what the real services
send: every response body in every script parses with the providers'
official SDK types (PyPI anthropic, openai, google-genai), strictly, and so
does every error body the server makes for a fault.

    check_fixtures.py SCRIPTS_DIR [SCRIPTS_DIR ...]

Run it with the Python of the venv that ops/venv.sh makes (the SDK versions
are pinned in ops/python-requirements.txt). Strict means:
  - anthropic and openai types allow unknown fields; here any field that the
    SDK type does not know (model_extra, at any depth) fails the fixture;
  - google-genai types forbid unknown fields already;
  - the fields every real response carries are required even where the SDK
    type leaves them optional (Gemini: candidates with content and
    finishReason, usageMetadata token counts, modelVersion, responseId).
Exit 0 when every fixture passes, 1 with one line per failure otherwise,
77 when the SDKs are not installed (the venv is missing).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import server  # noqa: E402  (error_body, the bodies the server makes)

try:
    import anthropic.types as anthropic_types
    import openai.types.chat as openai_chat
    import openai.types.shared as openai_shared
    import pydantic
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types
except ImportError as e:  # pragma: no cover
    print("SKIP: check_fixtures: the provider SDKs are not importable (%s); run ops/venv.sh and use its python" % e)
    sys.exit(77)


def extras(model, path="$"):
    """Paths of fields no SDK type knows, anywhere under `model`."""
    out = []
    if isinstance(model, pydantic.BaseModel):
        for k in (model.model_extra or {}):
            out.append("%s.%s" % (path, k))
        for name in type(model).model_fields:
            out += extras(getattr(model, name), "%s.%s" % (path, name))
    elif isinstance(model, (list, tuple)):
        for i, v in enumerate(model):
            out += extras(v, "%s[%d]" % (path, i))
    elif isinstance(model, dict):
        for k, v in model.items():
            out += extras(v, "%s.%s" % (path, k))
    return out


def need(cond, what):
    if not cond:
        raise ValueError(what)


def check_anthropic(body):
    m = anthropic_types.Message.model_validate(body)
    bad = extras(m)
    need(not bad, "fields unknown to anthropic.types.Message: %s" % ", ".join(bad))
    need(m.stop_reason is not None, "stop_reason is null (only streaming events have that)")
    for b in m.content:
        if b.type == "tool_use":
            need(b.id.startswith("toolu_"), "tool_use id %r does not look like the API's (toolu_...)" % b.id)
    need(m.id.startswith("msg_"), "id %r does not look like the API's (msg_...)" % m.id)


def check_openai(body):
    c = openai_chat.ChatCompletion.model_validate(body)
    bad = extras(c)
    need(not bad, "fields unknown to openai.types.chat.ChatCompletion: %s" % ", ".join(bad))
    need(c.usage is not None, "usage is missing (the API always sends it without streaming)")
    need(c.choices, "no choices")
    for ch in c.choices:
        for tc in ch.message.tool_calls or []:
            need(tc.type == "function", "tool call of type %r" % tc.type)
            args = json.loads(tc.function.arguments)
            need(isinstance(args, dict), "tool call arguments are not a JSON object")
        if ch.finish_reason == "tool_calls":
            need(ch.message.tool_calls, "finish_reason tool_calls without tool_calls")


def check_gemini(body):
    r = genai_types.GenerateContentResponse.model_validate(body)
    need(r.candidates, "no candidates")
    for i, cand in enumerate(r.candidates):
        need(cand.content is not None and cand.content.parts, "candidates[%d] has no content.parts" % i)
        need(cand.content.role == "model", "candidates[%d].content.role is not model" % i)
        need(cand.finish_reason is not None, "candidates[%d] has no finishReason" % i)
        for j, p in enumerate(cand.content.parts):
            data = [k for k in ("text", "function_call", "inline_data", "executable_code", "code_execution_result")
                    if getattr(p, k) is not None]
            need(len(data) == 1, "candidates[%d].content.parts[%d] carries %s" % (i, j, data or "nothing"))
            if p.function_call is not None:
                need(p.function_call.name, "a functionCall without a name")
    u = r.usage_metadata
    need(u is not None and u.prompt_token_count is not None and u.candidates_token_count is not None
         and u.total_token_count is not None, "usageMetadata lacks promptTokenCount/candidatesTokenCount/totalTokenCount")
    need(r.model_version, "modelVersion is missing")
    need(r.response_id, "responseId is missing")


def check_error(provider, status, body):
    if provider == "anthropic":
        e = anthropic_types.ErrorResponse.model_validate(body)
        bad = extras(e)
        need(not bad, "fields unknown to anthropic.types.ErrorResponse: %s" % ", ".join(bad))
    elif provider == "openai":
        need(set(body) == {"error"}, "an OpenAI error body has only \"error\"")
        e = openai_shared.ErrorObject.model_validate(body["error"])
        bad = extras(e)
        need(not bad, "fields unknown to openai.types.shared.ErrorObject: %s" % ", ".join(bad))
    else:
        e = genai_errors.APIError(status, body)
        need(e.code == status and e.message and e.status, "google.genai.errors.APIError reads no code/message/status")
        need(set(body["error"]) <= {"code", "message", "status", "details"}, "unknown fields in a Gemini error")
        for d in body["error"].get("details", []):
            need(d.get("@type", "").startswith("type.googleapis.com/google.rpc."), "a detail without a google.rpc type")


CHECKS = {"anthropic": check_anthropic, "openai": check_openai, "gemini": check_gemini}


def provider_of(name, doc):
    if isinstance(doc, dict) and doc.get("provider"):
        return doc["provider"]
    for p in CHECKS:
        if name.startswith(p):
            return p
    return None


def main(dirs):
    failures, responses, errors = [], 0, 0
    files = []
    for d in dirs:
        files += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".json")]
    for path in files:
        name = os.path.basename(path)[:-5]
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except ValueError as e:
            failures.append("%s: not JSON: %s" % (path, e))
            continue
        provider = provider_of(name, doc)
        if provider not in CHECKS:
            failures.append("%s: no provider (set \"provider\" or name the file <provider>-...)" % path)
            continue
        turns = doc["turns"] if isinstance(doc, dict) else doc
        for i, t in enumerate(turns):
            where = "%s turn %d" % (path, i)
            try:
                if "response" in t:
                    status = int(t.get("status", 200))
                    if status == 200:
                        CHECKS[provider](t["response"])
                        responses += 1
                    else:
                        check_error(provider, status, t["response"])
                        errors += 1
                elif t.get("fault") not in (None, "timeout", "disconnect", "malformed"):
                    status = int(t["fault"])
                    check_error(provider, status, server.error_body(
                        provider, status, t.get("message"), request_id="req_011CVxyz" if provider == "anthropic"
                        else None, retry_delay=t.get("retry_delay"), reason=t.get("reason")))
                    errors += 1
            except (ValueError, TypeError, KeyError, pydantic.ValidationError) as e:
                failures.append("%s (%s): %s" % (where, provider, str(e).replace("\n", " | ")))
    # every error body the server can make, for every provider
    for provider in CHECKS:
        for status in sorted(server.DEFAULT_MESSAGES):
            try:
                check_error(provider, status, server.error_body(
                    provider, status, request_id="req_011CVxyz" if provider == "anthropic" else None,
                    retry_delay="1s" if provider == "gemini" else None,
                    reason="API_KEY_INVALID" if provider == "gemini" and status == 400 else None))
                errors += 1
            except (ValueError, TypeError, KeyError, pydantic.ValidationError) as e:
                failures.append("server error body %s %d: %s" % (provider, status, str(e).replace("\n", " | ")))
    for f in failures:
        print("FAIL " + f)
    print("check_fixtures: %d files, %d response bodies and %d error bodies checked with the SDK types; %d failures"
          % (len(files), responses, errors, len(failures)))
    return 1 if failures or not responses else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
