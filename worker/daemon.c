/*
 * daemon.c: the Kafka-fed pool of task slots (see daemon.h).
 *
 * Life of a task message:
 *   consumed ─► decode ─┬─ invalid ─► dead-letter topic ─► (acked) commit
 *                       └─ valid ─► Redis: finished before? ─┬─ yes ─► (republish if never acked) commit
 *                                                           └─ no ─► lease ─┬─ won ─► task process in a slot
 *                                                                           └─ held ─► wait, look again later
 *   task process ─► progress frames ─► numbered, published
 *               └─► result frame ─► Redis record ─► results topic ─► (acked) lease released, commit
 *
 * Offsets are committed per partition up to the first message that is not
 * finished, so a slow task never lets a later commit skip it.
 */
#include "daemon.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "deadletter.h"
#include "defaults.h"
#include "egress.h"
#include "events.h"
#include "cache.h"
#include "admission.h"
#include "heartbeat.h"
#include "kafka-conf.h"
#include "lease.h"
#include "log.h"
#include "offsets.h"
#include "policy.h"
#include "proc.h"
#include "proxy-runner.h"
#include "result-fit.h"
#include "sandbox.h"
#include "secrets.h"
#include "strv.h"
#include "task.h"
#include "worker-metrics.h"

extern char **environ;

typedef enum { SLOT_FREE = 0, SLOT_STARTING, SLOT_RUNNING, SLOT_PUBLISHING } slot_state;

typedef struct daemon daemon_t;
static void pump_ready (daemon_t *d);

/* Where a message came from, so its offset can be committed later. */
typedef struct origin {
    char *topic;
    int32_t partition;
    int64_t offset;
} origin;

typedef struct slot {
    daemon_t *d;
    int index;
    slot_state state;
    pid_t pid;
    int fd;
    ev_io io;
    ev_child child;
    kiwi_frame_reader reader;
    char *task_id;
    char *raw; /* the task message, as consumed */
    size_t raw_len;
    origin from;
    uint64_t seq;     /* of this run's events, from 1 */
    uint32_t attempt; /* this run of the task, from 1 (Redis); 0: unknown */
    bool have_result;
    char *result; /* encoded Result from the task process */
    size_t result_len;
    bool revoked; /* its partition went elsewhere: publish, never commit */
    bool leased;
    char hash[65]; /* kiwi_policy_task_hash of the task, kept in its finished record */
    int64_t started_ms;
    unsigned generation; /* tells delivery reports of an old occupant apart */
    ev_timer retry;      /* the result produced again after a failed delivery */
    int deliveries_failed;
    bool minimal;        /* `result` is the minimal one: the broker refused the whole as too large */
    bool counted;        /* its result is in the metrics */
} slot;

/* A task waiting for another worker's lease on it to end. */
typedef struct waiting {
    struct waiting *next;
    char *task_id;
    char *raw;
    size_t raw_len;
    origin from;
    int64_t next_look_ms;
} waiting;

static void
waiting_free (waiting *w)
{
    free (w->task_id);
    free (w->raw);
    free (w->from.topic);
    free (w);
}

struct daemon {
    const kiwi_worker_config *cfg;
    const char *self_exe;
    struct ev_loop *loop;
    rd_kafka_t *consumer, *producer;
    rd_kafka_queue_t *cq, *pq;
    int cq_pipe[2], pq_pipe[2];
    ev_io cq_w, pq_w;
    ev_timer poll_timer, heartbeat_timer, lease_timer, redis_timer, wait_timer, drain_timer, gc_timer;
    ev_signal sigterm_w, sigint_w;
    redisAsyncContext *redis;
    bool redis_ok;          /* connected and authenticated */
    char redis_error[512];  /* why not, for the log (once per change) and the heartbeat */
    slot *slots;
    int nslots, busy;
    int deciding; /* tasks consumed whose Redis look-up has not answered yet */
    /* consumed while every slot was taken: started (looked up) in order as
     * slots free, so a freed slot does not wait for Kafka (up to
     * KIWI_LOOKAHEAD of them; uncommitted, dropped on a drain or revoke) */
    struct decide_ctx *ready_head, *ready_tail;
    int nready;
    bool paused;
    bool draining;
    bool drain_expired; /* the drain deadline passed: unanswered look-ups no longer hold the exit */
    bool fatal;
    char fatal_msg[512];
    rd_kafka_topic_partition_list_t *assignment;
    kiwi_offsets offsets; /* consumed and not yet committed, per partition */
    waiting *waiting;
    uint64_t done, failed, cache_hits, cache_misses;
    int64_t started_ms;
    /* egress checks: the last result of each, from the check process */
    ev_timer egress_timer;
    ev_timer gc_timer2;
    ev_child egress_child;
    ev_io egress_io;
    int egress_fd;
    pid_t egress_pid;
    char egress_buf[16384];
    size_t egress_len;
    json_t *egress;           /* object: name -> {ok, detail, checked_at} */
    bool isolation_failed;    /* a failed isolation check: degraded */
    char degraded_reason[1024];
    rd_kafka_resp_err_t produce_err; /* why the last produce() was refused */
    pid_t gc_pid;                    /* the clean-up process (kiwi-worker --gc) running, or 0 */
    kiwi_worker_metrics *metrics;    /* what /metrics shows (worker-metrics.h) */
    kiwi_metrics_server *metrics_server; /* serving it on KIWI_METRICS_ADDR, or NULL */
    kiwi_proxy_runner *proxy;        /* Phase A's egress proxy, or NULL (KIWI_INSTALL_EGRESS=open) */
};

/* ---------- offsets ---------- */

/* Marks a message finished and commits its partition up to the first
 * unfinished message (offsets.h). */
static void
offset_done (daemon_t *d, const origin *o)
{
    int64_t commit;
    if (!kiwi_offsets_done (&d->offsets, o->topic, o->partition, o->offset, &commit))
        return;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new (1);
    rd_kafka_topic_partition_list_add (l, o->topic, o->partition)->offset = commit;
    rd_kafka_resp_err_t e = rd_kafka_commit (d->consumer, l, 1);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        kiwi_warn ("commit %s[%d]@%lld: %s", o->topic, o->partition, (long long) commit, rd_kafka_err2str (e));
    else
        kiwi_debug ("committed %s[%d]@%lld", o->topic, o->partition, (long long) commit);
    rd_kafka_topic_partition_list_destroy (l);
}

static void
origin_set (origin *o, const rd_kafka_message_t *m)
{
    o->topic = strdup (rd_kafka_topic_name (m->rkt));
    o->partition = m->partition;
    o->offset = m->offset;
}

static void
origin_clear (origin *o)
{
    free (o->topic);
    o->topic = NULL;
}

/* ---------- producing ---------- */

typedef enum { ACK_NONE = 0, ACK_RESULT, ACK_COMMIT } ack_kind;

/* What to do when the broker acknowledges a message. */
typedef struct ack {
    ack_kind kind;
    int slot;
    unsigned generation;
    origin from;      /* ACK_COMMIT */
    char *task_id;    /* ACK_COMMIT of a republished result */
} ack;

static void finish_slot (daemon_t *d, slot *s);
static void result_not_delivered (daemon_t *d, slot *s, const char *why);
static void result_too_large (daemon_t *d, slot *s, size_t len, const char *why);
static void on_result_acked (daemon_t *d, slot *s);
static void mark_done_published (daemon_t *d, const char *task_id);

