/*
 * conversation.c: the provider-neutral conversation (messages of text, tool
 * calls and tool results) and the checks every provider needs of a request.
 */
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "models/models-internal.h"

static const char *const failure_names[] = {
    "ok",
#define KIWI__FAILURE_STR(name, str) str,
    KIWI_MODEL_FAILURE_MAP (KIWI__FAILURE_STR)
#undef KIWI__FAILURE_STR
};

const char *
kiwi_model_failure_name (int failure)
{
    if (failure < 0 || failure >= (int) (sizeof failure_names / sizeof failure_names[0]))
        return "unknown";
    return failure_names[failure];
}

static const char *const stop_names[] = {
#define KIWI__STOP_STR(name, str) str,
    KIWI_MODEL_STOP_MAP (KIWI__STOP_STR)
#undef KIWI__STOP_STR
};

const char *
kiwi_model_stop_name (kiwi_model_stop stop)
{
    if ((int) stop < 0 || (size_t) stop >= sizeof stop_names / sizeof stop_names[0])
        return "unknown";
    return stop_names[stop];
}

char *
kiwi__strdup0 (const char *s)
{
    return s != NULL ? strdup (s) : NULL;
}

static void
block_clear (kiwi_model_block *b)
{
    free (b->text);
    free (b->id);
    free (b->name);
    free (b->signature);
    if (b->arguments != NULL)
        json_decref (b->arguments);
    memset (b, 0, sizeof *b);
}

/* A new zeroed block at the end of msg, or NULL. */
static kiwi_model_block *
block_push (kiwi_model_message *msg, kiwi_error_t *err)
{
    if (msg->n_blocks == msg->cap_blocks) {
        size_t cap = msg->cap_blocks ? msg->cap_blocks * 2 : 4;
        kiwi_model_block *nb = realloc (msg->blocks, cap * sizeof *nb);
        if (nb == NULL) {
            kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "out of memory growing a message");
            return NULL;
        }
        msg->blocks = nb;
        msg->cap_blocks = cap;
    }
    kiwi_model_block *b = &msg->blocks[msg->n_blocks];
    memset (b, 0, sizeof *b);
    return b;
}

static int
oom (kiwi_error_t *err)
{
    return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "out of memory building a message");
}

int
kiwi_model_message_add_text (kiwi_model_message *msg, const char *text, kiwi_error_t *err)
{
    kiwi_model_block *b = block_push (msg, err);
    if (b == NULL)
        return -1;
    b->kind = KIWI_MODEL_BLOCK_TEXT;
    b->text = strdup (text != NULL ? text : "");
    if (b->text == NULL)
        return oom (err);
    msg->n_blocks++;
    return 0;
}

int
kiwi_model_message_add_tool_call (kiwi_model_message *msg, const char *id, const char *name, json_t *arguments,
                                  kiwi_error_t *err)
{
    if (arguments != NULL && !json_is_object (arguments))
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "tool call %s: arguments must be a JSON object",
                                     name != NULL ? name : "(unnamed)");
    kiwi_model_block *b = block_push (msg, err);
    if (b == NULL)
        return -1;
    b->kind = KIWI_MODEL_BLOCK_TOOL_CALL;
    b->id = kiwi__strdup0 (id);
    b->name = kiwi__strdup0 (name);
    b->arguments = arguments != NULL ? json_incref (arguments) : json_object ();
    if ((id != NULL && b->id == NULL) || (name != NULL && b->name == NULL) || b->arguments == NULL) {
        block_clear (b);
        return oom (err);
    }
    msg->n_blocks++;
    return 0;
}

int
kiwi_model_message_add_tool_result (kiwi_model_message *msg, const char *call_id, const char *name,
                                    const char *content, bool is_error, kiwi_error_t *err)
{
    kiwi_model_block *b = block_push (msg, err);
    if (b == NULL)
        return -1;
    b->kind = KIWI_MODEL_BLOCK_TOOL_RESULT;
    b->id = kiwi__strdup0 (call_id);
    b->name = kiwi__strdup0 (name);
    b->text = strdup (content != NULL ? content : "");
    b->is_error = is_error;
    if ((call_id != NULL && b->id == NULL) || (name != NULL && b->name == NULL) || b->text == NULL) {
        block_clear (b);
        return oom (err);
    }
    msg->n_blocks++;
    return 0;
}

