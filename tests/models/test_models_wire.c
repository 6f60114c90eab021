/*
 * test_models_wire.c: what the three providers put on the wire and read
 * back. Request bodies against golden JSON (a conversation with text, tool
 * calls and tool results), URLs and headers; response parsing (text only,
 * tool calls, several tool calls, usage, stop reasons, request ids); bodies
 * of the wrong shape are malformed_response and never a crash, including a
 * seeded loop of mutated bodies.
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

/* ---------------------------------------------------------------- helpers --- */

static json_t *
parse (const char *s)
{
    json_error_t e;
    json_t *j = json_loads (s, JSON_DECODE_ANY, &e);
    if (j == NULL)
        fail_msg ("golden JSON does not parse: %s (line %d): %s", e.text, e.line, s);
    return j;
}

static void
assert_json_equal (json_t *got, const char *want_text)
{
    json_t *want = parse (want_text);
    if (!json_equal (got, want)) {
        cleanup_free char *g = json_dumps (got, JSON_SORT_KEYS | JSON_INDENT (1));
        cleanup_free char *w = json_dumps (want, JSON_SORT_KEYS | JSON_INDENT (1));
        fail_msg ("JSON differs\n--- got\n%s\n--- want\n%s", g, w);
    }
    json_decref (want);
}

typedef struct convo {
    kiwi_model_conversation conv;
    json_t *schema;
    kiwi_model_tool tool;
    kiwi_model_request req;
} convo;

/* user text; assistant text + two tool calls; user with both results (the
 * second an error). */
static void
convo_init (convo *c, const char *model)
{
    memset (c, 0, sizeof *c);
    kiwi_error_t err = NULL;
    c->schema = parse ("{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]}");
    c->tool = (kiwi_model_tool) { "read_file", "Read a file.", c->schema };
    assert_int_equal (kiwi_model_conv_add_user_text (&c->conv, "Fix the test.", &err), 0);
    kiwi_model_message m = { .role = KIWI_MODEL_ROLE_ASSISTANT };
    json_t *a1 = parse ("{\"path\":\"a.c\"}");
    json_t *a2 = parse ("{\"path\":\"b.c\"}");
    assert_int_equal (kiwi_model_message_add_text (&m, "Reading.", &err), 0);
    assert_int_equal (kiwi_model_message_add_tool_call (&m, "call_1", "read_file", a1, &err), 0);
    assert_int_equal (kiwi_model_message_add_tool_call (&m, "call_2", "read_file", a2, &err), 0);
    json_decref (a1);
    json_decref (a2);
    assert_int_equal (kiwi_model_conv_take_message (&c->conv, &m, &err), 0);
    assert_int_equal (kiwi_model_conv_add_tool_result (&c->conv, "call_1", "read_file", "int main;", false, &err), 0);
    assert_int_equal (kiwi_model_conv_add_tool_result (&c->conv, "call_2", "read_file", "no such file", true, &err),
                      0);
    c->req = (kiwi_model_request) {
        .model = model,
        .system = "You are the Implementer.",
        .conversation = &c->conv,
        .tools = &c->tool,
        .n_tools = 1,
        .max_tokens = 2048,
        .has_temperature = true,
        .temperature = 0.5,
    };
    assert_int_equal (kiwi__model_request_check (&c->req, &err), 0);
}

static void
convo_clear (convo *c)
{
    kiwi_model_conv_clear (&c->conv);
    json_decref (c->schema);
}

static json_t *
encode (const kiwi_model_provider *p, const kiwi_model_request *req, bool native)
{
    kiwi_error_t err = NULL;
    kiwi__model_encode_opts o = { .native = native };
    json_t *j = p->encode (req, &o, &err);
    if (j == NULL)
        fail_msg ("%s encode: %s", p->name, kiwi_error_msg (err));
    return j;
}

/* ------------------------------------------------------------- requests --- */

