/*
 * admit.c: what a consumed task becomes (daemon-internal.h).
 *
 *   consumed ─► a slot free? ─ no ─► next in line (ready queue)
 *            └─ yes ─► Redis: finished before? ─┬─ same body, published ─► commit
 *                                              ├─ same body, not published ─► republish, then commit
 *                                              ├─ other body ─► error result for this delivery
 *                                              └─ no ─► lease ─┬─ won ─► attempt number ─► slot
 *                                                              └─ held ─► parked, looked at again
 *
 * Its state is d->admit; kiwi__admission gathers the counts that
 * admission.h's rules decide on.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "worker/daemon/daemon-internal.h"

#include "worker/task/cache.h"
#include "worker/daemon/lease.h"
#include "common/clock.h"
#include "common/log.h"
#include "worker/task/policy.h"
#include "schemas/task.h"

struct kiwi__daemon_waiting {
    kiwi__daemon_waiting *next;
    char *task_id;
    char *raw;
    size_t raw_len;
    kiwi__daemon_origin from;
    int64_t next_look_ms;
};

kiwi_admission
kiwi__admission (const kiwi__daemon *d)
{
    return (kiwi_admission) { .nslots = d->slots.n,
                              .busy = d->slots.busy,
                              .deciding = d->admit.deciding,
                              .nready = d->admit.nready,
                              .parked = d->admit.waiting != NULL,
                              .draining = d->stop.draining,
                              .drain_expired = d->stop.drain_expired,
                              .stopped = d->egress_check.isolation_failed && d->cfg->egress_stop_when_degraded };
}

static void
waiting_free (kiwi__daemon_waiting *w)
{
    free (w->task_id);
    free (w->raw);
    free (w->from.topic);
    free (w);
}

/* A decision ended (a slot, parked, or nothing to do): its place counts
 * no more. */
static void
decided (kiwi__daemon *d)
{
    if (d->admit.deciding > 0)
        d->admit.deciding--;
    kiwi__drain_done_check (d);
}

static void
decide_free (kiwi__daemon_decide_ctx *c)
{
    free (c->task_id);
    free (c->raw);
    kiwi__origin_clear (&c->from);
    free (c);
}

int
kiwi__admit_park (kiwi__daemon *d, char *task_id, char *raw, size_t raw_len, kiwi__daemon_origin *from,
                  int64_t after_ms)
{
    kiwi__daemon_waiting *w = calloc (1, sizeof *w);
    if (w == NULL)
        return -1;
    w->task_id = task_id;
    w->raw = raw;
    w->raw_len = raw_len;
    w->from = *from;
    from->topic = NULL;
    w->next_look_ms = kiwi_mono_ms () + after_ms;
    w->next = d->admit.waiting;
    d->admit.waiting = w;
    return 0;
}

static void
park (kiwi__daemon *d, kiwi__daemon_decide_ctx *c)
{
    if (d->stop.draining) { /* parked tasks are dropped by the drain: uncommitted */
        decide_free (c);
        decided (d);
        return;
    }
    if (kiwi__admit_park (d, c->task_id, c->raw, c->raw_len, &c->from, 2000) < 0) {
        decide_free (c);
        decided (d);
        kiwi__out_of_memory (d, "parking a task");
        return;
    }
    c->task_id = c->raw = NULL;
    decide_free (c);
    decided (d);
    kiwi__admit_pump (d);
    kiwi__consumer_update_pause (d);
}

/* The attempt number has come back (or not: 0, unknown); the leased task
 * starts with it. */
static void
attempt_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    kiwi__daemon_decide_ctx *c = privdata;
    kiwi__daemon *d = c->d;
    redisReply *reply = r;
    uint32_t attempt = 0;
    if (reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0 && reply->integer <= UINT32_MAX)
        attempt = (uint32_t) reply->integer;
    else
        kiwi_warn ("task %s: no attempt number from redis; its events say attempt 0 (unknown)", c->task_id);
    decided (d);
    kiwi__slots_start_run (d, c->task_id, c->raw, c->raw_len, &c->from, true, attempt);
    c->task_id = c->raw = NULL;
    decide_free (c);
}