char *
kiwi_model_message_text (const kiwi_model_message *msg)
{
    size_t len = 0, n = 0;
    for (size_t i = 0; i < msg->n_blocks; i++)
        if (msg->blocks[i].kind == KIWI_MODEL_BLOCK_TEXT && msg->blocks[i].text != NULL) {
            len += strlen (msg->blocks[i].text) + 1;
            n++;
        }
    if (n == 0)
        return NULL;
    char *out = malloc (len + 1);
    if (out == NULL)
        return NULL;
    char *p = out;
    for (size_t i = 0; i < msg->n_blocks; i++)
        if (msg->blocks[i].kind == KIWI_MODEL_BLOCK_TEXT && msg->blocks[i].text != NULL) {
            if (p != out)
                *p++ = '\n';
            size_t l = strlen (msg->blocks[i].text);
            memcpy (p, msg->blocks[i].text, l);
            p += l;
        }
    *p = '\0';
    return out;
}

size_t
kiwi_model_message_n_tool_calls (const kiwi_model_message *msg)
{
    size_t n = 0;
    for (size_t i = 0; i < msg->n_blocks; i++)
        n += msg->blocks[i].kind == KIWI_MODEL_BLOCK_TOOL_CALL;
    return n;
}

const kiwi_model_block *
kiwi_model_message_tool_call (const kiwi_model_message *msg, size_t i)
{
    for (size_t k = 0; k < msg->n_blocks; k++)
        if (msg->blocks[k].kind == KIWI_MODEL_BLOCK_TOOL_CALL && i-- == 0)
            return &msg->blocks[k];
    return NULL;
}

static void
kiwi_model_message_clear (kiwi_model_message *msg)
{
    for (size_t i = 0; i < msg->n_blocks; i++)
        block_clear (&msg->blocks[i]);
    free (msg->blocks);
    kiwi_model_role role = msg->role;
    memset (msg, 0, sizeof *msg);
    msg->role = role;
}

/* A new empty message of `role` at the end of conv, or NULL. */
static kiwi_model_message *
conv_push (kiwi_model_conversation *conv, kiwi_model_role role, kiwi_error_t *err)
{
    if (conv->n_messages == conv->cap_messages) {
        size_t cap = conv->cap_messages ? conv->cap_messages * 2 : 8;
        kiwi_model_message *nm = realloc (conv->messages, cap * sizeof *nm);
        if (nm == NULL) {
            kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "out of memory growing a conversation");
            return NULL;
        }
        conv->messages = nm;
        conv->cap_messages = cap;
    }
    kiwi_model_message *m = &conv->messages[conv->n_messages];
    memset (m, 0, sizeof *m);
    m->role = role;
    return m;
}

int
kiwi_model_conv_add_user_text (kiwi_model_conversation *conv, const char *text, kiwi_error_t *err)
{
    kiwi_model_message *m = conv_push (conv, KIWI_MODEL_ROLE_USER, err);
    if (m == NULL)
        return -1;
    if (kiwi_model_message_add_text (m, text, err) < 0) {
        kiwi_model_message_clear (m);
        return -1;
    }
    conv->n_messages++;
    return 0;
}

int
kiwi_model_conv_add_tool_result (kiwi_model_conversation *conv, const char *call_id, const char *name,
                                 const char *content, bool is_error, kiwi_error_t *err)
{
    kiwi_model_message *last = kiwi_model_conv_last (conv);
    if (last != NULL && last->role == KIWI_MODEL_ROLE_USER && last->n_blocks > 0
        && last->blocks[0].kind == KIWI_MODEL_BLOCK_TOOL_RESULT)
        return kiwi_model_message_add_tool_result (last, call_id, name, content, is_error, err);
    kiwi_model_message *m = conv_push (conv, KIWI_MODEL_ROLE_USER, err);
    if (m == NULL)
        return -1;
    if (kiwi_model_message_add_tool_result (m, call_id, name, content, is_error, err) < 0) {
        kiwi_model_message_clear (m);
        return -1;
    }
    conv->n_messages++;
    return 0;
}

int
kiwi_model_conv_take_message (kiwi_model_conversation *conv, kiwi_model_message *msg, kiwi_error_t *err)
{
    kiwi_model_message *m = conv_push (conv, msg->role, err);
    if (m == NULL)
        return -1;
    *m = *msg; /* the blocks now belong to the conversation */
    conv->n_messages++;
    kiwi_model_role role = msg->role;
    memset (msg, 0, sizeof *msg);
    msg->role = role;
    return 0;
}

kiwi_model_message *
kiwi_model_conv_last (kiwi_model_conversation *conv)
{
    return conv->n_messages > 0 ? &conv->messages[conv->n_messages - 1] : NULL;
}

