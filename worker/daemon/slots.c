/*
 * slots.c: task processes and their results (daemon-internal.h).
 *
 * A slot runs one task process (kiwi-worker --task-child): the task goes in
 * on its stdin, frames come back on fd 3 (progress events, numbered and
 * published here; the result; observations for the metrics). The result is
 * recorded in Redis, then produced; its acknowledgement frees the slot and
 * commits the offset. A result the broker did not take is produced again
 * with a backoff, or cut to a minimal one when it is too large.
 *
 * Its state is d->slots; other rooms reach a slot through the functions
 * here (a revoke, a delivery report, a lease renewal, a denial).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "worker/daemon/daemon-internal.h"
#include "worker/egress/egress-record.h"

#include "worker/task/cache.h"
#include "worker/daemon/lease.h"
#include "common/clock.h"
#include "common/log.h"
#include "worker/task/policy.h"
#include "worker/task/result-fit.h"
#include "schemas/task.h"

static void finish_slot (kiwi__daemon *d, kiwi__daemon_slot *s);
static void publish_result (kiwi__daemon *d, kiwi__daemon_slot *s);
static void stamp_task_sha256 (kiwi__daemon_slot *s);
static void result_not_delivered (kiwi__daemon *d, kiwi__daemon_slot *s, const char *why);
static void result_too_large (kiwi__daemon *d, kiwi__daemon_slot *s, size_t len, const char *why);

int
kiwi__slots_init (kiwi__daemon *d)
{
    d->slots.list = calloc ((size_t) d->slots.n, sizeof *d->slots.list);
    if (d->slots.list == NULL)
        return -1;
    for (int i = 0; i < d->slots.n; i++) {
        d->slots.list[i].d = d;
        d->slots.list[i].index = i;
        d->slots.list[i].fd = -1;
    }
    return 0;
}

void
kiwi__slots_free (kiwi__daemon *d)
{
    for (int i = 0; d->slots.list != NULL && i < d->slots.n; i++) {
        kiwi_frame_reader_clear (&d->slots.list[i].reader);
        free (d->slots.list[i].task_id);
        free (d->slots.list[i].raw);
        free (d->slots.list[i].result);
        kiwi__origin_clear (&d->slots.list[i].from);
    }
    free (d->slots.list);
    d->slots.list = NULL;
}

void
kiwi__slots_kill (kiwi__daemon *d, int sig)
{
    for (int i = 0; i < d->slots.n; i++)
        if (d->slots.list[i].state == KIWI__SLOT_RUNNING && d->slots.list[i].pid > 0)
            kill (d->slots.list[i].pid, sig);
}

bool
kiwi__slots_holding (const kiwi__daemon *d, const char *task_id)
{
    for (int i = 0; i < d->slots.n; i++) {
        const kiwi__daemon_slot *s = &d->slots.list[i];
        if (s->state != KIWI__SLOT_FREE && s->task_id != NULL && strcmp (s->task_id, task_id) == 0)
            return true;
    }
    return false;
}

void
kiwi__slots_revoke (kiwi__daemon *d, const char *topic, int32_t partition)
{
    for (int k = 0; k < d->slots.n; k++) {
        kiwi__daemon_slot *s = &d->slots.list[k];
        if (s->state != KIWI__SLOT_FREE && s->from.topic && s->from.partition == partition
            && strcmp (s->from.topic, topic) == 0)
            s->revoked = true;
    }
}

static void
count_cache (kiwi__daemon *d, const kiwi_progress *p)
{
    if (p->payload == NULL || (p->stage != KIWI_STAGE_INSTALL && p->stage != KIWI_STAGE_STEP0))
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
        kiwi_worker_metrics_cache (d->metrics.registry, p->stage == KIWI_STAGE_INSTALL ? "install" : "verify",
                                   json_is_true (c));
        if (json_is_true (c))
            d->slots.cache_hits++;
        else
            d->slots.cache_misses++;
    }
    json_decref (j);
    free (json);
}

static void
publish_event (kiwi__daemon *d, kiwi__daemon_slot *s, kiwi_progress *p)
{
    p->seq = ++s->seq;
    p->attempt = s->attempt;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_progress_encode (p, &buf, &len, &err) == 0)
        kiwi__produce (d, d->cfg->topic_progress, s->task_id, buf, len, NULL);
    else
        kiwi_warn ("task %s: event %s: %s", s->task_id, p->kind, kiwi_error_msg (err));
    kiwi_error_free (&err);
    free (buf);
}

static void
emit_daemon_event (kiwi__daemon *d, kiwi__daemon_slot *s, kiwi_stage phase, const char *kind, json_t *payload)
{
    kiwi_progress p;
    kiwi_progress_init (&p);
    p.task_id = s->task_id;
    p.worker_id = d->cfg->worker_id;
    p.stage = phase;
    p.kind = (char *) kind;
    p.ts = kiwi_wall_ms ();
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
    kiwi__daemon_slot *s = ud;
    kiwi__daemon *d = s->d;
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
        s->have_result = false;
        s->result = malloc (len ? len : 1);
        if (s->result == NULL) {
            kiwi__out_of_memory (d, "a task's result");
            return;
        }
        memcpy (s->result, body, len);
        s->result_len = len;
        s->have_result = true;
        stamp_task_sha256 (s);
    } else if (type == KIWI_FRAME_SANDBOX) {
        if (kiwi_frame_sandbox_parse (body, len, s->install_address, sizeof s->install_address, &s->install_since_ms,
                                      s->install_command, sizeof s->install_command)
            < 0)
            kiwi_warn ("task %s: an unreadable sandbox frame from the task process", s->task_id);
        else if (s->install_address[0])
            kiwi_debug ("task %s: Phase A sandbox at %s runs `%s`", s->task_id, s->install_address,
                        s->install_command);
    } else if (type == KIWI_FRAME_OBSERVE) {
        kiwi_error_t err = NULL;
        if (kiwi_worker_metrics_observation (d->metrics.registry, body, len, &err) < 0)
            kiwi_debug ("task %s: %s", s->task_id, kiwi_error_msg (err));
        kiwi_error_free (&err);
    }
}

/* The running task whose Phase A sandbox had `address` at at_ms (ms since
 * the epoch), or NULL: an earlier line or packet from that address was
 * another container's (kiwi_egress_window). */
