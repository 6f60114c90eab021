/*
 * cmd-watch.c: following a batch: `kiwi watch BATCH_ID`, and the loop that
 * `kiwi batch --wait` runs after it submitted (kiwi_cli_watch), plus the
 * batch manifest that `kiwi batch` writes and `kiwi watch` reads.
 *
 * The loop reads the topics from the batch's submission time (minus the
 * clock_skew setting), never from their beginning: every partition starts
 * at rd_kafka_offsets_for_times of that time. `kiwi watch` first reads the
 * tasks topic up to its end to learn the batch's task ids (each task of the
 * batch carries its batch_id) and only then the results and progress
 * topics; it keeps reading tasks while the batch is still being submitted.
 * A result whose task id is not known yet and that is only seconds old is
 * held for a few seconds, in case its task is still on the way to us.
 * When no task of the batch was taken, progressed or finished for
 * stall_after seconds, the loop says why from the heartbeats (stall.h).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cleanup.h"
#include "producer/cli.h"
#include "common/clock.h"
#include "producer/kafka.h"
#include "common/log.h"
#include "producer/stall.h"
#include "schemas/result.h"
#include "schemas/task.h"
#include "producer/watch.h"

/* ---------------------------------------------------------------- manifests */

/* The manifest directory: the batch_dir setting, which the loader makes
 * ~/.kiwi/batches when it is not set; NULL when neither it nor HOME is. */
static char *
manifest_dir (const kiwi_cli_settings *s)
{
    if (s->batch_dir == NULL || *s->batch_dir == '\0')
        return NULL;
    return strdup (s->batch_dir);
}

/* mkdir -p for the manifest directory (at most two levels are missing:
 * ~/.kiwi and its batches). */
