/*
 * outbox.c: the held messages of outbox.h, a FIFO list.
 */
#include "worker/daemon/outbox.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void
msg_free (kiwi_outbox_msg *m)
{
    free (m->topic);
    free (m->key);
    free (m->value);
    free (m);
}

int
kiwi_outbox_push (kiwi_outbox *o, const char *topic, const char *key, const void *value, size_t len, void *opaque,
                  int64_t now_ms, kiwi_error_t *err)
{
    if (o->max_bytes && (len > o->max_bytes || o->bytes > o->max_bytes - len))
        return kiwi_error_make (err, 0,
                                "the producer's queue is full and %zu message(s) (%zu bytes) already wait for room; "
                                "this one (%zu bytes) is not held",
                                o->count, o->bytes, len);
    kiwi_outbox_msg *m = calloc (1, sizeof *m);
    if (m == NULL)
        return kiwi_error_make (err, ENOMEM, "holding a message for %s", topic);
    m->topic = strdup (topic);
    m->key = key ? strdup (key) : NULL;
    m->value = malloc (len ? len : 1);
    if (m->topic == NULL || (key && m->key == NULL) || m->value == NULL) {
        msg_free (m);
        return kiwi_error_make (err, ENOMEM, "holding a message for %s", topic);
    }
    if (len)
        memcpy (m->value, value, len);
    m->len = len;
    m->opaque = opaque;
    m->held_since_ms = now_ms;
    if (o->tail)
        o->tail->next = m;
    else
        o->head = m;
    o->tail = m;
    o->count++;
    o->bytes += len;
    return 0;
}

const kiwi_outbox_msg *
kiwi_outbox_head (const kiwi_outbox *o)
{
    return o->head;
}

void *
kiwi_outbox_pop (kiwi_outbox *o)
{
    kiwi_outbox_msg *m = o->head;
    if (m == NULL)
        return NULL;
    o->head = m->next;
    if (o->head == NULL)
        o->tail = NULL;
    o->count--;
    o->bytes -= m->len;
    o->tries = 0;
    void *opaque = m->opaque;
    msg_free (m);
    return opaque;
}

void
kiwi_outbox_refused (kiwi_outbox *o)
{
    if (o->tries < 64)
        o->tries++;
}

bool
kiwi_outbox_head_expired (const kiwi_outbox *o, int64_t now_ms, int64_t timeout_ms)
{
    return o->head != NULL && now_ms - o->head->held_since_ms >= timeout_ms;
}

double
kiwi_outbox_backoff_s (const kiwi_outbox *o)
{
    double s = 0.05;
    for (int i = 0; i < o->tries && s < 1.0; i++)
        s *= 2;
    return s < 1.0 ? s : 1.0;
}

void
kiwi_outbox_clear (kiwi_outbox *o, void (*free_opaque) (void *))
{
    while (o->head) {
        void *op = kiwi_outbox_pop (o);
        if (free_opaque)
            free_opaque (op);
    }
}
