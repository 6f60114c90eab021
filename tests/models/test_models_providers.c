/*
 * test_models_providers.c: the three provider clients against the scripted
 * provider on loopback (tests/scripted_provider/server.py), real libcurl,
 * real HTTP: a two-turn tool-use conversation, parallel tool calls, 429 with
 * retry-after (really waited), 5xx then success, persistent 5xx, timeout,
 * malformed JSON, auth, a request the server's validation refuses, a key
 * that never shows in an error, secrets masked out of what is sent and of
 * the errors, a refused connection. The server is started
 * and stopped here; nothing is left running.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/mask.h"
#include "models/models.h"
#include "scripted-provider.h"

static kiwi_scripted_provider server;

typedef struct prov {
    const char *name;
    const char *model;
} prov;

static const prov PROVIDERS[] = {
    { "anthropic", "claude-sonnet-4-5-20250929" },
    { "openai", "gpt-4.1" },
    { "gemini", "gemini-2.5-flash" },
};

/* Sleep callback: records each wait; really sleeps only when asked to. */
typedef struct sleeper {
    long waits[16];
    int n;
    bool real;
} sleeper;

static int
record_sleep (void *ctx, long ms)
{
    sleeper *s = ctx;
    if (s->n < 16)
        s->waits[s->n] = ms;
    s->n++;
    if (s->real) {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep (&ts, NULL);
    }
    return 0;
}

static long
mono_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int
group_setup (void **state)
{
    kiwi_error_t err = NULL;
    if (kiwi_scripted_provider_start (&server, NULL, &err) < 0) {
        fprintf (stderr, "%s\n", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return -1;
    }
    return 0;
}

static int
group_teardown (void **state)
{
    kiwi_scripted_provider_stop (&server);
    return 0;
}

/* A client of provider `p` for script "<p>-<suffix>", with sleeper `s`. */
static kiwi_model_client *
open_client (const prov *p, const char *suffix, sleeper *s, kiwi_model_config *tweak, char **script_out)
{
    char *script = NULL;
    assert_true (asprintf (&script, "%s-%s", p->name, suffix) > 0);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_scripted_provider_reset (&server, script, &err), 0);
    const kiwi_model_provider *mp = kiwi_model_provider_find (p->name, &err);
    assert_non_null (mp);
    cleanup_free char *base = kiwi_scripted_provider_base_url (&server, p->name, script);
    kiwi_model_config cfg = { 0 };
    if (tweak != NULL)
        cfg = *tweak;
    cfg.base_url = base;
    if (cfg.api_key == NULL)
        cfg.api_key = kiwi_scripted_provider_key (p->name);
    if (cfg.max_attempts == 0)
        cfg.max_attempts = 4;
    if (cfg.request_timeout_ms == 0)
        cfg.request_timeout_ms = 10000;
    cfg.backoff_base_ms = 200;
    cfg.backoff_max_ms = 5000;
    cfg.sleep = record_sleep;
    cfg.sleep_ctx = s;
    kiwi_model_client *c = kiwi_model_client_open (mp, &cfg, &err);
    if (c == NULL)
        fail_msg ("open %s: %s", p->name, kiwi_error_msg (err));
    *script_out = script;
    return c;
}

static json_t *
schema_path (void)
{
    return json_pack ("{s:s, s:{s:{s:s, s:s}}, s:[s], s:b}", "type", "object", "properties", "path", "type", "string",
                      "description", "a path relative to the workspace", "required", "path", "additionalProperties",
                      0);
}

typedef struct fixture {
    kiwi_model_conversation conv;
    kiwi_model_tool tools[2];
    json_t *schemas[2];
    kiwi_model_request req;
} fixture;

