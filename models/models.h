/*
 * models.h: the model providers behind one interface.
 *
 * A provider-neutral conversation (messages of text, tool calls and tool
 * results), a request (model, system prompt, conversation, tools, limits),
 * and a response (why the model stopped, the assistant message, token usage,
 * the provider's request id). Three providers speak it over libcurl:
 * "anthropic" (Messages API), "openai" (Chat Completions with function
 * calling; any OpenAI-compatible server through base_url) and "gemini"
 * (generateContent with function calling).
 *
 * This module is the only code that ever sees a model key. Keys come from the
 * worker's environment (kiwi_model_key_from_env) and are never written to a
 * log line or an error message: the client scrubs them from every message it
 * makes.
 *
 * Failures are named: kiwi_error_code() of an error from
 * kiwi_model_client_call() is a kiwi_model_failure (auth, rate_limited, ...),
 * and its message says which provider, which HTTP status and what the
 * provider said. Retryable failures (429, 5xx, 529, timeouts, transport) are
 * retried with exponential backoff and jitter, honouring retry-after.
 *
 * Ownership, in one place:
 *   - a conversation owns its messages, a message owns its blocks, a block
 *     owns its strings and its arguments (one jansson reference);
 *   - a request borrows everything it points to (conversation, tools, model
 *     name, system prompt) for the duration of the call;
 *   - a response owns its message, stop_raw and request_id; hand the message
 *     to the conversation with kiwi_model_conv_take_message(), then clear the
 *     response;
 *   - a client copies the base URL and the key out of its config at open.
 *
 * A client is not thread-safe: one client per session (or a lock around it).
 */
#ifndef KIWI_MODELS_H
#define KIWI_MODELS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/mask.h"

/* ------------------------------------------------------------ failures --- */

/* Every failure of a call, by name. kiwi_error_code() of the error returns one
 * of these (never 0). */
#define KIWI_MODEL_FAILURE_MAP(X)                                                                  \
    X (AUTH, "auth")                             /* 401/403, or a key the provider rejects */    \
    X (RATE_LIMITED, "rate_limited")             /* 429 after the retries (or quota exhausted) */ \
    X (OVERLOADED, "overloaded")                 /* 529 or 503 after the retries */               \
    X (BAD_REQUEST, "bad_request")               /* 400, 404, 413, 422...: not retried */         \
    X (SERVER_ERROR, "server_error")             /* 500, 502, 504 after the retries */            \
    X (TIMEOUT, "timeout")                       /* connect or total timeout, after the retries */\
    X (TRANSPORT, "transport")                   /* DNS, refused, reset, TLS... after retries */   \
    X (MALFORMED_RESPONSE, "malformed_response") /* not JSON, missing fields, too large */        \
    X (INVALID, "invalid")                       /* the caller's request or config is unusable */ \
    X (CANCELLED, "cancelled")                   /* the sleep callback refused to wait */

typedef enum {
    KIWI_MODEL_OK = KIWI_ERR_RANGE_MODEL,
#define KIWI__MODEL_FAILURE_ENUM(name, str) KIWI_MODEL_E_##name,
    KIWI_MODEL_FAILURE_MAP (KIWI__MODEL_FAILURE_ENUM)
#undef KIWI__MODEL_FAILURE_ENUM
        KIWI_MODEL_E__COUNT
} kiwi_model_failure;
_Static_assert ((int) KIWI_MODEL_E__COUNT <= (int) KIWI_ERR_RANGE_SANDBOX, "model failure codes run into the sandbox range");

/* "auth", "rate_limited", ...; "ok" for 0; "unknown" out of range. Static. */
const char *kiwi_model_failure_name (int failure);

/* -------------------------------------------------------- conversation --- */

typedef enum { KIWI_MODEL_ROLE_USER, KIWI_MODEL_ROLE_ASSISTANT } kiwi_model_role;

typedef enum {
    KIWI_MODEL_BLOCK_TEXT,
    KIWI_MODEL_BLOCK_TOOL_CALL,
    KIWI_MODEL_BLOCK_TOOL_RESULT,
} kiwi_model_block_kind;

/* One content block. Which fields are set depends on the kind; all owned. */
typedef struct kiwi_model_block {
    kiwi_model_block_kind kind;
    char *text;        /* TEXT: the text. TOOL_RESULT: the result's content */
    char *id;          /* TOOL_CALL: the call id. TOOL_RESULT: the id of the call it answers */
    char *name;        /* TOOL_CALL, TOOL_RESULT: the tool's name */
    json_t *arguments; /* TOOL_CALL: a JSON object (one reference owned) */
    bool is_error;     /* TOOL_RESULT: the tool failed */
    char *signature;   /* opaque provider token to send back as received (Gemini's
                          thoughtSignature), or NULL */
} kiwi_model_block;

