/*
 * gemini.c: Gemini generateContent with function calling
 * (POST {base}/models/{model}:generateContent).
 *
 * Request: contents of {role user|model, parts}, a part being text,
 * functionCall {name, args, id?} or functionResponse {name, response, id?}
 * (with thoughtSignature sent back as received); systemInstruction; tools
 * [{functionDeclarations:[{name, description, parameters}]}] where
 * parameters is the OpenAPI subset Gemini accepts (other JSON-schema
 * keywords are dropped); generationConfig {maxOutputTokens, temperature}.
 * The key travels in the x-goog-api-key header, never in the URL. Response:
 * candidates[0].content.parts and finishReason, usageMetadata
 * promptTokenCount/candidatesTokenCount(/thoughtsTokenCount), responseId.
 * Errors: {"error":{"code","message","status","details"}}; a rejected key is
 * a 400 with reason API_KEY_INVALID, a retry delay a RetryInfo detail.
 *
 * Gemini may leave function calls without ids: the client names them
 * "kiwi-call-N" and sends no id back for those.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "models/models-internal.h"

#define SYNTHETIC_ID_PREFIX "kiwi-call-"

static char *
gemini_url (const char *base, const kiwi_model_request *req, kiwi_error_t *err)
{
    const char *model = req->model;
    if (strncmp (model, "models/", 7) == 0)
        model += 7;
    if (model[0] == '\0' || model[strspn (model, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")] != '\0') {
        kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "model name '%s' has characters a Gemini model id never has",
                              req->model);
        return NULL;
    }
    return kiwi__model_url (base, "/models/", model, ":generateContent", err);
}

static int
gemini_headers (struct curl_slist **list, const char *key, kiwi_error_t *err)
{
    return key != NULL ? kiwi__model_key_header (list, "x-goog-api-key: ", key, err) : 0;
}

/* Keywords of Gemini's Schema (an OpenAPI 3.0 subset). */
static const char *const schema_keys[] = {
    "type",      "format",    "title",     "description", "nullable",      "enum",          "maxItems",
    "minItems",  "properties", "required", "minProperties", "maxProperties", "minLength",   "maxLength",
    "pattern",   "example",   "anyOf",     "propertyOrdering", "default",   "items",         "minimum",
    "maximum",
};

static bool
schema_key_ok (const char *k)
{
    for (size_t i = 0; i < sizeof schema_keys / sizeof schema_keys[0]; i++)
        if (strcmp (schema_keys[i], k) == 0)
            return true;
    return false;
}

/* A copy of a JSON schema with only what Gemini's Schema accepts; a type
 * list ["string","null"] becomes type "string" with nullable. */
static json_t *
gemini_schema (json_t *s, int depth)
{
    if (!json_is_object (s) || depth > 32)
        return json_object ();
    json_t *out = json_object ();
    if (out == NULL)
        return NULL;
    const char *k;
    json_t *v;
    json_object_foreach (s, k, v)
    {
        if (!schema_key_ok (k))
            continue;
        json_t *nv = NULL;
        if (strcmp (k, "properties") == 0 && json_is_object (v)) {
            nv = json_object ();
            const char *pk;
            json_t *pv;
            json_object_foreach (v, pk, pv) json_object_set_new (nv, pk, gemini_schema (pv, depth + 1));
        } else if (strcmp (k, "items") == 0) {
            nv = gemini_schema (v, depth + 1);
        } else if (strcmp (k, "anyOf") == 0 && json_is_array (v)) {
            nv = json_array ();
            size_t i;
            json_t *iv;
            json_array_foreach (v, i, iv) json_array_append_new (nv, gemini_schema (iv, depth + 1));
        } else if (strcmp (k, "type") == 0 && json_is_array (v)) {
            size_t i;
            json_t *iv;
            json_array_foreach (v, i, iv)
            {
                if (!json_is_string (iv))
                    continue;
                if (strcmp (json_string_value (iv), "null") == 0)
                    json_object_set_new (out, "nullable", json_true ());
                else if (nv == NULL)
                    nv = json_incref (iv);
            }
            if (nv == NULL)
                continue;
        } else {
            nv = json_incref (v);
        }
        if (nv == NULL || json_object_set_new (out, k, nv) < 0) {
            json_decref (out);
            return NULL;
        }
    }
    return out;
}