static void
fixture_init (fixture *f, const prov *p)
{
    memset (f, 0, sizeof *f);
    f->schemas[0] = schema_path ();
    f->schemas[1] = json_pack ("{s:s, s:{}}", "type", "object", "properties");
    f->tools[0] = (kiwi_model_tool) { "read_file", "Read a file of the workspace.", f->schemas[0] };
    f->tools[1] = (kiwi_model_tool) { "run_tests", "Run the repository's tests.", f->schemas[1] };
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_model_conv_add_user_text (&f->conv, "The test of add() fails. Fix it.", &err), 0);
    f->req = (kiwi_model_request) {
        .model = p->model,
        .system = "You are the Implementer. Use the tools.",
        .conversation = &f->conv,
        .tools = f->tools,
        .n_tools = 2,
        .max_tokens = 1024,
        .has_temperature = true,
        .temperature = 0.2,
    };
}

static void
fixture_clear (fixture *f)
{
    kiwi_model_conv_clear (&f->conv);
    json_decref (f->schemas[0]);
    json_decref (f->schemas[1]);
}

static void
assert_no_violations (const char *script)
{
    cleanup_free char *first = NULL;
    size_t n = kiwi_scripted_provider_violations (&server, script, &first);
    if (n != 0)
        fail_msg ("script %s: the server recorded %zu violation(s), first: %s", script, n, first);
}

static void
assert_contains (const char *hay, const char *needle)
{
    if (hay == NULL || strstr (hay, needle) == NULL)
        fail_msg ("expected \"%s\" in \"%s\"", needle, hay != NULL ? hay : "(null)");
}

/* What most tests start from: a client of p on the script "<p>-<suffix>"
 * (open_client) whose sleeps go to s (really slept with real_sleep), and the
 * fixture's request. Closed by session_end. */
typedef struct session {
    sleeper s;
    char *script;
    kiwi_model_client *c;
    fixture f;
} session;

static void
session_open (session *ses, const prov *p, const char *suffix, bool real_sleep)
{
    memset (ses, 0, sizeof *ses);
    ses->s.real = real_sleep;
    ses->c = open_client (p, suffix, &ses->s, NULL, &ses->script);
    fixture_init (&ses->f, p);
}

/* One call of the session's request that must succeed, into *r; what names
 * it when it fails. */
static void
session_call (session *ses, kiwi_model_response *r, const char *what)
{
    kiwi_error_t err = NULL;
    if (kiwi_model_client_call (ses->c, &ses->f.req, r, &err) < 0)
        fail_msg ("%s: %s", what, kiwi_error_msg (err));
}

/* The end of a test: no violation recorded for the session's script, the
 * session closed. */
static void
session_end (session *ses)
{
    assert_no_violations (ses->script);
    fixture_clear (&ses->f);
    kiwi_model_client_close (ses->c);
    free (ses->script);
}

/* ------------------------------------------------------------------ tests --- */

