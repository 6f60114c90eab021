/*
 * anthropic.c: the Anthropic Messages API (POST {base}/v1/messages).
 *
 * Request: model, max_tokens, system, messages of content blocks (text,
 * tool_use, tool_result), tools with input_schema, temperature. Headers
 * x-api-key and anthropic-version: 2023-06-01. Prompt caching:
 * cache_control {"type":"ephemeral"} on the last tool, the system prompt
 * and the conversation's last block. Response: content blocks, stop_reason,
 * usage.input_tokens/output_tokens and the cache's
 * cache_creation_input_tokens/cache_read_input_tokens; the request id is the
 * request-id header. Errors: {"type":"error","error":{"type","message"},
 * "request_id"}.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "models/models-internal.h"

static char *
anthropic_url (const char *base, const kiwi_model_request *req, kiwi_error_t *err)
{
    return kiwi__model_url (base, "/v1/messages", "", "", err);
}

static int
anthropic_headers (struct curl_slist **list, const char *key, kiwi_error_t *err)
{
    struct curl_slist *l = curl_slist_append (*list, "anthropic-version: 2023-06-01");
    if (l == NULL)
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "out of memory building headers");
    *list = l;
    return key != NULL ? kiwi__model_key_header (list, "x-api-key: ", key, err) : 0;
}

static json_t *
encode_block (const kiwi_model_block *b)
{
    switch (b->kind) {
    case KIWI_MODEL_BLOCK_TEXT:
        return json_pack ("{s:s, s:s}", "type", "text", "text", b->text);
    case KIWI_MODEL_BLOCK_TOOL_CALL:
        return json_pack ("{s:s, s:s, s:s, s:O}", "type", "tool_use", "id", b->id, "name", b->name, "input",
                          b->arguments);
    case KIWI_MODEL_BLOCK_TOOL_RESULT: {
        json_t *o = json_pack ("{s:s, s:s}", "type", "tool_result", "tool_use_id", b->id);
        if (o == NULL)
            return NULL;
        /* an empty content string is refused: leave content out instead */
        if (b->text[0] != '\0' && json_object_set_new (o, "content", json_string (b->text)) < 0) {
            json_decref (o);
            return NULL;
        }
        if (b->is_error && json_object_set_new (o, "is_error", json_true ()) < 0) {
            json_decref (o);
            return NULL;
        }
        return o;
    }
    }
    return NULL;
}

/* Empty text blocks are refused. */
static bool
keep_block (const kiwi_model_block *b)
{
    return b->kind != KIWI_MODEL_BLOCK_TEXT || b->text[0] != '\0';
}

static json_t *
encode_tool (const kiwi_model_tool *t)
{
    return json_pack ("{s:s, s:s, s:O}", "name", t->name, "description", t->description, "input_schema",
                      t->parameters);
}

/* A prompt-cache breakpoint's value. New reference. */
static json_t *
ephemeral (void)
{
    return json_pack ("{s:s}", "type", "ephemeral");
}

static json_t *
anthropic_encode (const kiwi_model_request *req, const kiwi__model_encode_opts *opts, kiwi_error_t *err)
{
    json_t *root = json_pack ("{s:s, s:i}", "model", req->model, "max_tokens", req->max_tokens);
    json_t *messages = json_array ();
    if (root == NULL || messages == NULL || json_object_set_new (root, "messages", messages) < 0)
        goto oom;
    /* the system prompt as a block: it carries a cache breakpoint */
    if (req->system != NULL && req->system[0] != '\0'
        && json_object_set_new (root, "system",
                                json_pack ("[{s:s, s:s, s:o}]", "type", "text", "text", req->system, "cache_control",
                                           ephemeral ()))
               < 0)
        goto oom;
    if (req->has_temperature && json_object_set_new (root, "temperature", json_real (req->temperature)) < 0)
        goto oom;
    const kiwi_model_conversation *conv = req->conversation;
    for (size_t i = 0; i < conv->n_messages; i++) {
        const kiwi_model_message *m = &conv->messages[i];
        json_t *content = json_array ();
        json_t *msg = json_pack ("{s:s, s:o}", "role", m->role == KIWI_MODEL_ROLE_USER ? "user" : "assistant",
                                 "content", content);
        if (msg == NULL || json_array_append_new (messages, msg) < 0)
            goto oom;
        /* tool results first (the API requires them before any text), then the rest in order */
        if (kiwi__model_encode_blocks (content, m, keep_block, encode_block) < 0)
            goto oom;
        if (json_array_size (content) == 0)
            return kiwi__model_empty_message (root, i, err);
    }
    if (kiwi__model_add_tools (root, req, encode_tool) < 0)
        goto oom;
    /* the breakpoints: the tools (their prefix), the system prompt (above:
     * tools and system), and the conversation's last block, so the next call
     * reads all of it from the cache; 3 of the 4 allowed */
    json_t *last = json_array_get (json_object_get (root, "tools"), json_array_size (json_object_get (root, "tools")) - 1);
    if (last != NULL && json_object_set_new (last, "cache_control", ephemeral ()) < 0)
        goto oom;
    json_t *lc = json_object_get (json_array_get (messages, json_array_size (messages) - 1), "content");
    last = json_array_get (lc, json_array_size (lc) - 1);
    if (last != NULL && json_object_set_new (last, "cache_control", ephemeral ()) < 0)
        goto oom;
    return root;
oom:
    return kiwi__model_encode_oom (root, err);
}

