/*
 * cmd-batch.c: `kiwi batch FILE`: many tasks from a file of JSON lines or
 * TSV, one per line; each line is reported as accepted or rejected, the
 * accepted ones are produced asynchronously (backing off while the local
 * queue is full) and flushed at the end, and every delivery failure is
 * reported with its line.
 *
 * Every task of one run carries the run's batch id (--batch-id, else a new
 * one), which `kiwi batch` says on stderr at its start and end and records
 * in the batch's manifest (cmd-watch.c); with --wait it then follows the
 * batch as `kiwi watch` does (kiwi_cli_watch), knowing its task ids and
 * its total already.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "producer/batch.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/cleanup.h"
#include "producer/cli.h"
#include "producer/kafka.h"
#include "common/log.h"
#include "schemas/task-input.h"
#include "schemas/task.h"
#include "producer/watch.h"

enum { OPT_FORMAT = KIWI_OPT_OWN, OPT_JSON, OPT_QUIET, OPT_DRY_RUN, OPT_BATCH_ID, OPT_WAIT, OPT_RESULTS, OPT_WAIT_TIMEOUT };

static const kiwi_opt batch_opts[] = {
    { OPT_FORMAT, "format", 0, "F", "auto (default: JSON lines if the first line starts with '{', else TSV), jsonl, tsv" },
    { OPT_JSON, "json", 0, NULL, "report as JSON lines: {\"line\", \"status\", \"id\" | \"error\"} and a summary object" },
    { OPT_QUIET, "quiet", 'q', NULL, "report only rejected and undelivered lines, and the summary" },
    { OPT_DRY_RUN, "dry-run", 0, NULL, "parse and validate every line; produce nothing" },
    { OPT_BATCH_ID, "batch-id", 0, "ID", "the batch id every task carries (default: batch-<UTC time>-<hex>)" },
    { OPT_WAIT, "wait", 'w', NULL, "then follow the batch until every task has its result (as kiwi watch)" },
    { OPT_RESULTS, "results", 0, "FILE", "with --wait: results file of JSON lines (default: kiwi-batch-<id>.jsonl)" },
    { OPT_WAIT_TIMEOUT, "wait-timeout", 0, "S", "with --wait: stop following after S seconds (exit 124)" },
    { 0, NULL, 0, NULL, NULL },
};

static const kiwi_exit_doc batch_exits[] = {
    { 0, "every line was accepted and every accepted task delivered" },
    { 1, "some accepted task was not delivered (or the run was interrupted, or the file unreadable)" },
    { 2, "usage or configuration error (nothing was produced)" },
    { 3, "some line was rejected (the others were produced), or the TSV header is bad (nothing was produced)" },
    { 124, "with --wait: --wait-timeout ran out before every task had its result" },
    { -1, NULL },
};

const kiwi_cmd kiwi_cmd_batch_def = {
    .name = "batch",
    .synopsis = "batch [OPTIONS] FILE|-",
    .summary = "put many tasks on the tasks topic from a file of JSON lines or TSV",
    .description
    = "Reads one task per line from FILE (- for stdin): JSON lines in the Task's shape, or TSV with\n"
      "the columns url, ref, test_command, goal (or the columns a header line names, starting with\n"
      "`url`); see docs/cli.md. Blank lines and lines starting with # are skipped. The task fields\n"
      "given as flags are defaults for lines that lack them. Each line is reported on stdout:\n"
      "  line 3: accepted: <task id>\n"
      "  line 17: rejected: task.repo.url: required field missing\n"
      "  line 9: not delivered: <reason>\n"
      "Accepted tasks are produced as they are read (idempotent producer, acks=all, key: repository\n"
      "URL) and flushed at the end; the last line is the summary:\n"
      "  accepted N, rejected M, delivered K\n"
      "Every task carries the batch id (--batch-id, else a new one), said on stderr at the start and\n"
      "the end with the submission time, and kept in the batch's manifest in batch_dir for kiwi watch.\n"
      "With --wait the command then follows the batch as `kiwi watch BATCH_ID` does: a progress line,\n"
      "the outcome table, the results in a file of JSON lines, why nothing moves when nothing did\n"
      "for stall_after seconds; after an interrupt, `kiwi watch BATCH_ID` goes on where it stopped.",
    .opts = batch_opts,
    .task_fields = KIWI_TASK_FIELDS_ALL & ~KIWI_TASK_FIELD_BIT (KIWI_TF_ID),
    .exits = batch_exits,
};

/* One produced line, alive until its delivery report. */
typedef struct pending {
    kiwi_delivery d; /* first: the report's pointer is this record's */
    unsigned long lineno;
    char id[];
} pending;

