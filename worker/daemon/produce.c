/*
 * produce.c: the daemon's messages out, d->producer and d->outbox
 * (daemon-internal.h).
 *
 * Every message goes through kiwi__produce with an ack saying what its
 * acknowledgement does: a result's frees its slot and commits its offset, a
 * dead letter's or a republished result's commits the offset it carries.
 * When librdkafka's queue is full the message waits in the outbox
 * (outbox.h) and a timer offers it again, so the loop never blocks on a
 * slow broker; a message that cannot be delivered is given up the way a
 * failed delivery report is, and its task, uncommitted, is redelivered.
 */
#include <stdlib.h>
#include <string.h>

#include "worker/daemon/daemon-internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "schemas/task.h"

void
kiwi__ack_free (kiwi__daemon_ack *a)
{
    if (a == NULL)
        return;
    kiwi__origin_clear (&a->from);
    free (a->task_id);
    free (a);
}

static void
ack_free_v (void *a)
{
    kiwi__ack_free (a);
}

/* A message that will not be delivered (a final delivery report, or given
 * up in the outbox): a result is produced again or cut down; anything else
 * leaves its offset uncommitted, so the task is redelivered. Frees a. */
static void
not_delivered (kiwi__daemon *d, const char *topic, kiwi__daemon_ack *a, rd_kafka_resp_err_t e, size_t len)
{
    kiwi_errorf ("delivery to %s failed: %s", topic, rd_kafka_err2str (e));
    kiwi_worker_metrics_delivery_failed (d->metrics.registry, topic);
    if (a != NULL && a->kind == KIWI__ACK_RESULT)
        kiwi__slots_result_failed (d, a->slot, a->generation, e, len);
    kiwi__ack_free (a);
}

void
kiwi__producer_io_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    kiwi__daemon *d = w->data;
    kiwi__drain_pipe (d->producer.pipe[0]);
    rd_kafka_poll (d->producer.rk, 0);
    if (d->outbox.held.count) /* deliveries made room */
        kiwi__outbox_flush (d, 0);
}

static rd_kafka_resp_err_t
producev (kiwi__daemon *d, const char *topic, const char *key, const void *buf, size_t len, kiwi__daemon_ack *a)
{
    return rd_kafka_producev (d->producer.rk, RD_KAFKA_V_TOPIC (topic), RD_KAFKA_V_KEY (key, key ? strlen (key) : 0),
                              RD_KAFKA_V_VALUE ((void *) buf, len), RD_KAFKA_V_MSGFLAGS (RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_OPAQUE (a), RD_KAFKA_V_END);
}

static void
outbox_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    (void) loop;
    (void) revents;
    kiwi__daemon *d = w->data;
    rd_kafka_poll (d->producer.rk, 0); /* delivery reports make room */
    kiwi__outbox_flush (d, 0);
}

void
kiwi__outbox_flush (kiwi__daemon *d, int block_ms)
{
    int64_t until = kiwi_mono_ms () + block_ms;
    int64_t timeout_ms = (int64_t) d->cfg->delivery_timeout * 1000;
    const kiwi_outbox_msg *m;
    while ((m = kiwi_outbox_head (&d->outbox.held)) != NULL) {
        rd_kafka_resp_err_t e = producev (d, m->topic, m->key, m->value, m->len, m->opaque);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
            kiwi_outbox_pop (&d->outbox.held); /* its ack now rides with the message */
            if (kiwi_outbox_head (&d->outbox.held) == NULL)
                kiwi_info ("producer queue has room again: every held message handed over");
            continue;
        }
        int64_t now = kiwi_mono_ms ();
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL || kiwi_outbox_head_expired (&d->outbox.held, now, timeout_ms)) {
            if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                e = RD_KAFKA_RESP_ERR__MSG_TIMED_OUT;
            char *topic = strdup (m->topic);
            size_t len = m->len;
            kiwi__daemon_ack *a = kiwi_outbox_pop (&d->outbox.held);
            not_delivered (d, topic ? topic : "(topic)", a, e, len);
            free (topic);
            continue;
        }
        if (block_ms > 0 && now < until) {
            rd_kafka_poll (d->producer.rk, 100);
            continue;
        }
        kiwi_outbox_refused (&d->outbox.held);
        break;
    }
    if (kiwi_outbox_head (&d->outbox.held) != NULL && block_ms == 0 && d->loop != NULL) {
        ev_timer_stop (d->loop, &d->outbox.timer);
        ev_timer_init (&d->outbox.timer, outbox_timer_cb, kiwi_outbox_backoff_s (&d->outbox.held), 0.);
        d->outbox.timer.data = d;
        ev_timer_start (d->loop, &d->outbox.timer);
    }
}

/* Hands a message to the producer, or holds it in the outbox while the
 * producer's queue is full (or while earlier ones are held: the order
 * stays). Returns 0, or -1 with d->outbox.last_err when it was refused (a is
 * then still the caller's). */
int
kiwi__produce (kiwi__daemon *d, const char *topic, const char *key, const void *buf, size_t len, kiwi__daemon_ack *a)
{
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__QUEUE_FULL;
    if (kiwi_outbox_head (&d->outbox.held) == NULL) {
        e = producev (d, topic, key, buf, len, a);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            return 0;
    }
    if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        bool first = kiwi_outbox_head (&d->outbox.held) == NULL;
        kiwi_error_t err = NULL;
        if (kiwi_outbox_push (&d->outbox.held, topic, key, buf, len, a, kiwi_mono_ms (), &err) == 0) {
            if (first) {
                kiwi_warn ("producer queue full (broker slow or away): holding messages and offering them again");
                kiwi__outbox_flush (d, 0); /* arms the timer */
            }
            return 0;
        }
        kiwi_errorf ("produce to %s: %s", topic, kiwi_error_msg (err));
        kiwi_error_free (&err);
    } else
        kiwi_errorf ("produce to %s: %s", topic, rd_kafka_err2str (e));
    kiwi_worker_metrics_delivery_failed (d->metrics.registry, topic);
    d->outbox.last_err = e;
    return -1;
}

/* Frees what the outbox still holds (at exit: their tasks are uncommitted
 * and will be redelivered). */
void
kiwi__outbox_drop (kiwi__daemon *d)
{
    if (d->outbox.held.count)
        kiwi_warn ("%zu message(s) the producer never had room for are dropped; their tasks stay uncommitted",
                   d->outbox.held.count);
    kiwi_outbox_clear (&d->outbox.held, ack_free_v);
    if (d->loop)
        ev_timer_stop (d->loop, &d->outbox.timer);
}

void
kiwi__producer_dr_msg_cb (rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void) rk;
    kiwi__daemon *d = opaque;
    kiwi__daemon_ack *a = m->_private;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        /* the idempotent producer retries on its own; a failure here is
         * final: the task's offset stays uncommitted, so it is redelivered */
        not_delivered (d, rd_kafka_topic_name (m->rkt), a, m->err, m->len);
        return;
    }
    if (a != NULL) {
        if (a->kind == KIWI__ACK_RESULT)
            kiwi__slots_result_acked (d, a->slot, a->generation);
        else if (a->kind == KIWI__ACK_COMMIT) {
            if (a->republished)
                kiwi__redis_mark_done_published (d, a->task_id);
            kiwi__consumer_offset_done (d, &a->from, a->task_id);
        }
    }
    kiwi__ack_free (a);
}