void
kiwi_model_conv_clear (kiwi_model_conversation *conv)
{
    for (size_t i = 0; i < conv->n_messages; i++)
        kiwi_model_message_clear (&conv->messages[i]);
    free (conv->messages);
    memset (conv, 0, sizeof *conv);
}

void
kiwi_model_response_clear (kiwi_model_response *resp)
{
    kiwi_model_message_clear (&resp->message);
    free (resp->stop_raw);
    free (resp->request_id);
    memset (resp, 0, sizeof *resp);
    resp->message.role = KIWI_MODEL_ROLE_ASSISTANT;
}

bool
kiwi__model_tool_name_ok (const char *name)
{
    if (name == NULL)
        return false;
    size_t n = 0;
    for (const char *p = name; *p; p++, n++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return n >= 1 && n <= 64;
}

int
kiwi__model_request_check (const kiwi_model_request *req, kiwi_error_t *err)
{
    if (req == NULL)
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "no request");
    if (req->model == NULL || req->model[0] == '\0')
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "the request names no model");
    if (req->max_tokens <= 0)
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "max_tokens must be > 0 (got %d)", req->max_tokens);
    if (req->has_temperature && !(req->temperature >= 0.0 && req->temperature <= 2.0))
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "temperature must be within 0..2");
    const kiwi_model_conversation *conv = req->conversation;
    if (conv == NULL || conv->n_messages == 0)
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "the conversation is empty");
    if (conv->messages[0].role != KIWI_MODEL_ROLE_USER)
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "the conversation must start with a user message");
    for (size_t i = 0; i < req->n_tools; i++) {
        const kiwi_model_tool *t = &req->tools[i];
        if (!kiwi__model_tool_name_ok (t->name))
            return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID,
                                         "tool %zu: name '%s' does not match ^[a-zA-Z0-9_-]{1,64}$", i,
                                         t->name != NULL ? t->name : "(null)");
        if (t->description == NULL)
            return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "tool %s: no description", t->name);
        if (!json_is_object (t->parameters))
            return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "tool %s: parameters must be a JSON schema object",
                                         t->name);
        for (size_t j = 0; j < i; j++)
            if (strcmp (req->tools[j].name, t->name) == 0)
                return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "tool %s: defined twice", t->name);
    }
    for (size_t i = 0; i < conv->n_messages; i++) {
        const kiwi_model_message *m = &conv->messages[i];
        if (m->n_blocks == 0)
            return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "message %zu has no content", i);
        for (size_t j = 0; j < m->n_blocks; j++) {
            const kiwi_model_block *b = &m->blocks[j];
            switch (b->kind) {
            case KIWI_MODEL_BLOCK_TEXT:
                if (b->text == NULL)
                    return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "message %zu block %zu: text block without text",
                                                 i, j);
                break;
            case KIWI_MODEL_BLOCK_TOOL_CALL:
                if (m->role != KIWI_MODEL_ROLE_ASSISTANT)
                    return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID,
                                                 "message %zu block %zu: a tool call in a user message", i, j);
                if (b->id == NULL || b->id[0] == '\0' || b->name == NULL || !json_is_object (b->arguments))
                    return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID,
                                                 "message %zu block %zu: a tool call needs an id, a name and "
                                                 "object arguments",
                                                 i, j);
                break;
            case KIWI_MODEL_BLOCK_TOOL_RESULT:
                if (m->role != KIWI_MODEL_ROLE_USER)
                    return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID,
                                                 "message %zu block %zu: a tool result in an assistant message", i, j);
                if (b->id == NULL || b->id[0] == '\0' || b->name == NULL || b->text == NULL)
                    return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID,
                                                 "message %zu block %zu: a tool result needs the call id and the "
                                                 "tool name",
                                                 i, j);
                break;
            default:
                return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "message %zu block %zu: unknown kind %d", i,
                                             j, (int) b->kind);
            }
        }
    }
    return 0;
}

const char *
kiwi__model_json_str (json_t *obj, const char *key)
{
    json_t *v = json_is_object (obj) ? json_object_get (obj, key) : NULL;
    return json_is_string (v) ? json_string_value (v) : NULL;
}

bool
kiwi__json_uint (json_t *obj, const char *key, uint64_t *out)
{
    json_t *v = json_is_object (obj) ? json_object_get (obj, key) : NULL;
    if (!json_is_integer (v) || json_integer_value (v) < 0)
        return false;
    *out = (uint64_t) json_integer_value (v);
    return true;
}