static json_t *
encode_part (const kiwi_model_block *b)
{
    json_t *part = NULL;
    switch (b->kind) {
    case KIWI_MODEL_BLOCK_TEXT:
        part = json_pack ("{s:s}", "text", b->text);
        break;
    case KIWI_MODEL_BLOCK_TOOL_CALL:
        part = json_pack ("{s:{s:s, s:O}}", "functionCall", "name", b->name, "args", b->arguments);
        if (part != NULL && strncmp (b->id, SYNTHETIC_ID_PREFIX, strlen (SYNTHETIC_ID_PREFIX)) != 0)
            json_object_set_new (json_object_get (part, "functionCall"), "id", json_string (b->id));
        break;
    case KIWI_MODEL_BLOCK_TOOL_RESULT:
        part = json_pack ("{s:{s:s, s:{s:s}}}", "functionResponse", "name", b->name, "response",
                          b->is_error ? "error" : "output", b->text);
        if (part != NULL && strncmp (b->id, SYNTHETIC_ID_PREFIX, strlen (SYNTHETIC_ID_PREFIX)) != 0)
            json_object_set_new (json_object_get (part, "functionResponse"), "id", json_string (b->id));
        break;
    }
    if (part != NULL && b->signature != NULL)
        json_object_set_new (part, "thoughtSignature", json_string (b->signature));
    return part;
}

/* An empty text part is left out unless it carries a thoughtSignature. */
static bool
keep_part (const kiwi_model_block *b)
{
    return b->kind != KIWI_MODEL_BLOCK_TEXT || b->text[0] != '\0' || b->signature != NULL;
}

/* A functionDeclaration for one tool, its schema in Gemini's subset. */
static json_t *
encode_decl (const kiwi_model_tool *t)
{
    json_t *params = gemini_schema (t->parameters, 0);
    return params != NULL ? json_pack ("{s:s, s:s, s:o}", "name", t->name, "description", t->description,
                                       "parameters", params)
                          : NULL;
}

static json_t *
gemini_encode (const kiwi_model_request *req, const kiwi__model_encode_opts *opts, kiwi_error_t *err)
{
    json_t *root = json_object ();
    json_t *contents = json_array ();
    if (root == NULL || contents == NULL || json_object_set_new (root, "contents", contents) < 0)
        goto oom;
    if (req->system != NULL && req->system[0] != '\0') {
        json_t *si = json_pack ("{s:[{s:s}]}", "parts", "text", req->system);
        if (si == NULL || json_object_set_new (root, "systemInstruction", si) < 0)
            goto oom;
    }
    const kiwi_model_conversation *conv = req->conversation;
    for (size_t i = 0; i < conv->n_messages; i++) {
        const kiwi_model_message *m = &conv->messages[i];
        json_t *parts = json_array ();
        json_t *c = json_pack ("{s:s, s:o}", "role", m->role == KIWI_MODEL_ROLE_USER ? "user" : "model", "parts",
                               parts);
        if (c == NULL || json_array_append_new (contents, c) < 0)
            goto oom;
        if (kiwi__model_encode_blocks (parts, m, keep_part, encode_part) < 0)
            goto oom;
        if (json_array_size (parts) == 0)
            return kiwi__model_empty_message (root, i, err);
    }
    if (req->n_tools > 0) {
        json_t *decls = json_array ();
        json_t *tools = json_pack ("[{s:o}]", "functionDeclarations", decls);
        if (tools == NULL || json_object_set_new (root, "tools", tools) < 0
            || kiwi__model_encode_tools (decls, req, encode_decl) < 0)
            goto oom;
    }
    json_t *gc = json_pack ("{s:i}", "maxOutputTokens", req->max_tokens);
    if (gc == NULL || json_object_set_new (root, "generationConfig", gc) < 0)
        goto oom;
    if (req->has_temperature && json_object_set_new (gc, "temperature", json_real (req->temperature)) < 0)
        goto oom;
    return root;
oom:
    return kiwi__model_encode_oom (root, err);
}

