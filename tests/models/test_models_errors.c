/*
 * test_models_errors.c: failures by name. The status of every error the
 * providers send mapped to a failure and a retry decision; each provider's
 * error body read (type, code, message, request id, retry delay, a rejected
 * key, an exhausted quota); retry-after in seconds, as an HTTP date and as
 * retry-after-ms; the backoff; keys from the environment and never in an
 * error; the provider selector; the conversation helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "models/models-internal.h"

static void
test_failure_names (void **state)
{
    assert_string_equal (kiwi_model_failure_name (0), "ok");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E_AUTH), "auth");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E_RATE_LIMITED), "rate_limited");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E_OVERLOADED), "overloaded");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E_BAD_REQUEST), "bad_request");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E_SERVER_ERROR), "server_error");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E_TIMEOUT), "timeout");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E_TRANSPORT), "transport");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E_MALFORMED_RESPONSE), "malformed_response");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E_INVALID), "invalid");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E_CANCELLED), "cancelled");
    assert_string_equal (kiwi_model_failure_name (KIWI_MODEL_E__COUNT), "unknown");
    assert_string_equal (kiwi_model_failure_name (-1), "unknown");
    assert_string_equal (kiwi_model_stop_name (KIWI_MODEL_STOP_END_TURN), "end_turn");
    assert_string_equal (kiwi_model_stop_name (KIWI_MODEL_STOP_TOOL_USE), "tool_use");
    assert_string_equal (kiwi_model_stop_name (KIWI_MODEL_STOP_MAX_TOKENS), "max_tokens");
    assert_string_equal (kiwi_model_stop_name (KIWI_MODEL_STOP_OTHER), "other");
}

static void
test_status_mapping (void **state)
{
    static const struct {
        long status;
        kiwi_model_failure f;
        bool retry;
    } table[] = {
        { 400, KIWI_MODEL_E_BAD_REQUEST, false },  { 401, KIWI_MODEL_E_AUTH, false },
        { 402, KIWI_MODEL_E_BAD_REQUEST, false },  { 403, KIWI_MODEL_E_AUTH, false },
        { 404, KIWI_MODEL_E_BAD_REQUEST, false },  { 408, KIWI_MODEL_E_TIMEOUT, true },
        { 409, KIWI_MODEL_E_BAD_REQUEST, false },  { 413, KIWI_MODEL_E_BAD_REQUEST, false },
        { 422, KIWI_MODEL_E_BAD_REQUEST, false },  { 429, KIWI_MODEL_E_RATE_LIMITED, true },
        { 500, KIWI_MODEL_E_SERVER_ERROR, true },  { 501, KIWI_MODEL_E_SERVER_ERROR, false },
        { 502, KIWI_MODEL_E_SERVER_ERROR, true },  { 503, KIWI_MODEL_E_OVERLOADED, true },
        { 504, KIWI_MODEL_E_SERVER_ERROR, true },  { 529, KIWI_MODEL_E_OVERLOADED, true },
        { 302, KIWI_MODEL_E_MALFORMED_RESPONSE, false },
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        bool retry = !table[i].retry;
        kiwi_model_failure f = kiwi__model_classify_status (table[i].status, NULL, &retry);
        if (f != table[i].f || retry != table[i].retry)
            fail_msg ("HTTP %ld: got %s/%d, want %s/%d", table[i].status, kiwi_model_failure_name ((int) f), retry,
                      kiwi_model_failure_name ((int) table[i].f), table[i].retry);
    }
    bool retry;
    kiwi__model_error_info quota = { .quota = true, .retry_after_ms = -1 };
    assert_int_equal (kiwi__model_classify_status (429, &quota, &retry), KIWI_MODEL_E_RATE_LIMITED);
    assert_false (retry); /* money ran out: waiting will not help */
    kiwi__model_error_info badkey = { .auth = true, .retry_after_ms = -1 };
    assert_int_equal (kiwi__model_classify_status (400, &badkey, &retry), KIWI_MODEL_E_AUTH);
    assert_false (retry);
}

static void
info_of (const kiwi_model_provider *p, const char *body, kiwi__model_error_info *info)
{
    json_t *j = body != NULL ? json_loads (body, JSON_DECODE_ANY, NULL) : NULL;
    memset (info, 0, sizeof *info);
    info->retry_after_ms = -1;
    p->error_info (j, info);
    if (j != NULL)
        json_decref (j);
}