static int
produce (daemon_t *d, const char *topic, const char *key, const void *buf, size_t len, ack *a)
{
    for (int attempt = 0;; attempt++) {
        rd_kafka_resp_err_t e = rd_kafka_producev (
            d->producer, RD_KAFKA_V_TOPIC (topic), RD_KAFKA_V_KEY (key, key ? strlen (key) : 0),
            RD_KAFKA_V_VALUE ((void *) buf, len), RD_KAFKA_V_MSGFLAGS (RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE (a),
            RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            return 0;
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL && attempt < 100) {
            rd_kafka_poll (d->producer, 100);
            continue;
        }
        kiwi_errorf ("produce to %s: %s", topic, rd_kafka_err2str (e));
        kiwi_worker_metrics_delivery_failed (d->metrics, topic);
        d->produce_err = e;
        return -1;
    }
}

static void
dr_msg_cb (rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    daemon_t *d = opaque;
    ack *a = m->_private;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        /* the idempotent producer retries on its own; a failure here is
         * final: the task's offset stays uncommitted, so it is redelivered */
        kiwi_errorf ("delivery to %s failed: %s", rd_kafka_topic_name (m->rkt), rd_kafka_err2str (m->err));
        kiwi_worker_metrics_delivery_failed (d->metrics, rd_kafka_topic_name (m->rkt));
        if (a != NULL && a->kind == ACK_RESULT) {
            slot *s = &d->slots[a->slot];
            if (s->generation == a->generation) {
                if (m->err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
                    result_too_large (d, s, m->len, rd_kafka_err2str (m->err));
                else
                    result_not_delivered (d, s, rd_kafka_err2str (m->err));
            }
        }
    } else if (a != NULL) {
        if (a->kind == ACK_RESULT) {
            slot *s = &d->slots[a->slot];
            if (s->generation == a->generation)
                on_result_acked (d, s);
        } else if (a->kind == ACK_COMMIT) {
            if (a->task_id)
                mark_done_published (d, a->task_id);
            offset_done (d, &a->from);
        }
    }
    if (a != NULL) {
        origin_clear (&a->from);
        free (a->task_id);
        free (a);
    }
}

/* ---------- Redis ---------- */

static void redis_connect (daemon_t *d);

/* Records why Redis is not usable; logs it when the reason changes (a
 * retry every 2 s with the same wrong password logs once). */
static void
redis_failed (daemon_t *d, const char *why)
{
    if (strcmp (d->redis_error, why) != 0)
        kiwi_warn ("%s; tasks run uncached until it is back", why);
    snprintf (d->redis_error, sizeof d->redis_error, "%s", why);
}

/* The reply to the first command on a connection: AUTH with a password,
 * PING without. Only then is the connection used. */
static void
redis_auth_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    daemon_t *d = ac->data;
    redisReply *reply = r;
    if (reply == NULL || d->redis != ac)
        return; /* disconnected meanwhile: redis_disconnect_cb saw to it */
    bool with_password = d->cfg->redis_password != NULL && *d->cfg->redis_password;
    char why[512];
    if (kiwi_redis_auth_reply (d->cfg->redis_host, (int) d->cfg->redis_port, with_password,
                               reply->type == REDIS_REPLY_ERROR, reply->str, why, sizeof why)
        < 0) {
        redis_failed (d, why);
        redisAsyncDisconnect (ac);
        return;
    }
    d->redis_ok = true;
    d->redis_error[0] = '\0';
    kiwi_info ("redis %s:%lld connected%s", d->cfg->redis_host, (long long) d->cfg->redis_port,
               with_password ? " and authenticated" : "");
}

static void
redis_connect_cb (const redisAsyncContext *ac, int status)
{
    daemon_t *d = ac->data;
    if (status != REDIS_OK) {
        char why[512];
        snprintf (why, sizeof why, "redis %s:%lld: %s", d->cfg->redis_host, (long long) d->cfg->redis_port,
                  ac->errstr);
        redis_failed (d, why);
        d->redis = NULL;
        d->redis_ok = false;
        return;
    }
}

static void
redis_disconnect_cb (const redisAsyncContext *ac, int status)
{
    daemon_t *d = ac->data;
    if (d->redis == ac) {
        d->redis = NULL;
        if (d->redis_ok)
            kiwi_warn ("redis disconnected: %s; tasks run uncached until it is back",
                       status == REDIS_OK ? "closed" : ac->errstr);
        d->redis_ok = false;
    }
}

static void
redis_connect (daemon_t *d)
{
    if (d->redis != NULL)
        return;
    /* hiredis 0.14: non-blocking connect; a Redis that does not answer
     * shows as a connect failure or a disconnect, never a blocked loop */
    redisAsyncContext *ac = redisAsyncConnect (d->cfg->redis_host, (int) d->cfg->redis_port);
    if (ac == NULL)
        return;
    if (ac->err) {
        kiwi_warn ("redis: %s", ac->errstr);
        redisAsyncFree (ac);
        return;
    }
    ac->data = d;
    redisLibevAttach (d->loop, ac);
    redisAsyncSetConnectCallback (ac, redis_connect_cb);
    redisAsyncSetDisconnectCallback (ac, redis_disconnect_cb);
    d->redis = ac;
    /* queued now, sent first once connected; nothing else is sent before
     * its reply says the connection may be used (redis_ok) */
    const char *user = d->cfg->redis_user, *password = d->cfg->redis_password;
    if (password && *password && user && *user)
        redisAsyncCommand (ac, redis_auth_cb, NULL, "AUTH %s %s", user, password);
    else if (password && *password)
        redisAsyncCommand (ac, redis_auth_cb, NULL, "AUTH %s", password);
    else
        redisAsyncCommand (ac, redis_auth_cb, NULL, "PING");
}

static void
redis_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    if (d->redis == NULL)
        redis_connect (d);
}

/* The lease's scripts (compare-and-delete, compare-and-extend): lease.h. */

static void
lease_release (daemon_t *d, const char *task_id)
{
    if (!d->redis_ok)
        return;
    redisAsyncCommand (d->redis, NULL, NULL, "EVAL %s 1 %s%s %s", kiwi_lua_lease_release, KIWI_REDIS_LEASE_PREFIX, task_id,
                       d->cfg->worker_id);
}

static void
mark_done_published (daemon_t *d, const char *task_id)
{
    if (d->redis_ok)
        redisAsyncCommand (d->redis, NULL, NULL, "HSET %s%s published 1", KIWI_REDIS_DONE_PREFIX, task_id);
}

/* ---------- heartbeats ---------- */

static void
publish_heartbeat (daemon_t *d)
{
    kiwi_heartbeat h;
    kiwi_heartbeat_init (&h);
    h.worker_id = d->cfg->worker_id;
    h.version = (char *) KIWI_VERSION;
    h.ts = kiwi_now_ms ();
    h.slots_total = (uint32_t) d->nslots;
    h.slots_busy = (uint32_t) d->busy;
    h.tasks_done = d->done;
    h.tasks_failed = d->failed;
    h.cache_hits = d->cache_hits;
    h.cache_misses = d->cache_misses;
    h.redis_ok = d->redis_ok;
    /* the proxy's state is the daemon's own, not the check process's */
    json_t *pcheck = d->proxy ? kiwi_proxy_runner_check (d->proxy) : NULL;
    bool proxy_down = pcheck && !json_is_true (json_object_get (pcheck, "ok"));
    if (pcheck)
        json_object_set (d->egress, "egress_proxy", pcheck);
    h.degraded = d->draining || !d->redis_ok || d->isolation_failed || proxy_down;
    /* every cause, not the first: Redis down on a worker whose egress checks
     * fail must still show */
    char reason[2200] = "";
    if (d->isolation_failed)
        snprintf (reason, sizeof reason, "%s", d->degraded_reason);
    if (d->draining)
        snprintf (reason + strlen (reason), sizeof reason - strlen (reason), "%sdraining: taking no new tasks",
                  reason[0] ? "; " : "");
    if (!d->redis_ok)
        snprintf (reason + strlen (reason), sizeof reason - strlen (reason),
                  "%sredis unreachable or refused: %s: tasks run uncached and without leases", reason[0] ? "; " : "",
                  d->redis_error[0] ? d->redis_error : "not connected");
    if (proxy_down)
        snprintf (reason + strlen (reason), sizeof reason - strlen (reason),
                  "%segress proxy down: %s: Phase A installs fail until it is back", reason[0] ? "; " : "",
                  json_string_value (json_object_get (pcheck, "detail")));
    if (h.degraded)
        h.degraded_reason = reason;
    kiwi_egress_check checks[8];
    size_t n = 0;
    const char *name;
    json_t *v;
    json_object_foreach (d->egress, name, v)
    {
        if (n == 8)
            break;
        checks[n].name = (char *) name;
        checks[n].ok = json_is_true (json_object_get (v, "ok"));
        checks[n].detail = (char *) json_string_value (json_object_get (v, "detail"));
        checks[n].checked_at = json_integer_value (json_object_get (v, "checked_at"));
        n++;
    }
    h.egress = n ? checks : NULL;
    h.n_egress = n;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_heartbeat_encode (&h, &buf, &len, &err) == 0)
        produce (d, d->cfg->topic_heartbeats, d->cfg->worker_id, buf, len, NULL);
    else
        kiwi_warn ("heartbeat: %s", kiwi_error_msg (err));
    kiwi_error_free (&err);
    free (buf);
    json_decref (pcheck);
}

static void
heartbeat_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    publish_heartbeat (w->data);
}

/* ---------- pausing ---------- */

