/*
 * provider-util.c: what the three providers' pure functions share (see
 * models-internal.h): the endpoint URL, the auth header that holds the key, the tools list
 * of a request body, and the errors an encoder or decoder ends with.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "models/models-internal.h"

char *
kiwi__model_url (const char *base, const char *path, const char *model, const char *suffix, kiwi_error_t *err)
{
    char *url = NULL;
    if (asprintf (&url, "%s%s%s%s", base, path, model, suffix) < 0) {
        kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "out of memory building the URL");
        return NULL;
    }
    return url;
}

int
kiwi__model_key_header (struct curl_slist **list, const char *prefix, const char *key, kiwi_error_t *err)
{
    cleanup_free char *h = NULL;
    struct curl_slist *l = NULL;
    if (asprintf (&h, "%s%s", prefix, key) < 0 || (l = curl_slist_append (*list, h)) == NULL) {
        if (h != NULL)
            explicit_bzero (h, strlen (h));
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "out of memory building headers");
    }
    explicit_bzero (h, strlen (h));
    *list = l;
    return 0;
}

int
kiwi__model_encode_tools (json_t *into, const kiwi_model_request *req,
                          json_t *(*encode_tool) (const kiwi_model_tool *t))
{
    for (size_t i = 0; i < req->n_tools; i++) {
        json_t *jt = encode_tool (&req->tools[i]);
        if (jt == NULL || json_array_append_new (into, jt) < 0)
            return -1;
    }
    return 0;
}

int
kiwi__model_add_tools (json_t *root, const kiwi_model_request *req, json_t *(*encode_tool) (const kiwi_model_tool *t))
{
    if (req->n_tools == 0)
        return 0;
    json_t *tools = json_array ();
    if (tools == NULL || json_object_set_new (root, "tools", tools) < 0)
        return -1;
    return kiwi__model_encode_tools (tools, req, encode_tool);
}

int
kiwi__model_encode_blocks (json_t *into, const kiwi_model_message *m, bool (*keep) (const kiwi_model_block *b),
                           json_t *(*encode) (const kiwi_model_block *b))
{
    for (int pass = 0; pass < 2; pass++)
        for (size_t j = 0; j < m->n_blocks; j++) {
            const kiwi_model_block *b = &m->blocks[j];
            if ((b->kind == KIWI_MODEL_BLOCK_TOOL_RESULT) != (pass == 0) || !keep (b))
                continue;
            json_t *jb = encode (b);
            if (jb == NULL || json_array_append_new (into, jb) < 0)
                return -1;
        }
    return 0;
}

json_t *
kiwi__model_empty_message (json_t *root, size_t i, kiwi_error_t *err)
{
    json_decref (root);
    kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "message %zu has only empty text", i);
    return NULL;
}

json_t *
kiwi__model_encode_oom (json_t *root, kiwi_error_t *err)
{
    if (root != NULL)
        json_decref (root);
    kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "out of memory encoding the request");
    return NULL;
}

int
kiwi__model_malformed (kiwi_error_t *err, const char *what)
{
    return kiwi_error_make_code (err, KIWI_MODEL_E_MALFORMED_RESPONSE, "%s", what);
}