static void
test_error_bodies (void **state)
{
    kiwi__model_error_info i;
    info_of (&kiwi__model_anthropic,
             "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"},"
             "\"request_id\":\"req_011\"}",
             &i);
    assert_string_equal (i.type, "rate_limit_error");
    assert_string_equal (i.message, "slow down");
    assert_string_equal (i.request_id, "req_011");
    assert_false (i.quota);
    kiwi__model_error_info_clear (&i);
    info_of (&kiwi__model_anthropic,
             "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"cap\",\"details\":"
             "{\"error_code\":\"enforced_spend_limit_reached\"}}}",
             &i);
    assert_true (i.quota);
    kiwi__model_error_info_clear (&i);

    info_of (&kiwi__model_openai,
             "{\"error\":{\"message\":\"You exceeded your current quota\",\"type\":\"insufficient_quota\","
             "\"param\":null,\"code\":\"insufficient_quota\"}}",
             &i);
    assert_string_equal (i.message, "You exceeded your current quota");
    assert_string_equal (i.code, "insufficient_quota");
    assert_true (i.quota);
    kiwi__model_error_info_clear (&i);
    info_of (&kiwi__model_openai, "{\"error\":{\"message\":\"bad key\",\"type\":\"x\",\"code\":\"invalid_api_key\"}}", &i);
    assert_true (i.auth);
    kiwi__model_error_info_clear (&i);
    info_of (&kiwi__model_openai, "{\"error\":\"model not loaded\"}", &i); /* a compatible server */
    assert_string_equal (i.message, "model not loaded");
    kiwi__model_error_info_clear (&i);
    info_of (&kiwi__model_openai, "{\"detail\":\"Not Found\"}", &i);
    assert_string_equal (i.message, "Not Found");
    kiwi__model_error_info_clear (&i);

    info_of (&kiwi__model_gemini,
             "{\"error\":{\"code\":400,\"message\":\"API key not valid. Please pass a valid API key.\","
             "\"status\":\"INVALID_ARGUMENT\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\","
             "\"reason\":\"API_KEY_INVALID\",\"domain\":\"googleapis.com\"}]}}",
             &i);
    assert_true (i.auth);
    assert_string_equal (i.type, "INVALID_ARGUMENT");
    assert_string_equal (i.code, "API_KEY_INVALID");
    kiwi__model_error_info_clear (&i);
    info_of (&kiwi__model_gemini,
             "[{\"error\":{\"code\":429,\"message\":\"quota\",\"status\":\"RESOURCE_EXHAUSTED\",\"details\":["
             "{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"37s\"}]}}]",
             &i);
    assert_int_equal (i.retry_after_ms, 37000);
    assert_string_equal (i.message, "quota");
    kiwi__model_error_info_clear (&i);

    /* anything at all: never a crash */
    static const char *const junk[] = { NULL, "[]", "3", "{\"error\":[1]}", "{\"error\":{\"message\":5,\"details\":{}}}",
                                        "{\"error\":{\"details\":[1,{\"@type\":2},{\"@type\":\"google.rpc.RetryInfo\"}]}}" };
    for (size_t k = 0; k < sizeof junk / sizeof junk[0]; k++) {
        info_of (&kiwi__model_anthropic, junk[k], &i);
        kiwi__model_error_info_clear (&i);
        info_of (&kiwi__model_openai, junk[k], &i);
        kiwi__model_error_info_clear (&i);
        info_of (&kiwi__model_gemini, junk[k], &i);
        kiwi__model_error_info_clear (&i);
    }
}

