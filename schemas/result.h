/*
 * result.h: the Result message (topic kiwi.results, key: task id): the
 * outcome of one task — a unified diff when it was fixed, otherwise the
 * named status saying why there is none — with what it cost. The field
 * table is result.md.
 *
 * Ownership: a kiwi_result owns its strings. Start from kiwi_result_init(),
 * release with kiwi_result_clear() (which leaves it initialised).
 * kiwi_result_decode() fills a caller's struct; on failure that struct holds
 * nothing to free.
 */
#ifndef KIWI_SCHEMAS_RESULT_H
#define KIWI_SCHEMAS_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "schemas/wire.h"

/* Outcomes: enum constant and wire string from one table. */
#define KIWI_RESULT_STATUS_MAP(X)              \
    X (FIXED, "fixed")                         \
    X (NOT_FIXED, "not_fixed")                 \
    X (INSTALL_FAILED, "install_failed")       \
    X (NEEDS_NETWORK, "needs_network")         \
    X (BUDGET_EXHAUSTED, "budget_exhausted")   \
    X (MAX_ROUNDS, "max_rounds")               \
    X (TIMED_OUT, "timed_out")                 \
    X (ERROR, "error")                         \
    X (GAVE_UP, "gave_up")

typedef enum {
    KIWI_RESULT_UNSET = 0,
#define KIWI__STATUS_ENUM(id, s) KIWI_RESULT_##id,
    KIWI_RESULT_STATUS_MAP (KIWI__STATUS_ENUM)
#undef KIWI__STATUS_ENUM
    KIWI_RESULT__END
} kiwi_result_status;

/* The wire string of s ("not_fixed"), or NULL if s is not a status. */
const char *kiwi_result_status_name (kiwi_result_status s);

/* Looks up a wire string. Returns 0 and sets *out, or < 0 if unknown. */
int kiwi_result_status_parse (const char *s, kiwi_result_status *out);

#define KIWI_RESULT_DIFF_MAX (16 * 1024 * 1024)
#define KIWI_RESULT_REASON_MAX 65536
#define KIWI_RESULT_LOCATION_MAX 4096

typedef struct kiwi_result {
    char *task_id;             /* required, same rules as task.id */
    kiwi_result_status status; /* required */
    char *reason;              /* optional, <= 65536 bytes, any bytes but NUL */
    char *diff;                /* present iff status is FIXED; <= 16 MiB; may be "" */
    uint32_t rounds;           /* rounds run, 0..100 */
    uint64_t tokens_in;
    uint64_t tokens_out;
    uint64_t cost_usd_micros;
    uint64_t duration_ms;
    char *worker_id;           /* required, 1..128 of [A-Za-z0-9._:-] */
    int64_t finished_at;       /* ms since the epoch, >= 0 */
    /* optional: the diff did not fit the results topic (result.md) */
    bool diff_truncated;       /* `diff` is the first part of the whole diff, or empty */
    uint64_t diff_bytes;       /* the whole diff's size; set with diff_truncated */
    char *diff_sha256;         /* the whole diff's SHA-256, 64 lowercase hex, or NULL */
    char *diff_location;       /* where the whole diff is, <= 4096 bytes, or NULL */
    /* optional: kiwi_task_body_sha256 of the task this result answers (64
     * lowercase hex), stamped by the worker; NULL from older workers */
    char *task_sha256;
} kiwi_result;

void kiwi_result_init (kiwi_result *r);

/* Frees everything *r owns and re-initialises it. */
void kiwi_result_clear (kiwi_result *r);

/* Validates, then encodes. *out is malloc'd (*out_len bytes); the caller
 * frees it. */
int kiwi_result_encode (const kiwi_result *r, char **out, size_t *out_len, kiwi_error_t *err);

/* Decodes and validates. On success the caller owns *out
 * (kiwi_result_clear); on failure *out holds nothing to free. */
int kiwi_result_decode (const char *buf, size_t len, kiwi_result *out, kiwi_error_t *err);

/* One JSON object. *out is malloc'd; the caller frees it. */
int kiwi_result_to_json (const kiwi_result *r, char **out, kiwi_error_t *err);

#endif
