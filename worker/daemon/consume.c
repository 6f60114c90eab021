/*
 * consume.c: messages in (daemon-internal.h).
 *
 * The consumer queue is read when librdkafka signals its pipe (and every
 * 0.5 s): each message is tracked for its offset, decoded, and admitted
 * (admit.c) or, undecodable, sent to the dead-letter topic with its
 * reason. A rebalance hands the revoked partitions' tasks to their next
 * owner.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "worker/daemon/daemon-internal.h"

#include "common/cleanup.h"
#include "schemas/deadletter.h"
#include "common/log.h"
#include "worker/task/secrets.h"
#include "schemas/task.h"

/* A copy of the first len bytes of buf with the worker's secrets masked,
 * or NULL when there is nothing to mask (or no memory: then *failed). */
static char *
masked_copy (const kiwi_mask *mask, const void *buf, size_t len, size_t *out_len, bool *failed)
{
    if (buf == NULL || !kiwi_mask_hits (mask, buf, len))
        return NULL;
    char *c = malloc (len ? len : 1);
    if (c == NULL) {
        *failed = true;
        return NULL;
    }
    memcpy (c, buf, len);
    *out_len = kiwi_mask_apply_buf (mask, c, len);
    return c;
}

/* The undecodable message goes to the dead-letter topic with the reason:
 * its bytes as they came (they are the producer's own), except that any of
 * the worker's own secrets in them, or in the reason, is masked. */
static void
dead_letter (daemon_t *d, const rd_kafka_message_t *m, const char *reason)
{
    kiwi_error_t merr = NULL;
    cleanup_mask kiwi_mask *mask = kiwi_worker_mask (d->cfg, (const char *const *) environ, NULL, &merr);
    bool mask_failed = mask == NULL;
    kiwi_error_free (&merr);
    cleanup_free char *masked_reason = kiwi_mask_apply (mask, reason);
    size_t orig_len = m->len, key_len = m->key_len;
    cleanup_free char *orig = masked_copy (mask, m->payload, m->len, &orig_len, &mask_failed);
    cleanup_free char *key = masked_copy (mask, m->key, m->key_len, &key_len, &mask_failed);
    kiwi_deadletter dl;
    kiwi_deadletter_init (&dl);
    dl.reason = masked_reason != NULL ? masked_reason : (char *) "undecodable task (its reason could not be masked)";
    dl.topic = (char *) rd_kafka_topic_name (m->rkt);
    dl.partition = m->partition;
    dl.offset = m->offset;
    dl.original = orig != NULL ? orig : m->payload;
    dl.original_len = orig_len;
    dl.has_key = m->key != NULL;
    dl.key = key != NULL ? key : m->key;
    dl.key_len = key_len;
    if (mask_failed) {
        /* could not look for secrets in them: the bytes stay out */
        dl.original = NULL;
        dl.original_len = 0;
        dl.has_key = false;
        dl.reason = (char *) "undecodable task (not copied: out of memory masking it)";
    }
    dl.ts = kiwi_now_ms ();
    dl.worker_id = d->cfg->worker_id;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    ack *a = calloc (1, sizeof *a);
    if (a == NULL || kiwi__origin_set (&a->from, m) < 0) {
        kiwi__ack_free (a);
        kiwi__out_of_memory (d, "a dead letter");
        return;
    }
    a->kind = ACK_COMMIT;
    if (kiwi_deadletter_encode (&dl, &buf, &len, &err) < 0) {
        /* too large to carry whole: say so, without the bytes */
        kiwi_error_free (&err);
        dl.original = NULL;
        dl.original_len = 0;
        dl.has_key = false;
        dl.reason = (char *) "undecodable task too large to copy into the dead-letter topic";
        kiwi_deadletter_encode (&dl, &buf, &len, &err);
    }
    kiwi_warn ("dead letter %s[%d]@%lld: %s", dl.topic, dl.partition, (long long) dl.offset, dl.reason);
    if (buf == NULL || kiwi__produce (d, d->cfg->topic_dlq, NULL, buf, len, a) < 0)
        kiwi__ack_free (a);
    kiwi_error_free (&err);
    free (buf);
}