typedef struct kiwi_model_message {
    kiwi_model_role role;
    kiwi_model_block *blocks; /* owned array of n_blocks */
    size_t n_blocks;
    size_t cap_blocks;
} kiwi_model_message;

typedef struct kiwi_model_conversation {
    kiwi_model_message *messages; /* owned array of n_messages */
    size_t n_messages;
    size_t cap_messages;
} kiwi_model_conversation;

#define KIWI_MODEL_CONVERSATION_INIT { NULL, 0, 0 }

/* Appends a text block to `msg` (copies text). Returns < 0 on allocation failure. */
int kiwi_model_message_add_text (kiwi_model_message *msg, const char *text, kiwi_error_t *err);

/* Appends a tool call (copies id and name, takes a new reference to the
 * `arguments` object; NULL means {}). */
int kiwi_model_message_add_tool_call (kiwi_model_message *msg, const char *id, const char *name, json_t *arguments,
                                      kiwi_error_t *err);

/* Appends a tool result answering call `call_id` of tool `name` (copies). */
int kiwi_model_message_add_tool_result (kiwi_model_message *msg, const char *call_id, const char *name,
                                        const char *content, bool is_error, kiwi_error_t *err);

/* The text blocks joined with "\n" (a new string, caller frees), or NULL when
 * there is none. */
char *kiwi_model_message_text (const kiwi_model_message *msg);

/* Number of TOOL_CALL blocks; kiwi_model_message_tool_call(msg, i) is the
 * i-th (borrowed), or NULL. */
size_t kiwi_model_message_n_tool_calls (const kiwi_model_message *msg);
const kiwi_model_block *kiwi_model_message_tool_call (const kiwi_model_message *msg, size_t i);

/* A new user message with one text block at the end of the conversation. */
int kiwi_model_conv_add_user_text (kiwi_model_conversation *conv, const char *text, kiwi_error_t *err);

/* A tool result at the end of the conversation: appended to the last message
 * when that is a user message already holding tool results, else in a new
 * user message. All results answering one assistant turn belong in the one
 * user message that follows it (every provider requires that). */
int kiwi_model_conv_add_tool_result (kiwi_model_conversation *conv, const char *call_id, const char *name,
                                     const char *content, bool is_error, kiwi_error_t *err);

/* Moves *msg (typically a response's message) to the end of the
 * conversation; *msg is left empty. Returns < 0 on allocation failure, *msg
 * untouched then. */
int kiwi_model_conv_take_message (kiwi_model_conversation *conv, kiwi_model_message *msg, kiwi_error_t *err);

/* The last message, or NULL. Borrowed. */
kiwi_model_message *kiwi_model_conv_last (kiwi_model_conversation *conv);

void kiwi_model_conv_clear (kiwi_model_conversation *conv);

#define cleanup_model_conv __attribute__ ((cleanup (kiwi_model_conv_clear)))

/* ------------------------------------------------------------ requests --- */

/* A tool the model may call. Borrowed by the request. `parameters` is a JSON
 * schema object ({"type":"object","properties":{...},"required":[...]}). The
 * name must match ^[a-zA-Z0-9_-]{1,64}$ (the common ground of the three
 * providers). */
typedef struct kiwi_model_tool {
    const char *name;
    const char *description;
    json_t *parameters;
} kiwi_model_tool;

typedef struct kiwi_model_request {
    const char *model;                           /* required */
    const char *system;                          /* may be NULL */
    const kiwi_model_conversation *conversation; /* required, non-empty, starts with a user message */
    const kiwi_model_tool *tools;                /* n_tools entries, may be NULL */
    size_t n_tools;
    int max_tokens;                              /* required, > 0 */
    bool has_temperature;
    double temperature;
} kiwi_model_request;

/* ----------------------------------------------------------- responses --- */

#define KIWI_MODEL_STOP_MAP(X)                                                                    \
    X (END_TURN, "end_turn")     /* the model finished its turn */                                \
    X (TOOL_USE, "tool_use")     /* the model wants tool results */                              \
    X (MAX_TOKENS, "max_tokens") /* cut at max_tokens */                                         \
    X (OTHER, "other")           /* anything else (refusal, safety, stop sequence...): see stop_raw */

typedef enum {
#define KIWI__MODEL_STOP_ENUM(name, str) KIWI_MODEL_STOP_##name,
    KIWI_MODEL_STOP_MAP (KIWI__MODEL_STOP_ENUM)
#undef KIWI__MODEL_STOP_ENUM
} kiwi_model_stop;

const char *kiwi_model_stop_name (kiwi_model_stop stop);

typedef struct kiwi_model_usage {
    uint64_t input_tokens;       /* every prompt token, the cached ones too */
    uint64_t output_tokens;
    uint64_t cache_write_tokens; /* of input_tokens: written to the provider's prompt cache */
    uint64_t cache_read_tokens;  /* of input_tokens: read from it */
} kiwi_model_usage;