static char *
synthetic_id (void)
{
    static unsigned long counter;
    unsigned long n = __atomic_add_fetch (&counter, 1, __ATOMIC_RELAXED);
    char *id = NULL;
    if (asprintf (&id, SYNTHETIC_ID_PREFIX "%lu", n) < 0)
        return NULL;
    return id;
}

static int
gemini_decode (json_t *body, kiwi_model_response *resp, kiwi_error_t *err)
{
    if (!json_is_object (body))
        return kiwi__model_malformed (err, "response is not a JSON object");
    resp->message.role = KIWI_MODEL_ROLE_ASSISTANT;
    json_t *usage = json_object_get (body, "usageMetadata");
    if (usage != NULL && !json_is_object (usage))
        return kiwi__model_malformed (err, "usageMetadata is not an object");
    uint64_t v = 0;
    if (kiwi__json_uint (usage, "promptTokenCount", &v))
        resp->usage.input_tokens = v;
    if (kiwi__json_uint (usage, "candidatesTokenCount", &v))
        resp->usage.output_tokens = v;
    if (kiwi__json_uint (usage, "thoughtsTokenCount", &v))
        resp->usage.output_tokens += v; /* billed as output */
    /* the prompt tokens served from a cache (of promptTokenCount) */
    if (kiwi__json_uint (usage, "cachedContentTokenCount", &v))
        resp->usage.cache_read_tokens = v < resp->usage.input_tokens ? v : resp->usage.input_tokens;
    resp->request_id = kiwi__strdup0 (kiwi__model_json_str (body, "responseId"));

    json_t *cands = json_object_get (body, "candidates");
    if (cands != NULL && !json_is_array (cands))
        return kiwi__model_malformed (err, "candidates is not an array");
    if (json_array_size (cands) == 0) {
        const char *block = kiwi__model_json_str (json_object_get (body, "promptFeedback"), "blockReason");
        if (block == NULL)
            return kiwi__model_malformed (err, "response has no candidates");
        resp->stop = KIWI_MODEL_STOP_OTHER;
        if (asprintf (&resp->stop_raw, "prompt blocked: %s", block) < 0)
            resp->stop_raw = NULL;
        return 0;
    }
    json_t *cand = json_array_get (cands, 0);
    if (!json_is_object (cand))
        return kiwi__model_malformed (err, "candidates[0] is not an object");
    json_t *content = json_object_get (cand, "content");
    json_t *parts = json_object_get (content, "parts");
    if (content != NULL && !json_is_object (content))
        return kiwi__model_malformed (err, "candidates[0].content is not an object");
    if (parts != NULL && !json_is_array (parts))
        return kiwi__model_malformed (err, "candidates[0].content.parts is not an array");
    size_t i;
    json_t *part;
    json_array_foreach (parts, i, part)
    {
        if (!json_is_object (part))
            return kiwi__model_malformed (err, "a part is not an object");
        const char *sig = kiwi__model_json_str (part, "thoughtSignature");
        json_t *fc = json_object_get (part, "functionCall");
        const char *text = kiwi__model_json_str (part, "text");
        if (json_is_true (json_object_get (part, "thought")))
            continue; /* a thought summary, not the answer */
        if (fc != NULL) {
            const char *name = kiwi__model_json_str (fc, "name");
            json_t *args = json_object_get (fc, "args");
            if (name == NULL || (args != NULL && !json_is_object (args)))
                return kiwi__model_malformed (err, "a functionCall lacks a name or has non-object args");
            const char *id = kiwi__model_json_str (fc, "id");
            cleanup_free char *made = NULL;
            if (id == NULL || id[0] == '\0')
                id = made = synthetic_id ();
            if (id == NULL || kiwi_model_message_add_tool_call (&resp->message, id, name, args, err) < 0)
                return kiwi_error_make_code (err, KIWI_MODEL_E_MALFORMED_RESPONSE, "out of memory decoding");
        } else if (text != NULL || sig != NULL) {
            if (kiwi_model_message_add_text (&resp->message, text != NULL ? text : "", err) < 0)
                return -1;
        } else {
            continue; /* inline data, executable code...: not for the session */
        }
        if (sig != NULL) {
            kiwi_model_block *b = &resp->message.blocks[resp->message.n_blocks - 1];
            b->signature = strdup (sig);
            if (b->signature == NULL)
                return kiwi__model_malformed (err, "out of memory decoding");
        }
    }
    const char *finish = kiwi__model_json_str (cand, "finishReason");
    resp->stop_raw = kiwi__strdup0 (finish);
    size_t n_calls = kiwi_model_message_n_tool_calls (&resp->message);
    if (n_calls > 0 && (finish == NULL || strcmp (finish, "STOP") == 0))
        resp->stop = KIWI_MODEL_STOP_TOOL_USE; /* Gemini says STOP after function calls too */
    else if (finish != NULL && strcmp (finish, "STOP") == 0)
        resp->stop = KIWI_MODEL_STOP_END_TURN;
    else if (finish != NULL && strcmp (finish, "MAX_TOKENS") == 0)
        resp->stop = KIWI_MODEL_STOP_MAX_TOKENS;
    else
        resp->stop = KIWI_MODEL_STOP_OTHER;
    if (resp->message.n_blocks == 0 && resp->stop == KIWI_MODEL_STOP_END_TURN)
        return kiwi__model_malformed (err, "candidates[0] finished with STOP but has no parts");
    return 0;
}

