/*
 * consume.c: messages in (daemon-internal.h).
 *
 * The consumer queue is read when librdkafka signals its pipe (and every
 * 0.5 s): each message is tracked for its offset, decoded, and admitted
 * (admit.c) or, undecodable, sent to the dead-letter topic with its
 * reason. A rebalance hands the revoked partitions' tasks to their next
 * owner. Consumption pauses while admission.h wants no task, and a
 * finished message's offset is committed here (d->consumer): the commit is
 * asynchronous, and the log says `task ID: offset committed
 * (TOPIC[PARTITION]@OFFSET)` when the broker has taken it (OFFSET is the
 * next message to read, so every message before it is done with; the task
 * named is the one whose finishing moved it, a commit may cover others).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "worker/daemon/daemon-internal.h"

#include "common/clock.h"
#include "common/cleanup.h"
#include "schemas/deadletter.h"
#include "common/log.h"
#include "worker/task/secrets.h"
#include "schemas/task.h"

struct kiwi__daemon_commit {
    char *topic;
    int32_t partition;
    int64_t offset;  /* the offset committed: the next one to read */
    char *task_id;   /* whose finishing moved it; NULL: none (a dead letter) */
    kiwi__daemon_commit *next;
};

static void
commit_free (kiwi__daemon_commit *c)
{
    if (c == NULL)
        return;
    free (c->topic);
    free (c->task_id);
    free (c);
}

/* "task ID: " when there is a task, else "" (for the commit's log lines) */
static const char *
task_prefix (const char *task_id, char *buf, size_t size)
{
    if (task_id == NULL)
        return "";
    snprintf (buf, size, "task %s: ", task_id);
    return buf;
}

void
kiwi__consumer_offset_done (kiwi__daemon *d, const kiwi__daemon_origin *o, const char *task_id)
{
    int64_t commit;
    if (!kiwi_offsets_done (&d->consumer.offsets, o->topic, o->partition, o->offset, &commit))
        return;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new (1);
    rd_kafka_topic_partition_list_add (l, o->topic, o->partition)->offset = commit;
    rd_kafka_resp_err_t e = rd_kafka_commit (d->consumer.rk, l, 1);
    rd_kafka_topic_partition_list_destroy (l);
    char who[300];
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        kiwi_warn ("%scommit %s[%d]@%lld: %s", task_prefix (task_id, who, sizeof who), o->topic, o->partition,
                   (long long) commit, rd_kafka_err2str (e));
        return;
    }
    kiwi_debug ("%scommitting %s[%d]@%lld", task_prefix (task_id, who, sizeof who), o->topic, o->partition,
                (long long) commit);
    /* asynchronous: kiwi__consumer_commit_cb says how it went, naming the
     * task (without memory to remember it, its line does without) */
    kiwi__daemon_commit *c = calloc (1, sizeof *c);
    if (c == NULL || (c->topic = strdup (o->topic)) == NULL
        || (task_id != NULL && (c->task_id = strdup (task_id)) == NULL)) {
        commit_free (c);
        return;
    }
    c->partition = o->partition;
    c->offset = commit;
    if (d->consumer.commits_tail)
        d->consumer.commits_tail->next = c;
    else
        d->consumer.commits = c;
    d->consumer.commits_tail = c;
}

/* The oldest commit asked of topic[partition]@offset, unlinked; NULL if none. */
static kiwi__daemon_commit *
commit_take (kiwi__daemon *d, const char *topic, int32_t partition, int64_t offset)
{
    kiwi__daemon_commit *prev = NULL;
    for (kiwi__daemon_commit *c = d->consumer.commits; c != NULL; prev = c, c = c->next) {
        if (c->partition != partition || c->offset != offset || strcmp (c->topic, topic) != 0)
            continue;
        if (prev)
            prev->next = c->next;
        else
            d->consumer.commits = c->next;
        if (d->consumer.commits_tail == c)
            d->consumer.commits_tail = prev;
        c->next = NULL;
        return c;
    }
    return NULL;
}

void
kiwi__consumer_commit_cb (rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets,
                          void *opaque)
{
    (void) rk;
    kiwi__daemon *d = opaque;
    if (offsets == NULL || offsets->cnt == 0) {
        /* (_NO_OFFSET: nothing was asked, not an error) */
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
            kiwi_warn ("commit: %s", rd_kafka_err2str (err));
        return;
    }
    for (int i = 0; i < offsets->cnt; i++) {
        const rd_kafka_topic_partition_t *p = &offsets->elems[i];
        kiwi__daemon_commit *c = commit_take (d, p->topic, p->partition, p->offset);
        char who[300];
        const char *task = task_prefix (c != NULL ? c->task_id : NULL, who, sizeof who);
        rd_kafka_resp_err_t e = p->err != RD_KAFKA_RESP_ERR_NO_ERROR ? p->err : err;
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
            /* left uncommitted: a later commit of the partition, or its
             * next owner, covers it */
            kiwi_warn ("%scommit %s[%d]@%lld: %s", task, p->topic, p->partition, (long long) p->offset,
                       rd_kafka_err2str (e));
        else
            kiwi_info ("%soffset committed (%s[%d]@%lld)", task, p->topic, p->partition, (long long) p->offset);
        commit_free (c);
    }
}

void
kiwi__consumer_commits_clear (kiwi__daemon *d)
{
    while (d->consumer.commits) {
        kiwi__daemon_commit *c = d->consumer.commits;
        d->consumer.commits = c->next;
        commit_free (c);
    }
    d->consumer.commits_tail = NULL;
}

