/*
 * openai.c: OpenAI Chat Completions with function calling
 * (POST {base}/chat/completions), and so any OpenAI-compatible server.
 *
 * Request: model, messages (system first; assistant messages carry
 * tool_calls with JSON-string arguments; each tool result is a role "tool"
 * message with its tool_call_id), tools [{type:function, function:{name,
 * description, parameters}}], max_completion_tokens (max_tokens for a
 * compatible server, which knows that one better), temperature. Header
 * Authorization: Bearer. Response: choices[0].message, finish_reason,
 * usage.prompt_tokens/completion_tokens; the request id is the x-request-id
 * header. Errors: {"error":{"message","type","param","code"}}.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "models/models-internal.h"

static char *
openai_url (const char *base, const kiwi_model_request *req, kiwi_error_t *err)
{
    return kiwi__model_url (base, "/chat/completions", "", "", err);
}

static int
openai_headers (struct curl_slist **list, const char *key, kiwi_error_t *err)
{
    return key != NULL ? kiwi__model_key_header (list, "Authorization: Bearer ", key, err) : 0;
}

/* Appends the messages for one conversation message. */
static int
encode_message (json_t *messages, const kiwi_model_message *m)
{
    if (m->role == KIWI_MODEL_ROLE_USER) {
        /* tool results answer the assistant turn before: they come first */
        for (size_t j = 0; j < m->n_blocks; j++) {
            const kiwi_model_block *b = &m->blocks[j];
            if (b->kind != KIWI_MODEL_BLOCK_TOOL_RESULT)
                continue;
            cleanup_free char *content = NULL;
            if (b->is_error) {
                if (asprintf (&content, "error: %s", b->text) < 0)
                    return -1;
            }
            json_t *o = json_pack ("{s:s, s:s, s:s}", "role", "tool", "tool_call_id", b->id, "content",
                                   content != NULL ? content : b->text);
            if (o == NULL || json_array_append_new (messages, o) < 0)
                return -1;
        }
    }
    /* the text of the message, joined */
    size_t len = 0, n_text = 0;
    for (size_t j = 0; j < m->n_blocks; j++)
        if (m->blocks[j].kind == KIWI_MODEL_BLOCK_TEXT && m->blocks[j].text[0] != '\0') {
            len += strlen (m->blocks[j].text) + 1;
            n_text++;
        }
    cleanup_free char *text = NULL;
    if (n_text > 0) {
        text = malloc (len + 1);
        if (text == NULL)
            return -1;
        char *p = text;
        for (size_t j = 0; j < m->n_blocks; j++)
            if (m->blocks[j].kind == KIWI_MODEL_BLOCK_TEXT && m->blocks[j].text[0] != '\0') {
                if (p != text)
                    *p++ = '\n';
                size_t l = strlen (m->blocks[j].text);
                memcpy (p, m->blocks[j].text, l);
                p += l;
            }
        *p = '\0';
    }
    if (m->role == KIWI_MODEL_ROLE_USER) {
        if (text == NULL)
            return 0;
        json_t *o = json_pack ("{s:s, s:s}", "role", "user", "content", text);
        return o != NULL && json_array_append_new (messages, o) == 0 ? 0 : -1;
    }
    json_t *o = json_pack ("{s:s}", "role", "assistant");
    if (o == NULL || json_array_append_new (messages, o) < 0)
        return -1;
    json_t *calls = NULL;
    for (size_t j = 0; j < m->n_blocks; j++) {
        const kiwi_model_block *b = &m->blocks[j];
        if (b->kind != KIWI_MODEL_BLOCK_TOOL_CALL)
            continue;
        if (calls == NULL) {
            calls = json_array ();
            if (calls == NULL || json_object_set_new (o, "tool_calls", calls) < 0)
                return -1;
        }
        cleanup_free char *args = json_dumps (b->arguments, JSON_COMPACT);
        if (args == NULL)
            return -1;
        json_t *call = json_pack ("{s:s, s:s, s:{s:s, s:s}}", "id", b->id, "type", "function", "function", "name",
                                  b->name, "arguments", args);
        if (call == NULL || json_array_append_new (calls, call) < 0)
            return -1;
    }
    json_t *content = text != NULL ? json_string (text) : calls != NULL ? json_null () : json_string ("");
    return content != NULL && json_object_set_new (o, "content", content) == 0 ? 0 : -1;
}

