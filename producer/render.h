/*
 * render.h: Kafka messages as JSON lines for `kiwi tail` and `kiwi wait`.
 *
 * A message of a known type is decoded with its schema and rendered with
 * its _to_json(); a message of no known type with kiwi_msgpack_to_json().
 * A message that does not decode is never dropped and never fatal: it
 * becomes {"error": "<why>", "type": "<expected type>", "topic", "partition",
 * "offset", "key", "raw_base64": "<the bytes>"} plus "raw_msgpack": <the
 * bytes rendered generically> when they are valid msgpack at all.
 */
#ifndef KIWI_PRODUCER_RENDER_H
#define KIWI_PRODUCER_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base64.h" /* kiwi_base64: the bytes of an undecodable message */
#include "common/error.h"

/* Message types: enum, type name, short topic name. */
#define KIWI_MSG_TYPE_MAP(X)                    \
    X (TASK, "task", "tasks")                   \
    X (PROGRESS, "progress", "progress")        \
    X (RESULT, "result", "results")             \
    X (HEARTBEAT, "heartbeat", "heartbeats")    \
    X (DEADLETTER, "deadletter", "dlq")

typedef enum {
    KIWI_MSG_RAW = 0, /* no schema: generic msgpack */
#define KIWI__MSG_ENUM(id, name, topic) KIWI_MSG_##id,
    KIWI_MSG_TYPE_MAP (KIWI__MSG_ENUM)
#undef KIWI__MSG_ENUM
    KIWI_MSG__END
} kiwi_msg_type;


/* Parses a type name ("result") or "raw". */
int kiwi_msg_type_parse (const char *s, kiwi_msg_type *out);

/* The type whose short topic name is s ("results" → RESULT), or < 0. */
int kiwi_msg_type_from_short (const char *s, kiwi_msg_type *out);

/* Where a message came from. */
typedef struct kiwi_msg_meta {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp; /* ms, or -1 */
    const void *key;   /* NULL: no key */
    size_t key_len;
} kiwi_msg_meta;

/* Renders one message as one line of JSON (no newline) into *json
 * (malloc'd). With `wrap`, the message object is wrapped as {"topic",
 * "partition", "offset", "timestamp", "key", "message": {...}}. When
 * task_id is not NULL, *task_id receives the task id the message is about
 * (task.id, progress/result task_id, a dead letter's original id), malloc'd,
 * or NULL. *decoded tells whether the message decoded with its schema.
 * Fails only when memory runs out. */
int kiwi_render_message (kiwi_msg_type type, const kiwi_msg_meta *m, const void *buf, size_t len, bool wrap,
                         char **json, char **task_id, bool *decoded, kiwi_error_t *err);

#endif