static void
test_anthropic_request (void **state)
{
    convo c;
    convo_init (&c, "claude-sonnet-4-5");
    json_t *j = encode (&kiwi__model_anthropic, &c.req, true);
    assert_json_equal (j, "{"
                          "\"model\":\"claude-sonnet-4-5\",\"max_tokens\":2048,\"temperature\":0.5,"
                          "\"system\":[{\"type\":\"text\",\"text\":\"You are the Implementer.\","
                          " \"cache_control\":{\"type\":\"ephemeral\"}}],"
                          "\"messages\":["
                          " {\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Fix the test.\"}]},"
                          " {\"role\":\"assistant\",\"content\":["
                          "  {\"type\":\"text\",\"text\":\"Reading.\"},"
                          "  {\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"read_file\",\"input\":{\"path\":\"a.c\"}},"
                          "  {\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"read_file\",\"input\":{\"path\":\"b.c\"}}]},"
                          " {\"role\":\"user\",\"content\":["
                          "  {\"type\":\"tool_result\",\"tool_use_id\":\"call_1\",\"content\":\"int main;\"},"
                          "  {\"type\":\"tool_result\",\"tool_use_id\":\"call_2\",\"content\":\"no such file\","
                          "   \"is_error\":true,\"cache_control\":{\"type\":\"ephemeral\"}}]}],"
                          "\"tools\":[{\"name\":\"read_file\",\"description\":\"Read a file.\",\"input_schema\":"
                          " {\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]},"
                          " \"cache_control\":{\"type\":\"ephemeral\"}}]"
                          "}");
    json_decref (j);

    kiwi_error_t err = NULL;
    cleanup_free char *url = kiwi__model_anthropic.url ("https://api.anthropic.com", &c.req, &err);
    assert_string_equal (url, "https://api.anthropic.com/v1/messages");
    struct curl_slist *h = NULL;
    assert_int_equal (kiwi__model_anthropic.headers (&h, "sk-ant-test", &err), 0);
    assert_string_equal (h->data, "anthropic-version: 2023-06-01");
    assert_string_equal (h->next->data, "x-api-key: sk-ant-test");
    assert_null (h->next->next);
    curl_slist_free_all (h);
    convo_clear (&c);
}

static void
test_anthropic_request_edges (void **state)
{
    /* empty tool output leaves content out; empty text blocks are skipped;
     * tool results come before text in a user message; no system, no
     * temperature, no tools: none of those keys */
    kiwi_model_conversation conv = KIWI_MODEL_CONVERSATION_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_model_conv_add_user_text (&conv, "go", &err), 0);
    kiwi_model_message m = { .role = KIWI_MODEL_ROLE_ASSISTANT };
    assert_int_equal (kiwi_model_message_add_text (&m, "", &err), 0);
    assert_int_equal (kiwi_model_message_add_tool_call (&m, "t1", "run", NULL, &err), 0);
    assert_int_equal (kiwi_model_conv_take_message (&conv, &m, &err), 0);
    kiwi_model_message u = { .role = KIWI_MODEL_ROLE_USER };
    assert_int_equal (kiwi_model_message_add_text (&u, "and then", &err), 0);
    assert_int_equal (kiwi_model_message_add_tool_result (&u, "t1", "run", "", false, &err), 0);
    assert_int_equal (kiwi_model_conv_take_message (&conv, &u, &err), 0);
    kiwi_model_request req = { .model = "m", .conversation = &conv, .max_tokens = 10 };
    json_t *j = encode (&kiwi__model_anthropic, &req, true);
    assert_json_equal (j, "{\"model\":\"m\",\"max_tokens\":10,\"messages\":["
                          "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"go\"}]},"
                          "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"run\","
                          "\"input\":{}}]},"
                          "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\"},"
                          "{\"type\":\"text\",\"text\":\"and then\",\"cache_control\":{\"type\":\"ephemeral\"}}]}]}");
    json_decref (j);
    kiwi_model_conv_clear (&conv);
}