static int
anthropic_decode (json_t *body, kiwi_model_response *resp, kiwi_error_t *err)
{
    if (!json_is_object (body))
        return kiwi__model_malformed (err, "response is not a JSON object");
    const char *type = kiwi__model_json_str (body, "type");
    if (type == NULL || strcmp (type, "message") != 0)
        return kiwi__model_malformed (err, "response type is not \"message\"");
    json_t *content = json_object_get (body, "content");
    if (!json_is_array (content))
        return kiwi__model_malformed (err, "response has no content array");
    json_t *usage = json_object_get (body, "usage");
    uint64_t in = 0, out = 0;
    if (!json_is_object (usage) || !kiwi__json_uint (usage, "input_tokens", &in)
        || !kiwi__json_uint (usage, "output_tokens", &out))
        return kiwi__model_malformed (err, "response has no usage.input_tokens/output_tokens");
    uint64_t wrote = 0, read = 0;
    /* cached prompt tokens are input too (billed at their own rates) */
    if (!kiwi__json_uint (usage, "cache_creation_input_tokens", &wrote))
        wrote = 0;
    if (!kiwi__json_uint (usage, "cache_read_input_tokens", &read))
        read = 0;
    resp->usage.input_tokens = in + wrote + read;
    resp->usage.cache_write_tokens = wrote;
    resp->usage.cache_read_tokens = read;
    resp->usage.output_tokens = out;
    resp->message.role = KIWI_MODEL_ROLE_ASSISTANT;

    size_t i;
    json_t *b;
    json_array_foreach (content, i, b)
    {
        const char *bt = kiwi__model_json_str (b, "type");
        if (bt == NULL)
            return kiwi__model_malformed (err, "a content block has no type");
        if (strcmp (bt, "text") == 0) {
            const char *text = kiwi__model_json_str (b, "text");
            if (text == NULL)
                return kiwi__model_malformed (err, "a text block has no text");
            if (kiwi_model_message_add_text (&resp->message, text, err) < 0)
                return -1;
        } else if (strcmp (bt, "tool_use") == 0) {
            const char *id = kiwi__model_json_str (b, "id"), *name = kiwi__model_json_str (b, "name");
            json_t *input = json_object_get (b, "input");
            if (id == NULL || id[0] == '\0' || name == NULL || !json_is_object (input))
                return kiwi__model_malformed (err, "a tool_use block lacks id, name or an input object");
            if (kiwi_model_message_add_tool_call (&resp->message, id, name, input, err) < 0)
                return -1;
        }
        /* thinking and server-tool blocks carry nothing the session acts on */
    }

    json_t *sr = json_object_get (body, "stop_reason");
    const char *stop = json_is_string (sr) ? json_string_value (sr) : NULL;
    if (sr != NULL && !json_is_null (sr) && stop == NULL)
        return kiwi__model_malformed (err, "stop_reason is not a string");
    resp->stop_raw = kiwi__strdup0 (stop);
    if (stop == NULL)
        resp->stop = KIWI_MODEL_STOP_OTHER;
    else if (strcmp (stop, "end_turn") == 0)
        resp->stop = KIWI_MODEL_STOP_END_TURN;
    else if (strcmp (stop, "tool_use") == 0)
        resp->stop = KIWI_MODEL_STOP_TOOL_USE;
    else if (strcmp (stop, "max_tokens") == 0)
        resp->stop = KIWI_MODEL_STOP_MAX_TOKENS;
    else
        resp->stop = KIWI_MODEL_STOP_OTHER;
    if (resp->stop == KIWI_MODEL_STOP_TOOL_USE && kiwi_model_message_n_tool_calls (&resp->message) == 0)
        return kiwi__model_malformed (err, "stop_reason tool_use without a tool_use block");
    resp->request_id = kiwi__strdup0 (kiwi__model_json_str (body, "id"));
    return 0;
}

static void
anthropic_error_info (json_t *body, kiwi__model_error_info *info)
{
    json_t *e = json_is_object (body) ? json_object_get (body, "error") : NULL;
    if (json_is_object (e)) {
        info->type = kiwi__strdup0 (kiwi__model_json_str (e, "type"));
        info->message = kiwi__strdup0 (kiwi__model_json_str (e, "message"));
        json_t *details = json_object_get (e, "details");
        const char *code = kiwi__model_json_str (details, "error_code");
        if (code != NULL) {
            info->code = strdup (code);
            info->quota = strstr (code, "spend_limit") != NULL;
        }
    }
    info->request_id = kiwi__strdup0 (kiwi__model_json_str (body, "request_id"));
}

const kiwi_model_provider kiwi__model_anthropic = {
    .name = "anthropic",
    .key_env = "ANTHROPIC_API_KEY",
    .default_base_url = "https://api.anthropic.com",
    .request_id_header = "request-id",
    .cache_write_factor = 1.25,
    .cache_read_factor = 0.1,
    .url = anthropic_url,
    .headers = anthropic_headers,
    .encode = anthropic_encode,
    .decode = anthropic_decode,
    .error_info = anthropic_error_info,
};