static void
set_paused (daemon_t *d, bool pause)
{
    if (d->paused == pause || d->assignment == NULL)
        return;
    rd_kafka_resp_err_t e = pause ? rd_kafka_pause_partitions (d->consumer, d->assignment)
                                  : rd_kafka_resume_partitions (d->consumer, d->assignment);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        kiwi_warn ("%s partitions: %s", pause ? "pausing" : "resuming", rd_kafka_err2str (e));
    d->paused = pause;
    kiwi_debug ("%s consumption (%d of %d slots busy)", pause ? "paused" : "resumed", d->busy, d->nslots);
}

/* The daemon's counts, for the rules of admission.h. */
static kiwi_admission
admission (const daemon_t *d)
{
    return (kiwi_admission) { .nslots = d->nslots,
                              .busy = d->busy,
                              .deciding = d->deciding,
                              .nready = d->nready,
                              .parked = d->waiting != NULL,
                              .draining = d->draining,
                              .drain_expired = d->drain_expired,
                              .stopped = d->isolation_failed && d->cfg->egress_stop_when_degraded };
}

static bool
want_tasks (daemon_t *d)
{
    kiwi_admission a = admission (d);
    return kiwi_admission_want_tasks (&a);
}

static void
update_pause (daemon_t *d)
{
    set_paused (d, !want_tasks (d));
}

/* ---------- events from task processes ---------- */

static void
count_cache (daemon_t *d, const kiwi_progress *p)
{
    if (p->payload == NULL || (p->phase != KIWI_PHASE_INSTALL && p->phase != KIWI_PHASE_STEP0))
        return;
    char *json = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_msgpack_to_json (p->payload, p->payload_len, &json, &err) < 0) {
        kiwi_error_free (&err);
        return;
    }
    json_t *j = json_loads (json, 0, NULL);
    json_t *c = json_object_get (j, "cached");
    if (json_is_boolean (c)) {
        kiwi_worker_metrics_cache (d->metrics, p->phase == KIWI_PHASE_INSTALL ? "install" : "verify",
                                   json_is_true (c));
        if (json_is_true (c))
            d->cache_hits++;
        else
            d->cache_misses++;
    }
    json_decref (j);
    free (json);
}

static void
publish_event (daemon_t *d, slot *s, kiwi_progress *p)
{
    p->seq = ++s->seq;
    p->attempt = s->attempt;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_progress_encode (p, &buf, &len, &err) == 0)
        produce (d, d->cfg->topic_progress, s->task_id, buf, len, NULL);
    else
        kiwi_warn ("task %s: event %s: %s", s->task_id, p->kind, kiwi_error_msg (err));
    kiwi_error_free (&err);
    free (buf);
}

static void
emit_daemon_event (daemon_t *d, slot *s, kiwi_phase phase, const char *kind, json_t *payload)
{
    kiwi_progress p;
    kiwi_progress_init (&p);
    p.task_id = s->task_id;
    p.worker_id = d->cfg->worker_id;
    p.phase = phase;
    p.kind = (char *) kind;
    p.ts = kiwi_now_ms ();
    if (payload != NULL) {
        kiwi_error_t err = NULL;
        if (kiwi_json_to_msgpack (payload, &p.payload, &p.payload_len, &err) < 0)
            kiwi_error_free (&err);
        json_decref (payload);
    }
    publish_event (d, s, &p);
    free (p.payload);
}

static void
on_frame (int type, const char *body, size_t len, void *ud)
{
    slot *s = ud;
    daemon_t *d = s->d;
    if (type == KIWI_FRAME_PROGRESS) {
        kiwi_progress p;
        kiwi_error_t err = NULL;
        if (kiwi_progress_decode (body, len, &p, &err) < 0) {
            kiwi_warn ("task %s: undecodable event from the task process: %s", s->task_id, kiwi_error_msg (err));
            kiwi_error_free (&err);
            return;
        }
        count_cache (d, &p);
        publish_event (d, s, &p);
        kiwi_progress_clear (&p);
    } else if (type == KIWI_FRAME_RESULT) {
        free (s->result);
        s->result = malloc (len ? len : 1);
        memcpy (s->result, body, len);
        s->result_len = len;
        s->have_result = true;
    } else if (type == KIWI_FRAME_OBSERVE) {
        kiwi_error_t err = NULL;
        if (kiwi_worker_metrics_observation (d->metrics, body, len, &err) < 0)
            kiwi_debug ("task %s: %s", s->task_id, kiwi_error_msg (err));
        kiwi_error_free (&err);
    }
}

static void
io_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    slot *s = w->data;
    char buf[65536];
    for (;;) {
        ssize_t n = read (s->fd, buf, sizeof buf);
        if (n > 0) {
            kiwi_error_t err = NULL;
            if (kiwi_frame_feed (&s->reader, buf, (size_t) n, on_frame, s, &err) < 0) {
                kiwi_warn ("task %s: %s", s->task_id, kiwi_error_msg (err));
                kiwi_error_free (&err);
                kill (s->pid, SIGTERM);
            }
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        /* EOF: the task process closed its end */
        ev_io_stop (loop, w);
        close (s->fd);
        s->fd = -1;
        return;
    }
}

/* Builds an error Result for a task whose process ended without one. */
static void
synthesize_result (daemon_t *d, slot *s, const char *reason)
{
    kiwi_result r;
    kiwi_result_init (&r);
    r.task_id = s->task_id;
    r.status = KIWI_RESULT_ERROR;
    r.reason = (char *) reason;
    r.worker_id = d->cfg->worker_id;
    r.finished_at = kiwi_now_ms ();
    r.duration_ms = (uint64_t) (kiwi_now_ms () - s->started_ms);
    kiwi_error_t err = NULL;
    free (s->result);
    s->result = NULL;
    if (kiwi_result_encode (&r, &s->result, &s->result_len, &err) == 0)
        s->have_result = true;
    else
        kiwi_errorf ("task %s: %s", s->task_id, kiwi_error_msg (err));
    kiwi_error_free (&err);
}

/* Keeps a whole diff that does not fit the results topic: in Redis
 * (kiwi:diff:<task>, living as the finished record) and in
 * <state>/results/<task>.diff. */
static void
keep_diff (const char *task_id, const char *diff, size_t len, char *loc, size_t cap, void *ud)
{
    daemon_t *d = ud;
    size_t used = 0;
    loc[0] = '\0';
    if (d->redis_ok) {
        redisAsyncCommand (d->redis, NULL, NULL, "SET %s%s %b EX %lld", KIWI_REDIS_DIFF_PREFIX, task_id, diff, len,
                           (long long) d->cfg->done_ttl_s);
        used += (size_t) snprintf (loc, cap, "redis:%s%s", KIWI_REDIS_DIFF_PREFIX, task_id);
    }
    char path[4096], host[256] = "localhost";
    kiwi_error_t err = NULL;
    if (kiwi_diff_keep_file (d->cfg->state_dir, task_id, diff, len, path, sizeof path, &err) == 0) {
        gethostname (host, sizeof host - 1);
        if (used < cap)
            snprintf (loc + used, cap - used, "%sfile://%s%s", used ? " " : "", host, path);
    } else
        kiwi_warn ("task %s: keeping its whole diff: %s", task_id, kiwi_error_msg (err));
    kiwi_error_free (&err);
}

/* A result over KIWI_RESULT_MAX_BYTES is cut to fit (result-fit.h). */
static void
fit_result (daemon_t *d, slot *s)
{
    char *out = NULL;
    size_t out_len = 0;
    kiwi_error_t err = NULL;
    int rc = kiwi_result_fit (s->result, s->result_len, (size_t) d->cfg->result_max_bytes, keep_diff, d, &out,
                              &out_len, &err);
    if (rc < 0) {
        char reason[512];
        snprintf (reason, sizeof reason, "the task's result (%zu bytes) could not be read: %s", s->result_len,
                  kiwi_error_msg (err));
        kiwi_errorf ("task %s: %s", s->task_id, reason);
        synthesize_result (d, s, reason);
    } else if (rc == 1) {
        kiwi_warn ("task %s: result of %zu bytes is over KIWI_RESULT_MAX_BYTES (%lld): its diff is cut to fit (%zu "
                   "bytes)",
                   s->task_id, s->result_len, (long long) d->cfg->result_max_bytes, out_len);
        free (s->result);
        s->result = out; /* now owned by the slot */
        s->result_len = out_len;
    }
    kiwi_error_free (&err);
}

