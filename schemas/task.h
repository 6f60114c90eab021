/*
 * task.h: the Task message (topic kiwi.tasks, key: repository URL): one
 * request to make a repository's test command pass. Produced by `kiwi
 * submit`, `kiwi batch` and `kiwi ci-event`; consumed by kiwi-worker. The
 * field table with every limit is task.md.
 *
 * Ownership: a kiwi_task owns every string and array it points to. Start
 * from kiwi_task_init() (which sets the limit defaults), fill the fields with
 * malloc'd strings, and release them all with kiwi_task_clear(), which leaves
 * the struct initialised again. kiwi_task_decode() fills a struct the caller
 * provides; on failure that struct holds nothing to free.
 */
#ifndef KIWI_SCHEMAS_TASK_H
#define KIWI_SCHEMAS_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "schemas/wire.h"

/* Model providers: enum constant and wire string from one table. */
#define KIWI_PROVIDER_MAP(X)      \
    X (ANTHROPIC, "anthropic")    \
    X (OPENAI, "openai")          \
    X (GEMINI, "gemini")          \
    X (SCRIPTED, "scripted")

typedef enum {
    KIWI_PROVIDER_UNSET = 0,
#define KIWI__PROVIDER_ENUM(id, s) KIWI_PROVIDER_##id,
    KIWI_PROVIDER_MAP (KIWI__PROVIDER_ENUM)
#undef KIWI__PROVIDER_ENUM
    KIWI_PROVIDER__END
} kiwi_provider;

/* The wire string of p ("anthropic"), or NULL if p is not a provider. */
const char *kiwi_provider_name (kiwi_provider p);

/* Looks up a wire string. Returns 0 and sets *out, or < 0 if unknown. */
int kiwi_provider_parse (const char *s, kiwi_provider *out);

/* Limits: bounds and defaults. */
#define KIWI_TASK_ID_MAX 128
#define KIWI_TASK_BATCH_ID_MAX 128
#define KIWI_TASK_MAX_ROUNDS_MIN 1
#define KIWI_TASK_MAX_ROUNDS_MAX 100
#define KIWI_TASK_MAX_ROUNDS_DEFAULT 8
#define KIWI_TASK_TIMEOUT_MIN 1
#define KIWI_TASK_TIMEOUT_MAX 86400
#define KIWI_TASK_TIMEOUT_DEFAULT 1800
#define KIWI_TASK_DISK_MB_MIN 16
#define KIWI_TASK_DISK_MB_MAX 1048576
#define KIWI_TASK_DISK_MB_DEFAULT 2048
#define KIWI_TASK_CREDENTIALS_MAX 64

typedef struct kiwi_task_repo {
    char *url;    /* required, 1..4096 bytes, handed to git */
    char *ref;    /* required, 1..256 bytes: branch, tag or commit */
    char *subdir; /* optional (NULL: repository root), relative, no '..' */
} kiwi_task_repo;

typedef struct kiwi_task_limits {
    uint32_t max_rounds;       /* 1..100, default 8 */
    bool has_session_budget_tokens;
    uint64_t session_budget_tokens;     /* >= 1 when present */
    bool has_session_budget_usd_micros;
    uint64_t session_budget_usd_micros; /* >= 1 when present */
    uint32_t timeout_seconds;  /* 1..86400, default 1800 */
    uint32_t disk_mb;          /* 16..1048576, default 2048 */
} kiwi_task_limits;

typedef struct kiwi_task_model {
    kiwi_provider provider; /* required when the model map is present */
    char *name;             /* required, 1..256 bytes */
    char *base_url;         /* optional, 1..2048 bytes */
} kiwi_task_model;

typedef struct kiwi_task {
    char *id;                 /* required, 1..128 of [A-Za-z0-9._:-] */
    kiwi_task_repo repo;
    char *test_command;       /* required, 1..8192 bytes */
    char *goal;               /* required, 1..65536 bytes */
    char *ci_context;         /* optional, ≤ 262144 bytes, any bytes but NUL */
    kiwi_task_limits limits;  /* always present in the struct; defaults apply */
    bool has_model;           /* false: the worker's configured model */
    kiwi_task_model model;
    char **test_credentials;  /* n_test_credentials owned names, or NULL */
    size_t n_test_credentials;
    int64_t submitted_at;     /* ms since the epoch, required, >= 0 */
    char *source;             /* optional: "submit", "batch", "ci-event", ... */
    char *batch_id;           /* optional, 1..128 of [A-Za-z0-9._:-]: the batch it belongs to */
} kiwi_task;

/* Zeroes *t and sets the limit defaults. */
void kiwi_task_init (kiwi_task *t);

/* Frees everything *t owns and re-initialises it. Safe on an initialised
 * struct and after a failed decode. */
void kiwi_task_clear (kiwi_task *t);

/* Checks every field rule of task.md. Returns 0, or < 0 with *err naming the
 * field ("task.repo.url: longer than 4096 bytes") and code
 * KIWI_WIRE_EINVALID. */
int kiwi_task_validate (const kiwi_task *t, kiwi_error_t *err);

/* Validates *t, then encodes it as one msgpack map with v = KIWI_WIRE_VERSION.
 * On success *out is a malloc'd buffer of *out_len bytes; the caller frees
 * it. On failure *out is untouched. */
int kiwi_task_encode (const kiwi_task *t, char **out, size_t *out_len, kiwi_error_t *err);

/* Decodes and validates buf[0..len). *out is initialised here (its previous
 * contents are not freed). On success the caller owns *out and releases it
 * with kiwi_task_clear(); on failure *out holds nothing to free and *err
 * names the field and the rule broken. Unknown keys are ignored. */
int kiwi_task_decode (const char *buf, size_t len, kiwi_task *out, kiwi_error_t *err);

/* Renders *t as one JSON object (no newline), every field included, absent
 * optional ones left out. *out is malloc'd; the caller frees it. */
int kiwi_task_to_json (const kiwi_task *t, char **out, kiwi_error_t *err);

/* The identity of a task's body: sha256 (64 lowercase hex) of its JSON
 * rendering (kiwi_task_to_json) without submitted_at and source, which
 * change when the same task is submitted again. The worker keeps it in the
 * finished record (telling a redelivery from a different task reusing the
 * id) and stamps it on the task's result as `task_sha256`; a producer
 * computes it from the task it sent, and a follower compares the two
 * (result.md). Returns 0, or < 0 with *err set. */
int kiwi_task_body_sha256 (const kiwi_task *t, char out[65], kiwi_error_t *err);

#endif