static void
tool_use_conversation (const prov *p)
{
    session ses;
    session_open (&ses, p, "tool-use", false);
    kiwi_error_t err = NULL;
    kiwi_model_response r = { 0 };

    session_call (&ses, &r, "turn 1");
    assert_int_equal (r.stop, KIWI_MODEL_STOP_TOOL_USE);
    assert_int_equal (r.attempts, 1);
    assert_int_equal (kiwi_model_message_n_tool_calls (&r.message), 1);
    const kiwi_model_block *call = kiwi_model_message_tool_call (&r.message, 0);
    assert_string_equal (call->name, "read_file");
    assert_string_equal (json_string_value (json_object_get (call->arguments, "path")), "src/add.js");
    assert_non_null (call->id);
    assert_non_null (r.request_id);
    assert_true (r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
    kiwi_model_usage u1 = r.usage;
    cleanup_free char *call_id = strdup (call->id);

    assert_int_equal (kiwi_model_conv_take_message (&ses.f.conv, &r.message, &err), 0);
    assert_int_equal (kiwi_model_conv_add_tool_result (&ses.f.conv, call_id, "read_file",
                                                      "module.exports = (a, b) => a - b;\n", false, &err),
                      0);
    kiwi_model_response_clear (&r);

    session_call (&ses, &r, "turn 2");
    assert_int_equal (r.stop, KIWI_MODEL_STOP_END_TURN);
    assert_int_equal (kiwi_model_message_n_tool_calls (&r.message), 0);
    cleanup_free char *text = kiwi_model_message_text (&r.message);
    assert_contains (text, "return a + b;");
    kiwi_model_usage total = kiwi_model_client_usage (ses.c);
    assert_int_equal (total.input_tokens, u1.input_tokens + r.usage.input_tokens);
    assert_int_equal (total.output_tokens, u1.output_tokens + r.usage.output_tokens);
    assert_int_equal (kiwi_model_client_calls (ses.c), 2);
    assert_int_equal (kiwi_model_client_attempts (ses.c), 2);
    assert_int_equal (ses.s.n, 0);
    kiwi_model_response_clear (&r);

    assert_int_equal (kiwi_scripted_provider_requests (&server, ses.script), 2);
    session_end (&ses);
}

static void
parallel_tool_calls (const prov *p)
{
    session ses;
    session_open (&ses, p, "parallel", false);
    kiwi_error_t err = NULL;
    kiwi_model_response r = { 0 };
    session_call (&ses, &r, "turn 1");
    assert_int_equal (r.stop, KIWI_MODEL_STOP_TOOL_USE);
    assert_int_equal (kiwi_model_message_n_tool_calls (&r.message), 2);
    cleanup_free char *id0 = strdup (kiwi_model_message_tool_call (&r.message, 0)->id);
    cleanup_free char *id1 = strdup (kiwi_model_message_tool_call (&r.message, 1)->id);
    assert_string_not_equal (id0, id1);
    assert_string_equal (kiwi_model_message_tool_call (&r.message, 1)->name, "run_tests");
    assert_int_equal (kiwi_model_conv_take_message (&ses.f.conv, &r.message, &err), 0);
    assert_int_equal (
        kiwi_model_conv_add_tool_result (&ses.f.conv, id0, "read_file", "module.exports = 1;", false, &err), 0);
    assert_int_equal (kiwi_model_conv_add_tool_result (&ses.f.conv, id1, "run_tests", "1 failing", true, &err), 0);
    assert_int_equal (ses.f.conv.n_messages, 3); /* both results in one user message */
    kiwi_model_response_clear (&r);
    session_call (&ses, &r, "turn 2");
    assert_int_equal (r.stop, KIWI_MODEL_STOP_END_TURN);
    kiwi_model_response_clear (&r);
    session_end (&ses);
}

/* One call expected to succeed after `retries` retries. */
static void
succeeds_after (const prov *p, const char *suffix, int retries, bool real_sleep, long want_wait_ms)
{
    session ses;
    session_open (&ses, p, suffix, real_sleep);
    kiwi_model_response r = { 0 };
    long t0 = mono_ms ();
    session_call (&ses, &r, ses.script);
    long took = mono_ms () - t0;
    assert_int_equal (r.attempts, retries + 1);
    assert_int_equal (ses.s.n, retries);
    assert_int_equal (kiwi_scripted_provider_requests (&server, ses.script), (size_t) retries + 1);
    assert_int_equal (kiwi_model_client_attempts (ses.c), (uint64_t) retries + 1);
    if (want_wait_ms >= 0) {
        assert_int_equal (ses.s.waits[0], want_wait_ms);
        if (real_sleep)
            assert_true (took >= want_wait_ms);
    } else {
        /* backoff with jitter: base 200 ms, doubling, within [d/2, d] */
        for (int i = 0; i < retries && i < 16; i++) {
            long d = 200L << i;
            assert_in_range (ses.s.waits[i], d / 2, d);
        }
    }
    cleanup_free char *text = kiwi_model_message_text (&r.message);
    assert_contains (text, "scripted provider");
    kiwi_model_usage u = kiwi_model_client_usage (ses.c);
    assert_int_equal (u.input_tokens, r.usage.input_tokens);
    kiwi_model_response_clear (&r);
    session_end (&ses);
}

/* One call expected to fail with `failure` after `attempts` attempts;
 * returns the error message (caller frees). */
static char *
fails_with (const prov *p, const char *suffix, kiwi_model_config *tweak, kiwi_model_failure failure, int attempts,
            fixture *use)
{
    sleeper s = { 0 };
    cleanup_free char *script = NULL;
    kiwi_model_client *c = open_client (p, suffix, &s, tweak, &script);
    fixture own;
    fixture *f = use;
    if (f == NULL) {
        fixture_init (&own, p);
        f = &own;
    }
    kiwi_error_t err = NULL;
    kiwi_model_response r = { 0 };
    assert_int_equal (kiwi_model_client_call (c, &f->req, &r, &err), -1);
    const char *msg = kiwi_error_msg (err);
    if (kiwi_error_code (err) != (int) failure)
        fail_msg ("%s: expected %s, got %s: %s", script, kiwi_model_failure_name ((int) failure),
                  kiwi_model_failure_name (kiwi_error_code (err)), msg);
    assert_contains (msg, p->name);
    assert_contains (msg, kiwi_model_failure_name ((int) failure));
    assert_int_equal (kiwi_model_client_attempts (c), (uint64_t) attempts);
    assert_int_equal (s.n, attempts - 1);
    kiwi_model_usage u = kiwi_model_client_usage (c);
    assert_int_equal (u.input_tokens + u.output_tokens, 0);
    assert_null (r.message.blocks);
    char *out = strdup (msg);
    kiwi_error_free (&err);
    if (f == &own)
        fixture_clear (&own);
    kiwi_model_client_close (c);
    return out;
}

static void
test_tool_use (void **state)
{
    for (size_t i = 0; i < 3; i++)
        tool_use_conversation (&PROVIDERS[i]);
}

static void
test_parallel (void **state)
{
    for (size_t i = 0; i < 3; i++)
        parallel_tool_calls (&PROVIDERS[i]);
}

static void
test_429_retry_after (void **state)
{
    /* retry-after: 1 (Anthropic, OpenAI) and RetryInfo 1s (Gemini), really waited */
    for (size_t i = 0; i < 3; i++)
        succeeds_after (&PROVIDERS[i], "429", 1, true, 1000);
}

static void
test_500_twice (void **state)
{
    for (size_t i = 0; i < 3; i++)
        succeeds_after (&PROVIDERS[i], "500-twice", 2, false, -1);
}

static void
test_overloaded_then_success (void **state)
{
    succeeds_after (&PROVIDERS[0], "529", 2, false, -1);
    succeeds_after (&PROVIDERS[2], "503", 2, false, -1);
}

static void
test_500_always (void **state)
{
    for (size_t i = 0; i < 3; i++) {
        cleanup_free char *msg = fails_with (&PROVIDERS[i], "500-always", NULL, KIWI_MODEL_E_SERVER_ERROR, 4, NULL);
        assert_contains (msg, "HTTP 500");
        assert_contains (msg, "after 4 attempts");
    }
}

static void
test_timeout (void **state)
{
    for (size_t i = 0; i < 3; i++) {
        kiwi_model_config t = { .request_timeout_ms = 700, .max_attempts = 2 };
        long t0 = mono_ms ();
        cleanup_free char *msg = fails_with (&PROVIDERS[i], "timeout", &t, KIWI_MODEL_E_TIMEOUT, 2, NULL);
        long took = mono_ms () - t0;
        assert_true (took >= 1400 && took < 4500);
        assert_contains (msg, "700 ms");
    }
}

static void
test_malformed (void **state)
{
    for (size_t i = 0; i < 3; i++) {
        cleanup_free char *msg = fails_with (&PROVIDERS[i], "malformed", NULL, KIWI_MODEL_E_MALFORMED_RESPONSE, 1, NULL);
        assert_contains (msg, "not JSON");
    }
}

static void
test_auth (void **state)
{
    cleanup_free char *a = fails_with (&PROVIDERS[0], "401", NULL, KIWI_MODEL_E_AUTH, 1, NULL);
    assert_contains (a, "HTTP 401");
    assert_contains (a, "authentication_error");
    assert_contains (a, "\"invalid x-api-key\"");
    assert_contains (a, "request id req_scripted_");
    cleanup_free char *o = fails_with (&PROVIDERS[1], "401", NULL, KIWI_MODEL_E_AUTH, 1, NULL);
    assert_contains (o, "HTTP 401");
    assert_contains (o, "Incorrect API key provided");
    cleanup_free char *g = fails_with (&PROVIDERS[2], "401", NULL, KIWI_MODEL_E_AUTH, 1, NULL);
    assert_contains (g, "HTTP 400");
    assert_contains (g, "API_KEY_INVALID");
    assert_contains (g, "API key not valid");
}

static void
test_wrong_key_never_shown (void **state)
{
    static const char *const secret = "sk-kiwi-SECRET-do-not-print-4f9b2c7d1e";
    for (size_t i = 0; i < 3; i++) {
        kiwi_model_config t = { .api_key = secret };
        cleanup_free char *script = NULL;
        if (asprintf (&script, "%s-text", PROVIDERS[i].name) < 0)
            fail ();
        size_t before = kiwi_scripted_provider_violations (&server, script, NULL);
        cleanup_free char *msg = fails_with (&PROVIDERS[i], "text", &t, KIWI_MODEL_E_AUTH, 1, NULL);
        if (strstr (msg, secret) != NULL || strstr (msg, "SECRET") != NULL)
            fail_msg ("the key shows in the error: %s", msg);
        if (i == 1)
            assert_contains (msg, "[redacted]"); /* the server echoed it; the client scrubbed it */
        /* the server saw the wrong key and said so */
        assert_int_equal (kiwi_scripted_provider_violations (&server, script, NULL), before + 1);
    }
}

static void
test_key_not_in_logs (void **state)
{
    /* the provider quotes the key in a retryable error: the retry's log line
     * and everything else on stderr show [redacted] instead */
    const prov *p = &PROVIDERS[1];
    const char *key = kiwi_scripted_provider_key (p->name);
    char path[] = "/tmp/kiwi-models-stderr-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    fflush (stderr);
    int saved = dup (STDERR_FILENO);
    dup2 (fd, STDERR_FILENO);
    session ses;
    session_open (&ses, p, "500-echo-key", false);
    kiwi_error_t err = NULL;
    kiwi_model_response r = { 0 };
    int rc = kiwi_model_client_call (ses.c, &ses.f.req, &r, &err);
    fflush (stderr);
    dup2 (saved, STDERR_FILENO);
    close (saved);
    if (rc < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    assert_int_equal (r.attempts, 2);
    char logged[8192] = "";
    ssize_t n = pread (fd, logged, sizeof logged - 1, 0);
    close (fd);
    unlink (path);
    assert_true (n > 0);
    logged[n] = '\0';
    assert_contains (logged, "the key sent: [redacted]");
    if (strstr (logged, key) != NULL)
        fail_msg ("the key shows on stderr: %s", logged);
    kiwi_model_response_clear (&r);
    session_end (&ses);
}

static void
test_redacted_requests (void **state)
{
    /* what a test printed reaches the model masked, in the system prompt,
     * the user's text and a tool result, raw or in base64, while the key
     * (a header) still authenticates; the provider's error message is masked
     * too (its text stands in for a secret quoted back) */
    static const char *const secret = "kiwi-prompt-canary-5e1d0a9b";
    static const char *const secret_b64 = "a2l3aS1wcm9tcHQtY2FuYXJ5LTVlMWQwYTli";
    kiwi_error_t err = NULL;
    kiwi_mask *m = kiwi_mask_new (&err);
    assert_non_null (m);
    assert_int_equal (kiwi_mask_add (m, secret, &err), 0);
    assert_int_equal (kiwi_mask_add (m, "Internal server error", &err), 0);
    for (size_t i = 0; i < 3; i++) {
        const prov *p = &PROVIDERS[i];
        kiwi_model_config t = { .redact = m };
        sleeper s = { 0 };
        cleanup_free char *script = NULL;
        kiwi_model_client *c = open_client (p, "text", &s, &t, &script);
        fixture f;
        fixture_init (&f, p);
        kiwi_model_conversation conv = KIWI_MODEL_CONVERSATION_INIT;
        cleanup_free char *text = NULL, *sys = NULL;
        assert_true (asprintf (&text, "The test printed:\nTOKEN=%s\nbase64 %s\n", secret, secret_b64) > 0);
        assert_true (asprintf (&sys, "You are the Implementer. Never print %s.", secret) > 0);
        assert_int_equal (kiwi_model_conv_add_user_text (&conv, text, &err), 0);
        f.req.conversation = &conv;
        f.req.system = sys;
        size_t before = kiwi_scripted_provider_violations (&server, script, NULL);
        kiwi_model_response r = { 0 };
        if (kiwi_model_client_call (c, &f.req, &r, &err) < 0)
            fail_msg ("%s: %s", script, kiwi_error_msg (err));
        kiwi_model_response_clear (&r);
        assert_int_equal (kiwi_scripted_provider_violations (&server, script, NULL), before); /* the key still works */
        json_t *log = kiwi_scripted_provider_log (&server, script, &err);
        assert_non_null (log);
        cleanup_free char *sent = json_dumps (json_array_get (log, json_array_size (log) - 1), JSON_COMPACT);
        json_decref (log);
        if (strstr (sent, secret) != NULL || strstr (sent, secret_b64) != NULL)
            fail_msg ("%s: the secret was sent: %s", script, sent);
        assert_contains (sent, "TOKEN=***");
        assert_contains (sent, "base64 ***");
        assert_contains (sent, "Never print ***.");
        kiwi_model_conv_clear (&conv);
        fixture_clear (&f);
        kiwi_model_client_close (c);

        kiwi_model_config once = { .redact = m, .max_attempts = 1 };
        cleanup_free char *msg = fails_with (p, "500-always", &once, KIWI_MODEL_E_SERVER_ERROR, 1, NULL);
        if (strstr (msg, "Internal server error") != NULL)
            fail_msg ("%s: the error is not masked: %s", p->name, msg);
        assert_contains (msg, "***");
    }
    kiwi_mask_free (m);
}

static void
test_server_refuses_broken_request (void **state)
{
    for (size_t i = 0; i < 3; i++) {
        const prov *p = &PROVIDERS[i];
        fixture f;
        fixture_init (&f, p);
        kiwi_error_t err = NULL;
        /* a tool result answering a call that was never made */
        assert_int_equal (kiwi_model_conv_add_tool_result (&f.conv, "call_never_made", "read_file", "x", false, &err),
                          0);
        cleanup_free char *script = NULL;
        if (asprintf (&script, "%s-text", p->name) < 0)
            fail ();
        size_t before = kiwi_scripted_provider_violations (&server, script, NULL);
        cleanup_free char *msg = fails_with (p, "text", NULL, KIWI_MODEL_E_BAD_REQUEST, 1, &f);
        assert_contains (msg, "HTTP 400");
        assert_contains (msg, "scripted provider:");
        assert_int_equal (kiwi_scripted_provider_violations (&server, script, NULL), before + 1);
        json_t *log = kiwi_scripted_provider_log (&server, script, NULL);
        json_t *last = json_array_get (log, json_array_size (log) - 1);
        json_t *v = json_array_get (json_object_get (last, "violations"), 0);
        assert_string_equal (json_string_value (json_object_get (v, "kind")), "invalid_request");
        json_decref (log);
        fixture_clear (&f);
    }
}

static int
refuse_sleep (void *ctx, long ms)
{
    (*(int *) ctx)++;
    return -1;
}

static void
test_retry_after_forms (void **state)
{
    /* an HTTP date two seconds ahead, then retry-after-ms: both honoured */
    sleeper s = { 0 };
    cleanup_free char *script = NULL;
    kiwi_model_client *c = open_client (&PROVIDERS[1], "429-date", &s, NULL, &script);
    fixture f;
    fixture_init (&f, &PROVIDERS[1]);
    kiwi_error_t err = NULL;
    kiwi_model_response r = { 0 };
    if (kiwi_model_client_call (c, &f.req, &r, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    assert_int_equal (r.attempts, 3);
    assert_int_equal (s.n, 2);
    assert_in_range (s.waits[0], 0, 2000); /* whole seconds: between 1 and 2 s left, or less on a slow run */
    assert_int_equal (s.waits[1], 1500);
    kiwi_model_response_clear (&r);
    assert_no_violations (script);
    kiwi_model_client_close (c);

    /* retry-after beyond backoff_max: not waited, named */
    cleanup_free char *msg = fails_with (&PROVIDERS[0], "429-long", NULL, KIWI_MODEL_E_RATE_LIMITED, 1, NULL);
    assert_contains (msg, "not retried: the provider asked for 120000 ms");

    /* the sleep callback refuses (a worker shutting down): cancelled */
    int calls = 0;
    kiwi_model_config cfg = { .base_url = NULL };
    cleanup_free char *base = kiwi_scripted_provider_base_url (&server, "anthropic", "anthropic-500-always");
    assert_int_equal (kiwi_scripted_provider_reset (&server, "anthropic-500-always", &err), 0);
    cfg.base_url = base;
    cfg.api_key = kiwi_scripted_provider_key ("anthropic");
    cfg.sleep = refuse_sleep;
    cfg.sleep_ctx = &calls;
    c = kiwi_model_client_open (kiwi_model_provider_find ("anthropic", NULL), &cfg, &err);
    assert_non_null (c);
    assert_int_equal (kiwi_model_client_call (c, &f.req, &r, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_MODEL_E_CANCELLED);
    assert_contains (kiwi_error_msg (err), "retry cancelled while waiting");
    assert_contains (kiwi_error_msg (err), "HTTP 500");
    assert_int_equal (calls, 1);
    kiwi_error_free (&err);
    kiwi_model_client_close (c);
    fixture_clear (&f);
}

static void
test_connection_refused (void **state)
{
    /* a loopback port that nobody listens on */
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    assert_int_equal (bind (fd, (struct sockaddr *) &a, sizeof a), 0);
    assert_int_equal (getsockname (fd, (struct sockaddr *) &a, &len), 0);
    close (fd);
    char base[64];
    snprintf (base, sizeof base, "http://127.0.0.1:%d/v1", ntohs (a.sin_port));
    sleeper s = { 0 };
    kiwi_model_config cfg = { .base_url = base, .api_key = "k-1234", .max_attempts = 3, .sleep = record_sleep,
                              .sleep_ctx = &s, .backoff_base_ms = 10 };
    kiwi_error_t err = NULL;
    kiwi_model_client *c = kiwi_model_client_open (kiwi_model_provider_find ("openai", NULL), &cfg, &err);
    assert_non_null (c);
    fixture f;
    fixture_init (&f, &PROVIDERS[1]);
    kiwi_model_response r = { 0 };
    assert_int_equal (kiwi_model_client_call (c, &f.req, &r, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_MODEL_E_TRANSPORT);
    assert_contains (kiwi_error_msg (err), "after 3 attempts");
    assert_int_equal (s.n, 2);
    kiwi_error_free (&err);
    fixture_clear (&f);
    kiwi_model_client_close (c);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_tool_use),
        cmocka_unit_test (test_parallel),
        cmocka_unit_test (test_429_retry_after),
        cmocka_unit_test (test_500_twice),
        cmocka_unit_test (test_overloaded_then_success),
        cmocka_unit_test (test_500_always),
        cmocka_unit_test (test_timeout),
        cmocka_unit_test (test_malformed),
        cmocka_unit_test (test_auth),
        cmocka_unit_test (test_wrong_key_never_shown),
        cmocka_unit_test (test_key_not_in_logs),
        cmocka_unit_test (test_redacted_requests),
        cmocka_unit_test (test_server_refuses_broken_request),
        cmocka_unit_test (test_retry_after_forms),
        cmocka_unit_test (test_connection_refused),
    };
    return cmocka_run_group_tests (tests, group_setup, group_teardown);
}