static void
publish_result (daemon_t *d, slot *s)
{
    s->state = SLOT_PUBLISHING;
    if (s->result_len > (size_t) d->cfg->result_max_bytes)
        fit_result (d, s);
    if (!s->counted)
        s->counted = kiwi_worker_metrics_result (d->metrics, s->result, s->result_len, NULL) == 0;
    /* the record first: a redelivery after a crash finds it and republishes
     * the same result instead of working the task again */
    if (d->redis_ok) {
        redisAsyncCommand (d->redis, NULL, NULL, "HSET %s%s result %b published 0 hash %s", KIWI_REDIS_DONE_PREFIX,
                           s->task_id, s->result, s->result_len, s->hash);
        redisAsyncCommand (d->redis, NULL, NULL, "EXPIRE %s%s %lld", KIWI_REDIS_DONE_PREFIX, s->task_id,
                           (long long) d->cfg->done_ttl_s);
    }
    ack *a = calloc (1, sizeof *a);
    a->kind = ACK_RESULT;
    a->slot = s->index;
    a->generation = s->generation;
    if (produce (d, d->cfg->topic_results, s->task_id, s->result, s->result_len, a) < 0) {
        free (a);
        if (d->produce_err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
            result_too_large (d, s, s->result_len, "the producer refused it as too large");
        else
            result_not_delivered (d, s, "the producer refused it");
    }
}

/* The broker (or the producer) refused a result as too large: the same
 * bytes would be refused forever, so the minimal result (result-fit.h) goes
 * at once, the finished record holding it too. The minimal result does not
 * depend on what the task printed or changed; a topic refusing even that
 * takes nothing of this worker's, and it is produced again as for a broker
 * that is down. */
static void
result_too_large (daemon_t *d, slot *s, size_t len, const char *why)
{
    if (s->minimal) {
        kiwi_errorf ("task %s: even the minimal result (%zu bytes) is too large for %s: its max.message.bytes is "
                     "below what any result needs",
                     s->task_id, len, d->cfg->topic_results);
        result_not_delivered (d, s, why);
        return;
    }
    char *out = NULL;
    size_t out_len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_result_minimal (s->result, s->result_len, len, keep_diff, d, &out, &out_len, &err) < 0) {
        kiwi_errorf ("task %s: %s", s->task_id, kiwi_error_msg (err));
        kiwi_error_free (&err);
        result_not_delivered (d, s, why);
        return;
    }
    s->minimal = true;
    if (out_len >= s->result_len) {
        /* the result is as small as a minimal one already: nothing smaller to send */
        free (out);
        kiwi_errorf ("task %s: its result (%zu bytes) is too large for %s and no smaller one says as much: its "
                     "max.message.bytes is below what any result needs",
                     s->task_id, len, d->cfg->topic_results);
        result_not_delivered (d, s, why);
        return;
    }
    kiwi_warn ("task %s: result not delivered (%s: %zu bytes); publishing a minimal result (%zu bytes) at once",
               s->task_id, why, len, out_len);
    free (s->result);
    s->result = out; /* now owned by the slot */
    s->result_len = out_len;
    publish_result (d, s);
}

static void
retry_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    slot *s = w->data;
    ev_timer_stop (loop, w);
    if (s->state != SLOT_PUBLISHING)
        return;
    if (s->revoked) /* the next owner publishes it from the finished record */
        result_not_delivered (s->d, s, "its partition went to another worker meanwhile");
    else
        publish_result (s->d, s);
}

/* A result Kafka did not take. The task's offset stays uncommitted and its
 * finished record holds the result; this worker produces it again (after
 * 5, 10, 20, 40, then every 60 s) while the partition is its own. Draining,
 * or revoked, it leaves it to the partition's next owner, who finds the
 * record and publishes it. */
static void
result_not_delivered (daemon_t *d, slot *s, const char *why)
{
    if (s->revoked || d->draining) {
        kiwi_warn ("task %s: result not delivered (%s); left uncommitted for the partition's next owner", s->task_id,
                   why);
        lease_release (d, s->task_id); /* the next owner publishes it at once */
        finish_slot (d, s);
        return;
    }
    int n = s->deliveries_failed++;
    double delay = n >= 4 ? 60.0 : 5.0 * (double) (1 << n);
    kiwi_warn ("task %s: result not delivered (%s); producing it again in %.0f s", s->task_id, why, delay);
    ev_timer_init (&s->retry, retry_cb, delay, 0.);
    s->retry.data = s;
    ev_timer_start (d->loop, &s->retry);
}

/* Results waiting to be produced again are left to the next owner (a drain
 * or a fatal error: the worker stops). */
static void
abandon_retries (daemon_t *d)
{
    for (int i = 0; i < d->nslots; i++) {
        slot *s = &d->slots[i];
        if (s->state == SLOT_PUBLISHING && ev_is_active (&s->retry)) {
            kiwi_warn ("task %s: stopping: its result, not delivered yet, is left uncommitted for the partition's "
                       "next owner",
                       s->task_id);
            lease_release (d, s->task_id);
            finish_slot (d, s);
        }
    }
}

static void
child_cb (struct ev_loop *loop, ev_child *w, int revents)
{
    slot *s = w->data;
    daemon_t *d = s->d;
    ev_child_stop (loop, w);
    /* drain what is left in the pipe */
    if (s->fd >= 0)
        io_cb (loop, &s->io, 0);
    if (s->fd >= 0) {
        ev_io_stop (loop, &s->io);
        close (s->fd);
        s->fd = -1;
    }
    int st = w->rstatus;
    if (!s->have_result) {
        char reason[256];
        if (WIFSIGNALED (st))
            snprintf (reason, sizeof reason, "the task process was killed by signal %d before it finished",
                      WTERMSIG (st));
        else
            snprintf (reason, sizeof reason, "the task process exited with status %d without a result",
                      WEXITSTATUS (st));
        if (d->draining) {
            /* stopped by the drain: not finished, so not committed, and the
             * lease released: another worker takes it */
            kiwi_warn ("task %s: stopped by the drain; it will be redelivered", s->task_id);
            lease_release (d, s->task_id);
            finish_slot (d, s);
            return;
        }
        if (s->revoked) {
            /* stopped because another worker holds its lease, or ended after
             * its partition went elsewhere: the task is theirs to finish; an
             * error result from here would be a second, different result */
            kiwi_warn ("task %s: %s; its lease or partition is elsewhere, so no result from here", s->task_id,
                       reason);
            lease_release (d, s->task_id);
            finish_slot (d, s);
            return;
        }
        kiwi_errorf ("task %s: %s", s->task_id, reason);
        synthesize_result (d, s, reason);
    }
    if (s->have_result) {
        kiwi_result r;
        kiwi_error_t err = NULL;
        if (kiwi_result_decode (s->result, s->result_len, &r, &err) == 0) {
            if (r.status == KIWI_RESULT_FIXED)
                d->done++;
            else
                d->failed++;
            kiwi_info ("task %s: %s after %llu ms", s->task_id, kiwi_result_status_name (r.status),
                       (unsigned long long) r.duration_ms);
            kiwi_result_clear (&r);
        }
        kiwi_error_free (&err);
        publish_result (d, s);
    } else
        finish_slot (d, s);
}

/* Draining ends when no task runs and no look-up is awaiting its reply
 * (after the drain deadline, when no task runs). */
static void
drain_done_check (daemon_t *d)
{
    kiwi_admission a = admission (d);
    if (kiwi_admission_drained (&a))
        ev_break (d->loop, EVBREAK_ALL);
}

static void
finish_slot (daemon_t *d, slot *s)
{
    kiwi_frame_reader_clear (&s->reader);
    free (s->task_id);
    free (s->raw);
    free (s->result);
    origin_clear (&s->from);
    ev_timer_stop (d->loop, &s->retry);
    int idx = s->index;
    unsigned gen = s->generation + 1;
    memset (s, 0, sizeof *s);
    s->d = d;
    s->index = idx;
    s->generation = gen;
    s->fd = -1;
    d->busy--;
    pump_ready (d);
    update_pause (d);
    drain_done_check (d);
}

static void
on_result_acked (daemon_t *d, slot *s)
{
    mark_done_published (d, s->task_id);
    lease_release (d, s->task_id);
    if (!s->revoked)
        offset_done (d, &s->from);
    finish_slot (d, s);
}

/* ---------- starting tasks ---------- */

static slot *
free_slot (daemon_t *d)
{
    for (int i = 0; i < d->nslots; i++)
        if (d->slots[i].state == SLOT_FREE)
            return &d->slots[i];
    return NULL;
}