/* A task whose lease this worker won: which run of it this is, counted in
 * Redis across every worker (kiwi:attempt:<id>, kept as long as its done
 * record), so that a run after a redelivery is told apart from the one
 * before it in the progress events. Then starts it (attempt_cb). */
static void
fetch_attempt (kiwi__daemon *d, kiwi__daemon_decide_ctx *c)
{
    if (d->redis.ok
        && redisAsyncCommand (d->redis.ctx, attempt_cb, c, "EVAL %s 1 %s%s %lld", kiwi_lua_attempt, KIWI_REDIS_ATTEMPT_PREFIX,
                              c->task_id, (long long) d->cfg->done_ttl_s)
               == REDIS_OK)
        return;
    attempt_cb (NULL, NULL, c);
}

static void
lease_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    kiwi__daemon_decide_ctx *c = privdata;
    kiwi__daemon *d = c->d;
    redisReply *reply = r;
    if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        /* Redis went away between the two calls: run without a lease */
        decided (d);
        kiwi__slots_start_task (d, c->task_id, c->raw, c->raw_len, &c->from, false);
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
same_body (const kiwi__daemon_decide_ctx *c, const char *stored, char mine[65])
{
    kiwi_task t;
    kiwi_error_t err = NULL;
    if (kiwi_task_decode (c->raw, c->raw_len, &t, &err) < 0) {
        kiwi_error_free (&err);
        return true;
    }
    int rc = kiwi_task_body_sha256 (&t, mine, &err);
    kiwi_task_clear (&t);
    kiwi_error_free (&err);
    return rc < 0 || strcmp (mine, stored) == 0;
}

/* A task whose id already finished with a different body: an error result
 * for this delivery (on the results topic, keyed by the id), its offset
 * committed once the broker has it; the finished record, and the earlier
 * result, stay as they were. */
static void
refuse_reused_id (kiwi__daemon *d, kiwi__daemon_decide_ctx *c, const char *mine, const char *stored)
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
    r.finished_at = kiwi_wall_ms ();
    r.task_sha256 = (char *) mine; /* this delivery's body: its producer's follower takes this answer */
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_result_encode (&r, &buf, &len, &err) < 0) {
        kiwi_errorf ("task %s: %s", c->task_id, kiwi_error_msg (err));
        kiwi_error_free (&err);
        return; /* uncommitted: redelivered */
    }
    kiwi__daemon_ack *a = calloc (1, sizeof *a);
    if (a == NULL) {
        free (buf);
        kiwi__out_of_memory (d, "refusing a reused task id");
        return;
    }
    a->kind = KIWI__ACK_COMMIT;
    a->task_id = strdup (c->task_id); /* for the commit's log line: without memory, it does without */
    a->from = c->from;
    c->from.topic = NULL; /* now owned by the ack */
    if (kiwi__produce (d, d->cfg->topic_results, c->task_id, buf, len, a) < 0)
        kiwi__ack_free (a);
    free (buf);
}

static void
done_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    kiwi__daemon_decide_ctx *c = privdata;
    kiwi__daemon *d = c->d;
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
            kiwi__consumer_offset_done (d, &c->from, c->task_id);
        } else if (kiwi__slots_holding (d, c->task_id)
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
            kiwi__daemon_ack *a = calloc (1, sizeof *a);
            if (a == NULL || (a->task_id = strdup (c->task_id)) == NULL) {
                free (a);
                kiwi__out_of_memory (d, "republishing a result");
            } else {
                a->kind = KIWI__ACK_COMMIT;
                a->republished = true;
                a->from = c->from;
                c->from.topic = NULL; /* now owned by the ack */
                if (kiwi__produce (d, d->cfg->topic_results, c->task_id, res->str, res->len, a) < 0)
                    kiwi__ack_free (a);
            }
        }
        decide_free (c);
        decided (d);
        kiwi__admit_pump (d);
        kiwi__consumer_update_pause (d);
        return;
    }
    if (reply == NULL || !d->redis.ok) {
        decided (d);
        kiwi__slots_start_task (d, c->task_id, c->raw, c->raw_len, &c->from, false);
        c->task_id = c->raw = NULL;
        decide_free (c);
        return;
    }
    redisAsyncCommand (d->redis.ctx, lease_cb, c, "SET %s%s %s NX PX %lld", KIWI_REDIS_LEASE_PREFIX, c->task_id,
                       d->cfg->worker_id, (long long) d->cfg->lease_ttl_s * 1000);
}