int
kiwi__origin_set (kiwi__daemon_origin *o, const rd_kafka_message_t *m)
{
    o->topic = strdup (rd_kafka_topic_name (m->rkt));
    o->partition = m->partition;
    o->offset = m->offset;
    return o->topic != NULL ? 0 : -1;
}

void
kiwi__origin_clear (kiwi__daemon_origin *o)
{
    free (o->topic);
    o->topic = NULL;
}

void
kiwi__consumer_set_paused (kiwi__daemon *d, bool pause)
{
    if (d->consumer.paused == pause || d->consumer.assignment == NULL)
        return;
    rd_kafka_resp_err_t e = pause ? rd_kafka_pause_partitions (d->consumer.rk, d->consumer.assignment)
                                  : rd_kafka_resume_partitions (d->consumer.rk, d->consumer.assignment);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        kiwi_warn ("%s partitions: %s", pause ? "pausing" : "resuming", rd_kafka_err2str (e));
    d->consumer.paused = pause;
    kiwi_debug ("%s consumption (%d of %d slots busy)", pause ? "paused" : "resumed", d->slots.busy, d->slots.n);
}

void
kiwi__consumer_update_pause (kiwi__daemon *d)
{
    kiwi_admission a = kiwi__admission (d);
    kiwi__consumer_set_paused (d, !kiwi_admission_want_tasks (&a));
}

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
dead_letter (kiwi__daemon *d, const rd_kafka_message_t *m, const char *reason)
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
    dl.ts = kiwi_wall_ms ();
    dl.worker_id = d->cfg->worker_id;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    kiwi__daemon_ack *a = calloc (1, sizeof *a);
    if (a == NULL || kiwi__origin_set (&a->from, m) < 0) {
        kiwi__ack_free (a);
        kiwi__out_of_memory (d, "a dead letter");
        return;
    }
    a->kind = KIWI__ACK_COMMIT;
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
on_message (kiwi__daemon *d, rd_kafka_message_t *m)
{
    if (d->stop.fatal) /* stopping: left uncommitted, redelivered */
        return;
    if (m->err) {
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
            return;
        kiwi_warn ("consumer: %s", rd_kafka_message_errstr (m));
        if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
            char buf[256];
            rd_kafka_fatal_error (d->consumer.rk, buf, sizeof buf);
            kiwi__fatal (d, "kafka consumer: %s", buf);
        }
        return;
    }
    kiwi__daemon_origin o;
    if (kiwi__origin_set (&o, m) < 0) {
        kiwi__out_of_memory (d, "a consumed message");
        return;
    }
    kiwi_error_t err = NULL;
    if (kiwi_offsets_add (&d->consumer.offsets, o.topic, o.partition, o.offset, &err) < 0) {
        /* untracked, a later commit could pass over it: stop rather */
        kiwi__fatal (d, "consumer: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi__origin_clear (&o);
        return;
    }
    kiwi_task t;
    if (kiwi_task_decode (m->payload, m->len, &t, &err) < 0) {
        dead_letter (d, m, kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi__origin_clear (&o);
        return;
    }
    kiwi__daemon_decide_ctx *c = calloc (1, sizeof *c);
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
consume_all (kiwi__daemon *d)
{
    rd_kafka_message_t *m;
    while ((m = rd_kafka_consumer_poll (d->consumer.rk, 0)) != NULL) {
        on_message (d, m);
        rd_kafka_message_destroy (m);
        /* the decisions just started may fill the slots before any task
         * starts: pause now, so the messages already fetched stay in Kafka
         * (a pause discards them; a resume fetches again from here) */
        kiwi__consumer_update_pause (d);
    }
}

void
kiwi__drain_pipe (int fd)
{
    char buf[256];
    while (read (fd, buf, sizeof buf) > 0)
        ;
}

void
kiwi__consumer_io_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    kiwi__daemon *d = w->data;
    kiwi__drain_pipe (d->consumer.pipe[0]);
    consume_all (d);
}

void
kiwi__consumer_poll_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    kiwi__daemon *d = w->data;
    rd_kafka_poll (d->producer.rk, 0);
    consume_all (d);
    kiwi_worker_metrics_state (d->metrics.registry, d->slots.busy, d->slots.n, d->redis.ok);
}

void
kiwi__consumer_rebalance_cb (rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    kiwi__daemon *d = opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        kiwi_info ("assigned %d partition(s)", parts->cnt);
        rd_kafka_assign (rk, parts);
        if (d->consumer.assignment)
            rd_kafka_topic_partition_list_destroy (d->consumer.assignment);
        d->consumer.assignment = rd_kafka_topic_partition_list_copy (parts);
        d->consumer.paused = false;
        kiwi__consumer_update_pause (d);
        return;
    }
    kiwi_info ("revoked %d partition(s)", parts->cnt);
    for (int i = 0; i < parts->cnt; i++) {
        const char *topic = parts->elems[i].topic;
        int32_t p = parts->elems[i].partition;
        /* running tasks of these partitions finish and publish, but their
         * offsets are the next owner's to commit: it finds the finished
         * record and commits without working them again */
        kiwi__slots_revoke (d, topic, p);
        kiwi_offsets_revoke (&d->consumer.offsets, topic, p);
        kiwi__admit_drop (d, topic, p);
    }
    /* librdkafka keeps a partition's pause through an unassign and a later
     * assign: resume what is revoked, or a partition that comes back is
     * never fetched again (d->consumer.paused starts false on every assign) */
    rd_kafka_resume_partitions (rk, parts);
    d->consumer.paused = false;
    rd_kafka_assign (rk, NULL);
    if (d->consumer.assignment) {
        rd_kafka_topic_partition_list_destroy (d->consumer.assignment);
        d->consumer.assignment = NULL;
    }
}
