/*
 * admit.c: what a consumed task becomes (daemon-internal.h).
 *
 *   consumed ─► a slot free? ─ no ─► next in line (ready queue)
 *            └─ yes ─► Redis: finished before? ─┬─ same body, published ─► commit
 *                                              ├─ same body, not published ─► republish, then commit
 *                                              ├─ other body ─► error result for this delivery
 *                                              └─ no ─► lease ─┬─ won ─► attempt number ─► slot
 *                                                              └─ held ─► parked, looked at again
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "worker/daemon/daemon-internal.h"

#include "worker/task/cache.h"
#include "worker/daemon/lease.h"
#include "common/log.h"
#include "worker/task/policy.h"
#include "schemas/task.h"

void
kiwi__waiting_free (waiting *w)
{
    free (w->task_id);
    free (w->raw);
    free (w->from.topic);
    free (w);
}

/* A decision ended (a slot, parked, or nothing to do): its place counts
 * no more. */
static void
decided (daemon_t *d)
{
    if (d->deciding > 0)
        d->deciding--;
    kiwi__drain_done_check (d);
}

static void
decide_free (decide_ctx *c)
{
    free (c->task_id);
    free (c->raw);
    kiwi__origin_clear (&c->from);
    free (c);
}

static void
park (daemon_t *d, decide_ctx *c)
{
    if (d->draining) { /* parked tasks are dropped by the drain: uncommitted */
        decide_free (c);
        decided (d);
        return;
    }
    waiting *w = calloc (1, sizeof *w);
    if (w == NULL) {
        decide_free (c);
        decided (d);
        kiwi__out_of_memory (d, "parking a task");
        return;
    }
    w->task_id = c->task_id;
    w->raw = c->raw;
    w->raw_len = c->raw_len;
    w->from = c->from;
    w->next_look_ms = kiwi_now_ms () + 2000;
    w->next = d->waiting;
    d->waiting = w;
    c->task_id = c->raw = NULL;
    c->from.topic = NULL;
    decide_free (c);
    decided (d);
    kiwi__pump_ready (d);
    kiwi__update_pause (d);
}

/* The attempt number has come back (or not: 0, unknown); the leased task
 * starts with it. */
static void
attempt_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    decide_ctx *c = privdata;
    daemon_t *d = c->d;
    redisReply *reply = r;
    uint32_t attempt = 0;
    if (reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0 && reply->integer <= UINT32_MAX)
        attempt = (uint32_t) reply->integer;
    else
        kiwi_warn ("task %s: no attempt number from redis; its events say attempt 0 (unknown)", c->task_id);
    decided (d);
    kiwi__start_run (d, c->task_id, c->raw, c->raw_len, &c->from, true, attempt);
    c->task_id = c->raw = NULL;
    decide_free (c);
}

/* A task whose lease this worker won: which run of it this is, counted in
 * Redis across every worker (kiwi:attempt:<id>, kept as long as its done
 * record), so that a run after a redelivery is told apart from the one
 * before it in the progress events. Then starts it (attempt_cb). */
static void
fetch_attempt (daemon_t *d, decide_ctx *c)
{
    if (d->redis_ok
        && redisAsyncCommand (d->redis, attempt_cb, c, "EVAL %s 1 %s%s %lld", kiwi_lua_attempt, KIWI_REDIS_ATTEMPT_PREFIX,
                              c->task_id, (long long) d->cfg->done_ttl_s)
               == REDIS_OK)
        return;
    attempt_cb (NULL, NULL, c);
}

static void
lease_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    decide_ctx *c = privdata;
    daemon_t *d = c->d;
    redisReply *reply = r;
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        /* Redis went away between the two calls: run without a lease */
        decided (d);
        kiwi__start_task (d, c->task_id, c->raw, c->raw_len, &c->from, false);
        c->task_id = c->raw = NULL;
        decide_free (c);
        return;
    }
    if (reply->type == REDIS_REPLY_STATUS) { /* OK: ours */
        fetch_attempt (d, c);
        return;
    }
    kiwi_info ("task %s: another worker holds its lease; waiting for it to finish or expire", c->task_id);
    park (d, c);
}

/* True when the consumed task's body hashes to `stored` (the finished
 * record's); its own hash goes to mine. An undecodable body (it was decoded
 * once already) counts as the same. */