/* Looks the consumed task up: the finished record and the lease's holder,
 * read in one step (kiwi_lua_done_look, lease.h); done_cb decides. */
static void
decide (kiwi__daemon *d, kiwi__daemon_decide_ctx *c)
{
    kiwi_info ("task %s: received from %s[%d]@%lld", c->task_id, c->from.topic, (int) c->from.partition,
               (long long) c->from.offset);
    d->admit.deciding++;
    if (!d->redis.ok) {
        kiwi_warn ("task %s: redis unreachable: running it without a lease or cache", c->task_id);
        decided (d);
        kiwi__slots_start_task (d, c->task_id, c->raw, c->raw_len, &c->from, false);
        c->task_id = c->raw = NULL;
        decide_free (c);
        return;
    }
    redisAsyncCommand (d->redis.ctx, done_cb, c, "EVAL %s 2 %s%s %s%s", kiwi_lua_done_look, KIWI_REDIS_DONE_PREFIX,
                       c->task_id, KIWI_REDIS_LEASE_PREFIX, c->task_id);
}

void
kiwi__admit (kiwi__daemon *d, kiwi__daemon_decide_ctx *c)
{
    kiwi_admission a = kiwi__admission (d);
    if (kiwi_admission_look_up_now (&a)) {
        decide (d, c);
        return;
    }
    kiwi_debug ("task %s: every slot taken; next in line", c->task_id);
    c->next = NULL;
    if (d->admit.ready_tail)
        d->admit.ready_tail->next = c;
    else
        d->admit.ready_head = c;
    d->admit.ready_tail = c;
    d->admit.nready++;
}

void
kiwi__admit_pump (kiwi__daemon *d)
{
    for (kiwi_admission a = kiwi__admission (d); d->admit.ready_head && kiwi_admission_may_look_up (&a); a = kiwi__admission (d)) {
        kiwi__daemon_decide_ctx *c = d->admit.ready_head;
        d->admit.ready_head = c->next;
        if (d->admit.ready_head == NULL)
            d->admit.ready_tail = NULL;
        d->admit.nready--;
        c->next = NULL;
        decide (d, c);
    }
}

void
kiwi__admit_drop (kiwi__daemon *d, const char *topic, int32_t partition)
{
    kiwi__daemon_decide_ctx **pp = &d->admit.ready_head;
    d->admit.ready_tail = NULL;
    while (*pp) {
        kiwi__daemon_decide_ctx *c = *pp;
        if (topic == NULL || (c->from.partition == partition && strcmp (c->from.topic, topic) == 0)) {
            *pp = c->next;
            d->admit.nready--;
            decide_free (c);
        } else {
            d->admit.ready_tail = c;
            pp = &c->next;
        }
    }
    kiwi__daemon_waiting **wp = &d->admit.waiting;
    while (*wp) {
        kiwi__daemon_waiting *w = *wp;
        if (topic == NULL || (w->from.partition == partition && strcmp (w->from.topic, topic) == 0)) {
            *wp = w->next;
            waiting_free (w);
        } else
            wp = &w->next;
    }
}

void
kiwi__admit_wait_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    kiwi__daemon *d = w->data;
    int64_t now = kiwi_mono_ms ();
    kiwi__daemon_waiting **pp = &d->admit.waiting;
    while (*pp) {
        kiwi__daemon_waiting *wt = *pp;
        kiwi_admission a = kiwi__admission (d);
        if (wt->next_look_ms > now || !kiwi_admission_may_look_up (&a)) {
            pp = &wt->next;
            continue;
        }
        *pp = wt->next;
        kiwi__daemon_decide_ctx *c = calloc (1, sizeof *c);
        if (c == NULL) {
            waiting_free (wt);
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
    kiwi__admit_pump (d);
    kiwi__consumer_update_pause (d);
}
