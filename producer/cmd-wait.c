/*
 * cmd-wait.c: `kiwi wait TASK_ID`: reads the results topic from the task's
 * submission time until the task's result arrives, prints it as JSON and
 * exits with a status that names the outcome (KIWI_WAIT_EXIT_MAP in cli.h).
 * The submission time is --since, else the time written in an id made by
 * kiwi (kiwi-<UTC time>-<hex>); every partition starts at
 * rd_kafka_offsets_for_times of it (minus the clock_skew setting), so a
 * long-lived topic is not read from its beginning. An id without a time is
 * looked for from the beginning, and the command says so. While no result
 * (nor, with --progress, a progress event of the task) arrives for
 * stall_after seconds, it says why from the heartbeats (stall.h). With
 * --task-sha256 only a result stamped with that task body hash is the
 * task's: another task may have been sent under the same id (result.md).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "producer/cli.h"
#include "common/clock.h"
#include "producer/kafka.h"
#include "common/log.h"
#include "producer/render.h"
#include "producer/stall.h"
#include "schemas/result.h"
#include "producer/watch.h"

enum { OPT_TIMEOUT = KIWI_OPT_OWN, OPT_PROGRESS, OPT_SINCE, OPT_STATS, OPT_TASK_SHA256 };

static const kiwi_opt wait_opts[] = {
    { OPT_TIMEOUT, "timeout", 0, "S", "give up after S seconds (exit 124); default: wait for ever" },
    { OPT_PROGRESS, "progress", 0, NULL, "print the task's progress events (JSON lines) on stderr meanwhile" },
    { OPT_SINCE, "since", 0, "TIME", "the task's submission time (ms since the epoch or 2026-12-01T19:50:00Z)" },
    { OPT_STATS, "stats", 0, NULL, "say on stderr where each topic was read from and how many messages" },
    { OPT_TASK_SHA256, "task-sha256", 0, "HEX",
      "take only a result stamped with this task body hash (task_sha256 of submit/ci-event --json)" },
    { 0, NULL, 0, NULL, NULL },
};

static const kiwi_exit_doc wait_exits[] = {
    { 0, "fixed" },
    { 10, "not_fixed" },
    { 11, "install_failed" },
    { 12, "needs_network" },
    { 13, "budget_exhausted" },
    { 14, "max_rounds" },
    { 15, "timed_out (the task ran out of time)" },
    { 16, "error (Kiwi itself failed on the task)" },
    { 17, "gave_up (the model said the task cannot be done, and why)" },
    { 124, "the wait timed out (--timeout) before a result arrived" },
    { 1, "the broker could not be reached, the result could not be decoded, or the wait was interrupted" },
    { 2, "usage or configuration error" },
    { -1, NULL },
};

const kiwi_cmd kiwi_cmd_wait_def = {
    .name = "wait",
    .synopsis = "wait [OPTIONS] TASK_ID",
    .summary = "wait for a task's result; the exit status tells the outcome",
    .description = "Reads the results topic from the task's submission time (so a result produced before the\n"
                   "wait started is found, and a long-lived topic is not read from its beginning) until the\n"
                   "result of TASK_ID arrives, prints it as one JSON line on stdout and exits with the status of\n"
                   "its outcome. The submission time is --since, else the time in an id made by kiwi\n"
                   "(kiwi-20261129T221422.123Z-...), less clock_skew seconds; an id without a time is looked\n"
                   "for from the topic's beginning (said on stderr). The first result wins if a task has\n"
                   "several. With --task-sha256 (printed by submit --json and ci-event --json) a result is\n"
                   "taken only when its task_sha256 says it answers that very task: one for another task under\n"
                   "the same id, or one without the stamp, is said on stderr and passed over.\n"
                   "A results topic that does not exist yet is waited for. When nothing moved for\n"
                   "stall_after seconds, the heartbeats topic tells why on stderr (no worker heartbeat, no\n"
                   "worker up, or every worker degraded, with the reasons), and with a worker up the broker's\n"
                   "consumer groups (none reads the tasks topic, or its group is rebalancing), once per change.",
    .opts = wait_opts,
    .exits = wait_exits,
};

static bool
key_is (const rd_kafka_message_t *m, const char *id)
{
    return m->key != NULL && m->key_len == strlen (id) && memcmp (m->key, id, m->key_len) == 0;
}

/* One results-topic message: < 0 not ours, else the exit status. With
 * `sha` (--task-sha256), a result of the id whose task_sha256 is not `sha`
 * answers another task: said, and not ours. */