typedef struct batch_run {
    bool json, quiet;
    unsigned long accepted, rejected, delivered, undelivered;
    const char *batch_id;
    kiwi_watch *watch; /* --wait: delivered tasks are added to it; else NULL */
    bool watch_failed;
} batch_run;

static void
report (batch_run *b, unsigned long lineno, const char *status, const char *id, const char *error)
{
    if (b->quiet && strcmp (status, "accepted") == 0)
        return;
    if (b->json) {
        json_t *o = json_pack ("{s:I, s:s}", "line", (json_int_t) lineno, "status", status);
        if (o == NULL)
            return;
        if (id != NULL)
            json_object_set_new (o, "id", json_string (id));
        if (error != NULL)
            json_object_set_new (o, "error", json_string (error));
        char *s = json_dumps (o, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref (o);
        if (s != NULL)
            printf ("%s\n", s);
        free (s);
        return;
    }
    const char *word = strcmp (status, "not_delivered") == 0 ? "not delivered" : status;
    if (error != NULL && id != NULL)
        printf ("line %lu: %s: %s: %s\n", lineno, word, id, error);
    else
        printf ("line %lu: %s: %s\n", lineno, word, error != NULL ? error : id);
}

static void
on_delivery (kiwi_delivery *d, void *ctx)
{
    batch_run *b = ctx;
    pending *p = (pending *) d;
    if (d->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        b->delivered++;
        kiwi_error_t err = NULL;
        if (b->watch != NULL && kiwi_watch_add (b->watch, p->id, strlen (p->id), &err) < 0) {
            kiwi_errorf ("batch: %s", kiwi_error_msg (err));
            kiwi_error_free (&err);
            b->watch_failed = true;
        }
    } else {
        b->undelivered++;
        report (b, p->lineno, "not_delivered", p->id, rd_kafka_err2str (d->err));
    }
    free (p);
}

/* Reads one line of at most KIWI_BATCH_LINE_MAX bytes into *line (emptied
 * first, NUL-terminated, line->data never NULL after a line). Returns its
 * length, -1 at the end of the file, -2 when it was longer (the rest of it
 * is skipped), -3 on a read error (errno). */
static ssize_t
read_line (FILE *f, kiwi_buf *line)
{
    kiwi_buf_reset (line);
    if (kiwi_buf_reserve (line, 0, NULL) < 0) {
        errno = ENOMEM;
        return -3;
    }
    bool too_long = false;
    int c;
    while ((c = getc_unlocked (f)) != EOF) {
        if (c == '\n')
            break;
        if (too_long)
            continue;
        if (line->len == KIWI_BATCH_LINE_MAX) {
            too_long = true;
            continue;
        }
        char ch = (char) c;
        if (kiwi_buf_append (line, &ch, 1, NULL) < 0) {
            errno = ENOMEM;
            return -3;
        }
    }
    if (c == EOF && ferror (f))
        return -3;
    if (c == EOF && line->len == 0 && !too_long)
        return -1;
    if (too_long)
        return -2;
    return (ssize_t) line->len;
}

static int
run_batch (const kiwi_cli_settings *s, FILE *in, kiwi_batch_parser *parser, batch_run *b, bool dry_run)
{
    kiwi_error_t err = NULL;
    rd_kafka_t *rk = NULL;
    kiwi_delivery_cb cb = { on_delivery, b };
    if (!dry_run && (rk = kiwi_cli_producer_new (s, &cb, &err)) == NULL)
        return kiwi_cli_fail (&err, "batch");

    cleanup_buf kiwi_buf line = KIWI_BUF_INIT;
    unsigned long lineno = 0;
    int code = KIWI_EXIT_OK;
    bool interrupted = false;
    for (;;) {
        if (kiwi_cli_stop) {
            interrupted = true;
            break;
        }
        ssize_t len = read_line (in, &line);
        if (len == -1)
            break;
        lineno++;
        if (len == -3) {
            kiwi_errorf ("batch: reading line %lu: %s", lineno, strerror (errno));
            code = KIWI_EXIT_FAILURE;
            break;
        }
        if (len == -2) {
            char why[96];
            snprintf (why, sizeof why, "line longer than %d bytes", KIWI_BATCH_LINE_MAX);
            report (b, lineno, "rejected", NULL, why);
            b->rejected++;
            continue;
        }
        kiwi_task t;
        kiwi_batch_line_kind k = kiwi_batch_line (parser, lineno, line.data, (size_t) len, &t, &err);
        if (k == KIWI_BATCH_LINE_SKIP)
            continue;
        if (k == KIWI_BATCH_LINE_FATAL) {
            kiwi_errorf ("batch: line %lu: %s", lineno, kiwi_error_msg (err));
            code = kiwi_exit_for (err);
            kiwi_error_free (&err);
            break;
        }
        if (k == KIWI_BATCH_LINE_REJECT) {
            report (b, lineno, "rejected", NULL, kiwi_error_msg (err));
            kiwi_error_free (&err);
            b->rejected++;
            continue;
        }
        /* accepted: it belongs to this run's batch, whatever the line said */
        if (t.batch_id == NULL || strcmp (t.batch_id, b->batch_id) != 0) {
            free (t.batch_id);
            t.batch_id = strdup (b->batch_id);
            if (t.batch_id == NULL) {
                kiwi_errorf ("batch: out of memory");
                kiwi_task_clear (&t);
                code = KIWI_EXIT_FAILURE;
                break;
            }
        }
        cleanup_free char *buf = NULL;
        size_t blen = 0;
        if (kiwi_task_encode (&t, &buf, &blen, &err) < 0) {
            report (b, lineno, "rejected", NULL, kiwi_error_msg (err));
            kiwi_error_free (&err);
            b->rejected++;
            kiwi_task_clear (&t);
            continue;
        }
        b->accepted++;
        report (b, lineno, "accepted", t.id, NULL);
        if (!dry_run) {
            size_t idlen = strlen (t.id);
            pending *p = calloc (1, sizeof *p + idlen + 1);
            if (p == NULL) {
                kiwi_errorf ("batch: out of memory");
                kiwi_task_clear (&t);
                code = KIWI_EXIT_FAILURE;
                break;
            }
            p->lineno = lineno;
            memcpy (p->id, t.id, idlen + 1);
            if (kiwi_cli_produce (rk, s->topic_tasks, t.repo.url, strlen (t.repo.url), buf, blen, &p->d, &err) < 0) {
                b->undelivered++;
                report (b, lineno, "not_delivered", p->id, kiwi_error_msg (err));
                kiwi_error_free (&err);
                free (p);
            }
            rd_kafka_poll (rk, 0); /* serve delivery reports as we go */
        }
        kiwi_task_clear (&t);
    }

    if (rk != NULL) {
        int timeout_ms = (int) (s->delivery_timeout * 1000 + 5000);
        rd_kafka_resp_err_t fe = rd_kafka_flush (rk, timeout_ms);
        if (fe != RD_KAFKA_RESP_ERR_NO_ERROR) {
            kiwi_warn ("batch: %d messages still queued after %d ms; giving them up", rd_kafka_outq_len (rk),
                       timeout_ms);
            rd_kafka_purge (rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
            rd_kafka_poll (rk, 1000); /* their reports: "purged" */
        }
        rd_kafka_destroy (rk);
    }
    if (interrupted) {
        kiwi_errorf ("batch: interrupted after line %lu; the rest of the file was not read", lineno);
        code = KIWI_EXIT_FAILURE;
    }

    if (b->json) {
        json_t *o = json_pack ("{s:I, s:I, s:I, s:I}", "accepted", (json_int_t) b->accepted, "rejected",
                               (json_int_t) b->rejected, "delivered", (json_int_t) b->delivered, "not_delivered",
                               (json_int_t) b->undelivered);
        char *j = o ? json_dumps (o, JSON_COMPACT) : NULL;
        if (j != NULL)
            printf ("%s\n", j);
        free (j);
        json_decref (o);
    } else if (dry_run)
        printf ("accepted %lu, rejected %lu, delivered 0 (dry run)\n", b->accepted, b->rejected);
    else
        printf ("accepted %lu, rejected %lu, delivered %lu\n", b->accepted, b->rejected, b->delivered);
    fflush (stdout);

    if (code != KIWI_EXIT_OK)
        return code;
    if (!dry_run && b->delivered != b->accepted)
        return KIWI_EXIT_FAILURE;
    if (b->rejected > 0)
        return KIWI_EXIT_INVALID;
    return KIWI_EXIT_OK;
}

int
kiwi_cmd_batch (int argc, char **argv)
{
    kiwi_args args = { 0 };
    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    kiwi_task defaults;
    kiwi_task_init (&defaults);
    kiwi_batch_parser parser;
    kiwi_batch_parser_init (&parser, KIWI_BATCH_AUTO, NULL);
    kiwi_error_t err = NULL;
    FILE *in = NULL;
    kiwi_watch w;
    bool have_w = false;
    int code = 0;
    if (kiwi_cli_begin (&kiwi_cmd_batch_def, argc, argv, &args, &s, &code) != 0)
        goto out;

    batch_run b = { 0 };
    bool dry_run = false, wait = false;
    const char *batch_id = NULL, *results = NULL;
    unsigned long long wait_timeout = 0;
    kiwi_batch_format format = KIWI_BATCH_AUTO;
    for (size_t i = 0; i < args.n_opts; i++)
        switch (args.opts[i].id) {
        case OPT_FORMAT:
            if (kiwi_batch_format_parse (args.opts[i].value, &format) < 0) {
                kiwi_errorf ("batch: --format: unknown format `%s` (accepted: auto, jsonl, tsv)", args.opts[i].value);
                code = KIWI_EXIT_USAGE;
                goto out;
            }
            break;
        case OPT_JSON: b.json = true; break;
        case OPT_QUIET: b.quiet = true; break;
        case OPT_DRY_RUN: dry_run = true; break;
        case OPT_WAIT: wait = true; break;
        case OPT_RESULTS: results = args.opts[i].value; break;
        case OPT_BATCH_ID:
            batch_id = args.opts[i].value;
            if (kiwi_batch_id_check (batch_id, &err) < 0) {
                kiwi_errorf ("batch: --batch-id: %s", kiwi_error_msg (err));
                kiwi_error_free (&err);
                code = KIWI_EXIT_USAGE;
                goto out;
            }
            break;
        case OPT_WAIT_TIMEOUT:
            if (kiwi_parse_u64 (args.opts[i].spelling, args.opts[i].value, 1, 31536000ULL, &wait_timeout, &err) < 0) {
                code = kiwi_cli_fail (&err, "batch");
                goto out;
            }
            break;
        default: break;
        }
    if (wait && dry_run) {
        kiwi_errorf ("batch: --wait and --dry-run do not go together (a dry run submits nothing to wait for)");
        code = KIWI_EXIT_USAGE;
        goto out;
    }
    if (!wait && (results != NULL || wait_timeout > 0)) {
        kiwi_errorf ("batch: --results and --wait-timeout go with --wait");
        code = KIWI_EXIT_USAGE;
        goto out;
    }
    if (args.n_pos != 1) {
        kiwi_errorf ("batch: expected one FILE (or - for stdin), got %zu arguments (see kiwi batch --help)", args.n_pos);
        code = KIWI_EXIT_USAGE;
        goto out;
    }
    if (kiwi_cli_task_options (&args, &defaults, &err) < 0) {
        code = kiwi_cli_fail (&err, "batch: defaults");
        goto out;
    }
    const char *path = args.pos[0];
    in = strcmp (path, "-") == 0 ? stdin : fopen (path, "r");
    if (in == NULL) {
        kiwi_errorf ("batch: cannot open `%s`: %s", path, strerror (errno));
        code = KIWI_EXIT_FAILURE;
        goto out;
    }
    int sigfd = kiwi_cli_signals_install (&err);
    if (sigfd < 0) {
        code = kiwi_cli_fail (&err, "batch");
        goto out;
    }
    char gen_id[64];
    if (batch_id == NULL) {
        if (kiwi_batch_id_new (gen_id, sizeof gen_id, &err) < 0) {
            close (sigfd);
            code = kiwi_cli_fail (&err, "batch");
            goto out;
        }
        batch_id = gen_id;
    }
    b.batch_id = batch_id;
    kiwi_batch_manifest man = { .submitted_at = kiwi_wall_ms () };
    snprintf (man.batch_id, sizeof man.batch_id, "%s", batch_id);
    char when[32];
    kiwi_time_format (man.submitted_at, when, sizeof when);
    kiwi_info ("batch %s: submitting at %s", batch_id, when);
    if (!dry_run && kiwi_cli_manifest_write (&s, &man, &err) < 0) {
        kiwi_warn ("batch %s: %s (kiwi watch will find the batch from the topics alone)", batch_id,
                   kiwi_error_msg (err));
        kiwi_error_free (&err);
    }
    if (wait) {
        if (kiwi_watch_init (&w, batch_id, man.submitted_at, &err) < 0) {
            close (sigfd);
            code = kiwi_cli_fail (&err, "batch");
            goto out;
        }
        have_w = true;
        b.watch = &w;
    }
    kiwi_batch_parser_init (&parser, format, &defaults);
    code = run_batch (&s, in, &parser, &b, dry_run);
    if (!dry_run) {
        man.complete = !kiwi_cli_stop;
        man.accepted = b.accepted;
        man.rejected = b.rejected;
        man.delivered = b.delivered;
        if (kiwi_cli_manifest_write (&s, &man, &err) < 0) {
            kiwi_warn ("batch %s: %s", batch_id, kiwi_error_msg (err));
            kiwi_error_free (&err);
        }
        kiwi_info ("batch %s: submitted at %s: %lu tasks delivered; follow it with `kiwi watch %s`", batch_id, when,
                   b.delivered, batch_id);
    }
    if (wait && !kiwi_cli_stop && b.delivered > 0 && !b.watch_failed) {
        cleanup_free char *def_results = NULL;
        if (results == NULL && asprintf (&def_results, "kiwi-batch-%s.jsonl", batch_id) < 0)
            def_results = NULL;
        if (results == NULL)
            results = def_results;
        kiwi_cli_watch_opts o = { .read_tasks = false, .timeout_s = wait_timeout, .json = b.json };
        o.since_ms = man.submitted_at - (int64_t) s.clock_skew * 1000;
        w.total = b.delivered;
        w.total_final = true;
        int wc;
        if (results == NULL || kiwi_watch_open_results (&w, results, &err) < 0)
            wc = err ? kiwi_cli_fail (&err, "batch") : KIWI_EXIT_FAILURE;
        else
            wc = kiwi_cli_watch (&s, &w, &o);
        if (wc != KIWI_EXIT_OK)
            code = wc;
    }
    close (sigfd);
out:
    if (have_w)
        kiwi_watch_clear (&w);
    if (in != NULL && in != stdin)
        fclose (in);
    kiwi_batch_parser_clear (&parser);
    kiwi_task_clear (&defaults);
    kiwi_args_clear (&args);
    kiwi_cli_settings_clear (&s);
    return code;
}
