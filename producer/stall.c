/*
 * stall.c: why nothing moves, from the heartbeats (see stall.h).
 */
#include "producer/stall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "producer/kafka.h"
#include "schemas/heartbeat.h"

void
kiwi_stall_init (kiwi_stall *st, const kiwi_cli_settings *s, int64_t now_mono)
{
    memset (st, 0, sizeof *st);
    kiwi_fleet_init (&st->fleet, (int64_t) s->gone_after * 1000);
    st->topic = s->topic_heartbeats;
    st->tasks = s->topic_tasks;
    /* as kiwi fleet reads it: far enough back that a worker gone lately
     * is known as gone */
    st->window_ms = s->gone_after > 0 ? 3 * (int64_t) s->gone_after * 1000 : 180000;
    if (st->window_ms < 60000)
        st->window_ms = 60000;
    st->after_ms = (int64_t) s->stall_after * 1000;
    st->moved_at = now_mono;
}

void
kiwi_stall_clear (kiwi_stall *st)
{
    kiwi_fleet_clear (&st->fleet);
    free (st->caught);
    st->caught = NULL;
    free (st->said);
    st->said = NULL;
    free (st->readers_said);
    st->readers_said = NULL;
}

void
kiwi_stall_moved (kiwi_stall *st, int64_t now_mono)
{
    st->moved_at = now_mono;
}

bool
kiwi_stall_message (kiwi_stall *st, const rd_kafka_message_t *m)
{
    if (st->topic == NULL || strcmp (rd_kafka_topic_name (m->rkt), st->topic) != 0)
        return false;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF && m->partition >= 0 && m->partition < st->n_parts
        && st->caught != NULL && !st->caught[m->partition]) {
        st->caught[m->partition] = true;
        st->n_caught++;
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR)
        return true;
    kiwi_heartbeat hb;
    kiwi_error_t err = NULL;
    if (kiwi_heartbeat_decode (m->payload, m->len, &hb, &err) < 0) {
        kiwi_debug ("%s [%d] at %lld: %s", st->topic, (int) m->partition, (long long) m->offset,
                    kiwi_error_msg (err));
        kiwi_error_free (&err);
        return true;
    }
    if (kiwi_fleet_update (&st->fleet, &hb, &err) < 0) {
        kiwi_heartbeat_clear (&hb);
        kiwi_debug ("%s: %s", st->topic, kiwi_error_msg (err));
        kiwi_error_free (&err);
    }
    return true;
}

/* A worker is up: whether a consumer group reads the tasks topic, asked
 * of the broker every KIWI_STALL_READERS_EVERY_MS at most (the answer kept
 * in between). A malloc'd diagnosis, or NULL. */
static char *
readers_diagnosis (kiwi_stall *st, rd_kafka_t *rk, int64_t now_mono)
{
    if (st->tasks == NULL || *st->tasks == '\0')
        return NULL;
    if (now_mono >= st->next_readers) {
        kiwi_topic_readers r = KIWI_TOPIC_READERS_INIT;
        kiwi_error_t err = NULL;
        free (st->readers_said);
        st->readers_said = NULL;
        if (kiwi_topic_readers_get (rk, st->tasks, 5000, &r, &err) < 0
            || kiwi_fleet_diagnose_readers (&st->fleet, kiwi_wall_ms (), st->topic, st->tasks, &r, &st->readers_said,
                                            &err)
                   < 0) {
            kiwi_debug ("who reads %s: %s", st->tasks, kiwi_error_msg (err));
            kiwi_error_free (&err);
        }
        kiwi_topic_readers_clear (&r);
        st->next_readers = kiwi_mono_ms () + KIWI_STALL_READERS_EVERY_MS;
    }
    return st->readers_said ? strdup (st->readers_said) : NULL;
}

char *
kiwi_stall_tick (kiwi_stall *st, rd_kafka_t *rk, int64_t now_mono)
{
    if (st->after_ms <= 0)
        return NULL;
    kiwi_error_t err = NULL;
    /* the topic is read only once things are half-way to a stall, so a
     * command that is over sooner costs the broker nothing more */
    if (st->n_parts == 0 && now_mono - st->moved_at >= st->after_ms / 2 && now_mono >= st->next_assign) {
        int64_t *from = NULL;
        int n = kiwi_cli_assign_topic_since (rk, st->topic, kiwi_wall_ms () - st->window_ms, 5000, &from, &err);
        if (n < 0) {
            kiwi_debug ("%s: %s", st->topic, kiwi_error_msg (err));
            kiwi_error_free (&err);
        } else if (n > 0) {
            st->n_parts = n; /* out of memory for caught: never caught up, never said */
            st->caught = calloc ((size_t) n, sizeof *st->caught);
            /* a partition with nothing to read back is caught up already */
            for (int p = 0; p < n && st->caught != NULL; p++) {
                int64_t lo = 0, hi = 0;
                if (rd_kafka_query_watermark_offsets (rk, st->topic, p, &lo, &hi, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR
                    && from[p] >= hi) {
                    st->caught[p] = true;
                    st->n_caught++;
                }
            }
        }
        free (from);
        st->looked = n >= 0;
        st->next_assign = kiwi_mono_ms () + 1000;
    }
    if (!st->looked || st->n_caught < st->n_parts)
        return NULL; /* the heartbeats are not all read yet */
    if (now_mono - st->moved_at < st->after_ms)
        return NULL;
    char *diag = NULL;
    if (kiwi_fleet_diagnose (&st->fleet, kiwi_wall_ms (), st->topic, st->window_ms, &diag, &err) < 0) {
        kiwi_error_free (&err);
        return NULL;
    }
    if (diag == NULL)
        diag = readers_diagnosis (st, rk, now_mono);
    if (diag == NULL || (st->said != NULL && strcmp (diag, st->said) == 0)) {
        if (diag == NULL) { /* a worker is up: a later stall is said again */
            free (st->said);
            st->said = NULL;
        }
        free (diag);
        return NULL;
    }
    char *say = NULL;
    if (asprintf (&say, "nothing moved for %llds: %s", (long long) ((now_mono - st->moved_at) / 1000), diag) < 0) {
        free (diag);
        return NULL;
    }
    free (st->said);
    st->said = diag; /* now owned by st */
    return say;
}