static bool
same_body (const decide_ctx *c, const char *stored, char mine[65])
{
    kiwi_task t;
    kiwi_error_t err = NULL;
    if (kiwi_task_decode (c->raw, c->raw_len, &t, &err) < 0) {
        kiwi_error_free (&err);
        return true;
    }
    int rc = kiwi_policy_task_hash (&t, mine, &err);
    kiwi_task_clear (&t);
    kiwi_error_free (&err);
    return rc < 0 || strcmp (mine, stored) == 0;
}

/* A task whose id already finished with a different body: an error result
 * for this delivery (on the results topic, keyed by the id), its offset
 * committed once the broker has it; the finished record, and the earlier
 * result, stay as they were. */
static void
refuse_reused_id (daemon_t *d, decide_ctx *c, const char *mine, const char *stored)
{
    char reason[512];
    snprintf (reason, sizeof reason,
              "task id %s was already used by a different task (body %.12s, this one %.12s): not run; give each "
              "task its own id",
              c->task_id, stored, mine);
    kiwi_warn ("task %s: %s", c->task_id, reason);
    kiwi_result r;
    kiwi_result_init (&r);
    r.task_id = c->task_id;
    r.status = KIWI_RESULT_ERROR;
    r.reason = reason;
    r.worker_id = d->cfg->worker_id;
    r.finished_at = kiwi_now_ms ();
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_result_encode (&r, &buf, &len, &err) < 0) {
        kiwi_errorf ("task %s: %s", c->task_id, kiwi_error_msg (err));
        kiwi_error_free (&err);
        return; /* uncommitted: redelivered */
    }
    ack *a = calloc (1, sizeof *a);
    if (a == NULL) {
        free (buf);
        kiwi__out_of_memory (d, "refusing a reused task id");
        return;
    }
    a->kind = ACK_COMMIT;
    a->from = c->from;
    c->from.topic = NULL; /* now owned by the ack */
    if (kiwi__produce (d, d->cfg->topic_results, c->task_id, buf, len, a) < 0)
        kiwi__ack_free (a);
    free (buf);
}

/* True while a slot of this worker holds task_id (running it, or
 * publishing its result). */
static bool
slot_holds (const daemon_t *d, const char *task_id)
{
    for (int i = 0; i < d->nslots; i++) {
        const slot *s = &d->slots[i];
        if (s->state != SLOT_FREE && s->task_id != NULL && strcmp (s->task_id, task_id) == 0)
            return true;
    }
    return false;
}

static void
done_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    decide_ctx *c = privdata;
    daemon_t *d = c->d;
    redisReply *reply = r;
    if (reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == 4
        && reply->element[0]->type == REDIS_REPLY_STRING) {
        const redisReply *res = reply->element[0], *pub = reply->element[1], *hash = reply->element[2],
                         *holder = reply->element[3];
        bool published = pub->type == REDIS_REPLY_STRING && strcmp (pub->str, "1") == 0;
        char mine[65] = "";
        if (hash->type == REDIS_REPLY_STRING && hash->len > 0 && !same_body (c, hash->str, mine)) {
            /* the id finished before as a different task: this one is not
             * run, and the earlier result is not its answer */
            refuse_reused_id (d, c, mine, hash->str);
        } else if (published) {
            kiwi_info ("task %s: delivered again after it finished; its result stands", c->task_id);
            kiwi__offset_done (d, &c->from);
        } else if (slot_holds (d, c->task_id)
                   || (holder->type == REDIS_REPLY_STRING && strcmp (holder->str, d->cfg->worker_id) != 0)) {
            /* the worker that finished it (this one, or the lease's holder)
             * is still publishing: its acknowledgement marks the record */
            kiwi_info ("task %s: finished, its result on its way (lease: %s); looking again later", c->task_id,
                       holder->type == REDIS_REPLY_STRING ? holder->str : "this worker");
            park (d, c);
            return;
        } else {
            kiwi_info ("task %s: finished before but its result was never acknowledged; publishing it again",
                       c->task_id);
            ack *a = calloc (1, sizeof *a);
            if (a == NULL || (a->task_id = strdup (c->task_id)) == NULL) {
                free (a);
                kiwi__out_of_memory (d, "republishing a result");
            } else {
                a->kind = ACK_COMMIT;
                a->from = c->from;
                c->from.topic = NULL; /* now owned by the ack */
                if (kiwi__produce (d, d->cfg->topic_results, c->task_id, res->str, res->len, a) < 0)
                    kiwi__ack_free (a);
            }
        }
        decide_free (c);
        decided (d);
        kiwi__pump_ready (d);
        kiwi__update_pause (d);
        return;
    }
    if (reply == NULL || !d->redis_ok) {
        decided (d);
        kiwi__start_task (d, c->task_id, c->raw, c->raw_len, &c->from, false);
        c->task_id = c->raw = NULL;
        decide_free (c);
        return;
    }
    redisAsyncCommand (d->redis, lease_cb, c, "SET %s%s %s NX PX %lld", KIWI_REDIS_LEASE_PREFIX, c->task_id,
                       d->cfg->worker_id, (long long) d->cfg->lease_ttl_s * 1000);
}

