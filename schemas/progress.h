/*
 * progress.h: the ProgressEvent message (topic kiwi.progress, key: task id):
 * one step of a task's life as it happens, from "accepted" to "finished",
 * for metrics consumers and `kiwi tail`. The field table is progress.md.
 *
 * Ownership: a kiwi_progress owns its strings and its payload buffer. Start
 * from kiwi_progress_init(), release with kiwi_progress_clear() (which leaves
 * it initialised). kiwi_progress_decode() fills a caller's struct; on failure
 * that struct holds nothing to free.
 */
#ifndef KIWI_SCHEMAS_PROGRESS_H
#define KIWI_SCHEMAS_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "schemas/wire.h"

/* The stages of a task's life (the progress event's "phase" on the wire;
 * not Phase A or B of the sandbox): enum constant and wire string from one
 * table. */
#define KIWI_STAGE_MAP(X)        \
    X (ACCEPTED, "accepted")     \
    X (INSTALL, "install")       \
    X (STEP0, "step0")           \
    X (ROUND, "round")           \
    X (FINISHED, "finished")

typedef enum {
    KIWI_STAGE_UNSET = 0,
#define KIWI__STAGE_ENUM(id, s) KIWI_STAGE_##id,
    KIWI_STAGE_MAP (KIWI__STAGE_ENUM)
#undef KIWI__STAGE_ENUM
    KIWI_STAGE__END
} kiwi_stage;

/* The wire string of p ("step0"), or NULL if p is not a stage. */
const char *kiwi_stage_name (kiwi_stage p);

/* Looks up a wire string. Returns 0 and sets *out, or < 0 if unknown. */
int kiwi_stage_parse (const char *s, kiwi_stage *out);

/* Largest encoded payload map, in bytes. */
#define KIWI_PROGRESS_PAYLOAD_MAX (1024 * 1024)

typedef struct kiwi_progress {
    char *task_id;      /* required, same rules as task.id */
    uint64_t seq;       /* per-task-run sequence, from 1 */
    uint32_t attempt;   /* which run of the task, from 1; 0: unknown (absent on the wire) */
    uint32_t round;     /* 0 before the first round, then 1..100 */
    kiwi_stage stage;   /* required; the wire key is "phase" */
    char *kind;         /* required, 1..64 of [A-Za-z0-9._:-], e.g. "tool_call" */
    int64_t ts;         /* ms since the epoch, >= 0 */
    char *worker_id;    /* required, 1..128 of [A-Za-z0-9._:-] */
    char *payload;      /* optional: one encoded msgpack map (NULL: absent) */
    size_t payload_len; /* its length, <= KIWI_PROGRESS_PAYLOAD_MAX */
} kiwi_progress;

void kiwi_progress_init (kiwi_progress *p);

/* Frees everything *p owns and re-initialises it. */
void kiwi_progress_clear (kiwi_progress *p);

/* Validates, then encodes; the payload bytes are embedded as they are.
 * *out is malloc'd (*out_len bytes); the caller frees it. */
int kiwi_progress_encode (const kiwi_progress *p, char **out, size_t *out_len, kiwi_error_t *err);

/* Decodes and validates. The payload is kept as msgpack bytes (re-encoded
 * from the unpacked value with msgpack-c, so equal in value to what was
 * sent; byte-identical when the sender used the shortest encodings). On
 * success the caller owns *out (kiwi_progress_clear); on failure *out holds
 * nothing to free. */
int kiwi_progress_decode (const char *buf, size_t len, kiwi_progress *out, kiwi_error_t *err);

/* One JSON object; the payload is rendered as JSON (see
 * kiwi_msgpack_to_json). *out is malloc'd; the caller frees it. */
int kiwi_progress_to_json (const kiwi_progress *p, char **out, kiwi_error_t *err);

#endif