static kiwi__daemon_slot *
install_slot (kiwi__daemon *d, const char *address, int64_t at_ms)
{
    for (int i = 0; i < d->slots.n; i++) {
        kiwi__daemon_slot *s = &d->slots.list[i];
        if (s->state == KIWI__SLOT_RUNNING && s->install_address[0] != '\0' && strcmp (s->install_address, address) == 0
            && kiwi_egress_in_window (at_ms, (kiwi_egress_window) { .since_ms = s->install_since_ms }))
            return s;
    }
    return NULL;
}

/* Publishes a denial (p, taken; NULL: no memory) as the task's
 * `egress_denied` event, with the command its install runs; past
 * KIWI__DENIALS_TOLD_MAX of the run, says so once in the log instead. */
static void
tell_denial (kiwi__daemon *d, kiwi__daemon_slot *s, json_t *p, const char *what)
{
    if (p == NULL) {
        kiwi_warn ("task %s: no memory for its egress_denied event of %s", s->task_id, what);
        return;
    }
    if (s->denials_told >= KIWI__DENIALS_TOLD_MAX) {
        if (s->denials_told++ == KIWI__DENIALS_TOLD_MAX)
            kiwi_warn ("task %s: more than %d denied attempts: the rest are not told as events or logged (the "
                       "proxy's still count in its install event)",
                       s->task_id, KIWI__DENIALS_TOLD_MAX);
        json_decref (p);
        return;
    }
    s->denials_told++;
    json_object_set_new (p, "command", json_string (s->install_command));
    emit_daemon_event (d, s, KIWI_STAGE_INSTALL, "egress_denied", p);
}

void
kiwi__slots_on_egress_denied (const kiwi_proxy_log_entry *e, const char *rule, void *userdata)
{
    kiwi__daemon *d = userdata;
    kiwi__daemon_slot *s = e->client ? install_slot (d, e->client, kiwi_egress_entry_ms (e)) : NULL;
    if (s != NULL)
        tell_denial (d, s, kiwi_egress_denial_json (e, rule, d->cfg->install_egress), e->host);
}