static void
test_retry_after (void **state)
{
    time_t now = 1764460800; /* Sun, 30 Nov 2025 00:00:00 GMT */
    assert_int_equal (kiwi__model_retry_after_ms ("1", NULL, now), 1000);
    assert_int_equal (kiwi__model_retry_after_ms ("1.5", NULL, now), 1500);
    assert_int_equal (kiwi__model_retry_after_ms (" 2 ", NULL, now), 2000);
    assert_int_equal (kiwi__model_retry_after_ms ("0", NULL, now), 0);
    assert_int_equal (kiwi__model_retry_after_ms (NULL, "250", now), 250);
    assert_int_equal (kiwi__model_retry_after_ms (NULL, "250.2", now), 251);
    assert_int_equal (kiwi__model_retry_after_ms ("30", "250", now), 250); /* the precise one wins */
    assert_int_equal (kiwi__model_retry_after_ms ("30", "junk", now), 30000);
    assert_int_equal (kiwi__model_retry_after_ms ("Sun, 30 Nov 2025 00:00:07 GMT", NULL, now), 7000);
    assert_int_equal (kiwi__model_retry_after_ms ("Sat, 29 Nov 2025 23:00:00 GMT", NULL, now), 0);
    assert_int_equal (kiwi__model_retry_after_ms ("99999999999", NULL, now), 86400000L); /* clamped */
    assert_int_equal (kiwi__model_retry_after_ms ("-1", NULL, now), -1);
    assert_int_equal (kiwi__model_retry_after_ms ("soon", NULL, now), -1);
    assert_int_equal (kiwi__model_retry_after_ms ("", NULL, now), -1);
    assert_int_equal (kiwi__model_retry_after_ms ("1e400", NULL, now), -1);
    assert_int_equal (kiwi__model_retry_after_ms ("nan", NULL, now), -1);
    assert_int_equal (kiwi__model_retry_after_ms (NULL, NULL, now), -1);

    assert_int_equal (kiwi__model_duration_ms ("37s"), 37000);
    assert_int_equal (kiwi__model_duration_ms ("1.5s"), 1500);
    assert_int_equal (kiwi__model_duration_ms ("0.000001s"), 1);
    assert_int_equal (kiwi__model_duration_ms ("s"), -1);
    assert_int_equal (kiwi__model_duration_ms ("10"), -1);
    assert_int_equal (kiwi__model_duration_ms ("xs"), -1);
    assert_int_equal (kiwi__model_duration_ms (NULL), -1);
}

static void
test_backoff (void **state)
{
    assert_int_equal (kiwi__model_backoff_ms (1000, 60000, 1, 1.0), 1000);
    assert_int_equal (kiwi__model_backoff_ms (1000, 60000, 1, 0.0), 500);
    assert_int_equal (kiwi__model_backoff_ms (1000, 60000, 2, 1.0), 2000);
    assert_int_equal (kiwi__model_backoff_ms (1000, 60000, 4, 1.0), 8000);
    assert_int_equal (kiwi__model_backoff_ms (1000, 60000, 30, 1.0), 60000); /* capped, no overflow */
    assert_int_equal (kiwi__model_backoff_ms (1000, 60000, 1000, 0.0), 30000);
    for (int retry = 1; retry < 12; retry++)
        for (double r = 0; r <= 1.0; r += 0.125) {
            long d = kiwi__model_backoff_ms (200, 5000, retry, r);
            long full = 200L << (retry - 1);
            if (full > 5000)
                full = 5000;
            assert_in_range (d, full / 2, full);
        }
}

static void
test_keys_from_env (void **state)
{
    kiwi_error_t err = NULL;
    const kiwi_model_provider *a = kiwi_model_provider_find ("anthropic", &err);
    const kiwi_model_provider *o = kiwi_model_provider_find ("openai", &err);
    const kiwi_model_provider *g = kiwi_model_provider_find ("gemini", &err);
    assert_non_null (a);
    assert_non_null (o);
    assert_non_null (g);
    assert_string_equal (kiwi_model_provider_key_env (a), "ANTHROPIC_API_KEY");
    assert_string_equal (kiwi_model_provider_key_env (o), "OPENAI_API_KEY");
    assert_string_equal (kiwi_model_provider_key_env (g), "GEMINI_API_KEY");
    assert_string_equal (kiwi_model_provider_default_base_url (a), "https://api.anthropic.com");
    assert_string_equal (kiwi_model_provider_default_base_url (o), "https://api.openai.com/v1");
    assert_string_equal (kiwi_model_provider_default_base_url (g), "https://generativelanguage.googleapis.com/v1beta");

    const char *const env[] = { "PATH=/bin", "ANTHROPIC_API_KEY_OLD=nope", "ANTHROPIC_API_KEY=sk-ant-123456",
                                "OPENAI_API_KEY=", "GEMINI_API_KEYX=zzz", NULL };
    assert_string_equal (kiwi_model_key_from_env (a, env, &err), "sk-ant-123456");
    assert_null (kiwi_model_key_from_env (o, env, &err)); /* set but empty */
    assert_int_equal (kiwi_error_code (err), KIWI_MODEL_E_AUTH);
    assert_string_equal (kiwi_error_msg (err), "openai: OPENAI_API_KEY is not set in the worker's environment");
    assert_null (kiwi_model_key_from_env (g, env, &err));
    assert_null (strstr (kiwi_error_msg (err), "zzz"));
    kiwi_error_free (&err);

    assert_null (kiwi_model_provider_find ("claude", &err));
    assert_string_equal (kiwi_error_msg (err), "unknown model provider 'claude' (known: anthropic, openai, gemini)");
    assert_null (kiwi_model_provider_find (NULL, &err));
    kiwi_error_free (&err);
}