static int
spawn_task (daemon_t *d, slot *s)
{
    int in[2], out[2];
    if (pipe2 (in, O_CLOEXEC) < 0)
        return -1;
    if (pipe2 (out, O_CLOEXEC) < 0) {
        close (in[0]);
        close (in[1]);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init (&fa);
    posix_spawn_file_actions_adddup2 (&fa, in[0], 0);
    posix_spawn_file_actions_adddup2 (&fa, out[1], 3);
    posix_spawnattr_t attr;
    posix_spawnattr_init (&attr);
    sigset_t none, all;
    sigemptyset (&none);
    sigfillset (&all);
    posix_spawnattr_setsigmask (&attr, &none);
    posix_spawnattr_setsigdefault (&attr, &all);
    posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char *argv[] = { (char *) d->self_exe, (char *) "--task-child", NULL };
    pid_t pid;
    int rc = posix_spawn (&pid, d->self_exe, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy (&fa);
    posix_spawnattr_destroy (&attr);
    close (in[0]);
    close (out[1]);
    if (rc != 0) {
        close (in[1]);
        close (out[0]);
        errno = rc;
        return -1;
    }
    /* the task goes in on stdin; the task process reads it all first */
    const char *p = s->raw;
    size_t left = s->raw_len;
    while (left > 0) {
        ssize_t w = write (in[1], p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        left -= (size_t) w;
    }
    close (in[1]);
    fcntl (out[0], F_SETFL, O_NONBLOCK);
    s->pid = pid;
    s->fd = out[0];
    ev_io_init (&s->io, io_cb, s->fd, EV_READ);
    s->io.data = s;
    ev_io_start (d->loop, &s->io);
    ev_child_init (&s->child, child_cb, pid, 0);
    s->child.data = s;
    ev_child_start (d->loop, &s->child);
    return 0;
}

/* Takes a slot for a task and starts its process, its events stamped with
 * `attempt` (0: unknown). Ownership of raw and from moves to the slot. */
static void
start_run (daemon_t *d, char *task_id, char *raw, size_t raw_len, origin *from, bool leased, uint32_t attempt)
{
    if (d->draining) {
        /* its look-up answered after the drain began: not started, not
         * committed, its lease given back; the next owner takes it */
        kiwi_info ("task %s: not started: the worker is draining; it will be redelivered", task_id);
        if (leased)
            lease_release (d, task_id);
        free (task_id);
        free (raw);
        origin_clear (from);
        return;
    }
    slot *s = free_slot (d);
    if (s == NULL) { /* should not happen: consumption pauses before */
        kiwi_warn ("task %s: no free slot; waiting for one", task_id);
        if (leased)
            lease_release (d, task_id);
        waiting *w = calloc (1, sizeof *w);
        w->task_id = task_id;
        w->raw = raw;
        w->raw_len = raw_len;
        w->from = *from;
        from->topic = NULL;
        w->next_look_ms = kiwi_now_ms () + 1000;
        w->next = d->waiting;
        d->waiting = w;
        update_pause (d);
        return;
    }
    s->state = SLOT_RUNNING;
    s->task_id = task_id;
    s->raw = raw;
    s->raw_len = raw_len;
    s->from = *from;
    from->topic = NULL;
    s->leased = leased;
    s->attempt = attempt;
    s->started_ms = kiwi_now_ms ();
    s->fd = -1;
    d->busy++;
    update_pause (d);
    /* the operator's policy decides before anything runs: a refusal is the
     * task's error result, and no task process is started */
    kiwi_task t;
    kiwi_task_policy pol;
    kiwi_error_t err = NULL;
    int ok = kiwi_task_decode (s->raw, s->raw_len, &t, &err) == 0;
    if (ok) {
        ok = kiwi_policy_task_hash (&t, s->hash, &err) == 0 && kiwi_policy_apply (d->cfg, &t, &pol, &err) == 0;
        kiwi_task_clear (&t);
    }
    if (!ok) {
        char reason[4096];
        snprintf (reason, sizeof reason, "refused by the worker's policy: %s", kiwi_error_msg (err));
        kiwi_warn ("task %s: %s", s->task_id, reason);
        emit_daemon_event (d, s, KIWI_PHASE_ACCEPTED, "refused",
                           json_pack ("{s:s,s:i,s:s,s:I,s:b,s:s}", "worker", d->cfg->worker_id, "slot", s->index,
                                      "topic", s->from.topic, "offset", (json_int_t) s->from.offset, "leased", leased,
                                      "reason", kiwi_error_msg (err)));
        kiwi_error_free (&err);
        synthesize_result (d, s, reason);
        d->failed++;
        publish_result (d, s);
        return;
    }
    emit_daemon_event (d, s, KIWI_PHASE_ACCEPTED, "accepted",
                       json_pack ("{s:s,s:i,s:s,s:I,s:b,s:o}", "worker", d->cfg->worker_id, "slot", s->index, "topic",
                                  s->from.topic, "offset", (json_int_t) s->from.offset, "leased", leased, "limits",
                                  kiwi_policy_limits_json (&pol)));
    if (spawn_task (d, s) < 0) {
        char reason[256];
        snprintf (reason, sizeof reason, "cannot start the task process: %s", strerror (errno));
        kiwi_errorf ("task %s: %s", s->task_id, reason);
        synthesize_result (d, s, reason);
        publish_result (d, s);
        return;
    }
    kiwi_info ("task %s: started in slot %d (pid %d), attempt %u", s->task_id, s->index, (int) s->pid,
               (unsigned) s->attempt);
}

/* A run whose attempt number is unknown: no lease, so Redis was not asked. */
static void
start_task (daemon_t *d, char *task_id, char *raw, size_t raw_len, origin *from, bool leased)
{
    start_run (d, task_id, raw, raw_len, from, leased, 0);
}

/* ---------- deciding what to do with a task ---------- */

typedef struct decide_ctx {
    daemon_t *d;
    char *task_id;
    char *raw;
    size_t raw_len;
    origin from;
    struct decide_ctx *next; /* in d->ready_head */
} decide_ctx;

/* A decision ended (a slot, parked, or nothing to do): its place counts
 * no more. */
static void
decided (daemon_t *d)
{
    if (d->deciding > 0)
        d->deciding--;
    drain_done_check (d);
}

static void
decide_free (decide_ctx *c)
{
    free (c->task_id);
    free (c->raw);
    origin_clear (&c->from);
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
    pump_ready (d);
    update_pause (d);
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
    start_run (d, c->task_id, c->raw, c->raw_len, &c->from, true, attempt);
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
        start_task (d, c->task_id, c->raw, c->raw_len, &c->from, false);
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
    a->kind = ACK_COMMIT;
    a->from = c->from;
    c->from.topic = NULL; /* now owned by the ack */
    if (produce (d, d->cfg->topic_results, c->task_id, buf, len, a) < 0) {
        origin_clear (&a->from);
        free (a);
    }
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
            offset_done (d, &c->from);
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
            a->kind = ACK_COMMIT;
            a->from = c->from;
            c->from.topic = NULL;
            a->task_id = strdup (c->task_id);
            if (produce (d, d->cfg->topic_results, c->task_id, res->str, res->len, a) < 0) {
                origin_clear (&a->from);
                free (a->task_id);
                free (a);
            }
        }
        decide_free (c);
        decided (d);
        pump_ready (d);
        update_pause (d);
        return;
    }
    if (reply == NULL || !d->redis_ok) {
        decided (d);
        start_task (d, c->task_id, c->raw, c->raw_len, &c->from, false);
        c->task_id = c->raw = NULL;
        decide_free (c);
        return;
    }
    redisAsyncCommand (d->redis, lease_cb, c, "SET %s%s %s NX PX %lld", KIWI_REDIS_LEASE_PREFIX, c->task_id,
                       d->cfg->worker_id, (long long) d->cfg->lease_ttl_s * 1000);
}

/* The finished record and the lease's holder, read in one step
 * (kiwi_kiwi_lua_done_look, lease.h). */

static void
decide (daemon_t *d, decide_ctx *c)
{
    kiwi_info ("task %s: received from %s[%d]@%lld", c->task_id, c->from.topic, (int) c->from.partition,
               (long long) c->from.offset);
    d->deciding++;
    if (!d->redis_ok) {
        kiwi_warn ("task %s: redis unreachable: running it without a lease or cache", c->task_id);
        decided (d);
        start_task (d, c->task_id, c->raw, c->raw_len, &c->from, false);
        c->task_id = c->raw = NULL;
        decide_free (c);
        return;
    }
    redisAsyncCommand (d->redis, done_cb, c, "EVAL %s 2 %s%s %s%s", kiwi_lua_done_look, KIWI_REDIS_DONE_PREFIX,
                       c->task_id, KIWI_REDIS_LEASE_PREFIX, c->task_id);
}

/* A consumed task: looked up now if a slot is free, else queued. */
static void
admit (daemon_t *d, decide_ctx *c)
{
    kiwi_admission a = admission (d);
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
static void
pump_ready (daemon_t *d)
{
    for (kiwi_admission a = admission (d); d->ready_head && kiwi_admission_may_look_up (&a); a = admission (d)) {
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
static void
drop_ready (daemon_t *d, const char *topic, int32_t partition)
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

static void
wait_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    int64_t now = kiwi_now_ms ();
    waiting **pp = &d->waiting;
    while (*pp) {
        waiting *wt = *pp;
        kiwi_admission a = admission (d);
        if (wt->next_look_ms > now || !kiwi_admission_may_look_up (&a)) {
            pp = &wt->next;
            continue;
        }
        *pp = wt->next;
        decide_ctx *c = calloc (1, sizeof *c);
        c->d = d;
        c->task_id = wt->task_id;
        c->raw = wt->raw;
        c->raw_len = wt->raw_len;
        c->from = wt->from;
        free (wt);
        decide (d, c);
    }
    pump_ready (d);
    update_pause (d);
}

/* ---------- consuming ---------- */

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
    a->kind = ACK_COMMIT;
    origin_set (&a->from, m);
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
    if (buf == NULL || produce (d, d->cfg->topic_dlq, NULL, buf, len, a) < 0) {
        origin_clear (&a->from);
        free (a);
    }
    kiwi_error_free (&err);
    free (buf);
}

static void
on_message (daemon_t *d, rd_kafka_message_t *m)
{
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
    origin_set (&o, m);
    kiwi_error_t err = NULL;
    if (kiwi_offsets_add (&d->offsets, o.topic, o.partition, o.offset, &err) < 0) {
        /* untracked, a later commit could pass over it: stop rather */
        snprintf (d->fatal_msg, sizeof d->fatal_msg, "consumer: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        origin_clear (&o);
        d->fatal = true;
        ev_break (d->loop, EVBREAK_ALL);
        return;
    }
    kiwi_task t;
    if (kiwi_task_decode (m->payload, m->len, &t, &err) < 0) {
        dead_letter (d, m, kiwi_error_msg (err));
        kiwi_error_free (&err);
        origin_clear (&o);
        return;
    }
    decide_ctx *c = calloc (1, sizeof *c);
    c->d = d;
    c->task_id = strdup (t.id);
    c->raw = malloc (m->len);
    memcpy (c->raw, m->payload, m->len);
    c->raw_len = m->len;
    c->from = o;
    kiwi_task_clear (&t);
    admit (d, c);
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
        update_pause (d);
    }
}

static void
drain_pipe (int fd)
{
    char buf[256];
    while (read (fd, buf, sizeof buf) > 0)
        ;
}

static void
cq_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    daemon_t *d = w->data;
    drain_pipe (d->cq_pipe[0]);
    consume_all (d);
}

static void
pq_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    daemon_t *d = w->data;
    drain_pipe (d->pq_pipe[0]);
    rd_kafka_poll (d->producer, 0);
}