typedef struct kiwi_model_response {
    kiwi_model_stop stop;
    char *stop_raw;             /* the provider's own word ("end_turn", "stop", "STOP"...), owned, may be NULL */
    kiwi_model_message message; /* role assistant; owned; move it with kiwi_model_conv_take_message() */
    kiwi_model_usage usage;     /* this call's tokens */
    char *request_id;           /* the provider's request or response id, owned, may be NULL */
    int attempts;               /* HTTP attempts this call took (1 = no retry) */
} kiwi_model_response;

void kiwi_model_response_clear (kiwi_model_response *resp);

#define cleanup_model_response __attribute__ ((cleanup (kiwi_model_response_clear)))

/* ----------------------------------------------------------- providers --- */

/* A provider: a const vtable, selected by name. Opaque. */
typedef struct kiwi_model_provider kiwi_model_provider;

/* "anthropic", "openai" or "gemini". An unknown name is an error listing the
 * known ones. */
const kiwi_model_provider *kiwi_model_provider_find (const char *name, kiwi_error_t *err);

/* The environment variable holding the provider's key ("ANTHROPIC_API_KEY"...). */
const char *kiwi_model_provider_key_env (const kiwi_model_provider *p);

/* https://api.anthropic.com, https://api.openai.com/v1,
 * https://generativelanguage.googleapis.com/v1beta */
const char *kiwi_model_provider_default_base_url (const kiwi_model_provider *p);

/* The provider's key from `envp` ("KEY=VALUE" entries, NULL-terminated; NULL
 * means the process environment). Returns a pointer into envp (borrowed), or
 * NULL with *err naming the variable (never its value) when it is unset or
 * empty. */
const char *kiwi_model_key_from_env (const kiwi_model_provider *p, const char *const *envp, kiwi_error_t *err);

/* -------------------------------------------------------------- client --- */

/* Waits `ms` milliseconds before a retry. Return < 0 to stop retrying (the
 * call then fails with KIWI_MODEL_E_CANCELLED). */
typedef int (*kiwi_model_sleep_fn) (void *ctx, long ms);

/* Client settings. Zero means the default named on each field. */
typedef struct kiwi_model_config {
    const char *base_url;           /* NULL: the provider's default */
    const char *api_key;            /* required, unless base_url is set (a local server without auth) */
    long connect_timeout_ms;        /* 10000 */
    long request_timeout_ms;        /* 300000: one HTTP attempt, start to end */
    int max_attempts;               /* 5: HTTP attempts per call, retries included */
    long backoff_base_ms;           /* 1000: first retry waits about this long */
    long backoff_max_ms;            /* 60000: no wait is longer (retry-after included: a
                                       longer retry-after ends the retries) */
    size_t max_response_bytes;      /* 8 MiB: a larger body is malformed_response */
    double price_input_per_mtok;    /* price of a million input tokens (0: unknown) */
    double price_output_per_mtok;   /* same for output tokens */
    kiwi_model_sleep_fn sleep;      /* NULL: nanosleep */
    void *sleep_ctx;
    const kiwi_mask *redact;        /* secrets masked ("***") out of every request body and every error
                                       message, or NULL; borrowed: it must outlive the client. The
                                       key travels in a header and is not affected. */
} kiwi_model_config;

typedef struct kiwi_model_client kiwi_model_client;

/* Opens a client for `p` with `cfg` (copied; the config may go away after).
 * Returns NULL with *err on a bad config (no key, bad base URL). */
kiwi_model_client *kiwi_model_client_open (const kiwi_model_provider *p, const kiwi_model_config *cfg,
                                           kiwi_error_t *err);

/* Sends `req`, retrying as configured, and fills *resp (which must be zeroed
 * or cleared; it is cleared again on failure). Returns 0, or < 0 with *err,
 * whose code is a kiwi_model_failure. */
int kiwi_model_client_call (kiwi_model_client *c, const kiwi_model_request *req, kiwi_model_response *resp,
                            kiwi_error_t *err);

/* Tokens of every successful call so far. */
kiwi_model_usage kiwi_model_client_usage (const kiwi_model_client *c);

/* Calls made and HTTP attempts spent, successful or not. */
uint64_t kiwi_model_client_calls (const kiwi_model_client *c);
uint64_t kiwi_model_client_attempts (const kiwi_model_client *c);

/* The cost of `usage` at the configured prices (0 when no price is set):
 * prompt tokens at the input price, those written to the prompt cache and
 * those read from it at the provider's factors of it (Anthropic: 1.25 and
 * 0.1; OpenAI: 1 and 0.5; Gemini: 1 and 0.25), output at the output price. */
double kiwi_model_client_cost (const kiwi_model_client *c, kiwi_model_usage usage);

void kiwi_model_client_close (kiwi_model_client *c);

#endif