static void
gemini_error_info (json_t *body, kiwi__model_error_info *info)
{
    if (json_is_array (body)) /* some front ends wrap the error in a list */
        body = json_array_get (body, 0);
    json_t *e = json_is_object (body) ? json_object_get (body, "error") : NULL;
    if (!json_is_object (e))
        return;
    info->message = kiwi__strdup0 (kiwi__model_json_str (e, "message"));
    info->type = kiwi__strdup0 (kiwi__model_json_str (e, "status"));
    size_t i;
    json_t *d;
    json_array_foreach (json_object_get (e, "details"), i, d)
    {
        const char *at = kiwi__model_json_str (d, "@type");
        if (at == NULL)
            continue;
        if (strstr (at, "google.rpc.ErrorInfo") != NULL) {
            const char *reason = kiwi__model_json_str (d, "reason");
            if (reason != NULL && info->code == NULL)
                info->code = strdup (reason);
            if (reason != NULL && (strcmp (reason, "API_KEY_INVALID") == 0 || strcmp (reason, "API_KEY_EXPIRED") == 0))
                info->auth = true;
        } else if (strstr (at, "google.rpc.RetryInfo") != NULL) {
            info->retry_after_ms = kiwi__model_duration_ms (kiwi__model_json_str (d, "retryDelay"));
        }
    }
}

const kiwi_model_provider kiwi__model_gemini = {
    .name = "gemini",
    .key_env = "GEMINI_API_KEY",
    .default_base_url = "https://generativelanguage.googleapis.com/v1beta",
    .request_id_header = NULL,
    .cache_write_factor = 1.0,
    .cache_read_factor = 0.25, /* Gemini 2.5's cached-token price */
    .url = gemini_url,
    .headers = gemini_headers,
    .encode = gemini_encode,
    .decode = gemini_decode,
    .error_info = gemini_error_info,
};