void
kiwi__slots_on_firewall_denied (const kiwi_nflog_packet *p, void *userdata)
{
    kiwi__daemon *d = userdata;
    kiwi__daemon_slot *s = install_slot (d, p->src, p->at_ms);
    if (s == NULL) {
        kiwi_debug ("egress rules: rejected %s %s:%d from %s (no running install of ours)", p->protocol, p->dst,
                    p->port, p->src);
        return;
    }
    if (s->denials_told < KIWI__DENIALS_TOLD_MAX)
        kiwi_info ("task %s: egress rules rejected %s to %s%s%s port %d (%s)", s->task_id, p->protocol, p->dst,
                   p->qname[0] ? ", asking for " : "", p->qname, p->port, p->rule);
    tell_denial (d, s, kiwi_nflog_denial_json (p), p->dst);
}

static void
io_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    kiwi__daemon_slot *s = w->data;
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

/* Writes the task's body hash into the result its process sent
 * (`task_sha256`, result.md), so that a follower can tell it is the answer
 * to the task it submitted. A result that does not decode is left as it
 * came. */
static void
stamp_task_sha256 (kiwi__daemon_slot *s)
{
    if (s->hash[0] == '\0')
        return;
    kiwi_result r;
    kiwi_error_t err = NULL;
    if (kiwi_result_decode (s->result, s->result_len, &r, &err) < 0) {
        kiwi_error_free (&err);
        return;
    }
    char *out = NULL;
    size_t out_len = 0;
    if (r.task_sha256 == NULL || strcmp (r.task_sha256, s->hash) != 0) {
        free (r.task_sha256);
        r.task_sha256 = strdup (s->hash);
        if (r.task_sha256 == NULL || kiwi_result_encode (&r, &out, &out_len, &err) < 0)
            kiwi_warn ("task %s: its result goes without task_sha256: %s", s->task_id,
                       err ? kiwi_error_msg (err) : "out of memory");
    }
    if (out != NULL) {
        free (s->result);
        s->result = out; /* now owned by the slot */
        s->result_len = out_len;
    }
    kiwi_error_free (&err);
    kiwi_result_clear (&r);
}