static void
test_openai_request (void **state)
{
    convo c;
    convo_init (&c, "gpt-4.1");
    json_t *j = encode (&kiwi__model_openai, &c.req, true);
    assert_json_equal (j, "{"
                          "\"model\":\"gpt-4.1\",\"max_completion_tokens\":2048,\"temperature\":0.5,"
                          "\"messages\":["
                          " {\"role\":\"system\",\"content\":\"You are the Implementer.\"},"
                          " {\"role\":\"user\",\"content\":\"Fix the test.\"},"
                          " {\"role\":\"assistant\",\"content\":\"Reading.\",\"tool_calls\":["
                          "  {\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","
                          "   \"arguments\":\"{\\\"path\\\":\\\"a.c\\\"}\"}},"
                          "  {\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","
                          "   \"arguments\":\"{\\\"path\\\":\\\"b.c\\\"}\"}}]},"
                          " {\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"int main;\"},"
                          " {\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"error: no such file\"}],"
                          "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"read_file\","
                          " \"description\":\"Read a file.\",\"parameters\":"
                          " {\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]}}}]"
                          "}");
    json_decref (j);

    /* an OpenAI-compatible server gets max_tokens, which they all know */
    j = encode (&kiwi__model_openai, &c.req, false);
    assert_int_equal (json_integer_value (json_object_get (j, "max_tokens")), 2048);
    assert_null (json_object_get (j, "max_completion_tokens"));
    json_decref (j);

    kiwi_error_t err = NULL;
    cleanup_free char *url = kiwi__model_openai.url ("http://127.0.0.1:8000/v1", &c.req, &err);
    assert_string_equal (url, "http://127.0.0.1:8000/v1/chat/completions");
    struct curl_slist *h = NULL;
    assert_int_equal (kiwi__model_openai.headers (&h, "sk-test", &err), 0);
    assert_string_equal (h->data, "Authorization: Bearer sk-test");
    curl_slist_free_all (h);
    h = NULL;
    assert_int_equal (kiwi__model_openai.headers (&h, NULL, &err), 0); /* a local server without auth */
    assert_null (h);
    convo_clear (&c);
}

static void
test_openai_request_tool_calls_only (void **state)
{
    /* an assistant turn of tool calls alone has content null */
    kiwi_model_conversation conv = KIWI_MODEL_CONVERSATION_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_model_conv_add_user_text (&conv, "go", &err), 0);
    kiwi_model_message m = { .role = KIWI_MODEL_ROLE_ASSISTANT };
    assert_int_equal (kiwi_model_message_add_tool_call (&m, "c1", "run", NULL, &err), 0);
    assert_int_equal (kiwi_model_conv_take_message (&conv, &m, &err), 0);
    assert_int_equal (kiwi_model_conv_add_tool_result (&conv, "c1", "run", "ok", false, &err), 0);
    kiwi_model_request req = { .model = "m", .conversation = &conv, .max_tokens = 5 };
    json_t *j = encode (&kiwi__model_openai, &req, true);
    assert_json_equal (j, "{\"model\":\"m\",\"max_completion_tokens\":5,\"messages\":["
                          "{\"role\":\"user\",\"content\":\"go\"},"
                          "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
                          "\"function\":{\"name\":\"run\",\"arguments\":\"{}\"}}]},"
                          "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}]}");
    json_decref (j);
    kiwi_model_conv_clear (&conv);
}

static void
test_gemini_request (void **state)
{
    convo c;
    convo_init (&c, "gemini-2.5-flash");
    json_t *j = encode (&kiwi__model_gemini, &c.req, true);
    assert_json_equal (j, "{"
                          "\"systemInstruction\":{\"parts\":[{\"text\":\"You are the Implementer.\"}]},"
                          "\"contents\":["
                          " {\"role\":\"user\",\"parts\":[{\"text\":\"Fix the test.\"}]},"
                          " {\"role\":\"model\",\"parts\":["
                          "  {\"text\":\"Reading.\"},"
                          "  {\"functionCall\":{\"id\":\"call_1\",\"name\":\"read_file\",\"args\":{\"path\":\"a.c\"}}},"
                          "  {\"functionCall\":{\"id\":\"call_2\",\"name\":\"read_file\",\"args\":{\"path\":\"b.c\"}}}]},"
                          " {\"role\":\"user\",\"parts\":["
                          "  {\"functionResponse\":{\"id\":\"call_1\",\"name\":\"read_file\",\"response\":"
                          "   {\"output\":\"int main;\"}}},"
                          "  {\"functionResponse\":{\"id\":\"call_2\",\"name\":\"read_file\",\"response\":"
                          "   {\"error\":\"no such file\"}}}]}],"
                          "\"tools\":[{\"functionDeclarations\":[{\"name\":\"read_file\",\"description\":\"Read a file.\","
                          " \"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},"
                          " \"required\":[\"path\"]}}]}],"
                          "\"generationConfig\":{\"maxOutputTokens\":2048,\"temperature\":0.5}"
                          "}");
    json_decref (j);

    kiwi_error_t err = NULL;
    cleanup_free char *url = kiwi__model_gemini.url ("https://generativelanguage.googleapis.com/v1beta", &c.req, &err);
    assert_string_equal (url, "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent");
    c.req.model = "models/gemini-2.5-pro";
    cleanup_free char *url2 = kiwi__model_gemini.url ("http://h/v1beta", &c.req, &err);
    assert_string_equal (url2, "http://h/v1beta/models/gemini-2.5-pro:generateContent");
    c.req.model = "gemini/../../x?key=1";
    assert_null (kiwi__model_gemini.url ("http://h/v1beta", &c.req, &err));
    assert_int_equal (kiwi_error_code (err), KIWI_MODEL_E_INVALID);
    kiwi_error_free (&err);
    struct curl_slist *h = NULL;
    assert_int_equal (kiwi__model_gemini.headers (&h, "AIza-test", &err), 0);
    assert_string_equal (h->data, "x-goog-api-key: AIza-test"); /* never ?key= in the URL */
    curl_slist_free_all (h);
    convo_clear (&c);
}