static int
on_result (const rd_kafka_message_t *m, const char *id, const char *sha)
{
    /* Results are keyed by task id; a keyless one is decoded to check. */
    if (m->key != NULL && !key_is (m, id))
        return -1;
    kiwi_result r;
    kiwi_error_t err = NULL;
    if (kiwi_result_decode (m->payload, m->len, &r, &err) < 0) {
        if (m->key == NULL) {
            kiwi_error_free (&err);
            return -1;
        }
        kiwi_errorf ("wait: the result of task %s (%s [%d] at offset %lld) does not decode: %s", id,
                     rd_kafka_topic_name (m->rkt), (int) m->partition, (long long) m->offset, kiwi_error_msg (err));
        kiwi_error_free (&err);
        return KIWI_EXIT_FAILURE;
    }
    if (strcmp (r.task_id, id) != 0) {
        kiwi_result_clear (&r);
        return -1;
    }
    if (sha != NULL && (r.task_sha256 == NULL || strcmp (r.task_sha256, sha) != 0)) {
        kiwi_warn ("wait: a result of task id %s (%s [%d] at offset %lld, %s) answers %s: passed over", id,
                   rd_kafka_topic_name (m->rkt), (int) m->partition, (long long) m->offset,
                   kiwi_result_status_name (r.status),
                   r.task_sha256 ? "another task under the same id (its task_sha256 differs)"
                                 : "a task it does not name (no task_sha256)");
        kiwi_result_clear (&r);
        return -1;
    }
    cleanup_free char *json = NULL;
    int code;
    if (kiwi_result_to_json (&r, &json, &err) < 0)
        code = kiwi_cli_fail (&err, "wait");
    else {
        kiwi_cli_println (json);
        code = kiwi_wait_exit_code (r.status);
        kiwi_debug ("task %s: %s (exit %d)", id, kiwi_result_status_name (r.status), code);
    }
    kiwi_result_clear (&r);
    return code;
}

/* Prints a progress event of task `id`. Returns whether it was one. */
static bool
on_progress (const rd_kafka_message_t *m, const char *id)
{
    kiwi_msg_meta mm = { rd_kafka_topic_name (m->rkt), m->partition, m->offset, -1, m->key, m->key_len };
    bool key_match = key_is (m, id);
    if (m->key != NULL && !key_match)
        return false;
    cleanup_free char *line = NULL;
    cleanup_free char *tid = NULL;
    bool decoded = false;
    kiwi_error_t err = NULL;
    if (kiwi_render_message (KIWI_MSG_PROGRESS, &mm, m->payload, m->len, false, &line, &tid, &decoded, &err) < 0) {
        kiwi_error_free (&err);
        return false;
    }
    if (key_match || (tid != NULL && strcmp (tid, id) == 0)) {
        fprintf (stderr, "%s\n", line);
        fflush (stderr);
        return true;
    }
    return false;
}