static void
test_key_never_in_errors (void **state)
{
    static const char *const key = "sk-live-abcdef0123456789";
    char *msg = strdup ("Incorrect API key provided: sk-live-abcdef0123456789. And again sk-live-abcdef0123456789!");
    kiwi__model_scrub (&msg, key);
    assert_string_equal (msg, "Incorrect API key provided: [redacted]. And again [redacted]!");
    kiwi__model_scrub (&msg, NULL);
    kiwi__model_scrub (&msg, "ab"); /* too short to mean anything: left alone */
    assert_string_equal (msg, "Incorrect API key provided: [redacted]. And again [redacted]!");
    free (msg);

    kiwi_error_t err = NULL;
    const kiwi_model_provider *o = kiwi_model_provider_find ("openai", &err);
    /* no key and the provider's own URL: refused, naming the variable */
    kiwi_model_config none = { 0 };
    assert_null (kiwi_model_client_open (o, &none, &err));
    assert_int_equal (kiwi_error_code (err), KIWI_MODEL_E_AUTH);
    assert_non_null (strstr (kiwi_error_msg (err), "OPENAI_API_KEY"));
    /* a key with a line break would smuggle a header: refused, not shown */
    kiwi_model_config crlf = { .api_key = "sk-abc\r\nX-Evil: 1" };
    assert_null (kiwi_model_client_open (o, &crlf, &err));
    assert_null (strstr (kiwi_error_msg (err), "sk-abc"));
    kiwi_model_config badurl = { .api_key = key, .base_url = "ftp://x" };
    assert_null (kiwi_model_client_open (o, &badurl, &err));
    assert_null (strstr (kiwi_error_msg (err), key));
    /* a request refused before any I/O: the error names the problem, never the key */
    kiwi_model_config cfg = { .api_key = key };
    kiwi_model_client *c = kiwi_model_client_open (o, &cfg, &err);
    assert_non_null (c);
    kiwi_model_conversation conv = KIWI_MODEL_CONVERSATION_INIT;
    kiwi_model_request req = { .model = "m", .conversation = &conv, .max_tokens = 1 };
    kiwi_model_response r = { 0 };
    assert_int_equal (kiwi_model_client_call (c, &req, &r, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_MODEL_E_INVALID);
    assert_string_equal (kiwi_error_msg (err), "openai: request: the conversation is empty");
    kiwi_error_free (&err);
    /* a local OpenAI-compatible server without auth needs no key */
    kiwi_model_config local = { .base_url = "http://127.0.0.1:1/v1/" };
    kiwi_model_client *lc = kiwi_model_client_open (o, &local, &err);
    assert_non_null (lc);
    kiwi_model_client_close (lc);
    /* cost at the configured prices */
    kiwi_model_config priced = { .api_key = key, .price_input_per_mtok = 3.0, .price_output_per_mtok = 15.0 };
    kiwi_model_client *pc = kiwi_model_client_open (o, &priced, &err);
    kiwi_model_usage u = { .input_tokens = 1000000, .output_tokens = 200000 };
    assert_float_equal (kiwi_model_client_cost (pc, u), 6.0, 1e-9);
    assert_float_equal (kiwi_model_client_cost (c, u), 0.0, 1e-12);
    /* prompt-cache tokens at OpenAI's factors: 400000 plain, 100000
     * written (1x), 500000 read (0.5x) */
    u.cache_write_tokens = 100000;
    u.cache_read_tokens = 500000;
    assert_float_equal (kiwi_model_client_cost (pc, u), (400000 + 100000 + 250000) * 3.0 / 1e6 + 3.0, 1e-9);
    /* Anthropic's: writes 1.25x, reads 0.1x the input price */
    kiwi_model_client *ac = kiwi_model_client_open (kiwi_model_provider_find ("anthropic", &err), &priced, &err);
    assert_non_null (ac);
    assert_float_equal (kiwi_model_client_cost (ac, u), (400000 + 125000 + 50000) * 3.0 / 1e6 + 3.0, 1e-9);
    kiwi_model_client_close (ac);
    kiwi_model_client_close (pc);
    kiwi_model_client_close (c);
}

static void
test_conversation (void **state)
{
    kiwi_model_conversation conv = KIWI_MODEL_CONVERSATION_INIT;
    kiwi_error_t err = NULL;
    assert_null (kiwi_model_conv_last (&conv));
    assert_int_equal (kiwi_model_conv_add_user_text (&conv, "hi", &err), 0);
    kiwi_model_message m = { .role = KIWI_MODEL_ROLE_ASSISTANT };
    assert_int_equal (kiwi_model_message_add_text (&m, "a", &err), 0);
    assert_int_equal (kiwi_model_message_add_text (&m, "b", &err), 0);
    json_t *args = json_pack ("{s:i}", "n", 1);
    assert_int_equal (kiwi_model_message_add_tool_call (&m, "c1", "f", args, &err), 0);
    json_t *arr = json_array ();
    assert_int_equal (kiwi_model_message_add_tool_call (&m, "c2", "f", arr, &err), -1); /* not an object */
    assert_int_equal (kiwi_error_code (err), KIWI_MODEL_E_INVALID);
    kiwi_error_free (&err);
    json_decref (arr);
    assert_int_equal (json_integer_value (json_object_get (kiwi_model_message_tool_call (&m, 0)->arguments, "n")), 1);
    json_decref (args); /* the message holds its own reference */
    cleanup_free char *text = kiwi_model_message_text (&m);
    assert_string_equal (text, "a\nb");
    assert_int_equal (kiwi_model_message_n_tool_calls (&m), 1);
    assert_null (kiwi_model_message_tool_call (&m, 1));
    assert_int_equal (kiwi_model_conv_take_message (&conv, &m, &err), 0);
    assert_null (m.blocks);
    assert_int_equal (m.n_blocks, 0);
    assert_int_equal (conv.n_messages, 2);
    /* results of one turn share one user message; text after them starts a new one */
    assert_int_equal (kiwi_model_conv_add_tool_result (&conv, "c1", "f", "r1", false, &err), 0);
    assert_int_equal (kiwi_model_conv_add_tool_result (&conv, "c2", "f", "r2", true, &err), 0);
    assert_int_equal (conv.n_messages, 3);
    assert_int_equal (kiwi_model_conv_last (&conv)->n_blocks, 2);
    assert_true (kiwi_model_conv_last (&conv)->blocks[1].is_error);
    assert_int_equal (kiwi_model_conv_add_user_text (&conv, "more", &err), 0);
    assert_int_equal (conv.n_messages, 4);
    assert_int_equal (kiwi_model_conv_add_tool_result (&conv, "c3", "f", "r3", false, &err), 0);
    assert_int_equal (conv.n_messages, 5);
    assert_null (kiwi_model_message_text (&conv.messages[2]));
    kiwi_model_conv_clear (&conv);
    assert_int_equal (conv.n_messages, 0);
    kiwi_model_conv_clear (&conv); /* twice is fine */

    kiwi_model_response r = { 0 };
    kiwi_model_response_clear (&r);
    kiwi_model_response_clear (&r);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_failure_names),  cmocka_unit_test (test_status_mapping),
        cmocka_unit_test (test_error_bodies),   cmocka_unit_test (test_retry_after),
        cmocka_unit_test (test_backoff),        cmocka_unit_test (test_keys_from_env),
        cmocka_unit_test (test_key_never_in_errors), cmocka_unit_test (test_conversation),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
