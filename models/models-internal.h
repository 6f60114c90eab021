/*
 * models-internal.h: what the providers implement and the client drives.
 *
 * A provider is a const vtable of pure functions: the URL and headers of a
 * call, the request body from a kiwi_model_request, the response from a body,
 * and what an error body says. None of them does I/O; client.c does the HTTP,
 * the retries and the naming of failures. The unit tests call these
 * directly (golden request bodies, response and error parsing).
 */
#ifndef KIWI_MODELS_INTERNAL_H
#define KIWI_MODELS_INTERNAL_H

#include <curl/curl.h>
#include <time.h>

#include "models/models.h"

/* What a provider's error body says. Strings owned (free with
 * kiwi__model_error_info_clear). */
typedef struct kiwi__model_error_info {
    char *type;          /* "rate_limit_error", "invalid_request_error", "RESOURCE_EXHAUSTED"... or NULL */
    char *code;          /* OpenAI's error.code, Gemini's ErrorInfo reason, or NULL */
    char *message;       /* the provider's own message, or NULL */
    char *request_id;    /* a request id found in the body, or NULL */
    long retry_after_ms; /* a retry delay found in the body (Gemini RetryInfo), or -1 */
    bool auth;           /* the body says the key is bad even though the status is not 401/403 */
    bool quota;          /* the body says money or quota ran out: retrying will not help */
} kiwi__model_error_info;

void kiwi__model_error_info_clear (kiwi__model_error_info *info);

/* How the request is encoded beyond the request itself. */
typedef struct kiwi__model_encode_opts {
    bool native; /* base URL is the provider's own (not a compatible server) */
} kiwi__model_encode_opts;

struct kiwi_model_provider {
    const char *name;
    const char *key_env;
    const char *default_base_url;
    const char *request_id_header; /* response header holding the request id, or NULL */
    double cache_write_factor;     /* a prompt-cache write's price, of the input price */
    double cache_read_factor;      /* a prompt-cache read's price, of the input price */

    /* The endpoint for `req` under `base` (no trailing slash). New string. */
    char *(*url) (const char *base, const kiwi_model_request *req, kiwi_error_t *err);

    /* Appends the auth and version headers. `key` may be NULL (no auth). */
    int (*headers) (struct curl_slist **list, const char *key, kiwi_error_t *err);

    /* The request body. New reference, or NULL with a KIWI_MODEL_E_INVALID error. */
    json_t *(*encode) (const kiwi_model_request *req, const kiwi__model_encode_opts *opts, kiwi_error_t *err);

    /* Fills resp (stop, message, usage, request id from the body) from a 2xx
     * body. < 0 with a KIWI_MODEL_E_MALFORMED_RESPONSE error on a body that
     * lacks what a response must have. */
    int (*decode) (json_t *body, kiwi_model_response *resp, kiwi_error_t *err);

    /* What an error body says (body may be NULL or any JSON). Never fails. */
    void (*error_info) (json_t *body, kiwi__model_error_info *info);
};

extern const kiwi_model_provider kiwi__model_anthropic;
extern const kiwi_model_provider kiwi__model_openai;
extern const kiwi_model_provider kiwi__model_gemini;

/* Checks what every provider needs of a request (model, a conversation
 * starting with a user turn, max_tokens, tool names and schemas, call ids).
 * < 0 with KIWI_MODEL_E_INVALID. */
int kiwi__model_request_check (const kiwi_model_request *req, kiwi_error_t *err);

/* True when `name` matches ^[a-zA-Z0-9_-]{1,64}$. */
bool kiwi__model_tool_name_ok (const char *name);

/* Milliseconds to wait from a retry-after-ms value ("1500", "1500.5") or,
 * failing that, a retry-after value (seconds "2", "1.5", or an HTTP date,
 * relative to `now`). Either may be NULL. -1 when neither says anything
 * usable. A date in the past is 0. */
long kiwi__model_retry_after_ms (const char *retry_after, const char *retry_after_ms, time_t now);

/* Gemini-style duration "37s", "1.5s" in ms, or -1. */
long kiwi__model_duration_ms (const char *s);

/* The backoff before retry number `retry` (1 = first retry): base * 2^(retry-1)
 * capped at max, then jittered uniformly into [d/2, d] with `rnd` (0..1). */
long kiwi__model_backoff_ms (long base_ms, long max_ms, int retry, double rnd);

/* The failure an HTTP status names, and whether it is worth retrying. */
kiwi_model_failure kiwi__model_classify_status (long status, const kiwi__model_error_info *info, bool *retryable);

/* Replaces every occurrence of `secret` (when at least 4 characters) in
 * *msg with "[redacted]". *msg may be reallocated. */
void kiwi__model_scrub (char **msg, const char *secret);

/* JSON helpers for the decoders: a string member or NULL; an integer member
 * (>= 0) into *out, false when absent or of another type. */
const char *kiwi__model_json_str (json_t *obj, const char *key);
bool kiwi__json_uint (json_t *obj, const char *key, uint64_t *out);

/* strdup that takes NULL. */
char *kiwi__strdup0 (const char *s);

/* Shared by the providers (provider-util.c). */

/* A provider's endpoint URL: base, path, model and suffix joined (model
 * and suffix may be ""). New string, or NULL with a KIWI_MODEL_E_INVALID
 * error out of memory. */
char *kiwi__model_url (const char *base, const char *path, const char *model, const char *suffix,
                       kiwi_error_t *err);

/* Appends the header "<prefix><key>" (e.g. "x-api-key: "), wiping the
 * copy it formats. < 0 with KIWI_MODEL_E_INVALID out of memory. */
int kiwi__model_key_header (struct curl_slist **list, const char *prefix, const char *key, kiwi_error_t *err);

/* Appends encode_tool's object (a new reference, or NULL out of memory)
 * for each of req's tools to the array `into`. < 0 out of memory. */
int kiwi__model_encode_tools (json_t *into, const kiwi_model_request *req,
                              json_t *(*encode_tool) (const kiwi_model_tool *t));

/* Sets root's "tools" to the array of encode_tool's objects when req has
 * tools (Anthropic's and OpenAI's shape). < 0 out of memory. */
int kiwi__model_add_tools (json_t *root, const kiwi_model_request *req,
                           json_t *(*encode_tool) (const kiwi_model_tool *t));

/* Appends encode(b) (a new reference, or NULL out of memory) for each block
 * of m that keep(b) accepts, tool results first and then the rest in order.
 * < 0 out of memory. */
int kiwi__model_encode_blocks (json_t *into, const kiwi_model_message *m, bool (*keep) (const kiwi_model_block *b),
                               json_t *(*encode) (const kiwi_model_block *b));

/* An encoder's exit for message i with nothing left to send: releases root
 * and sets a KIWI_MODEL_E_INVALID error. Returns NULL. */
json_t *kiwi__model_empty_message (json_t *root, size_t i, kiwi_error_t *err);

/* An encoder's out-of-memory exit: releases root (may be NULL) and sets a
 * KIWI_MODEL_E_INVALID error. Returns NULL. */
json_t *kiwi__model_encode_oom (json_t *root, kiwi_error_t *err);

/* A decoder's failure: KIWI_MODEL_E_MALFORMED_RESPONSE saying `what`. Returns -1. */
int kiwi__model_malformed (kiwi_error_t *err, const char *what);

#endif