static int
make_dirs (const char *path, kiwi_error_t *err)
{
    char buf[PATH_MAX];
    if (snprintf (buf, sizeof buf, "%s", path) >= (int) sizeof buf)
        return kiwi_error_make (err, ENAMETOOLONG, "batch directory `%s`", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir (buf, 0700) < 0 && errno != EEXIST)
                return kiwi_error_make (err, errno, "creating `%s`", buf);
            *p = '/';
        }
    if (mkdir (buf, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating `%s`", buf);
    return 0;
}

int
kiwi_cli_manifest_write (const kiwi_cli_settings *s, const kiwi_batch_manifest *m, kiwi_error_t *err)
{
    cleanup_free char *dir = manifest_dir (s);
    if (dir == NULL)
        return kiwi_error_make (err, 0, "no batch directory: set batch_dir (KIWI_BATCH_DIR) or HOME");
    if (make_dirs (dir, err) < 0)
        return -1;
    cleanup_free char *path = NULL, *tmp = NULL;
    if (asprintf (&path, "%s/%s.json", dir, m->batch_id) < 0 || asprintf (&tmp, "%s.tmp", path) < 0)
        return kiwi_error_make (err, ENOMEM, "writing the batch manifest");
    json_t *o = json_pack ("{s:s, s:I, s:b, s:I, s:I, s:I, s:s, s:s, s:s}", "batch_id", m->batch_id,
                           "submitted_at", (json_int_t) m->submitted_at, "complete", (int) m->complete, "accepted",
                           (json_int_t) m->accepted, "rejected", (json_int_t) m->rejected, "delivered",
                           (json_int_t) m->delivered, "tasks_topic", s->topic_tasks, "results_topic",
                           s->topic_results, "brokers", s->brokers);
    if (o == NULL)
        return kiwi_error_make (err, ENOMEM, "writing the batch manifest");
    /* Written whole, then renamed over the old one. */
    int r = json_dump_file (o, tmp, JSON_COMPACT);
    json_decref (o);
    if (r < 0 || rename (tmp, path) < 0) {
        int e = errno;
        unlink (tmp);
        return kiwi_error_make (err, e, "writing the batch manifest `%s`", path);
    }
    kiwi_debug ("batch %s: manifest %s", m->batch_id, path);
    return 0;
}

/* Returns 1 and fills *m when the batch has a manifest, 0 when it has none,
 * < 0 with *err when it cannot be read. */
static int
kiwi_cli_manifest_read (const kiwi_cli_settings *s, const char *batch_id, kiwi_batch_manifest *m,
                        kiwi_error_t *err)
{
    memset (m, 0, sizeof *m);
    cleanup_free char *dir = manifest_dir (s);
    cleanup_free char *path = NULL;
    if (dir == NULL)
        return 0;
    if (asprintf (&path, "%s/%s.json", dir, batch_id) < 0)
        return kiwi_error_make (err, ENOMEM, "reading the batch manifest");
    json_error_t je;
    json_t *o = json_load_file (path, 0, &je);
    if (o == NULL) {
        if (access (path, F_OK) < 0)
            return 0;
        return kiwi_error_make (err, 0, "batch manifest `%s`: %s", path, je.text);
    }
    json_t *sa = json_object_get (o, "submitted_at"), *id = json_object_get (o, "batch_id");
    if (!json_is_integer (sa) || !json_is_string (id) || strcmp (json_string_value (id), batch_id) != 0) {
        json_decref (o);
        return kiwi_error_make (err, 0, "batch manifest `%s`: not the manifest of batch %s", path, batch_id);
    }
    snprintf (m->batch_id, sizeof m->batch_id, "%s", batch_id);
    m->submitted_at = json_integer_value (sa);
    m->complete = json_is_true (json_object_get (o, "complete"));
    m->accepted = (uint64_t) json_integer_value (json_object_get (o, "accepted"));
    m->rejected = (uint64_t) json_integer_value (json_object_get (o, "rejected"));
    m->delivered = (uint64_t) json_integer_value (json_object_get (o, "delivered"));
    json_decref (o);
    return 1;
}

/* ---------------------------------------------------------------- the loop */

/* A result whose task is not known yet, held a few seconds. */
typedef struct parked {
    char *buf;
    size_t len;
    int64_t until; /* monotonic ms */
} parked;

#define PARK_MS 5000      /* results younger than this may beat their task to us */
#define PARK_MAX 100000   /* held at most; older ones are checked first */

typedef struct loop {
    const kiwi_cli_settings *s;
    kiwi_cli_watch_opts *o;
    kiwi_watch *w;
    rd_kafka_t *rk;
    bool have_tasks, have_results, have_progress;
    int64_t *tasks_end;  /* high watermark of each tasks partition at the start */
    bool *tasks_caught;  /* that partition was read to its end */
    int n_tasks_parts;
    bool tasks_ready;    /* the tasks topic was read to its end once */
    bool tasks_idle;     /* ... and nothing new arrived since */
    parked *park;
    size_t n_park, park_head;
    uint64_t n_read_tasks, n_read_results, n_read_progress;
} loop;

/* A result's bytes; `ours`: its key is a task of the batch (else it is
 * recorded only if its task id turns out to be one, and said nothing of
 * when it does not decode). */
static void
on_result_bytes (loop *l, const char *buf, size_t len, bool ours)
{
    kiwi_result r;
    kiwi_error_t err = NULL;
    if (kiwi_result_decode (buf, len, &r, &err) < 0) {
        if (ours)
            kiwi_warn ("batch %s: a result of the batch does not decode: %s", l->w->batch_id, kiwi_error_msg (err));
        kiwi_error_free (&err);
        return;
    }
    if (!ours && kiwi_watch_state_of (l->w, r.task_id, strlen (r.task_id)) < 0) {
        kiwi_result_clear (&r);
        return;
    }
    cleanup_free char *json = NULL;
    if (kiwi_result_to_json (&r, &json, &err) < 0 || kiwi_watch_result (l->w, &r, json, &err) < 0) {
        kiwi_errorf ("batch %s: %s", l->w->batch_id, kiwi_error_msg (err));
        kiwi_error_free (&err);
        l->o->failed = true;
    }
    kiwi_result_clear (&r);
}

static void
park (loop *l, const rd_kafka_message_t *m)
{
    if (l->n_park - l->park_head >= PARK_MAX)
        return;
    if (l->park_head > 0 && l->park_head == l->n_park)
        l->park_head = l->n_park = 0;
    parked *np = realloc (l->park, (l->n_park + 1) * sizeof *np);
    char *b = malloc (m->len ? m->len : 1);
    if (np == NULL || b == NULL) {
        if (np != NULL)
            l->park = np;
        free (b);
        return;
    }
    l->park = np;
    memcpy (b, m->payload, m->len);
    l->park[l->n_park++] = (parked) { b, m->len, kiwi_mono_ms () + PARK_MS };
}

/* The held results whose time is up: recorded if their task is now known. */
static void
unpark (loop *l)
{
    int64_t now = kiwi_mono_ms ();
    while (l->park_head < l->n_park && l->park[l->park_head].until <= now) {
        parked *p = &l->park[l->park_head++];
        on_result_bytes (l, p->buf, p->len, false);
        free (p->buf);
    }
}

static bool
key_known (const kiwi_watch *w, const rd_kafka_message_t *m)
{
    return m->key != NULL && kiwi_watch_state_of (w, m->key, m->key_len) >= 0;
}

static void
on_message (loop *l, const rd_kafka_message_t *m)
{
    const char *t = rd_kafka_topic_name (m->rkt);
    if (l->o->read_tasks && strcmp (t, l->s->topic_tasks) == 0) {
        l->n_read_tasks++;
        if (m->partition < l->n_tasks_parts && m->offset + 1 >= l->tasks_end[m->partition])
            l->tasks_caught[m->partition] = true;
        l->tasks_idle = false;
        kiwi_task task;
        kiwi_error_t err = NULL;
        if (kiwi_task_decode (m->payload, m->len, &task, &err) < 0) {
            kiwi_error_free (&err); /* not ours to judge: the worker dead-letters it */
            return;
        }
        if (task.batch_id != NULL && strcmp (task.batch_id, l->w->batch_id) == 0
            && kiwi_watch_add (l->w, task.id, strlen (task.id), &err) < 0) {
            kiwi_errorf ("batch %s: %s", l->w->batch_id, kiwi_error_msg (err));
            kiwi_error_free (&err);
            l->o->failed = true;
        }
        kiwi_task_clear (&task);
        return;
    }
    if (strcmp (t, l->s->topic_results) == 0) {
        l->n_read_results++;
        /* Results are keyed by task id: others' results are never decoded. */
        if (key_known (l->w, m)) {
            if (kiwi_watch_state_of (l->w, m->key, m->key_len) != KIWI_WATCH_DONE)
                on_result_bytes (l, m->payload, m->len, true);
            return;
        }
        if (m->key == NULL) { /* keyless: decoded to see whose it is */
            on_result_bytes (l, m->payload, m->len, false);
            return;
        }
        if (l->o->read_tasks) {
            int64_t now = kiwi_wall_ms ();
            int64_t mts = rd_kafka_message_timestamp (m, NULL);
            if (mts > 0 && now - mts < PARK_MS)
                park (l, m);
        }
        return;
    }
    if (strcmp (t, l->s->topic_progress) == 0) {
        l->n_read_progress++;
        if (m->key != NULL)
            kiwi_watch_progress (l->w, m->key, m->key_len);
    }
}

/* Looks for the topics not assigned yet; the results and progress topics
 * only once the tasks topic was read to its end. */
static int
assign_topics (loop *l, kiwi_error_t *err)
{
    int n;
    int ask_ms = 5000;
    int64_t since = l->o->since_ms;
    if (l->o->read_tasks && !l->have_tasks) {
        int64_t *from = NULL;
        if ((n = kiwi_cli_assign_topic_since (l->rk, l->s->topic_tasks, since, ask_ms, &from, err)) < 0)
            return -1;
        if (n == 0) {
            /* No tasks topic yet: nothing to wait for before the results;
             * it is looked for again each second. */
            l->tasks_ready = true;
            l->tasks_idle = true;
        } else {
            l->have_tasks = true;
            l->n_tasks_parts = n;
            l->tasks_end = calloc ((size_t) n, sizeof *l->tasks_end);
            l->tasks_caught = calloc ((size_t) n, sizeof *l->tasks_caught);
            if (l->tasks_end == NULL || l->tasks_caught == NULL) {
                free (from);
                return kiwi_error_make (err, ENOMEM, "watching the tasks topic");
            }
            for (int p = 0; p < n; p++) {
                int64_t lo = 0, hi = 0;
                rd_kafka_resp_err_t e
                    = rd_kafka_query_watermark_offsets (l->rk, l->s->topic_tasks, p, &lo, &hi, ask_ms);
                if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
                    free (from);
                    return kiwi_error_make (err, 0, "the end of %s [%d]: %s", l->s->topic_tasks, p,
                                            rd_kafka_err2str (e));
                }
                l->tasks_end[p] = hi;
                l->tasks_caught[p] = from[p] >= hi || hi <= lo;
            }
            free (from);
        }
    }
    if (l->o->read_tasks && !l->tasks_ready)
        return 0;
    if (!l->have_results) {
        if ((n = kiwi_cli_assign_topic_since (l->rk, l->s->topic_results, since, ask_ms, NULL, err)) < 0)
            return -1;
        l->have_results = n > 0;
    }
    if (!l->have_progress && !l->o->no_progress_topic) {
        if ((n = kiwi_cli_assign_topic_since (l->rk, l->s->topic_progress, since, ask_ms, NULL, err)) < 0)
            return -1;
        l->have_progress = n > 0;
    }
    return 0;
}