static void
poll_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    rd_kafka_poll (d->producer, 0);
    consume_all (d);
    kiwi_worker_metrics_state (d->metrics, d->busy, d->nslots, d->redis_ok);
}

static void
rebalance_cb (rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    daemon_t *d = opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        kiwi_info ("assigned %d partition(s)", parts->cnt);
        rd_kafka_assign (rk, parts);
        if (d->assignment)
            rd_kafka_topic_partition_list_destroy (d->assignment);
        d->assignment = rd_kafka_topic_partition_list_copy (parts);
        d->paused = false;
        update_pause (d);
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
        drop_ready (d, topic, p);
        waiting **wp = &d->waiting;
        while (*wp) {
            waiting *w = *wp;
            if (w->from.partition == p && strcmp (w->from.topic, topic) == 0) {
                *wp = w->next;
                waiting_free (w);
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

/* ---------- leases ---------- */

static void
renew_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    /* privdata: slot index + generation packed */
    redisReply *reply = r;
    uintptr_t v = (uintptr_t) privdata;
    daemon_t *d = ac->data;
    int idx = (int) (v & 0xffff);
    unsigned gen = (unsigned) (v >> 16);
    if (idx >= d->nslots)
        return;
    slot *s = &d->slots[idx];
    if (s->state != SLOT_RUNNING || (s->generation & 0xffff) != (gen & 0xffff) || !s->leased)
        return;
    if (reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) {
        /* the lease is gone or someone else's: this worker was taken for
         * dead; stop so the task is not worked twice at the same time */
        kiwi_errorf ("task %s: lost its lease; stopping it here", s->task_id);
        s->revoked = true;
        kill (s->pid, SIGTERM);
    }
}

static void
lease_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    if (!d->redis_ok)
        return;
    for (int i = 0; i < d->nslots; i++) {
        slot *s = &d->slots[i];
        if (s->state != SLOT_RUNNING || !s->leased)
            continue;
        uintptr_t v = (uintptr_t) i | ((uintptr_t) (s->generation & 0xffff) << 16);
        redisAsyncCommand (d->redis, renew_cb, (void *) v, "EVAL %s 2 %s%s %s%s %s %lld", kiwi_lua_lease_renew,
                           KIWI_REDIS_LEASE_PREFIX, s->task_id, KIWI_REDIS_DONE_PREFIX, s->task_id,
                           d->cfg->worker_id, (long long) d->cfg->lease_ttl_s * 1000);
    }
}

/* ---------- draining ---------- */

static void
drain_deadline_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    kiwi_warn ("drain deadline reached: stopping %d task(s); they will be redelivered", d->busy);
    for (int i = 0; i < d->nslots; i++)
        if (d->slots[i].state == SLOT_RUNNING && d->slots[i].pid > 0)
            kill (d->slots[i].pid, SIGTERM); /* the task process removes its sandboxes */
    ev_timer_stop (loop, w);
    abandon_retries (d);
    d->drain_expired = true;
    drain_done_check (d); /* when only look-ups Redis did not answer were left */
}

static void
kill_stragglers_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    for (int i = 0; i < d->nslots; i++)
        if (d->slots[i].state == SLOT_RUNNING && d->slots[i].pid > 0)
            kill (d->slots[i].pid, SIGKILL);
}

static void
signal_cb (struct ev_loop *loop, ev_signal *w, int revents)
{
    daemon_t *d = w->data;
    if (d->draining) {
        kiwi_warn ("second signal: stopping now");
        ev_timer_stop (loop, &d->drain_timer);
        drain_deadline_cb (loop, &d->drain_timer, 0);
        return;
    }
    d->draining = true;
    kiwi_info ("draining: no new tasks; %d in flight get %lld s to finish", d->busy,
               (long long) d->cfg->drain_timeout_s);
    set_paused (d, true);
    abandon_retries (d);
    /* parked and queued tasks are not ours to finish: they stay uncommitted */
    if (d->nready > 0)
        kiwi_info ("draining: %d task(s) next in line left uncommitted, for redelivery", d->nready);
    drop_ready (d, NULL, 0);
    while (d->waiting) {
        waiting *wt = d->waiting;
        d->waiting = wt->next;
        waiting_free (wt);
    }
    if (d->busy == 0 && d->deciding == 0) {
        ev_break (loop, EVBREAK_ALL);
        return;
    }
    ev_timer_init (&d->drain_timer, drain_deadline_cb, (double) d->cfg->drain_timeout_s, 0.);
    d->drain_timer.data = d;
    ev_timer_start (loop, &d->drain_timer);
}

/* ---------- egress checks ---------- */

static void
egress_line (daemon_t *d, const char *line)
{
    json_error_t je;
    json_t *j = json_loads (line, 0, &je);
    const char *n = json_string_value (json_object_get (j, "name"));
    char *name = n ? strdup (n) : NULL; /* the key outlives the "name" member */
    if (name != NULL) {
        kiwi_worker_metrics_egress (d->metrics, name, json_is_true (json_object_get (j, "ok")));
        json_object_del (j, "name");
        json_object_set (d->egress, name, j);
    }
    free (name);
    json_decref (j);
}

static void
egress_io_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    daemon_t *d = w->data;
    for (;;) {
        ssize_t n = read (d->egress_fd, d->egress_buf + d->egress_len, sizeof d->egress_buf - 1 - d->egress_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            ev_io_stop (loop, w);
            close (d->egress_fd);
            d->egress_fd = -1;
            return;
        }
        d->egress_len += (size_t) n;
        d->egress_buf[d->egress_len] = '\0';
        char *nl;
        while ((nl = strchr (d->egress_buf, '\n')) != NULL) {
            *nl = '\0';
            egress_line (d, d->egress_buf);
            size_t used = (size_t) (nl + 1 - d->egress_buf);
            memmove (d->egress_buf, nl + 1, d->egress_len - used + 1);
            d->egress_len -= used;
        }
        if (d->egress_len == sizeof d->egress_buf - 1)
            d->egress_len = 0; /* a line that long is not ours */
    }
}