static void
on_message (daemon_t *d, rd_kafka_message_t *m)
{
    if (d->fatal) /* stopping: left uncommitted, redelivered */
        return;
    if (m->err) {
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
            return;
        kiwi_warn ("consumer: %s", rd_kafka_message_errstr (m));
        if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
            char buf[256];
            rd_kafka_fatal_error (d->consumer, buf, sizeof buf);
            snprintf (d->fatal_msg, sizeof d->fatal_msg, "kafka consumer: %s", buf);
            d->fatal = true;
            ev_break (d->loop, EVBREAK_ALL);
        }
        return;
    }
    origin o;
    if (kiwi__origin_set (&o, m) < 0) {
        kiwi__out_of_memory (d, "a consumed message");
        return;
    }
    kiwi_error_t err = NULL;
    if (kiwi_offsets_add (&d->offsets, o.topic, o.partition, o.offset, &err) < 0) {
        /* untracked, a later commit could pass over it: stop rather */
        snprintf (d->fatal_msg, sizeof d->fatal_msg, "consumer: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi__origin_clear (&o);
        d->fatal = true;
        ev_break (d->loop, EVBREAK_ALL);
        return;
    }
    kiwi_task t;
    if (kiwi_task_decode (m->payload, m->len, &t, &err) < 0) {
        dead_letter (d, m, kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi__origin_clear (&o);
        return;
    }
    decide_ctx *c = calloc (1, sizeof *c);
    if (c != NULL) {
        c->task_id = strdup (t.id);
        c->raw = malloc (m->len ? m->len : 1);
    }
    kiwi_task_clear (&t);
    if (c == NULL || c->task_id == NULL || c->raw == NULL) {
        if (c != NULL) {
            free (c->task_id);
            free (c->raw);
            free (c);
        }
        kiwi__origin_clear (&o);
        kiwi__out_of_memory (d, "a consumed task");
        return;
    }
    c->d = d;
    memcpy (c->raw, m->payload, m->len);
    c->raw_len = m->len;
    c->from = o;
    kiwi__admit (d, c);
}

static void
consume_all (daemon_t *d)
{
    rd_kafka_message_t *m;
    while ((m = rd_kafka_consumer_poll (d->consumer, 0)) != NULL) {
        on_message (d, m);
        rd_kafka_message_destroy (m);
        /* the decisions just started may fill the slots before any task
         * starts: pause now, so the messages already fetched stay in Kafka
         * (a pause discards them; a resume fetches again from here) */
        kiwi__update_pause (d);
    }
}

static void
drain_pipe (int fd)
{
    char buf[256];
    while (read (fd, buf, sizeof buf) > 0)
        ;
}

void
kiwi__cq_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    daemon_t *d = w->data;
    drain_pipe (d->cq_pipe[0]);
    consume_all (d);
}

void
kiwi__pq_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    daemon_t *d = w->data;
    drain_pipe (d->pq_pipe[0]);
    rd_kafka_poll (d->producer, 0);
    if (d->outbox.count) /* deliveries made room */
        kiwi__outbox_flush (d, 0);
}

void
kiwi__poll_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    rd_kafka_poll (d->producer, 0);
    consume_all (d);
    kiwi_worker_metrics_state (d->metrics, d->busy, d->nslots, d->redis_ok);
}

void
kiwi__rebalance_cb (rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    daemon_t *d = opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        kiwi_info ("assigned %d partition(s)", parts->cnt);
        rd_kafka_assign (rk, parts);
        if (d->assignment)
            rd_kafka_topic_partition_list_destroy (d->assignment);
        d->assignment = rd_kafka_topic_partition_list_copy (parts);
        d->paused = false;
        kiwi__update_pause (d);
        return;
    }
    kiwi_info ("revoked %d partition(s)", parts->cnt);
    for (int i = 0; i < parts->cnt; i++) {
        const char *topic = parts->elems[i].topic;
        int32_t p = parts->elems[i].partition;
        /* running tasks of these partitions finish and publish, but their
         * offsets are the next owner's to commit: it finds the finished
         * record and commits without working them again */
        for (int k = 0; k < d->nslots; k++) {
            slot *s = &d->slots[k];
            if (s->state != SLOT_FREE && s->from.topic && s->from.partition == p && strcmp (s->from.topic, topic) == 0)
                s->revoked = true;
        }
        kiwi_offsets_revoke (&d->offsets, topic, p);
        kiwi__drop_ready (d, topic, p);
        waiting **wp = &d->waiting;
        while (*wp) {
            waiting *w = *wp;
            if (w->from.partition == p && strcmp (w->from.topic, topic) == 0) {
                *wp = w->next;
                kiwi__waiting_free (w);
            } else
                wp = &w->next;
        }
    }
    /* librdkafka keeps a partition's pause through an unassign and a later
     * assign: resume what is revoked, or a partition that comes back is
     * never fetched again (d->paused starts false on every assign) */
    rd_kafka_resume_partitions (rk, parts);
    d->paused = false;
    rd_kafka_assign (rk, NULL);
    if (d->assignment) {
        rd_kafka_topic_partition_list_destroy (d->assignment);
        d->assignment = NULL;
    }
}