static void
test_gemini_schema_and_signatures (void **state)
{
    /* JSON-schema keywords Gemini refuses are dropped; ["string","null"]
     * becomes nullable; a synthetic call id is not sent back; a thought
     * signature is */
    kiwi_model_conversation conv = KIWI_MODEL_CONVERSATION_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_model_conv_add_user_text (&conv, "go", &err), 0);
    kiwi_model_message m = { .role = KIWI_MODEL_ROLE_ASSISTANT };
    assert_int_equal (kiwi_model_message_add_tool_call (&m, "kiwi-call-7", "run", NULL, &err), 0);
    m.blocks[0].signature = strdup ("c2lnbmF0dXJl");
    assert_int_equal (kiwi_model_conv_take_message (&conv, &m, &err), 0);
    assert_int_equal (kiwi_model_conv_add_tool_result (&conv, "kiwi-call-7", "run", "ok", false, &err), 0);
    json_t *schema = parse ("{\"$schema\":\"x\",\"type\":\"object\",\"additionalProperties\":false,"
                            "\"properties\":{\"n\":{\"type\":[\"integer\",\"null\"],\"const\":3},"
                            "\"l\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"additionalProperties\":1}}}}");
    kiwi_model_tool tool = { "run", "Run.", schema };
    kiwi_model_request req = { .model = "g", .conversation = &conv, .max_tokens = 5, .tools = &tool, .n_tools = 1 };
    json_t *j = encode (&kiwi__model_gemini, &req, true);
    assert_json_equal (j, "{\"contents\":["
                          "{\"role\":\"user\",\"parts\":[{\"text\":\"go\"}]},"
                          "{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"run\",\"args\":{}},"
                          "\"thoughtSignature\":\"c2lnbmF0dXJl\"}]},"
                          "{\"role\":\"user\",\"parts\":[{\"functionResponse\":{\"name\":\"run\",\"response\":"
                          "{\"output\":\"ok\"}}}]}],"
                          "\"tools\":[{\"functionDeclarations\":[{\"name\":\"run\",\"description\":\"Run.\","
                          "\"parameters\":{\"type\":\"object\",\"properties\":{"
                          "\"n\":{\"type\":\"integer\",\"nullable\":true},"
                          "\"l\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}}]}],"
                          "\"generationConfig\":{\"maxOutputTokens\":5}}");
    json_decref (j);
    json_decref (schema);
    kiwi_model_conv_clear (&conv);
}