/* Looks the consumed task up: the finished record and the lease's holder,
 * read in one step (kiwi_lua_done_look, lease.h); done_cb decides. */
static void
decide (daemon_t *d, decide_ctx *c)
{
    kiwi_info ("task %s: received from %s[%d]@%lld", c->task_id, c->from.topic, (int) c->from.partition,
               (long long) c->from.offset);
    d->deciding++;
    if (!d->redis_ok) {
        kiwi_warn ("task %s: redis unreachable: running it without a lease or cache", c->task_id);
        decided (d);
        kiwi__start_task (d, c->task_id, c->raw, c->raw_len, &c->from, false);
        c->task_id = c->raw = NULL;
        decide_free (c);
        return;
    }
    redisAsyncCommand (d->redis, done_cb, c, "EVAL %s 2 %s%s %s%s", kiwi_lua_done_look, KIWI_REDIS_DONE_PREFIX,
                       c->task_id, KIWI_REDIS_LEASE_PREFIX, c->task_id);
}

/* A consumed task: looked up now if a slot is free, else queued. */
void
kiwi__admit (daemon_t *d, decide_ctx *c)
{
    kiwi_admission a = kiwi__admission (d);
    if (kiwi_admission_look_up_now (&a)) {
        decide (d, c);
        return;
    }
    kiwi_debug ("task %s: every slot taken; next in line", c->task_id);
    c->next = NULL;
    if (d->ready_tail)
        d->ready_tail->next = c;
    else
        d->ready_head = c;
    d->ready_tail = c;
    d->nready++;
}

/* Queued tasks into the slots that are free. */
void
kiwi__pump_ready (daemon_t *d)
{
    for (kiwi_admission a = kiwi__admission (d); d->ready_head && kiwi_admission_may_look_up (&a); a = kiwi__admission (d)) {
        decide_ctx *c = d->ready_head;
        d->ready_head = c->next;
        if (d->ready_head == NULL)
            d->ready_tail = NULL;
        d->nready--;
        c->next = NULL;
        decide (d, c);
    }
}

/* Queued tasks dropped (uncommitted): all of them, or those of one
 * partition (topic NULL: all). */
void
kiwi__drop_ready (daemon_t *d, const char *topic, int32_t partition)
{
    decide_ctx **pp = &d->ready_head;
    d->ready_tail = NULL;
    while (*pp) {
        decide_ctx *c = *pp;
        if (topic == NULL || (c->from.partition == partition && strcmp (c->from.topic, topic) == 0)) {
            *pp = c->next;
            d->nready--;
            decide_free (c);
        } else {
            d->ready_tail = c;
            pp = &c->next;
        }
    }
}

void
kiwi__wait_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    int64_t now = kiwi_now_ms ();
    waiting **pp = &d->waiting;
    while (*pp) {
        waiting *wt = *pp;
        kiwi_admission a = kiwi__admission (d);
        if (wt->next_look_ms > now || !kiwi_admission_may_look_up (&a)) {
            pp = &wt->next;
            continue;
        }
        *pp = wt->next;
        decide_ctx *c = calloc (1, sizeof *c);
        if (c == NULL) {
            kiwi__waiting_free (wt);
            kiwi__out_of_memory (d, "looking at a parked task again");
            return;
        }
        c->d = d;
        c->task_id = wt->task_id;
        c->raw = wt->raw;
        c->raw_len = wt->raw_len;
        c->from = wt->from;
        free (wt);
        decide (d, c);
    }
    kiwi__pump_ready (d);
    kiwi__update_pause (d);
}
