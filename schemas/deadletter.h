/*
 * deadletter.h: the DeadLetter message (topic kiwi.dlq): a consumed message
 * that could not be decoded or was invalid, kept with the reason, where it
 * came from and its exact original bytes, so that nothing is ever dropped
 * and it can be inspected or replayed. The field table is deadletter.md.
 *
 * Ownership: a kiwi_deadletter owns its strings and the original and key
 * buffers. Start from kiwi_deadletter_init(), release with
 * kiwi_deadletter_clear() (which leaves it initialised).
 * kiwi_deadletter_decode() fills a caller's struct; on failure that struct
 * holds nothing to free.
 */
#ifndef KIWI_SCHEMAS_DEADLETTER_H
#define KIWI_SCHEMAS_DEADLETTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "schemas/wire.h"

#define KIWI_DEADLETTER_ORIGINAL_MAX (16 * 1024 * 1024)
#define KIWI_DEADLETTER_KEY_MAX 16384
#define KIWI_DEADLETTER_REASON_MAX 65536

typedef struct kiwi_deadletter {
    char *reason;        /* required, 1..65536 bytes, any bytes but NUL */
    char *topic;         /* required, 1..249 of [A-Za-z0-9._:-] (Kafka's limit) */
    int32_t partition;   /* >= -1; -1 when unknown */
    int64_t offset;      /* >= -1; -1 when unknown */
    char *original;      /* the original message bytes, exactly; NULL when empty */
    size_t original_len; /* <= 16 MiB */
    bool has_key;        /* the original Kafka message key, if it had one */
    char *key;           /* NULL when empty */
    size_t key_len;      /* <= 16384 */
    int64_t ts;          /* ms since the epoch, >= 0 */
    char *worker_id;     /* required, 1..128 of [A-Za-z0-9._:-] */
} kiwi_deadletter;

void kiwi_deadletter_init (kiwi_deadletter *d);

/* Frees everything *d owns and re-initialises it. */
void kiwi_deadletter_clear (kiwi_deadletter *d);

/* Validates, then encodes; original and key travel as msgpack bin. *out is
 * malloc'd (*out_len bytes); the caller frees it. */
int kiwi_deadletter_encode (const kiwi_deadletter *d, char **out, size_t *out_len, kiwi_error_t *err);

/* Decodes and validates. On success the caller owns *out
 * (kiwi_deadletter_clear); on failure *out holds nothing to free. */
int kiwi_deadletter_decode (const char *buf, size_t len, kiwi_deadletter *out, kiwi_error_t *err);

/* One JSON object: original (and key) as base64 strings, and when the
 * original bytes are a single msgpack value, "original_decoded" with that
 * value rendered as JSON. *out is malloc'd; the caller frees it. */
int kiwi_deadletter_to_json (const kiwi_deadletter *d, char **out, kiwi_error_t *err);

#endif