static void
test_request_check (void **state)
{
    convo c;
    convo_init (&c, "m");
    kiwi_error_t err = NULL;
    kiwi_model_request r = c.req;
    r.model = "";
    assert_int_equal (kiwi__model_request_check (&r, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_MODEL_E_INVALID);
    r = c.req;
    r.max_tokens = 0;
    assert_int_equal (kiwi__model_request_check (&r, &err), -1);
    r = c.req;
    kiwi_model_tool bad = { "read file", "x", c.schema };
    r.tools = &bad;
    assert_int_equal (kiwi__model_request_check (&r, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "^[a-zA-Z0-9_-]{1,64}$"));
    kiwi_model_tool noparams = { "ok", "x", NULL };
    r.tools = &noparams;
    assert_int_equal (kiwi__model_request_check (&r, &err), -1);
    kiwi_model_tool dup[2] = { c.tool, c.tool };
    r.tools = dup;
    r.n_tools = 2;
    assert_int_equal (kiwi__model_request_check (&r, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "twice"));
    kiwi_model_conversation empty = KIWI_MODEL_CONVERSATION_INIT;
    r = c.req;
    r.conversation = &empty;
    assert_int_equal (kiwi__model_request_check (&r, &err), -1);
    kiwi_error_free (&err);

    assert_true (kiwi__model_tool_name_ok ("read_file-2"));
    assert_false (kiwi__model_tool_name_ok (""));
    assert_false (kiwi__model_tool_name_ok ("a.b"));
    char long_name[66];
    memset (long_name, 'a', 65);
    long_name[65] = '\0';
    assert_false (kiwi__model_tool_name_ok (long_name));
    long_name[64] = '\0';
    assert_true (kiwi__model_tool_name_ok (long_name));
    convo_clear (&c);
}

/* ------------------------------------------------------------ responses --- */

static int
decode (const kiwi_model_provider *p, const char *body, kiwi_model_response *r, kiwi_error_t *err)
{
    json_t *j = parse (body);
    memset (r, 0, sizeof *r);
    int rc = p->decode (j, r, err);
    json_decref (j);
    return rc;
}

static void
test_anthropic_responses (void **state)
{
    kiwi_model_response r;
    kiwi_error_t err = NULL;
    /* text only */
    assert_int_equal (decode (&kiwi__model_anthropic,
                              "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\","
                              "\"content\":[{\"type\":\"text\",\"text\":\"Hi.\"}],\"stop_reason\":\"end_turn\","
                              "\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":3,"
                              "\"cache_read_input_tokens\":5}}",
                              &r, &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_END_TURN);
    assert_string_equal (r.stop_raw, "end_turn");
    assert_int_equal (r.message.role, KIWI_MODEL_ROLE_ASSISTANT);
    assert_int_equal (r.message.n_blocks, 1);
    assert_string_equal (r.message.blocks[0].text, "Hi.");
    assert_int_equal (r.usage.input_tokens, 17); /* cached input counts */
    assert_int_equal (r.usage.cache_read_tokens, 5);
    assert_int_equal (r.usage.cache_write_tokens, 0);
    assert_int_equal (r.usage.output_tokens, 3);
    assert_string_equal (r.request_id, "msg_1");
    kiwi_model_response_clear (&r);
    /* several tool calls, a thinking block ignored */
    assert_int_equal (decode (&kiwi__model_anthropic,
                              "{\"id\":\"msg_2\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\","
                              "\"content\":[{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"s\"},"
                              "{\"type\":\"text\",\"text\":\"Two.\"},"
                              "{\"type\":\"tool_use\",\"id\":\"toolu_a\",\"name\":\"read_file\",\"input\":{\"path\":\"x\"}},"
                              "{\"type\":\"tool_use\",\"id\":\"toolu_b\",\"name\":\"run_tests\",\"input\":{}}],"
                              "\"stop_reason\":\"tool_use\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}",
                              &r, &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_TOOL_USE);
    assert_int_equal (kiwi_model_message_n_tool_calls (&r.message), 2);
    const kiwi_model_block *b = kiwi_model_message_tool_call (&r.message, 1);
    assert_string_equal (b->id, "toolu_b");
    assert_string_equal (b->name, "run_tests");
    assert_true (json_is_object (b->arguments));
    assert_string_equal (json_string_value (json_object_get (kiwi_model_message_tool_call (&r.message, 0)->arguments,
                                                             "path")),
                         "x");
    kiwi_model_response_clear (&r);
    /* max_tokens and other stops */
    assert_int_equal (decode (&kiwi__model_anthropic,
                              "{\"type\":\"message\",\"content\":[],\"stop_reason\":\"max_tokens\","
                              "\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}",
                              &r, &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_MAX_TOKENS);
    kiwi_model_response_clear (&r);
    assert_int_equal (decode (&kiwi__model_anthropic,
                              "{\"type\":\"message\",\"content\":[],\"stop_reason\":\"refusal\","
                              "\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}",
                              &r, &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_OTHER);
    assert_string_equal (r.stop_raw, "refusal");
    kiwi_model_response_clear (&r);
}

static void
test_openai_responses (void **state)
{
    kiwi_model_response r;
    kiwi_error_t err = NULL;
    assert_int_equal (decode (&kiwi__model_openai,
                              "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"g\","
                              "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hi.\","
                              "\"refusal\":null},\"finish_reason\":\"stop\"}],"
                              "\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11,"
                              "\"prompt_tokens_details\":{\"cached_tokens\":4}}}",
                              &r, &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_END_TURN);
    assert_string_equal (r.message.blocks[0].text, "Hi.");
    assert_int_equal (r.usage.input_tokens, 9);
    assert_int_equal (r.usage.cache_read_tokens, 4); /* of the 9 */
    assert_int_equal (r.usage.output_tokens, 2);
    assert_string_equal (r.request_id, "chatcmpl-1");
    kiwi_model_response_clear (&r);
    assert_int_equal (decode (&kiwi__model_openai,
                              "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,"
                              "\"tool_calls\":["
                              "{\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","
                              "\"arguments\":\"{\\\"path\\\":\\\"x\\\"}\"}},"
                              "{\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"run_tests\","
                              "\"arguments\":\"\"}}]},"
                              "\"finish_reason\":\"tool_calls\"}],"
                              "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}",
                              &r, &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_TOOL_USE);
    assert_int_equal (r.message.n_blocks, 2);
    assert_string_equal (kiwi_model_message_tool_call (&r.message, 0)->id, "call_a");
    assert_true (json_object_size (kiwi_model_message_tool_call (&r.message, 1)->arguments) == 0);
    kiwi_model_response_clear (&r);
    /* a compatible server: "stop" after tool calls, no usage */
    assert_int_equal (decode (&kiwi__model_openai,
                              "{\"choices\":[{\"message\":{\"content\":\"\",\"tool_calls\":[{\"id\":\"1\","
                              "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"stop\"}]}",
                              &r, &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_TOOL_USE);
    assert_int_equal (r.usage.input_tokens, 0);
    kiwi_model_response_clear (&r);
    assert_int_equal (decode (&kiwi__model_openai,
                              "{\"choices\":[{\"message\":{\"content\":\"cut\"},\"finish_reason\":\"length\"}]}", &r,
                              &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_MAX_TOKENS);
    kiwi_model_response_clear (&r);
}

static void
test_gemini_responses (void **state)
{
    kiwi_model_response r;
    kiwi_error_t err = NULL;
    assert_int_equal (decode (&kiwi__model_gemini,
                              "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi.\"}],\"role\":\"model\"},"
                              "\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":7,"
                              "\"candidatesTokenCount\":2,\"thoughtsTokenCount\":10,\"totalTokenCount\":19,"
                              "\"cachedContentTokenCount\":3},"
                              "\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"resp-1\"}",
                              &r, &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_END_TURN);
    assert_string_equal (r.message.blocks[0].text, "Hi.");
    assert_int_equal (r.usage.input_tokens, 7);
    assert_int_equal (r.usage.cache_read_tokens, 3); /* of the 7 */
    assert_int_equal (r.usage.output_tokens, 12); /* thoughts are billed as output */
    assert_string_equal (r.request_id, "resp-1");
    kiwi_model_response_clear (&r);
    /* two function calls, STOP; one with an id, one without; a thought summary skipped */
    assert_int_equal (decode (&kiwi__model_gemini,
                              "{\"candidates\":[{\"content\":{\"parts\":["
                              "{\"text\":\"thinking...\",\"thought\":true},"
                              "{\"functionCall\":{\"name\":\"read_file\",\"args\":{\"path\":\"x\"},\"id\":\"fc-1\"},"
                              "\"thoughtSignature\":\"c2ln\"},"
                              "{\"functionCall\":{\"name\":\"run_tests\"}}],\"role\":\"model\"},"
                              "\"finishReason\":\"STOP\"}]}",
                              &r, &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_TOOL_USE);
    assert_int_equal (r.message.n_blocks, 2);
    const kiwi_model_block *a = kiwi_model_message_tool_call (&r.message, 0);
    const kiwi_model_block *b = kiwi_model_message_tool_call (&r.message, 1);
    assert_string_equal (a->id, "fc-1");
    assert_string_equal (a->signature, "c2ln");
    assert_true (strncmp (b->id, "kiwi-call-", 10) == 0);
    assert_true (json_is_object (b->arguments));
    kiwi_model_response_clear (&r);
    /* blocked prompt: no candidates, a reason */
    assert_int_equal (decode (&kiwi__model_gemini, "{\"promptFeedback\":{\"blockReason\":\"SAFETY\"}}", &r, &err), 0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_OTHER);
    assert_string_equal (r.stop_raw, "prompt blocked: SAFETY");
    kiwi_model_response_clear (&r);
    assert_int_equal (decode (&kiwi__model_gemini,
                              "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"cut\"}]},"
                              "\"finishReason\":\"MAX_TOKENS\"}]}",
                              &r, &err),
                      0);
    assert_int_equal (r.stop, KIWI_MODEL_STOP_MAX_TOKENS);
    kiwi_model_response_clear (&r);
}

/* Bodies of the wrong shape: each is malformed_response. */
static const struct {
    const kiwi_model_provider *p;
    const char *body;
} MALFORMED[] = {
    { &kiwi__model_anthropic, "[]" },
    { &kiwi__model_anthropic, "{\"type\":\"error\"}" },
    { &kiwi__model_anthropic, "{\"type\":\"message\",\"content\":{},\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}" },
    { &kiwi__model_anthropic, "{\"type\":\"message\",\"content\":[]}" },
    { &kiwi__model_anthropic, "{\"type\":\"message\",\"content\":[],\"usage\":{\"input_tokens\":\"1\",\"output_tokens\":1}}" },
    { &kiwi__model_anthropic, "{\"type\":\"message\",\"content\":[{\"type\":\"tool_use\",\"name\":\"x\",\"input\":{}}],"
                              "\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}" },
    { &kiwi__model_anthropic, "{\"type\":\"message\",\"content\":[{\"type\":\"tool_use\",\"id\":\"i\",\"name\":\"x\","
                              "\"input\":[]}],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}" },
    { &kiwi__model_anthropic, "{\"type\":\"message\",\"content\":[{\"type\":\"text\"}],"
                              "\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}" },
    { &kiwi__model_anthropic, "{\"type\":\"message\",\"content\":[{}],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}" },
    { &kiwi__model_anthropic, "{\"type\":\"message\",\"content\":[],\"stop_reason\":\"tool_use\","
                              "\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}" },
    { &kiwi__model_anthropic, "{\"type\":\"message\",\"content\":[],\"stop_reason\":7,"
                              "\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}" },
    { &kiwi__model_openai, "{}" },
    { &kiwi__model_openai, "{\"choices\":[]}" },
    { &kiwi__model_openai, "{\"choices\":[1]}" },
    { &kiwi__model_openai, "{\"choices\":[{\"message\":{\"content\":5}}]}" },
    { &kiwi__model_openai, "{\"choices\":[{\"message\":{\"tool_calls\":{}}}]}" },
    { &kiwi__model_openai, "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\","
                           "\"arguments\":\"{not json\"}}]}}]}" },
    { &kiwi__model_openai, "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\","
                           "\"arguments\":\"[1,2]\"}}]}}]}" },
    { &kiwi__model_openai, "{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"f\","
                           "\"arguments\":\"{}\"}}]}}]}" },
    { &kiwi__model_openai, "{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":\"tool_calls\"}]}" },
    { &kiwi__model_openai, "{\"choices\":[{\"message\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":-1}}" },
    { &kiwi__model_openai, "{\"choices\":[{\"message\":{\"content\":\"x\"}}],\"usage\":3}" },
    { &kiwi__model_gemini, "\"x\"" },
    { &kiwi__model_gemini, "{}" },
    { &kiwi__model_gemini, "{\"candidates\":{}}" },
    { &kiwi__model_gemini, "{\"candidates\":[7]}" },
    { &kiwi__model_gemini, "{\"candidates\":[{\"content\":[]}]}" },
    { &kiwi__model_gemini, "{\"candidates\":[{\"content\":{\"parts\":{}}}]}" },
    { &kiwi__model_gemini, "{\"candidates\":[{\"content\":{\"parts\":[1]}}]}" },
    { &kiwi__model_gemini, "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"args\":{}}}]}}]}" },
    { &kiwi__model_gemini, "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":3}}]}}]}" },
    { &kiwi__model_gemini, "{\"candidates\":[{\"content\":{\"parts\":[]},\"finishReason\":\"STOP\"}]}" },
    { &kiwi__model_gemini, "{\"candidates\":[],\"usageMetadata\":[]}" },
};

static void
test_malformed_bodies (void **state)
{
    for (size_t i = 0; i < sizeof MALFORMED / sizeof MALFORMED[0]; i++) {
        kiwi_model_response r;
        kiwi_error_t err = NULL;
        int rc = decode (MALFORMED[i].p, MALFORMED[i].body, &r, &err);
        if (rc != -1 || kiwi_error_code (err) != KIWI_MODEL_E_MALFORMED_RESPONSE)
            fail_msg ("%s accepted %s (rc %d, %s)", MALFORMED[i].p->name, MALFORMED[i].body, rc, kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi_model_response_clear (&r);
    }
}

/* A seeded loop: valid bodies with random nodes replaced by values of other
 * types. Decoding must succeed or fail with malformed_response, never crash
 * or leak (ASan). */
static uint64_t rng = 0x5eed1234abcdULL;

static uint64_t
next (void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static json_t *
random_value (void)
{
    switch (next () % 7) {
    case 0: return json_null ();
    case 1: return json_integer ((json_int_t) (next () % 5) - 2);
    case 2: return json_string ("x");
    case 3: return json_array ();
    case 4: return json_object ();
    case 5: return json_true ();
    default: return json_real (1.5);
    }
}

static void
mutate (json_t *j, int depth)
{
    if (json_is_object (j)) {
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe (j, tmp, k, v)
        {
            uint64_t r = next () % 10;
            if (r == 0)
                json_object_set_new (j, k, random_value ());
            else if (r == 1)
                json_object_del (j, k);
            else if (depth < 12)
                mutate (v, depth + 1);
        }
    } else if (json_is_array (j)) {
        for (size_t i = 0; i < json_array_size (j); i++) {
            uint64_t r = next () % 10;
            if (r == 0)
                json_array_set_new (j, i, random_value ());
            else if (depth < 12)
                mutate (json_array_get (j, i), depth + 1);
        }
    }
}

static const struct {
    const kiwi_model_provider *p;
    const char *body;
} SEEDS[] = {
    { &kiwi__model_anthropic,
      "{\"id\":\"m\",\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"tool_use\","
      "\"id\":\"t\",\"name\":\"n\",\"input\":{\"a\":[1,{\"b\":2}]}}],\"stop_reason\":\"tool_use\","
      "\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}" },
    { &kiwi__model_openai,
      "{\"id\":\"c\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"a\",\"tool_calls\":"
      "[{\"id\":\"x\",\"type\":\"function\",\"function\":{\"name\":\"n\",\"arguments\":\"{\\\"a\\\":1}\"}}]},"
      "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}" },
    { &kiwi__model_gemini,
      "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\",\"thoughtSignature\":\"s\"},{\"functionCall\":"
      "{\"name\":\"n\",\"args\":{\"a\":1}}}],\"role\":\"model\"},\"finishReason\":\"STOP\"}],"
      "\"usageMetadata\":{\"promptTokenCount\":1,\"candidatesTokenCount\":2},\"responseId\":\"r\"}" },
};

static void
test_mutated_bodies (void **state)
{
    int ok = 0, bad = 0;
    for (int round = 0; round < 3000; round++) {
        size_t s = (size_t) round % 3;
        json_t *j = parse (SEEDS[s].body);
        mutate (j, 0);
        kiwi_model_response r = { 0 };
        kiwi_error_t err = NULL;
        int rc = SEEDS[s].p->decode (j, &r, &err);
        if (rc == 0) {
            ok++;
            for (size_t i = 0; i < r.message.n_blocks; i++)
                if (r.message.blocks[i].kind == KIWI_MODEL_BLOCK_TOOL_CALL)
                    assert_true (json_is_object (r.message.blocks[i].arguments) && r.message.blocks[i].id != NULL
                                 && r.message.blocks[i].name != NULL);
        } else {
            bad++;
            assert_int_equal (kiwi_error_code (err), KIWI_MODEL_E_MALFORMED_RESPONSE);
        }
        kiwi_error_free (&err);
        kiwi_model_response_clear (&r);
        json_decref (j);
    }
    assert_true (ok > 100 && bad > 100);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_anthropic_request),
        cmocka_unit_test (test_anthropic_request_edges),
        cmocka_unit_test (test_openai_request),
        cmocka_unit_test (test_openai_request_tool_calls_only),
        cmocka_unit_test (test_gemini_request),
        cmocka_unit_test (test_gemini_schema_and_signatures),
        cmocka_unit_test (test_request_check),
        cmocka_unit_test (test_anthropic_responses),
        cmocka_unit_test (test_openai_responses),
        cmocka_unit_test (test_gemini_responses),
        cmocka_unit_test (test_malformed_bodies),
        cmocka_unit_test (test_mutated_bodies),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