static json_t *
encode_tool (const kiwi_model_tool *t)
{
    return json_pack ("{s:s, s:{s:s, s:s, s:O}}", "type", "function", "function", "name", t->name, "description",
                      t->description, "parameters", t->parameters);
}

static json_t *
openai_encode (const kiwi_model_request *req, const kiwi__model_encode_opts *opts, kiwi_error_t *err)
{
    json_t *root = json_pack ("{s:s}", "model", req->model);
    json_t *messages = json_array ();
    if (root == NULL || messages == NULL || json_object_set_new (root, "messages", messages) < 0)
        goto oom;
    if (json_object_set_new (root, opts != NULL && !opts->native ? "max_tokens" : "max_completion_tokens",
                             json_integer (req->max_tokens))
        < 0)
        goto oom;
    if (req->has_temperature && json_object_set_new (root, "temperature", json_real (req->temperature)) < 0)
        goto oom;
    if (req->system != NULL && req->system[0] != '\0') {
        json_t *o = json_pack ("{s:s, s:s}", "role", "system", "content", req->system);
        if (o == NULL || json_array_append_new (messages, o) < 0)
            goto oom;
    }
    for (size_t i = 0; i < req->conversation->n_messages; i++)
        if (encode_message (messages, &req->conversation->messages[i]) < 0)
            goto oom;
    if (kiwi__model_add_tools (root, req, encode_tool) < 0)
        goto oom;
    return root;
oom:
    return kiwi__model_encode_oom (root, err);
}