/* Whether the tasks topic was read to its end (then the results are read),
 * and whether it is idle: the fetcher has nothing newer on any partition. */
static void
check_tasks (loop *l, int64_t *next_assign)
{
    bool all = true;
    for (int p = 0; p < l->n_tasks_parts; p++)
        all = all && l->tasks_caught[p];
    if (!all)
        return;
    if (!l->tasks_ready) {
        l->tasks_ready = true;
        *next_assign = 0; /* now the results */
        kiwi_debug ("batch %s: %zu tasks found on %s", l->w->batch_id, l->w->n_tasks, l->s->topic_tasks);
    }
    bool idle = true;
    rd_kafka_topic_partition_list_t *pl = rd_kafka_topic_partition_list_new (l->n_tasks_parts);
    for (int p = 0; p < l->n_tasks_parts; p++)
        rd_kafka_topic_partition_list_add (pl, l->s->topic_tasks, p);
    if (rd_kafka_position (l->rk, pl) != RD_KAFKA_RESP_ERR_NO_ERROR)
        idle = false;
    for (int i = 0; idle && i < pl->cnt; i++) {
        int64_t lo = 0, hi = 0;
        rd_kafka_get_watermark_offsets (l->rk, l->s->topic_tasks, pl->elems[i].partition, &lo, &hi);
        idle = pl->elems[i].offset < 0 || pl->elems[i].offset >= hi;
    }
    rd_kafka_topic_partition_list_destroy (pl);
    l->tasks_idle = idle;
}

