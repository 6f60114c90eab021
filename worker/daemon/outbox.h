/*
 * outbox.h: messages the producer's queue had no room for, held in order
 * until it has (pure: no Kafka or libev; the daemon offers them again on a
 * timer and does the producing).
 *
 * librdkafka answers QUEUE_FULL when its local queue is at
 * queue.buffering.max.messages or .kbytes (a broker that is slow or down).
 * Waiting for room inside a loop callback would freeze every timer of the
 * worker (lease renewals, heartbeats); the outbox holds the message instead
 * and the daemon retries after kiwi_outbox_backoff_s. While the outbox holds
 * anything, every new message goes behind it, so messages keep the order
 * they were produced in (the progress topic's seq per task). A message held
 * longer than the delivery timeout is given up, as librdkafka gives up one
 * it could not deliver.
 */
#ifndef KIWI_WORKER_OUTBOX_H
#define KIWI_WORKER_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* One held message: copies of topic, key and value, and the caller's
 * opaque (not owned: the caller frees it when the message goes). */
typedef struct kiwi_outbox_msg {
    struct kiwi_outbox_msg *next;
    char *topic;
    char *key; /* NULL: no key */
    void *value;
    size_t len;
    void *opaque;
    int64_t held_since_ms;
} kiwi_outbox_msg;

/* Zero-initialised is empty with no bound; set max_bytes to bound it. */
typedef struct kiwi_outbox {
    kiwi_outbox_msg *head, *tail;
    size_t count;
    size_t bytes;     /* of the values held */
    size_t max_bytes; /* 0: unbounded */
    int tries;        /* offers of the head since it last moved, for the backoff */
} kiwi_outbox;

/* Holds a copy of the message behind the others. Returns 0, or -1 with err
 * when it would take the outbox past max_bytes or there is no memory (the
 * message is then not held and the caller still owns opaque). */
int kiwi_outbox_push (kiwi_outbox *o, const char *topic, const char *key, const void *value, size_t len, void *opaque,
                      int64_t now_ms, kiwi_error_t *err);

/* The oldest held message, or NULL. */
const kiwi_outbox_msg *kiwi_outbox_head (const kiwi_outbox *o);

/* Removes the oldest message (the producer took it, or it is given up) and
 * returns its opaque. The backoff starts again. */
void *kiwi_outbox_pop (kiwi_outbox *o);

/* The producer still had no room for the head: counts a try. */
void kiwi_outbox_refused (kiwi_outbox *o);

/* True when the head has been held for timeout_ms or longer. */
bool kiwi_outbox_head_expired (const kiwi_outbox *o, int64_t now_ms, int64_t timeout_ms);

/* Seconds until the next offer: 50 ms, doubling with each refused try, at
 * most 1 s. */
double kiwi_outbox_backoff_s (const kiwi_outbox *o);

/* Frees every held message; each opaque goes to free_opaque (may be NULL). */
void kiwi_outbox_clear (kiwi_outbox *o, void (*free_opaque) (void *));

#endif
