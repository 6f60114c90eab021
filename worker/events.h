/*
 * events.h: how the task pipeline reports what happens.
 *
 * The pipeline (task.c) runs in a child process of the daemon, or alone in
 * `kiwi-worker --once`. It emits progress events and one result through a
 * kiwi_events sink without knowing where they go: to the parent over a pipe
 * (frames, see below), or as JSON lines on stdout.
 *
 * Payloads are built as JSON objects (jansson) and carried as msgpack maps
 * on the wire (kiwi_json_to_msgpack).
 *
 * Secrets: with a mask set on the sink (ev->mask), every string of every
 * payload (object keys included) is masked before it is encoded, and so are
 * the result's free-text fields, reason and diff, before the result is sent
 * (kiwi_events_mask_result). A diff is masked too: the model may have
 * written into the code a secret it read in a test's output.
 *
 * Frames on the child's pipe: 1 byte type ('P' progress, 'R' result,
 * 'M' an observation for the daemon's metrics, 'S' the Phase A sandbox
 * now running), 4 bytes big-endian length, then the encoded message (an
 * observation: one line of text, worker-metrics.h; a sandbox: its address,
 * a newline, when it started running (ms since the epoch, decimal), a
 * newline and the install command, or nothing when Phase A has ended).
 * The child's progress events carry seq 0; the parent numbers them per
 * task.
 */
#ifndef KIWI_WORKER_EVENTS_H
#define KIWI_WORKER_EVENTS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/mask.h"
#include "schemas/progress.h"
#include "schemas/result.h"

typedef struct kiwi_events kiwi_events;

struct kiwi_events {
    /* Takes a finished event (seq not set). Returns < 0 if it could not be
     * delivered (the pipeline goes on; events are best effort, the result
     * is not). */
    int (*progress) (kiwi_events *ev, const kiwi_progress *p);
    int (*result) (kiwi_events *ev, const kiwi_result *r);
    /* Takes one observation for the metrics (a line, worker-metrics.h), or
     * NULL: observations are dropped (kiwi-worker --once). */
    void (*observe) (kiwi_events *ev, const char *line);
    /* Takes the address of the Phase A sandbox now running, when it
     * started running (ms since the epoch, before its command did) and its
     * command, or NULL/0/NULL when it has ended: the daemon puts the egress
     * proxy's denials from that address since then down to this task
     * (kiwi_egress_window). NULL: nobody listens. */
    void (*sandbox) (kiwi_events *ev, const char *address, int64_t since_ms, const char *command);
    const char *task_id;
    const char *worker_id;
    const kiwi_mask *mask; /* secrets masked in everything sent, or NULL; borrowed */
    void *userdata;
};

/* Masks r->reason and r->diff in place with `m` (NULL: nothing). Returns
 * < 0 on allocation failure; the field that could not be masked is then
 * replaced by "***" whole, so nothing unmasked remains. */
int kiwi_events_mask_result (const kiwi_mask *m, kiwi_result *r);

/* Emits one event; `payload` (may be NULL) is stolen. */
int kiwi_events_emit (kiwi_events *ev, kiwi_stage stage, const char *kind, uint32_t round, json_t *payload);

/* One measurement for the daemon's metrics: `what` KIWI_OBS_PHASE with a
 * phase and its seconds, KIWI_OBS_SANDBOX with a driver and a count
 * (worker-metrics.h). Best effort, like events. */
void kiwi_events_observe (kiwi_events *ev, const char *what, const char *label, double value);

/* Says which Phase A sandbox runs now (see `sandbox` above); best effort. */
void kiwi_events_sandbox (kiwi_events *ev, const char *address, int64_t since_ms, const char *command);

/* JSON object → one encoded msgpack map. Caller frees *out. */
int kiwi_json_to_msgpack (const json_t *j, char **out, size_t *len, kiwi_error_t *err);


/* ----- frames ----- */

enum { KIWI_FRAME_PROGRESS = 'P', KIWI_FRAME_RESULT = 'R', KIWI_FRAME_OBSERVE = 'M', KIWI_FRAME_SANDBOX = 'S' };
#define KIWI_FRAME_MAX (32u * 1024 * 1024)

/* An incremental frame reader for a non-blocking fd. */
typedef struct kiwi_frame_reader {
    unsigned char head[5];
    size_t head_have;
    char *body;
    size_t body_len, body_have;
} kiwi_frame_reader;

/* Feeds bytes; calls `fn` per complete frame. Returns < 0 on a frame larger
 * than KIWI_FRAME_MAX or an unknown type (the stream is unusable). */
int kiwi_frame_feed (kiwi_frame_reader *r, const char *data, size_t len,
                     void (*fn) (int type, const char *body, size_t len, void *ud), void *ud, kiwi_error_t *err);
void kiwi_frame_reader_clear (kiwi_frame_reader *r);

/* A sandbox frame's body: the address into `address` (cap bytes), its
 * start into *since_ms and the command into `command` (cap bytes); "", 0
 * and "" for an ended Phase A. -1 when it is not one (a newline missing,
 * an address too long, a start that is not a positive number). */
int kiwi_frame_sandbox_parse (const char *body, size_t len, char *address, size_t acap, int64_t *since_ms,
                              char *command, size_t ccap);

/* Sinks: frames on a pipe; JSON lines on a FILE. */
void kiwi_events_pipe_init (kiwi_events *ev, int fd, const char *task_id, const char *worker_id);
void kiwi_events_jsonl_init (kiwi_events *ev, void *file, const char *task_id, const char *worker_id);

#endif
