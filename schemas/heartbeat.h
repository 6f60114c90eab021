/*
 * heartbeat.h: the Heartbeat message (topic kiwi.heartbeats, key: worker
 * id): a worker's periodic state — slots, counters, whether Redis answers,
 * and the outcome of its egress checks. The field table is heartbeat.md.
 *
 * Ownership: a kiwi_heartbeat owns its strings and its egress array (and the
 * strings of each entry). Start from kiwi_heartbeat_init(), release with
 * kiwi_heartbeat_clear() (which leaves it initialised).
 * kiwi_heartbeat_decode() fills a caller's struct; on failure that struct
 * holds nothing to free.
 */
#ifndef KIWI_SCHEMAS_HEARTBEAT_H
#define KIWI_SCHEMAS_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "schemas/wire.h"

#define KIWI_HEARTBEAT_EGRESS_MAX 32
#define KIWI_HEARTBEAT_SLOTS_MAX 4096

/* One egress check, e.g. "metadata-blocked" or "https-reachable". */
typedef struct kiwi_egress_check {
    char *name;         /* required, 1..64 of [A-Za-z0-9._:-] */
    bool ok;            /* required */
    char *detail;       /* optional, <= 4096 bytes, any bytes but NUL */
    int64_t checked_at; /* ms since the epoch, >= 0 */
} kiwi_egress_check;

typedef struct kiwi_heartbeat {
    char *worker_id;       /* required, 1..128 of [A-Za-z0-9._:-] */
    char *version;         /* required, 1..64 printable ASCII, e.g. "0.1.0" */
    int64_t ts;            /* ms since the epoch, >= 0 */
    uint32_t slots_total;  /* 0..4096 */
    uint32_t slots_busy;   /* <= slots_total */
    uint64_t tasks_done;
    uint64_t tasks_failed;
    uint64_t cache_hits;
    uint64_t cache_misses;
    bool degraded;
    char *degraded_reason; /* optional, <= 4096 bytes, any bytes but NUL */
    bool redis_ok;
    kiwi_egress_check *egress; /* n_egress owned entries, or NULL */
    size_t n_egress;           /* <= 32 */
} kiwi_heartbeat;

void kiwi_heartbeat_init (kiwi_heartbeat *h);

/* Frees everything *h owns (egress entries included) and re-initialises it. */
void kiwi_heartbeat_clear (kiwi_heartbeat *h);

/* Validates, then encodes. *out is malloc'd (*out_len bytes); the caller
 * frees it. */
int kiwi_heartbeat_encode (const kiwi_heartbeat *h, char **out, size_t *out_len, kiwi_error_t *err);

/* Decodes and validates. On success the caller owns *out
 * (kiwi_heartbeat_clear); on failure *out holds nothing to free. */
int kiwi_heartbeat_decode (const char *buf, size_t len, kiwi_heartbeat *out, kiwi_error_t *err);

/* One JSON object. *out is malloc'd; the caller frees it. */
int kiwi_heartbeat_to_json (const kiwi_heartbeat *h, char **out, kiwi_error_t *err);

#endif