static unsigned
term_width (void)
{
    struct winsize ws;
    if (ioctl (STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 0;
}

static void
show (const loop *l, bool tty)
{
    cleanup_free char *line = kiwi_watch_line (l->w, kiwi_wall_ms (), tty, tty ? term_width () : 0);
    if (line == NULL)
        return;
    fputs (line, stdout);
    fflush (stdout);
}

/* The batch is over: complete, or (no final total) every task seen on the
 * tasks topic has its result and the topic has nothing new. */
static bool
finished (const loop *l)
{
    if (kiwi_watch_complete (l->w))
        return true;
    return !l->w->total_final && l->o->read_tasks && l->tasks_ready && l->tasks_idle && l->w->n_tasks > 0
           && l->w->done >= l->w->n_tasks && l->n_park == l->park_head;
}

static void
print_summary_json (const kiwi_watch *w, const char *outcome)
{
    json_t *by = json_object ();
    for (int s = KIWI_RESULT_UNSET + 1; s < KIWI_RESULT__END; s++)
        json_object_set_new (by, kiwi_result_status_name ((kiwi_result_status) s), json_integer ((json_int_t) w->by_status[s]));
    json_t *o = json_pack ("{s:s, s:s, s:I, s:b, s:I, s:I, s:o, s:s?}", "batch_id", w->batch_id, "outcome", outcome,
                           "total", (json_int_t) kiwi_watch_total (w), "total_final", (int) w->total_final, "done",
                           (json_int_t) w->done, "running", (json_int_t) w->running, "by_status", by, "results",
                           w->results_path);
    char *j = o ? json_dumps (o, JSON_COMPACT) : NULL;
    if (j != NULL)
        kiwi_cli_println (j);
    free (j);
    json_decref (o);
}

int
kiwi_cli_watch (const kiwi_cli_settings *s, kiwi_watch *w, kiwi_cli_watch_opts *o)
{
    kiwi_error_t err = NULL;
    loop l = { .s = s, .o = o, .w = w };
    int code = KIWI_EXIT_FAILURE;
    const char *outcome = "failed";
    if ((l.rk = kiwi_cli_consumer_new (s, &err)) == NULL)
        return kiwi_cli_fail (&err, "watch");
    if (o->since_ms < 0)
        kiwi_warn ("batch %s: its submission time is unknown (give --since); reading the topics from their "
                   "beginning",
                   w->batch_id);
    bool tty = isatty (STDOUT_FILENO) && !o->quiet && !o->json;
    bool lines = !tty && !o->quiet && !o->json;
    int64_t start = kiwi_mono_ms ();
    int64_t deadline = o->timeout_s ? start + (int64_t) o->timeout_s * 1000 : INT64_MAX;
    int64_t every = (int64_t) (tty ? s->refresh : s->progress_interval) * 1000;
    int64_t next_show = start, next_assign = 0, next_idle = 0;
    bool shown = false;
    kiwi_stall st;
    kiwi_stall_init (&st, s, start);
    uint64_t seen_done = w->done, seen_running = w->running;
    for (;;) {
        if (kiwi_cli_stop) {
            outcome = "interrupted";
            break;
        }
        int64_t now = kiwi_mono_ms ();
        if (now >= deadline) {
            outcome = "timed_out";
            code = KIWI_EXIT_WAIT_TIMEOUT;
            break;
        }
        if (o->failed)
            break;
        if ((!l.have_results || (!l.have_progress && !o->no_progress_topic) || (o->read_tasks && !l.have_tasks))
            && now >= next_assign) {
            if (assign_topics (&l, &err) < 0) {
                kiwi_warn ("watch: %s (retrying)", kiwi_error_msg (err));
                kiwi_error_free (&err);
            }
            next_assign = kiwi_mono_ms () + 1000;
        }
        if ((tty || lines) && now >= next_show) {
            show (&l, tty);
            shown = true;
            next_show = now + every;
        }
        if (finished (&l)) {
            code = KIWI_EXIT_OK;
            outcome = "complete";
            break;
        }
        if (w->done != seen_done || w->running != seen_running) {
            seen_done = w->done;
            seen_running = w->running;
            kiwi_stall_moved (&st, now);
        }
        cleanup_free char *stall = kiwi_stall_tick (&st, l.rk, now);
        if (stall != NULL) {
            if (tty && shown) { /* the warning under the progress line, which is drawn again */
                fputc ('\n', stdout);
                fflush (stdout);
                next_show = now;
            }
            kiwi_warn ("batch %s: %s", w->batch_id, stall);
        }
        unpark (&l);
        rd_kafka_message_t *m = rd_kafka_consumer_poll (l.rk, 100);
        if (m != NULL) {
            if (kiwi_stall_message (&st, m))
                ; /* a heartbeat: taken into the fleet */
            else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
                on_message (&l, m);
            else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                if (o->read_tasks && strcmp (rd_kafka_topic_name (m->rkt), s->topic_tasks) == 0
                    && m->partition < l.n_tasks_parts)
                    l.tasks_caught[m->partition] = true;
            } else
                kiwi_warn ("watch: %s: %s", rd_kafka_topic_name (m->rkt), rd_kafka_message_errstr (m));
            rd_kafka_message_destroy (m);
        }
        /* At once while the tasks are caught up on (the results wait for
         * it), then every 200 ms: the idle check asks the consumer. */
        if (o->read_tasks && l.have_tasks && (!l.tasks_ready || m == NULL || kiwi_mono_ms () >= next_idle)) {
            check_tasks (&l, &next_assign);
            next_idle = kiwi_mono_ms () + 200;
        }
    }
    if (tty && shown) {
        show (&l, true);
        fputc ('\n', stdout);
    } else if (lines)
        show (&l, false);
    if (o->json)
        print_summary_json (w, outcome);
    else
        kiwi_watch_table (w, stdout);
    if (strcmp (outcome, "interrupted") == 0)
        kiwi_errorf ("batch %s: interrupted with %llu of %llu%s done; nothing is lost: follow it again with "
                     "`kiwi watch %s`",
                     w->batch_id, (unsigned long long) w->done, (unsigned long long) kiwi_watch_total (w),
                     w->total_final ? "" : "+", w->batch_id);
    else if (strcmp (outcome, "timed_out") == 0)
        kiwi_errorf ("batch %s: not complete within %llu s (%llu of %llu%s done)", w->batch_id,
                     (unsigned long long) o->timeout_s, (unsigned long long) w->done,
                     (unsigned long long) kiwi_watch_total (w), w->total_final ? "" : "+");
    if (w->results_path != NULL)
        kiwi_info ("batch %s: results in %s", w->batch_id, w->results_path);
    if (o->stats)
        kiwi_info ("watch: read %llu messages of %s, %llu of %s, %llu of %s in %lld ms",
                   (unsigned long long) l.n_read_tasks, s->topic_tasks, (unsigned long long) l.n_read_results,
                   s->topic_results, (unsigned long long) l.n_read_progress, s->topic_progress,
                   (long long) (kiwi_mono_ms () - start));
    for (size_t i = l.park_head; i < l.n_park; i++)
        free (l.park[i].buf);
    free (l.park);
    free (l.tasks_end);
    free (l.tasks_caught);
    kiwi_stall_clear (&st);
    kiwi_cli_consumer_free (l.rk);
    return code;
}

/* ---------------------------------------------------------------- kiwi watch */

enum { OPT_RESULTS = KIWI_OPT_OWN, OPT_SINCE, OPT_TOTAL, OPT_TIMEOUT, OPT_QUIET, OPT_JSON, OPT_STATS };

static const kiwi_opt watch_opts[] = {
    { OPT_RESULTS, "results", 0, "FILE", "results file of JSON lines, appended to (default: kiwi-batch-<id>.jsonl)" },
    { OPT_SINCE, "since", 0, "TIME", "the batch's submission time (ms since the epoch or 2026-12-01T19:50:00Z)" },
    { OPT_TOTAL, "total", 0, "N", "the batch has N tasks (default: from its manifest, else the tasks seen)" },
    { OPT_TIMEOUT, "timeout", 0, "S", "give up after S seconds (exit 124); default: until the batch is complete" },
    { OPT_QUIET, "quiet", 'q', NULL, "no progress line; only the outcome table at the end" },
    { OPT_JSON, "json", 0, NULL, "no progress line; at the end one JSON object with the counts" },
    { OPT_STATS, "stats", 0, NULL, "say on stderr how many messages of each topic were read" },
    { 0, NULL, 0, NULL, NULL },
};

static const kiwi_exit_doc watch_exits[] = {
    { 0, "every task of the batch has its result (whatever its status: see the table)" },
    { 1, "interrupted (SIGINT/SIGTERM: run kiwi watch again to go on), the broker could not be reached or the "
         "results file could not be written" },
    { 2, "usage or configuration error" },
    { 124, "--timeout ran out before the batch was complete" },
    { -1, NULL },
};

const kiwi_cmd kiwi_cmd_watch_def = {
    .name = "watch",
    .synopsis = "watch [OPTIONS] BATCH_ID",
    .summary = "follow a batch: progress line, outcome table, results file",
    .description
    = "Follows the batch that `kiwi batch` submitted as BATCH_ID (it prints the id at its start and\n"
      "end): its tasks are those of the tasks topic whose batch_id is BATCH_ID. Reads the topics from\n"
      "the batch's submission time (from its manifest in batch_dir, else --since, else the time in a\n"
      "batch id made by kiwi), never from their beginning. On a terminal a progress line is redrawn\n"
      "in place (done of total, counts by status, tasks running, rate, time left); otherwise a line is\n"
      "printed every progress_interval seconds. At the end: a table of outcomes by status.\n"
      "Each result is appended to the results file as a JSON line; an earlier watch's file is read\n"
      "first, so after an interrupt the same command goes on where it stopped and no task is written\n"
      "twice. The total comes from the manifest (written by kiwi batch on this machine), else\n"
      "--total, else the batch's tasks on the tasks topic (a batch still being submitted elsewhere\n"
      "may then look complete early). When no task moved for stall_after seconds, the heartbeats\n"
      "topic tells why on stderr (no worker heartbeat, no worker up, or every worker degraded,\n"
      "with the reasons), and with a worker up the broker's consumer groups (none reads the tasks\n"
      "topic, or its group is rebalancing), once per change.",
    .opts = watch_opts,
    .exits = watch_exits,
};

int
kiwi_cmd_watch (int argc, char **argv)
{
    kiwi_args args = { 0 };
    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    kiwi_error_t err = NULL;
    kiwi_watch w;
    bool have_w = false;
    char *def_results = NULL;
    int sigfd = -1;
    int code = 0;
    if (kiwi_cli_begin (&kiwi_cmd_watch_def, argc, argv, &args, &s, &code) != 0)
        goto out;

    kiwi_cli_watch_opts o = { .read_tasks = true, .since_ms = -1 };
    const char *results = NULL;
    unsigned long long total = 0;
    bool total_given = false, since_given = false;
    code = KIWI_EXIT_USAGE;
    for (size_t i = 0; i < args.n_opts; i++) {
        const kiwi_arg *a = &args.opts[i];
        switch (a->id) {
        case OPT_RESULTS: results = a->value; break;
        case OPT_QUIET: o.quiet = true; break;
        case OPT_JSON: o.json = true; break;
        case OPT_STATS: o.stats = true; break;
        case OPT_SINCE:
            if (kiwi_time_parse (a->value, &o.since_ms) < 0) {
                kiwi_errorf ("watch: --since: `%s` is not a time (ms since the epoch, or 2026-12-01T19:50:00Z)",
                             a->value);
                goto out;
            }
            since_given = true;
            break;
        case OPT_TOTAL:
            if (kiwi_parse_u64 (a->spelling, a->value, 1, 100000000ULL, &total, &err) < 0) {
                code = kiwi_cli_fail (&err, "watch");
                goto out;
            }
            total_given = true;
            break;
        case OPT_TIMEOUT:
            if (kiwi_parse_u64 (a->spelling, a->value, 1, 31536000ULL, &o.timeout_s, &err) < 0) {
                code = kiwi_cli_fail (&err, "watch");
                goto out;
            }
            break;
        default: break;
        }
    }
    if (args.n_pos != 1) {
        kiwi_errorf ("watch: expected one BATCH_ID");
        goto out;
    }
    const char *id = args.pos[0];
    if (kiwi_batch_id_check (id, &err) < 0) {
        kiwi_errorf ("watch: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        goto out;
    }
    kiwi_batch_manifest man;
    int have_man = kiwi_cli_manifest_read (&s, id, &man, &err);
    if (have_man < 0) {
        kiwi_warn ("watch: %s (ignored)", kiwi_error_msg (err));
        kiwi_error_free (&err);
        have_man = 0;
    }
    int64_t submitted = since_given ? o.since_ms : have_man ? man.submitted_at : kiwi_id_time_ms (id);
    o.since_ms = submitted >= 0 ? submitted - (int64_t) s.clock_skew * 1000 : -1;
    if (o.since_ms < -1)
        o.since_ms = 0;
    if (kiwi_watch_init (&w, id, submitted, &err) < 0) {
        code = kiwi_cli_fail (&err, "watch");
        goto out;
    }
    have_w = true;
    if (total_given) {
        w.total = total;
        w.total_final = true;
    } else if (have_man && man.complete) {
        w.total = man.delivered;
        w.total_final = true;
    }
    if (results == NULL) {
        if (asprintf (&def_results, "kiwi-batch-%s.jsonl", id) < 0) {
            kiwi_errorf ("watch: out of memory");
            code = KIWI_EXIT_FAILURE;
            goto out;
        }
        results = def_results;
    }
    long had = kiwi_watch_open_results (&w, results, &err);
    if (had < 0) {
        code = kiwi_cli_fail (&err, "watch");
        goto out;
    }
    char when[32];
    kiwi_info ("batch %s: submitted %s; %ld results already in %s", id,
               submitted >= 0 ? kiwi_time_format (submitted, when, sizeof when) : "at an unknown time", had, results);
    if ((sigfd = kiwi_cli_signals_install (&err)) < 0) {
        code = kiwi_cli_fail (&err, "watch");
        goto out;
    }
    code = kiwi_cli_watch (&s, &w, &o);
out:
    if (have_w)
        kiwi_watch_clear (&w);
    free (def_results);
    if (sigfd >= 0)
        close (sigfd);
    kiwi_args_clear (&args);
    kiwi_cli_settings_clear (&s);
    return code;
}