/* Builds an error Result for a task whose process ended without one. */
static void
synthesize_result (kiwi__daemon *d, kiwi__daemon_slot *s, const char *reason)
{
    kiwi_result r;
    kiwi_result_init (&r);
    r.task_id = s->task_id;
    r.status = KIWI_RESULT_ERROR;
    r.reason = (char *) reason;
    r.worker_id = d->cfg->worker_id;
    r.finished_at = kiwi_wall_ms ();
    r.duration_ms = (uint64_t) (kiwi_mono_ms () - s->started_ms);
    r.task_sha256 = s->hash[0] ? s->hash : NULL;
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
    kiwi__daemon *d = ud;
    size_t used = 0;
    loc[0] = '\0';
    if (d->redis.ok) {
        redisAsyncCommand (d->redis.ctx, NULL, NULL, "SET %s%s %b EX %lld", KIWI_REDIS_DIFF_PREFIX, task_id, diff, len,
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
fit_result (kiwi__daemon *d, kiwi__daemon_slot *s)
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
publish_result (kiwi__daemon *d, kiwi__daemon_slot *s)
{
    s->state = KIWI__SLOT_PUBLISHING;
    if (s->result_len > (size_t) d->cfg->result_max_bytes)
        fit_result (d, s);
    if (!s->counted)
        s->counted = kiwi_worker_metrics_result (d->metrics.registry, s->result, s->result_len, NULL) == 0;
    /* the record first: a redelivery after a crash finds it and republishes
     * the same result instead of working the task again */
    if (d->redis.ok) {
        redisAsyncCommand (d->redis.ctx, NULL, NULL, "HSET %s%s result %b published 0 hash %s", KIWI_REDIS_DONE_PREFIX,
                           s->task_id, s->result, s->result_len, s->hash);
        redisAsyncCommand (d->redis.ctx, NULL, NULL, "EXPIRE %s%s %lld", KIWI_REDIS_DONE_PREFIX, s->task_id,
                           (long long) d->cfg->done_ttl_s);
    }
    kiwi__daemon_ack *a = calloc (1, sizeof *a);
    if (a == NULL) {
        result_not_delivered (d, s, "out of memory");
        return;
    }
    a->kind = KIWI__ACK_RESULT;
    a->slot = s->index;
    a->generation = s->generation;
    if (kiwi__produce (d, d->cfg->topic_results, s->task_id, s->result, s->result_len, a) < 0) {
        free (a);
        if (d->outbox.last_err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
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
result_too_large (kiwi__daemon *d, kiwi__daemon_slot *s, size_t len, const char *why)
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
    kiwi__daemon_slot *s = w->data;
    ev_timer_stop (loop, w);
    if (s->state != KIWI__SLOT_PUBLISHING)
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
result_not_delivered (kiwi__daemon *d, kiwi__daemon_slot *s, const char *why)
{
    if (s->revoked || d->stop.draining) {
        kiwi_warn ("task %s: result not delivered (%s); left uncommitted for the partition's next owner", s->task_id,
                   why);
        kiwi__redis_lease_release (d, s->task_id); /* the next owner publishes it at once */
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

void
kiwi__slots_abandon_retries (kiwi__daemon *d)
{
    for (int i = 0; i < d->slots.n; i++) {
        kiwi__daemon_slot *s = &d->slots.list[i];
        if (s->state == KIWI__SLOT_PUBLISHING && ev_is_active (&s->retry)) {
            kiwi_warn ("task %s: stopping: its result, not delivered yet, is left uncommitted for the partition's "
                       "next owner",
                       s->task_id);
            kiwi__redis_lease_release (d, s->task_id);
            finish_slot (d, s);
        }
    }
}

static void
child_cb (struct ev_loop *loop, ev_child *w, int revents)
{
    kiwi__daemon_slot *s = w->data;
    kiwi__daemon *d = s->d;
    ev_child_stop (loop, w);
    /* drain what is left in the pipe */
    if (s->fd >= 0)
        io_cb (loop, &s->io, 0);
    s->install_address[0] = '\0'; /* its sandboxes went with it */
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
        if (d->stop.draining) {
            /* stopped by the drain: not finished, so not committed, and the
             * lease released: another worker takes it */
            kiwi_warn ("task %s: stopped by the drain; it will be redelivered", s->task_id);
            kiwi__redis_lease_release (d, s->task_id);
            finish_slot (d, s);
            return;
        }
        if (s->revoked) {
            /* stopped because another worker holds its lease, or ended after
             * its partition went elsewhere: the task is theirs to finish; an
             * error result from here would be a second, different result */
            kiwi_warn ("task %s: %s; its lease or partition is elsewhere, so no result from here", s->task_id,
                       reason);
            kiwi__redis_lease_release (d, s->task_id);
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
                d->slots.done++;
            else
                d->slots.failed++;
            kiwi_info ("task %s: %s after %llu ms", s->task_id, kiwi_result_status_name (r.status),
                       (unsigned long long) r.duration_ms);
            kiwi_result_clear (&r);
        }
        kiwi_error_free (&err);
        publish_result (d, s);
    } else
        finish_slot (d, s);
}

static void
finish_slot (kiwi__daemon *d, kiwi__daemon_slot *s)
{
    kiwi_frame_reader_clear (&s->reader);
    free (s->task_id);
    free (s->raw);
    free (s->result);
    kiwi__origin_clear (&s->from);
    ev_timer_stop (d->loop, &s->retry);
    int idx = s->index;
    unsigned gen = s->generation + 1;
    memset (s, 0, sizeof *s);
    s->d = d;
    s->index = idx;
    s->generation = gen;
    s->fd = -1;
    d->slots.busy--;
    kiwi__admit_pump (d);
    kiwi__consumer_update_pause (d);
    kiwi__drain_done_check (d);
}

void
kiwi__slots_result_acked (kiwi__daemon *d, int idx, unsigned generation)
{
    kiwi__daemon_slot *s = &d->slots.list[idx];
    if (s->generation != generation)
        return;
    kiwi__redis_mark_done_published (d, s->task_id);
    kiwi__redis_lease_release (d, s->task_id);
    if (!s->revoked)
        kiwi__consumer_offset_done (d, &s->from, s->task_id);
    finish_slot (d, s);
}

void
kiwi__slots_result_failed (kiwi__daemon *d, int idx, unsigned generation, rd_kafka_resp_err_t e, size_t len)
{
    kiwi__daemon_slot *s = &d->slots.list[idx];
    if (s->generation != generation)
        return;
    if (e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
        result_too_large (d, s, len, rd_kafka_err2str (e));
    else
        result_not_delivered (d, s, rd_kafka_err2str (e));
}

void
kiwi__slots_lease_renewed (kiwi__daemon *d, int idx, unsigned generation, bool lost)
{
    if (idx >= d->slots.n)
        return;
    kiwi__daemon_slot *s = &d->slots.list[idx];
    if ((s->state != KIWI__SLOT_RUNNING && s->state != KIWI__SLOT_PUBLISHING)
        || (s->generation & 0xffff) != (generation & 0xffff) || !s->leased)
        return;
    if (lost && s->state == KIWI__SLOT_PUBLISHING) {
        /* finished: its record is in Redis, so the lease is not taken again
         * by this renewal; whoever gets the task next republishes the same
         * record */
        if (!s->lease_lost)
            kiwi_warn ("task %s: its lease ended while its result is being published", s->task_id);
        s->lease_lost = true;
        return;
    }
    if (lost) {
        /* the lease is gone or someone else's: this worker was taken for
         * dead; stop so the task is not worked twice at the same time */
        kiwi_errorf ("task %s: lost its lease; stopping it here", s->task_id);
        s->revoked = true;
        kill (s->pid, SIGTERM);
    }
}

static kiwi__daemon_slot *
free_slot (kiwi__daemon *d)
{
    for (int i = 0; i < d->slots.n; i++)
        if (d->slots.list[i].state == KIWI__SLOT_FREE)
            return &d->slots.list[i];
    return NULL;
}

static int
spawn_task (kiwi__daemon *d, kiwi__daemon_slot *s)
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

void
kiwi__slots_start_run (kiwi__daemon *d, char *task_id, char *raw, size_t raw_len, kiwi__daemon_origin *from, bool leased, uint32_t attempt)
{
    if (d->stop.draining) {
        /* its look-up answered after the drain began: not started, not
         * committed, its lease given back; the next owner takes it */
        kiwi_info ("task %s: not started: the worker is draining; it will be redelivered", task_id);
        if (leased)
            kiwi__redis_lease_release (d, task_id);
        free (task_id);
        free (raw);
        kiwi__origin_clear (from);
        return;
    }
    kiwi__daemon_slot *s = free_slot (d);
    if (s == NULL) { /* should not happen: consumption pauses before */
        kiwi_warn ("task %s: no free slot; waiting for one", task_id);
        if (leased)
            kiwi__redis_lease_release (d, task_id);
        if (kiwi__admit_park (d, task_id, raw, raw_len, from, 1000) < 0) {
            free (task_id);
            free (raw);
            kiwi__origin_clear (from);
            kiwi__out_of_memory (d, "a task waiting for a slot");
            return;
        }
        kiwi__consumer_update_pause (d);
        return;
    }
    s->state = KIWI__SLOT_RUNNING;
    s->task_id = task_id;
    s->raw = raw;
    s->raw_len = raw_len;
    s->from = *from;
    from->topic = NULL;
    s->leased = leased;
    s->attempt = attempt;
    s->denials_told = 0;
    s->started_ms = kiwi_mono_ms ();
    s->fd = -1;
    d->slots.busy++;
    kiwi__consumer_update_pause (d);
    /* the operator's policy decides before anything runs: a refusal is the
     * task's error result, and no task process is started */
    kiwi_task t;
    kiwi_task_policy pol;
    kiwi_error_t err = NULL;
    s->hash[0] = '\0';
    int ok = kiwi_task_decode (s->raw, s->raw_len, &t, &err) == 0;
    if (ok) {
        ok = kiwi_task_body_sha256 (&t, s->hash, &err) == 0 && kiwi_policy_apply (d->cfg, &t, &pol, &err) == 0;
        kiwi_task_clear (&t);
    }
    if (!ok) {
        char reason[4096];
        snprintf (reason, sizeof reason, "refused by the worker's policy: %s", kiwi_error_msg (err));
        kiwi_warn ("task %s: %s", s->task_id, reason);
        emit_daemon_event (d, s, KIWI_STAGE_ACCEPTED, "refused",
                           json_pack ("{s:s,s:i,s:s,s:I,s:b,s:s}", "worker", d->cfg->worker_id, "slot", s->index,
                                      "topic", s->from.topic, "offset", (json_int_t) s->from.offset, "leased", leased,
                                      "reason", kiwi_error_msg (err)));
        kiwi_error_free (&err);
        synthesize_result (d, s, reason);
        d->slots.failed++;
        publish_result (d, s);
        return;
    }
    emit_daemon_event (d, s, KIWI_STAGE_ACCEPTED, "accepted",
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

void
kiwi__slots_start_task (kiwi__daemon *d, char *task_id, char *raw, size_t raw_len, kiwi__daemon_origin *from, bool leased)
{
    kiwi__slots_start_run (d, task_id, raw, raw_len, from, leased, 0);
}