int
kiwi_cmd_wait (int argc, char **argv)
{
    kiwi_args args = { 0 };
    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    kiwi_error_t err = NULL;
    rd_kafka_t *rk = NULL;
    kiwi_stall st = { 0 };
    int sigfd = -1;
    int code = 0;
    if (kiwi_cli_begin (&kiwi_cmd_wait_def, argc, argv, &args, &s, &code) != 0)
        goto out;

    unsigned long long timeout_s = 0;
    bool progress = false, stats = false;
    char sha_buf[65];
    const char *sha = NULL;
    int64_t since = -1;
    code = KIWI_EXIT_USAGE;
    for (size_t i = 0; i < args.n_opts; i++) {
        const kiwi_arg *a = &args.opts[i];
        if (a->id == OPT_PROGRESS)
            progress = true;
        else if (a->id == OPT_STATS)
            stats = true;
        else if (a->id == OPT_TASK_SHA256) {
            if (strlen (a->value) != 64 || strspn (a->value, "0123456789abcdefABCDEF") != 64) {
                kiwi_errorf ("wait: --task-sha256: `%s` is not 64 hex digits", a->value);
                goto out;
            }
            for (size_t k = 0; k < 64; k++) /* results carry it in lower case */
                sha_buf[k] = (char) tolower ((unsigned char) a->value[k]);
            sha_buf[64] = '\0';
            sha = sha_buf;
        }
        else if (a->id == OPT_SINCE && kiwi_time_parse (a->value, &since) < 0) {
            kiwi_errorf ("wait: --since: `%s` is not a time (ms since the epoch, or 2026-12-01T19:50:00Z)", a->value);
            goto out;
        }
        else if (a->id == OPT_TIMEOUT && kiwi_parse_u64 (a->spelling, a->value, 1, 31536000ULL, &timeout_s, &err) < 0) {
            code = kiwi_cli_fail (&err, "wait");
            goto out;
        }
    }
    if (args.n_pos != 1) {
        kiwi_errorf ("wait: expected one TASK_ID");
        goto out;
    }
    const char *id = args.pos[0];
    if (since < 0 && (since = kiwi_id_time_ms (id)) < 0)
        kiwi_info ("wait: task id %s carries no submission time (give --since); reading %s from its beginning", id,
                   s.topic_results);
    int64_t from = since >= 0 ? since - (int64_t) s.clock_skew * 1000 : -1;
    if (since >= 0 && from < 0)
        from = 0;
    if ((sigfd = kiwi_cli_signals_install (&err)) < 0 || (rk = kiwi_cli_consumer_new (&s, &err)) == NULL) {
        code = kiwi_cli_fail (&err, "wait");
        goto out;
    }

    int64_t deadline = timeout_s ? kiwi_mono_ms () + (int64_t) timeout_s * 1000 : INT64_MAX;
    kiwi_stall_init (&st, &s, kiwi_mono_ms ());
    bool have_results = false, have_progress = !progress, told = false;
    int64_t next_check = 0, started = kiwi_mono_ms ();
    unsigned long long n_read = 0;
    code = -1;
    while (code < 0) {
        if (kiwi_cli_stop) {
            kiwi_errorf ("wait: interrupted before the result of task %s arrived", id);
            code = KIWI_EXIT_FAILURE;
            break;
        }
        int64_t now = kiwi_mono_ms ();
        if (now >= deadline) {
            kiwi_errorf ("wait: no result for task %s within %llu s", id, timeout_s);
            code = KIWI_EXIT_WAIT_TIMEOUT;
            break;
        }
        if ((!have_results || !have_progress) && now >= next_check) {
            /* Topics that do not exist yet are looked for again each second. */
            int n = 0;
            int64_t left = deadline - now;
            int ask_ms = left < 5000 ? (int) (left > 100 ? left : 100) : 5000;
            if (!have_results && (n = kiwi_cli_assign_topic_since (rk, s.topic_results, from, ask_ms, NULL, &err)) > 0)
                have_results = true;
            if (n >= 0 && !have_progress
                && (n = kiwi_cli_assign_topic_since (rk, s.topic_progress, from, ask_ms, NULL, &err)) > 0)
                have_progress = true;
            if (n < 0) {
                kiwi_warn ("wait: %s (retrying)", kiwi_error_msg (err));
                kiwi_error_free (&err);
            }
            if (!have_results && !told) {
                kiwi_info ("wait: topic %s does not exist yet; waiting for it", s.topic_results);
                told = true;
            }
            next_check = kiwi_mono_ms () + 1000;
        }
        cleanup_free char *stall = kiwi_stall_tick (&st, rk, now);
        if (stall != NULL)
            kiwi_warn ("wait: task %s: %s", id, stall);
        rd_kafka_message_t *m = rd_kafka_consumer_poll (rk, 200);
        if (m == NULL)
            continue;
        if (kiwi_stall_message (&st, m))
            ; /* a heartbeat: taken into the fleet */
        else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            const char *t = rd_kafka_topic_name (m->rkt);
            if (strcmp (t, s.topic_results) == 0) {
                n_read++;
                code = on_result (m, id, sha);
            }
            else if (progress && on_progress (m, id))
                kiwi_stall_moved (&st, kiwi_mono_ms ());
        } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            kiwi_warn ("wait: %s", rd_kafka_message_errstr (m));
        rd_kafka_message_destroy (m);
    }
    if (stats) {
        char when[32];
        kiwi_info ("wait: read %llu messages of %s from %s in %lld ms", n_read, s.topic_results,
                   from >= 0 ? kiwi_time_format (from, when, sizeof when) : "the beginning",
                   (long long) (kiwi_mono_ms () - started));
    }
out:
    kiwi_stall_clear (&st);
    kiwi_cli_consumer_free (rk);
    if (sigfd >= 0)
        close (sigfd);
    kiwi_args_clear (&args);
    kiwi_cli_settings_clear (&s);
    return code;
}