static void
egress_evaluate (daemon_t *d)
{
    bool failed = false;
    char reason[1024] = "";
    const char *name;
    json_t *v;
    json_object_foreach (d->egress, name, v)
    {
        if (!kiwi_egress_is_isolation_check (name) || json_is_true (json_object_get (v, "ok")))
            continue;
        failed = true;
        size_t l = strlen (reason);
        snprintf (reason + l, sizeof reason - l, "%segress check %s failed: %s", l ? "; " : "", name,
                  json_string_value (json_object_get (v, "detail")) ?: "");
    }
    if (failed && !d->isolation_failed)
        kiwi_errorf ("degraded: %s%s", reason,
                     d->cfg->egress_stop_when_degraded ? "; taking no new tasks until the checks pass" : "");
    else if (!failed && d->isolation_failed)
        kiwi_info ("egress checks pass again: taking tasks");
    d->isolation_failed = failed;
    snprintf (d->degraded_reason, sizeof d->degraded_reason, "%s%s", reason,
              failed && d->cfg->egress_stop_when_degraded ? "; taking no new tasks until the checks pass" : "");
    update_pause (d);
    publish_heartbeat (d);
}

static void
egress_child_cb (struct ev_loop *loop, ev_child *w, int revents)
{
    daemon_t *d = w->data;
    ev_child_stop (loop, w);
    if (d->egress_fd >= 0)
        egress_io_cb (loop, &d->egress_io, 0);
    if (d->egress_fd >= 0) {
        ev_io_stop (loop, &d->egress_io);
        close (d->egress_fd);
        d->egress_fd = -1;
    }
    d->egress_pid = 0;
    d->egress_len = 0;
    egress_evaluate (d);
}

/* On the way out: the check in flight is cancelled and given 20 s to
 * destroy its sandbox, so that a stopped worker leaves no container. */
static void
stop_egress_check (pid_t pid)
{
    kill (pid, SIGTERM);
    for (int i = 0; i < 200; i++) {
        pid_t r = waitpid (pid, NULL, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return;
        usleep (100000);
    }
    kiwi_warn ("egress checks: process %d still running 20 s after SIGTERM; left to finish on its own", (int) pid);
}

static void
egress_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    if (d->egress_pid > 0 || d->draining)
        return;
    int out[2];
    if (pipe2 (out, O_CLOEXEC) < 0)
        return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init (&fa);
    posix_spawn_file_actions_adddup2 (&fa, out[1], 1);
    char *argv[] = { (char *) d->self_exe, (char *) "--egress-check", NULL };
    pid_t pid;
    int rc = posix_spawn (&pid, d->self_exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy (&fa);
    close (out[1]);
    if (rc != 0) {
        close (out[0]);
        kiwi_warn ("egress checks: cannot start: %s", strerror (rc));
        return;
    }
    fcntl (out[0], F_SETFL, O_NONBLOCK);
    d->egress_fd = out[0];
    d->egress_pid = pid;
    ev_io_init (&d->egress_io, egress_io_cb, d->egress_fd, EV_READ);
    d->egress_io.data = d;
    ev_io_start (loop, &d->egress_io);
    ev_child_init (&d->egress_child, egress_child_cb, pid, 0);
    d->egress_child.data = d;
    ev_child_start (loop, &d->egress_child);
}

/* ---------- clean-up of the state dir ---------- */

static void
gc_child_cb (struct ev_loop *loop, ev_child *w, int revents)
{
    daemon_t *d = w->data;
    ev_child_stop (loop, w);
    d->gc_pid = 0;
    free (w);
}

/* At start and every 10 minutes a process of its own collects workspaces
 * of dead task processes, idle mirrors and snapshots, and the least
 * recently used above the disk watermark (kiwi-worker --gc; gc.h). Without
 * Redis it still runs: snapshots then go by idle age only. */
static void
gc_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    if (d->draining || d->gc_pid > 0) /* one pass at a time */
        return;
    /* the settings it needs as flags: the daemon's own may have come from
     * its command line, which the environment does not carry */
    const kiwi_worker_config *cf = d->cfg;
    char port[24], done_ttl[24], mirror_idle[24], snapshot_idle[24], high[24], low[24];
    snprintf (port, sizeof port, "%lld", (long long) cf->redis_port);
    snprintf (done_ttl, sizeof done_ttl, "%lld", (long long) cf->done_ttl_s);
    snprintf (mirror_idle, sizeof mirror_idle, "%lld", (long long) cf->gc_mirror_idle_s);
    snprintf (snapshot_idle, sizeof snapshot_idle, "%lld", (long long) cf->gc_snapshot_idle_s);
    snprintf (high, sizeof high, "%lld", (long long) cf->gc_disk_high);
    snprintf (low, sizeof low, "%lld", (long long) cf->gc_disk_low);
    char *argv[] = { (char *) d->self_exe, (char *) "--gc", (char *) "--state-dir", cf->state_dir,
                     (char *) "--redis-host", cf->redis_host, (char *) "--redis-port", port,
                     (char *) "--done-ttl", done_ttl, (char *) "--gc-mirror-idle", mirror_idle,
                     (char *) "--gc-snapshot-idle", snapshot_idle, (char *) "--gc-disk-high", high,
                     (char *) "--gc-disk-low", low, NULL };
    pid_t pid;
    if (posix_spawn (&pid, d->self_exe, NULL, NULL, argv, environ) != 0)
        return;
    d->gc_pid = pid;
    ev_child *c = calloc (1, sizeof *c);
    ev_child_init (c, gc_child_cb, pid, 0);
    c->data = d;
    ev_child_start (loop, c);
}

/* ---------- set-up ---------- */

/* The settings every client of the worker shares, then the operator's
 * properties (kafka.property.*, KIWI_KAFKA_PROPERTIES: SASL, TLS, ...),
 * which may override them. NULL with *err naming the property librdkafka
 * refused. */
static rd_kafka_conf_t *
base_conf (const kiwi_worker_config *cfg, kiwi_error_t *err)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new ();
    char errstr[256];
    rd_kafka_conf_set (conf, "bootstrap.servers", cfg->brokers, errstr, sizeof errstr);
    rd_kafka_conf_set (conf, "client.id", cfg->worker_id, errstr, sizeof errstr);
    rd_kafka_conf_set (conf, "reconnect.backoff.max.ms", "2000", errstr, sizeof errstr);
    cleanup_strv kiwi_strv props = KIWI_STRV_INIT;
    if (kiwi_worker_config_kafka_props (cfg, &props, err) < 0 || kiwi_kafka_props_apply (conf, &props, err) < 0) {
        rd_kafka_conf_destroy (conf);
        return NULL;
    }
    return conf;
}