static int
openai_decode (json_t *body, kiwi_model_response *resp, kiwi_error_t *err)
{
    if (!json_is_object (body))
        return kiwi__model_malformed (err, "response is not a JSON object");
    json_t *choices = json_object_get (body, "choices");
    if (!json_is_array (choices) || json_array_size (choices) == 0)
        return kiwi__model_malformed (err, "response has no choices");
    json_t *choice = json_array_get (choices, 0);
    json_t *message = json_object_get (choice, "message");
    if (!json_is_object (message))
        return kiwi__model_malformed (err, "choices[0] has no message");
    resp->message.role = KIWI_MODEL_ROLE_ASSISTANT;

    json_t *content = json_object_get (message, "content");
    if (json_is_string (content)) {
        if (json_string_length (content) > 0
            && kiwi_model_message_add_text (&resp->message, json_string_value (content), err) < 0)
            return -1;
    } else if (content != NULL && !json_is_null (content)) {
        return kiwi__model_malformed (err, "message content is neither a string nor null");
    }
    json_t *calls = json_object_get (message, "tool_calls");
    if (calls != NULL && !json_is_null (calls) && !json_is_array (calls))
        return kiwi__model_malformed (err, "message tool_calls is not an array");
    size_t i;
    json_t *call;
    json_array_foreach (calls, i, call)
    {
        const char *id = kiwi__model_json_str (call, "id");
        json_t *fn = json_object_get (call, "function");
        const char *name = kiwi__model_json_str (fn, "name"), *args = kiwi__model_json_str (fn, "arguments");
        if (id == NULL || id[0] == '\0' || name == NULL || args == NULL)
            return kiwi__model_malformed (err, "a tool call lacks id, function.name or function.arguments");
        json_t *parsed = NULL;
        if (args[strspn (args, " \t\r\n")] == '\0') {
            parsed = json_object (); /* no arguments at all */
        } else {
            json_error_t jerr;
            parsed = json_loads (args, 0, &jerr);
        }
        if (!json_is_object (parsed)) {
            if (parsed != NULL)
                json_decref (parsed);
            return kiwi_error_make_code (err, KIWI_MODEL_E_MALFORMED_RESPONSE,
                                         "tool call %s (%s): arguments are not a JSON object", id, name);
        }
        int rc = kiwi_model_message_add_tool_call (&resp->message, id, name, parsed, err);
        json_decref (parsed);
        if (rc < 0)
            return -1;
    }

    const char *finish = kiwi__model_json_str (choice, "finish_reason");
    resp->stop_raw = kiwi__strdup0 (finish);
    size_t n_calls = kiwi_model_message_n_tool_calls (&resp->message);
    if (finish == NULL)
        resp->stop = n_calls > 0 ? KIWI_MODEL_STOP_TOOL_USE : KIWI_MODEL_STOP_OTHER;
    else if (strcmp (finish, "stop") == 0)
        /* some compatible servers say "stop" after tool calls */
        resp->stop = n_calls > 0 ? KIWI_MODEL_STOP_TOOL_USE : KIWI_MODEL_STOP_END_TURN;
    else if (strcmp (finish, "tool_calls") == 0 || strcmp (finish, "function_call") == 0)
        resp->stop = KIWI_MODEL_STOP_TOOL_USE;
    else if (strcmp (finish, "length") == 0)
        resp->stop = KIWI_MODEL_STOP_MAX_TOKENS;
    else
        resp->stop = KIWI_MODEL_STOP_OTHER;
    if (resp->stop == KIWI_MODEL_STOP_TOOL_USE && n_calls == 0)
        return kiwi__model_malformed (err, "finish_reason tool_calls without a tool call");

    json_t *usage = json_object_get (body, "usage");
    if (json_is_object (usage)) {
        if (!kiwi__json_uint (usage, "prompt_tokens", &resp->usage.input_tokens)
            || !kiwi__json_uint (usage, "completion_tokens", &resp->usage.output_tokens))
            return kiwi__model_malformed (err, "usage lacks prompt_tokens or completion_tokens");
        /* the prompt tokens OpenAI's automatic cache served (of prompt_tokens) */
        uint64_t cached = 0;
        if (kiwi__json_uint (json_object_get (usage, "prompt_tokens_details"), "cached_tokens", &cached))
            resp->usage.cache_read_tokens = cached < resp->usage.input_tokens ? cached : resp->usage.input_tokens;
    } else if (usage != NULL && !json_is_null (usage)) {
        return kiwi__model_malformed (err, "usage is not an object");
    }
    resp->request_id = kiwi__strdup0 (kiwi__model_json_str (body, "id"));
    return 0;
}

static void
openai_error_info (json_t *body, kiwi__model_error_info *info)
{
    if (!json_is_object (body))
        return;
    json_t *e = json_object_get (body, "error");
    if (json_is_object (e)) {
        info->message = kiwi__strdup0 (kiwi__model_json_str (e, "message"));
        info->type = kiwi__strdup0 (kiwi__model_json_str (e, "type"));
        json_t *code = json_object_get (e, "code");
        if (json_is_string (code))
            info->code = strdup (json_string_value (code));
        else if (json_is_integer (code) && asprintf (&info->code, "%lld", (long long) json_integer_value (code)) < 0)
            info->code = NULL;
        if (info->code != NULL && strcmp (info->code, "insufficient_quota") == 0)
            info->quota = true;
        if (info->code != NULL && strcmp (info->code, "invalid_api_key") == 0)
            info->auth = true;
    } else if (json_is_string (e)) {
        info->message = strdup (json_string_value (e)); /* some compatible servers */
    } else {
        const char *m = kiwi__model_json_str (body, "message");
        if (m == NULL)
            m = kiwi__model_json_str (body, "detail");
        info->message = kiwi__strdup0 (m);
    }
}

const kiwi_model_provider kiwi__model_openai = {
    .name = "openai",
    .key_env = "OPENAI_API_KEY",
    .default_base_url = "https://api.openai.com/v1",
    .request_id_header = "x-request-id",
    .cache_write_factor = 1.0, /* automatic caching: writes cost nothing more */
    .cache_read_factor = 0.5,  /* the smallest discount of its models: a budget is never overrun */
    .url = openai_url,
    .headers = openai_headers,
    .encode = openai_encode,
    .decode = openai_decode,
    .error_info = openai_error_info,
};