static int
setup_kafka (daemon_t *d, kiwi_error_t *err)
{
    char errstr[512];
    rd_kafka_conf_t *pc = base_conf (d->cfg, err);
    if (pc == NULL)
        return -1;
    rd_kafka_conf_set (pc, "enable.idempotence", "true", errstr, sizeof errstr);
    rd_kafka_conf_set (pc, "acks", "all", errstr, sizeof errstr);
    rd_kafka_conf_set (pc, "linger.ms", "2", errstr, sizeof errstr);
    char timeout_ms[32];
    snprintf (timeout_ms, sizeof timeout_ms, "%lld", (long long) d->cfg->delivery_timeout_s * 1000);
    rd_kafka_conf_set (pc, "message.timeout.ms", timeout_ms, errstr, sizeof errstr);
    rd_kafka_conf_set_dr_msg_cb (pc, dr_msg_cb);
    rd_kafka_conf_set_opaque (pc, d);
    d->producer = rd_kafka_new (RD_KAFKA_PRODUCER, pc, errstr, sizeof errstr);
    if (d->producer == NULL)
        return kiwi_error_make (err, 0, "kafka producer: %s", errstr);
    /* pc is now owned by the producer */

    rd_kafka_conf_t *cc = base_conf (d->cfg, err);
    if (cc == NULL)
        return -1;
    if (rd_kafka_conf_set (cc, "group.id", d->cfg->group, errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (cc, "enable.auto.commit", "false", errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (cc, "auto.offset.reset", "earliest", errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (cc, "session.timeout.ms", "10000", errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (cc, "heartbeat.interval.ms", "1000", errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (cc, "max.poll.interval.ms", "86400000", errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy (cc);
        return kiwi_error_make (err, 0, "kafka consumer configuration: %s", errstr);
    }
    rd_kafka_conf_set_rebalance_cb (cc, rebalance_cb);
    rd_kafka_conf_set_opaque (cc, d);
    d->consumer = rd_kafka_new (RD_KAFKA_CONSUMER, cc, errstr, sizeof errstr);
    if (d->consumer == NULL)
        return kiwi_error_make (err, 0, "kafka consumer: %s", errstr);
    /* cc is now owned by the consumer */
    rd_kafka_poll_set_consumer (d->consumer);
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new (1);
    rd_kafka_topic_partition_list_add (topics, d->cfg->topic_tasks, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe (d->consumer, topics);
    rd_kafka_topic_partition_list_destroy (topics);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        return kiwi_error_make (err, 0, "subscribing to %s: %s", d->cfg->topic_tasks, rd_kafka_err2str (e));

    if (pipe2 (d->cq_pipe, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2 (d->pq_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return kiwi_error_make (err, errno, "pipes for kafka events");
    d->cq = rd_kafka_queue_get_consumer (d->consumer);
    rd_kafka_queue_io_event_enable (d->cq, d->cq_pipe[1], "1", 1);
    d->pq = rd_kafka_queue_get_main (d->producer);
    rd_kafka_queue_io_event_enable (d->pq, d->pq_pipe[1], "1", 1);
    ev_io_init (&d->cq_w, cq_cb, d->cq_pipe[0], EV_READ);
    d->cq_w.data = d;
    ev_io_start (d->loop, &d->cq_w);
    ev_io_init (&d->pq_w, pq_cb, d->pq_pipe[0], EV_READ);
    d->pq_w.data = d;
    ev_io_start (d->loop, &d->pq_w);
    return 0;
}

static void
timer_start (daemon_t *d, ev_timer *t, void (*cb) (struct ev_loop *, ev_timer *, int), double first, double every)
{
    ev_timer_init (t, cb, first, every);
    t->data = d;
    ev_timer_start (d->loop, t);
}

int
kiwi_daemon_run (const kiwi_worker_config *cfg, const char *self_exe, kiwi_error_t *err)
{
    daemon_t d = { .cfg = cfg, .self_exe = self_exe, .nslots = (int) cfg->slots, .egress_fd = -1 };
    d.egress = json_object ();
    d.loop = ev_default_loop (EVFLAG_AUTO);
    d.started_ms = kiwi_now_ms ();
    d.slots = calloc ((size_t) d.nslots, sizeof *d.slots);
    for (int i = 0; i < d.nslots; i++) {
        d.slots[i].d = &d;
        d.slots[i].index = i;
        d.slots[i].fd = -1;
    }
    signal (SIGPIPE, SIG_IGN);
    if (cfg->egress_apply) {
        kiwi_error_t e = NULL;
        if (kiwi_egress_apply_rules (cfg, &e) < 0)
            kiwi_errorf ("applying the egress rules: %s (the egress checks will report it)", kiwi_error_msg (e));
        else
            kiwi_info ("egress rules applied");
        kiwi_error_free (&e);
    }
    {
        /* sandboxes a crashed run of this worker left behind */
        const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (cfg->sandbox, NULL);
        kiwi_sandbox_config sc = { .docker_socket = cfg->docker_socket, .state_dir = cfg->state_dir,
                                   .worker_id = cfg->worker_id };
        kiwi_sandbox_env *env = NULL;
        kiwi_error_t e = NULL;
        int removed = 0;
        if (drv && kiwi_sandbox_env_open (drv, &sc, &env, &e) == 0 && kiwi_sandbox_reap (env, &removed, &e) == 0) {
            if (removed)
                kiwi_info ("removed %d sandbox part(s) left by an earlier run of %s", removed, cfg->worker_id);
        } else
            kiwi_warn ("reaping old sandboxes: %s", kiwi_error_msg (e));
        kiwi_error_free (&e);
        kiwi_sandbox_env_close (env);
    }
    if ((d.metrics = kiwi_worker_metrics_new (KIWI_VERSION, cfg->worker_id, d.nslots, err)) == NULL)
        goto out;
    if (cfg->metrics_addr
        && (d.metrics_server = kiwi_worker_metrics_serve (d.metrics, cfg->metrics_addr, err)) == NULL)
        goto out;
    if (d.metrics_server)
        kiwi_info ("metrics at http://%s/metrics", cfg->metrics_addr);
    /* after the reap: opening the sandbox environment creates the install
     * network whose gateway the proxy listens on */
    if (kiwi_proxy_runner_start (d.loop, cfg, &d.proxy, err) < 0)
        goto out;
    if (setup_kafka (&d, err) < 0)
        goto out;
    redis_connect (&d);
    ev_signal_init (&d.sigterm_w, signal_cb, SIGTERM);
    d.sigterm_w.data = &d;
    ev_signal_start (d.loop, &d.sigterm_w);
    ev_signal_init (&d.sigint_w, signal_cb, SIGINT);
    d.sigint_w.data = &d;
    ev_signal_start (d.loop, &d.sigint_w);
    timer_start (&d, &d.poll_timer, poll_timer_cb, 0.5, 0.5);
    timer_start (&d, &d.heartbeat_timer, heartbeat_cb, 0.0, (double) cfg->heartbeat_interval_s);
    timer_start (&d, &d.lease_timer, lease_timer_cb, (double) cfg->lease_ttl_s / 3.0, (double) cfg->lease_ttl_s / 3.0);
    timer_start (&d, &d.redis_timer, redis_timer_cb, 2.0, 2.0);
    timer_start (&d, &d.wait_timer, wait_timer_cb, 1.0, 1.0);
    timer_start (&d, &d.egress_timer, egress_timer_cb, 1.0, (double) cfg->egress_interval_s);
    timer_start (&d, &d.gc_timer2, gc_timer_cb, 1.0, 600.0);
    kiwi_info ("worker %s: %d slot(s), tasks from %s (group %s) at %s", cfg->worker_id, d.nslots, cfg->topic_tasks,
               cfg->group, cfg->brokers);

    ev_run (d.loop, 0);

    if (d.fatal) {
        kiwi_error_make (err, 0, "%s", d.fatal_msg);
        /* stop the task processes; they remove their sandboxes */
        d.draining = true;
        abandon_retries (&d);
        for (int i = 0; i < d.nslots; i++)
            if (d.slots[i].state == SLOT_RUNNING && d.slots[i].pid > 0)
                kill (d.slots[i].pid, SIGTERM);
        ev_timer straggle;
        ev_timer_init (&straggle, kill_stragglers_cb, 15.0, 0.);
        straggle.data = &d;
        ev_timer_start (d.loop, &straggle);
        while (d.busy > 0 && ev_run (d.loop, EVRUN_ONCE))
            ;
        ev_timer_stop (d.loop, &straggle);
    }
    publish_heartbeat (&d);
    /* every delivery acknowledged (and its offset committed) before the
     * consumer goes */
    rd_kafka_flush (d.producer, 10000);
    rd_kafka_poll (d.producer, 0);
    kiwi_info ("closing the consumer");
    rd_kafka_consumer_close (d.consumer);
out:
    if (d.redis && d.redis_ok)
        redisAsyncHandleWrite (d.redis); /* lease releases still buffered go out */
    if (d.redis)
        redisAsyncFree (d.redis);
    if (d.cq)
        rd_kafka_queue_destroy (d.cq);
    if (d.pq)
        rd_kafka_queue_destroy (d.pq);
    if (d.consumer)
        rd_kafka_destroy (d.consumer);
    if (d.producer)
        rd_kafka_destroy (d.producer);
    if (d.assignment)
        rd_kafka_topic_partition_list_destroy (d.assignment);
    kiwi_offsets_clear (&d.offsets);
    drop_ready (&d, NULL, 0);
    if (d.egress_pid > 0)
        stop_egress_check (d.egress_pid);
    kiwi_proxy_runner_stop (d.proxy);
    json_decref (d.egress);
    kiwi_metrics_server_stop (d.metrics_server);
    kiwi_worker_metrics_free (d.metrics);
    for (int i = 0; i < d.nslots; i++) {
        kiwi_frame_reader_clear (&d.slots[i].reader);
        free (d.slots[i].task_id);
        free (d.slots[i].raw);
        free (d.slots[i].result);
        origin_clear (&d.slots[i].from);
    }
    free (d.slots);
    return d.fatal || (err && *err) ? -1 : 0;
}
