/*
 * test_cli_stack_watch.c: following a batch and waiting for a task against
 * the real broker, with results produced by the test itself (the schemas/
 * encoder, no worker) among many results of other batches:
 *
 *   - `kiwi batch --wait`: the test reads the accepted task ids from its
 *     stdout and produces their results (every status, a duplicate, progress
 *     events) while it waits; the outcome table's counts and the results
 *     file (each task once) match what was produced;
 *   - `kiwi watch` interrupted after half the results and started again:
 *     the results file holds each task of the batch exactly once, and a
 *     watch with no manifest (another machine) finds the batch from the
 *     topics alone;
 *   - `kiwi watch` started before the batch, when its tasks topic does not
 *     exist yet: it finds the tasks and their results as they come;
 *   - on a terminal (tmux), the progress line is redrawn in place: the
 *     screen holds one progress line, then the outcome table;
 *   - `kiwi wait` on a kiwi-made task id reads from the submission time: the
 *     topic's older messages are undecodable bytes keyed by the same task id,
 *     which a read from offset 0 would report (exit 1), and --stats shows
 *     how few messages were read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "need.h"
#include "schemas/progress.h"
#include "schemas/result.h"
#include "schemas/task-input.h"
#include "test_cli_util.h"
#include "producer/watch.h"

static void
need_broker (void)
{
    KIWI_NEED (cli_broker_up (), "kafka at %s", cli_brokers ());
}

static const kiwi_result_status statuses[] = {
    KIWI_RESULT_FIXED,           KIWI_RESULT_NOT_FIXED,  KIWI_RESULT_INSTALL_FAILED, KIWI_RESULT_NEEDS_NETWORK,
    KIWI_RESULT_BUDGET_EXHAUSTED, KIWI_RESULT_MAX_ROUNDS, KIWI_RESULT_TIMED_OUT,      KIWI_RESULT_ERROR,
};
#define N_STATUS (sizeof statuses / sizeof statuses[0])

/* Queues the result of task_id with status s (timestamp ts_ms, 0: now). */
static void
send_result (cli_producer *p, const char *topic, const char *task_id, kiwi_result_status s, int64_t ts_ms)
{
    kiwi_result r;
    kiwi_result_init (&r);
    r.task_id = (char *) task_id;
    r.status = s;
    r.diff = s == KIWI_RESULT_FIXED ? (char *) "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+2\n" : NULL;
    r.reason = s == KIWI_RESULT_FIXED ? NULL : (char *) "tests still fail";
    r.rounds = 2;
    r.worker_id = (char *) "w-test";
    r.finished_at = cli_wall_ms ();
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_result_encode (&r, &buf, &len, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    cli_producer_send (p, topic, task_id, buf, len, ts_ms);
    free (buf);
}

static void
send_progress (cli_producer *p, const char *topic, const char *task_id)
{
    kiwi_progress e;
    kiwi_progress_init (&e);
    e.task_id = (char *) task_id;
    e.seq = 1;
    e.stage = KIWI_STAGE_ACCEPTED;
    e.kind = (char *) "accepted";
    e.ts = cli_wall_ms ();
    e.worker_id = (char *) "w-test";
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_progress_encode (&e, &buf, &len, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    cli_producer_send (p, topic, task_id, buf, len, 0);
    free (buf);
}

/* n results of other batches' tasks, an hour old (half of them, or all). */
static void
others (const char *topic, int n, bool all_old)
{
    cli_producer *p = cli_producer_new ();
    int64_t old = cli_wall_ms () - 3600 * 1000;
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf (id, sizeof id, "kiwi-20261201T000000.000Z-other%06d", i);
        send_result (p, topic, id, statuses[i % N_STATUS], all_old || i % 2 ? old + i : 0);
    }
    cli_producer_done (p);
}

/* A TSV batch file of n tasks; returns its path (malloc'd). */
static char *
batch_file (int n)
{
    char *path = strdup ("/tmp/kiwi-test-watch-batch-XXXXXX");
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    FILE *f = fdopen (fd, "w");
    for (int i = 0; i < n; i++)
        fprintf (f, "https://git.example.com/acme/repo-%d.git\tmain\tmake test\tmake the tests pass\n", i);
    fclose (f);
    return path;
}

static char *
tmp_dir (void)
{
    char *d = strdup ("/tmp/kiwi-test-watch-dir-XXXXXX");
    assert_non_null (mkdtemp (d));
    return d;
}

/* The lines of a file, counted per task id: fails on a duplicate or a task
 * not in ids[0..n). Returns the number of lines. */
static int
check_results_file (const char *path, char **ids, int n)
{
    FILE *f = fopen (path, "r");
    assert_non_null (f);
    int *seen = calloc ((size_t) n, sizeof *seen);
    char *line = NULL;
    size_t cap = 0;
    int lines = 0;
    while (getline (&line, &cap, f) > 0) {
        lines++;
        char *p = strstr (line, "\"task_id\":\"");
        assert_non_null (p);
        p += 11;
        char *q = strchr (p, '"');
        assert_non_null (q);
        *q = '\0';
        int k = 0;
        while (k < n && strcmp (ids[k], p) != 0)
            k++;
        if (k == n)
            fail_msg ("results file %s: task %s is not of the batch", path, p);
        if (seen[k]++)
            fail_msg ("results file %s: task %s twice", path, p);
    }
    free (line);
    free (seen);
    fclose (f);
    return lines;
}

/* The count in the table row of `status` ("fixed            5   12.5%"). */
static long
table_count (const char *out, const char *status)
{
    char want[64];
    snprintf (want, sizeof want, "\n%-18s ", status);
    const char *p = strstr (out, want);
    if (p == NULL)
        fail_msg ("no table row `%s` in:\n%s", status, out);
    return strtol (p + strlen (want), NULL, 10);
}

#define N_BATCH 40

static void
test_batch_wait (void **state)
{
    need_broker ();
    char *tasks = kiwi_test_unique ("kiwi.test.cli.bw.tasks");
    char *results = kiwi_test_unique ("kiwi.test.cli.bw.results");
    char *progress = kiwi_test_unique ("kiwi.test.cli.bw.progress");
    char *dir = tmp_dir ();
    others (results, 3000, false);
    char *file = batch_file (N_BATCH);
    char rfile[512], bid[96];
    snprintf (rfile, sizeof rfile, "%s/results.jsonl", dir);
    snprintf (bid, sizeof bid, "batch-test-%d", (int) getpid ());
    const char *argv[] = { "batch", "--brokers", cli_brokers (), "--tasks-topic", tasks, "--results-topic", results,
                           "--progress-topic", progress, "--batch-dir", dir, "--batch-id", bid, "--wait",
                           "--results", rfile, "--progress-interval", "1", "--wait-timeout", "120", file, NULL };
    int out_fd = -1, err_fd = -1;
    pid_t pid = cli_spawn (argv, &out_fd, &err_fd);

    /* the accepted ids, as kiwi batch reports them */
    char *ids[N_BATCH];
    char line[4096];
    for (int i = 0; i < N_BATCH; i++) {
        if (cli_read_line (out_fd, line, sizeof line, 60000) < 0)
            fail_msg ("kiwi batch reported %d lines; stderr: %s", i, cli_slurp (err_fd, 1000));
        char *p = strstr (line, ": accepted: ");
        if (p == NULL) {
            fail_msg ("line `%s`", line);
            return;
        }
        ids[i] = strdup (p + 12);
    }
    usleep (1500000); /* it is waiting now */
    /* results of every status, five each, some while others are running */
    cli_producer *pr = cli_producer_new ();
    for (int i = 0; i < N_BATCH; i++)
        send_progress (pr, progress, ids[i]);
    for (int i = 0; i < N_BATCH / 2; i++)
        send_result (pr, results, ids[i], statuses[i % N_STATUS], 0);
    cli_producer_done (pr);
    usleep (1500000);
    pr = cli_producer_new ();
    for (int i = N_BATCH / 2; i < N_BATCH; i++)
        send_result (pr, results, ids[i], statuses[i % N_STATUS], 0);
    send_result (pr, results, ids[0], KIWI_RESULT_ERROR, 0); /* a second result: the first wins */
    for (int i = 0; i < 200; i++) {                          /* other batches meanwhile */
        char id[64];
        snprintf (id, sizeof id, "kiwi-20261201T000000.000Z-late%06d", i);
        send_result (pr, results, id, KIWI_RESULT_FIXED, 0);
    }
    cli_producer_done (pr);

    int rc = cli_wait (pid, 120000);
    char *out = cli_slurp (out_fd, 2000), *log = cli_slurp (err_fd, 2000);
    if (rc != 0)
        fail_msg ("kiwi batch --wait: exit %d\nstdout: %s\nstderr: %s", rc, out, log);
    /* the batch id at the start and the end */
    assert_non_null (strstr (log, bid));
    assert_non_null (strstr (log, "submitting at"));
    assert_non_null (strstr (log, "follow it with `kiwi watch"));
    /* periodic progress lines (stdout is a pipe) */
    assert_non_null (strstr (out, bid));
    assert_non_null (strstr (out, "done ("));
    /* the table: five of each status (ids[0] fixed, despite its second result) */
    for (size_t s = 0; s < N_STATUS; s++)
        if (table_count (out, kiwi_result_status_name (statuses[s])) != N_BATCH / (long) N_STATUS)
            fail_msg ("%s: %ld, want %d\n%s", kiwi_result_status_name (statuses[s]),
                      table_count (out, kiwi_result_status_name (statuses[s])), N_BATCH / (int) N_STATUS, out);
    assert_int_equal (table_count (out, "done"), N_BATCH);
    assert_int_equal (table_count (out, "running"), 0);
    assert_int_equal (table_count (out, "total"), N_BATCH);
    assert_int_equal (check_results_file (rfile, ids, N_BATCH), N_BATCH);
    /* the manifest */
    char man[512];
    snprintf (man, sizeof man, "%s/%s.json", dir, bid);
    FILE *mf = fopen (man, "r");
    assert_non_null (mf);
    char mtext[1024] = "";
    assert_true (fread (mtext, 1, sizeof mtext - 1, mf) > 0);
    fclose (mf);
    assert_non_null (strstr (mtext, "\"complete\":true"));
    assert_non_null (strstr (mtext, "\"delivered\":40"));
    /* every task on the tasks topic carries the batch id */
    cli_msg *m = NULL;
    size_t n = cli_consume (tasks, N_BATCH, 30000, &m);
    assert_int_equal (n, N_BATCH);
    for (size_t i = 0; i < n; i++) {
        kiwi_task t;
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_task_decode (m[i].value, m[i].len, &t, &err), 0);
        assert_string_equal (t.batch_id, bid);
        kiwi_task_clear (&t);
    }
    cli_msgs_free (m, n);
    for (int i = 0; i < N_BATCH; i++)
        free (ids[i]);
    close (out_fd);
    close (err_fd);
    unlink (rfile);
    unlink (man);
    rmdir (dir);
    unlink (file);
    free (out), free (log), free (file), free (dir), free (tasks), free (results), free (progress);
}

/* Lines in a file (0 when it does not exist). */
static int
file_lines (const char *path)
{
    FILE *f = fopen (path, "r");
    if (f == NULL)
        return 0;
    int n = 0, c;
    while ((c = fgetc (f)) != EOF)
        n += c == '\n';
    fclose (f);
    return n;
}

#define N_RE 20

static void
test_watch_interrupted_and_reattached (void **state)
{
    need_broker ();
    char *tasks = kiwi_test_unique ("kiwi.test.cli.wr.tasks");
    char *results = kiwi_test_unique ("kiwi.test.cli.wr.results");
    char *progress = kiwi_test_unique ("kiwi.test.cli.wr.progress");
    char *dir = tmp_dir (), *elsewhere = tmp_dir ();
    char *file = batch_file (N_RE);
    char bid[96], rfile[512], rfile2[512];
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_batch_id_new (bid, sizeof bid, &err), 0); /* it carries its time */
    snprintf (rfile, sizeof rfile, "%s/r.jsonl", dir);
    snprintf (rfile2, sizeof rfile2, "%s/r.jsonl", elsewhere);
    /* tasks of another batch on the same topic */
    char *ofile = batch_file (5);
    const char *oargv[] = { "batch", "--brokers", cli_brokers (), "--tasks-topic", tasks, "--batch-dir", elsewhere,
                            "--batch-id", "some-other-batch", ofile, NULL };
    char *out = NULL, *log = NULL;
    assert_int_equal (cli_run (oargv, NULL, 0, &out, &log, 60), 0);
    free (out), free (log);
    const char *bargv[] = { "batch", "--brokers", cli_brokers (), "--tasks-topic", tasks, "--batch-dir", dir,
                            "--batch-id", bid, file, NULL };
    assert_int_equal (cli_run (bargv, NULL, 0, &out, &log, 60), 0);
    char *ids[N_RE];
    int k = 0;
    for (char *save = NULL, *l = strtok_r (out, "\n", &save); l && k < N_RE; l = strtok_r (NULL, "\n", &save)) {
        char *p = strstr (l, ": accepted: ");
        if (p != NULL)
            ids[k++] = strdup (p + 12);
    }
    assert_int_equal (k, N_RE);
    free (out), free (log);
    others (results, 2000, false);

    /* half the results, then a watch, interrupted once it wrote them */
    cli_producer *pr = cli_producer_new ();
    for (int i = 0; i < N_RE / 2; i++)
        send_result (pr, results, ids[i], statuses[i % N_STATUS], 0);
    cli_producer_done (pr);
    const char *wargv[] = { "watch", "--brokers", cli_brokers (), "--tasks-topic", tasks, "--results-topic", results,
                            "--progress-topic", progress, "--batch-dir", dir, "--results", rfile, bid, NULL };
    int out_fd = -1, err_fd = -1;
    pid_t pid = cli_spawn (wargv, &out_fd, &err_fd);
    int64_t until = cli_now_ms () + 60000;
    while (file_lines (rfile) < N_RE / 2 && cli_now_ms () < until)
        usleep (100000);
    assert_int_equal (file_lines (rfile), N_RE / 2);
    kill (pid, SIGINT);
    assert_int_equal (cli_wait (pid, 20000), 1);
    char *o1 = cli_slurp (out_fd, 1000), *e1 = cli_slurp (err_fd, 1000);
    close (out_fd);
    close (err_fd);
    assert_non_null (strstr (e1, "interrupted"));
    assert_int_equal (table_count (o1, "done"), N_RE / 2);
    assert_int_equal (table_count (o1, "total"), N_RE); /* from the manifest */
    free (o1), free (e1);

    /* the rest, and the first half again (a task redelivered) */
    pr = cli_producer_new ();
    for (int i = 0; i < N_RE; i++)
        send_result (pr, results, ids[i], statuses[i % N_STATUS], 0);
    cli_producer_done (pr);
    char *o2 = NULL, *e2 = NULL;
    int rc = cli_run (wargv, NULL, 0, &o2, &e2, 90);
    if (rc != 0)
        fail_msg ("re-attached watch: exit %d\n%s\n%s", rc, o2, e2);
    assert_int_equal (table_count (o2, "done"), N_RE);
    assert_int_equal (check_results_file (rfile, ids, N_RE), N_RE);
    free (o2), free (e2);

    /* another machine: no manifest, no results file; the topics alone */
    const char *rargv[] = { "watch", "--brokers", cli_brokers (), "--tasks-topic", tasks, "--results-topic", results,
                            "--progress-topic", progress, "--batch-dir", elsewhere, "--results", rfile2, "--stats",
                            bid, NULL };
    rc = cli_run (rargv, NULL, 0, &o2, &e2, 90);
    if (rc != 0)
        fail_msg ("remote watch: exit %d\n%s\n%s", rc, o2, e2);
    assert_int_equal (table_count (o2, "done"), N_RE);
    assert_non_null (strstr (o2, "(so far)")); /* the total is what the topic holds */
    assert_int_equal (check_results_file (rfile2, ids, N_RE), N_RE);
    free (o2), free (e2);

    for (int i = 0; i < N_RE; i++)
        free (ids[i]);
    char man[512];
    snprintf (man, sizeof man, "%s/%s.json", dir, bid);
    unlink (man);
    snprintf (man, sizeof man, "%s/some-other-batch.json", elsewhere);
    unlink (man);
    unlink (rfile), unlink (rfile2), rmdir (dir), rmdir (elsewhere), unlink (file), unlink (ofile);
    free (dir), free (elsewhere), free (file), free (ofile), free (tasks), free (results), free (progress);
}

/* A watch started before the batch, when its tasks topic does not exist
 * yet: the tasks and their results arrive while it runs, each result right
 * after its task. */
static void
test_watch_started_before_the_batch (void **state)
{
    need_broker ();
    char *tasks = kiwi_test_unique ("kiwi.test.cli.wb.tasks");
    char *results = kiwi_test_unique ("kiwi.test.cli.wb.results");
    char *progress = kiwi_test_unique ("kiwi.test.cli.wb.progress");
    char *dir = tmp_dir (), *elsewhere = tmp_dir ();
    char bid[96], rfile[512];
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_batch_id_new (bid, sizeof bid, &err), 0);
    snprintf (rfile, sizeof rfile, "%s/r.jsonl", elsewhere);
    /* the results and progress topics exist (other batches'), the tasks
     * topic not yet */
    cli_producer *pr = cli_producer_new ();
    send_result (pr, results, "kiwi-20261201T000000.000Z-early", KIWI_RESULT_FIXED, 0);
    send_progress (pr, progress, "kiwi-20261201T000000.000Z-early");
    cli_producer_done (pr);
    const char *wargv[] = { "watch", "--brokers", cli_brokers (), "--tasks-topic", tasks, "--results-topic", results,
                            "--progress-topic", progress, "--batch-dir", elsewhere, "--results", rfile, "--total",
                            "10", "--timeout", "60", bid, NULL };
    int out_fd = -1, err_fd = -1;
    pid_t pid = cli_spawn (wargv, &out_fd, &err_fd);
    usleep (1500000);
    char *file = batch_file (10);
    const char *bargv[] = { "batch", "--brokers", cli_brokers (), "--tasks-topic", tasks, "--batch-dir", dir,
                            "--batch-id", bid, file, NULL };
    char *out = NULL, *log = NULL;
    assert_int_equal (cli_run (bargv, NULL, 0, &out, &log, 60), 0);
    char *ids[10];
    int k = 0;
    for (char *save = NULL, *l = strtok_r (out, "\n", &save); l && k < 10; l = strtok_r (NULL, "\n", &save)) {
        char *p = strstr (l, ": accepted: ");
        if (p != NULL)
            ids[k++] = strdup (p + 12);
    }
    assert_int_equal (k, 10);
    free (out), free (log);
    pr = cli_producer_new ();
    for (int i = 0; i < 10; i++) {
        char other[64];
        snprintf (other, sizeof other, "kiwi-20261201T000000.000Z-live%06d", i);
        send_result (pr, results, other, KIWI_RESULT_FIXED, 0);
        send_result (pr, results, ids[i], statuses[i % N_STATUS], 0);
    }
    cli_producer_done (pr);
    int rc = cli_wait (pid, 90000);
    char *o = cli_slurp (out_fd, 1000), *e = cli_slurp (err_fd, 1000);
    close (out_fd);
    close (err_fd);
    if (rc != 0)
        fail_msg ("watch started before the batch: exit %d\n%s\n%s", rc, o, e);
    assert_int_equal (table_count (o, "done"), 10);
    assert_int_equal (check_results_file (rfile, ids, 10), 10);
    free (o), free (e);
    for (int i = 0; i < 10; i++)
        free (ids[i]);
    char man[512];
    snprintf (man, sizeof man, "%s/%s.json", dir, bid);
    unlink (man), unlink (rfile), unlink (file), rmdir (dir), rmdir (elsewhere);
    free (file), free (dir), free (elsewhere), free (tasks), free (results), free (progress);
}

/* Runs `tmux -L sock ARGS`; returns its stdout (malloc'd). */
static char *
tmux (const char *sock, const char *args)
{
    char cmd[4096];
    snprintf (cmd, sizeof cmd, "tmux -L %s %s 2>/dev/null", sock, args);
    FILE *p = popen (cmd, "r");
    assert_non_null (p);
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc (cap);
    while ((r = fread (buf + n, 1, cap - 1 - n, p)) > 0)
        n += r;
    buf[n] = '\0';
    pclose (p);
    return buf;
}

/* Lines of text that contain both a and b. */
static int
lines_with (const char *text, const char *a, const char *b)
{
    int n = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr (l, '\n');
        size_t len = e ? (size_t) (e - l) : strlen (l);
        char *line = strndup (l, len);
        n += strstr (line, a) != NULL && strstr (line, b) != NULL;
        free (line);
        l = e ? e + 1 : NULL;
    }
    return n;
}

/* On a terminal the progress line is redrawn in place: the screen holds one
 * progress line however many refreshes there were, then the table. */
static void
test_progress_line_in_a_terminal (void **state)
{
    need_broker ();
    KIWI_NEED (system ("tmux -V >/dev/null 2>&1") == 0, "tmux (ops/setup.sh installs it)");
    char *tasks = kiwi_test_unique ("kiwi.test.cli.wt.tasks");
    char *results = kiwi_test_unique ("kiwi.test.cli.wt.results");
    char *progress = kiwi_test_unique ("kiwi.test.cli.wt.progress");
    char *dir = tmp_dir ();
    char bid[96], rfile[512], status[512], sock[64];
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_batch_id_new (bid, sizeof bid, &err), 0);
    snprintf (rfile, sizeof rfile, "%s/r.jsonl", dir);
    snprintf (status, sizeof status, "%s/status", dir);
    snprintf (sock, sizeof sock, "kiwi-test-watch-%d", (int) getpid ());
    char *file = batch_file (20);
    const char *bargv[] = { "batch", "--brokers", cli_brokers (), "--tasks-topic", tasks, "--batch-dir", dir,
                            "--batch-id", bid, file, NULL };
    char *out = NULL, *log = NULL;
    assert_int_equal (cli_run (bargv, NULL, 0, &out, &log, 60), 0);
    char *ids[20];
    int k = 0;
    for (char *save = NULL, *l = strtok_r (out, "\n", &save); l && k < 20; l = strtok_r (NULL, "\n", &save)) {
        char *p = strstr (l, ": accepted: ");
        if (p != NULL)
            ids[k++] = strdup (p + 12);
    }
    assert_int_equal (k, 20);
    free (out), free (log);

    char cmd[4096];
    snprintf (cmd, sizeof cmd,
              "new-session -d -s watch -x 200 -y 30 \"%s watch --brokers %s --tasks-topic %s --results-topic %s "
              "--progress-topic %s --batch-dir %s --results %s --refresh 1 --progress-interval 1 %s; echo exit=\\$? > %s; sleep 60\"",
              KIWI_CLI_BIN, cli_brokers (), tasks, results, progress, dir, rfile, bid, status);
    free (tmux (sock, cmd));
    cli_producer *pr = cli_producer_new ();
    for (int i = 0; i < 10; i++)
        send_result (pr, results, ids[i], statuses[i % N_STATUS], 0);
    cli_producer_done (pr);
    char *pane = NULL;
    int64_t until = cli_now_ms () + 30000;
    while (cli_now_ms () < until) {
        usleep (300000);
        free (pane);
        pane = tmux (sock, "capture-pane -p -t watch");
        if (lines_with (pane, bid, ": 10/20 done (50.0%)") == 1)
            break;
    }
    if (lines_with (pane, bid, ": 10/20 done (50.0%)") != 1)
        fail_msg ("no progress line at 10/20:\n%s", pane);
    usleep (2500000); /* more refreshes */
    free (pane);
    pane = tmux (sock, "capture-pane -p -t watch");
    if (lines_with (pane, bid, " done (") != 1)
        fail_msg ("the progress line was not redrawn in place:\n%s", pane);
    print_message ("kiwi watch on a terminal, half done:\n%s\n", pane);

    pr = cli_producer_new ();
    for (int i = 10; i < 20; i++)
        send_result (pr, results, ids[i], statuses[i % N_STATUS], 0);
    cli_producer_done (pr);
    until = cli_now_ms () + 30000;
    char got[64] = "";
    while (cli_now_ms () < until && got[0] == '\0') {
        usleep (300000);
        FILE *f = fopen (status, "r");
        if (f != NULL) {
            if (fgets (got, sizeof got, f) == NULL)
                got[0] = '\0';
            fclose (f);
        }
    }
    free (pane);
    pane = tmux (sock, "capture-pane -p -t watch");
    free (tmux (sock, "kill-server"));
    assert_string_equal (got, "exit=0\n");
    assert_int_equal (lines_with (pane, bid, " done ("), 1);
    assert_int_equal (lines_with (pane, bid, ": 20/20 done (100.0%)"), 1);
    assert_int_equal (table_count (pane, "done"), 20);
    print_message ("kiwi watch on a terminal, complete:\n%s\n", pane);
    free (pane);
    for (int i = 0; i < 20; i++)
        free (ids[i]);
    char man[512];
    snprintf (man, sizeof man, "%s/%s.json", dir, bid);
    unlink (man), unlink (rfile), unlink (status), unlink (file), rmdir (dir);
    free (file), free (dir), free (tasks), free (results), free (progress);
}

static void
test_wait_reads_from_the_submission_time (void **state)
{
    need_broker ();
    char *results = kiwi_test_unique ("kiwi.test.cli.ws.results");
    char id[64];
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_task_id_new (id, sizeof id, &err), 0);
    /* an hour before the task: undecodable bytes under its key, and other
     * tasks' results */
    cli_producer *pr = cli_producer_new ();
    int64_t old = cli_wall_ms () - 3600 * 1000;
    for (int i = 0; i < 500; i++)
        cli_producer_send (pr, results, id, "\xc1garbage", 8, old + i);
    cli_producer_done (pr);
    others (results, 2000, true);
    pr = cli_producer_new ();
    send_result (pr, results, id, KIWI_RESULT_MAX_ROUNDS, 0);
    cli_producer_done (pr);

    const char *argv[] = { "wait", "--brokers", cli_brokers (), "--results-topic", results, "--timeout", "60", id,
                           NULL };
    char *out = NULL, *log = NULL;
    int rc = cli_run (argv, NULL, 0, &out, &log, 90);
    if (rc != 14) /* read from offset 0, the garbage under the key: exit 1, "does not decode" */
        fail_msg ("kiwi wait: exit %d, want 14 (max_rounds)\nstdout: %s\nstderr: %s", rc, out, log);
    assert_non_null (strstr (out, "\"status\":\"max_rounds\""));
    assert_null (strstr (log, "does not decode"));
    free (out), free (log);
    /* --stats: the task's result alone was read (2,500 messages are older) */
    const char *argv1[] = { "wait", "--brokers", cli_brokers (), "--results-topic", results, "--timeout", "60",
                            "--stats", id, NULL };
    assert_int_equal (cli_run (argv1, NULL, 0, &out, &log, 90), 14);
    const char *p = strstr (log, "wait: read ");
    assert_non_null (p);
    long n = strtol (p + 11, NULL, 10);
    if (n != 1)
        fail_msg ("read %ld messages, want 1: %s", n, log);
    free (out), free (log);

    /* an id with no time in it: from the beginning, and said so */
    pr = cli_producer_new ();
    send_result (pr, results, "plain-task-id", KIWI_RESULT_FIXED, 0);
    cli_producer_done (pr);
    const char *argv2[] = { "wait", "--brokers", cli_brokers (), "--results-topic", results, "--timeout", "60",
                            "plain-task-id", NULL };
    assert_int_equal (cli_run (argv2, NULL, 0, &out, &log, 90), 0);
    assert_non_null (strstr (log, "carries no submission time"));
    free (out), free (log);
    /* --since overrides: an hour back reaches the garbage under the key */
    const char *argv3[] = { "wait", "--brokers", cli_brokers (), "--results-topic", results, "--timeout", "60",
                            "--since", "0", id, NULL };
    assert_int_equal (cli_run (argv3, NULL, 0, &out, &log, 90), 1);
    assert_non_null (strstr (log, "does not decode"));
    free (out), free (log), free (results);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_batch_wait),
        cmocka_unit_test (test_watch_interrupted_and_reattached),
        cmocka_unit_test (test_watch_started_before_the_batch),
        cmocka_unit_test (test_progress_line_in_a_terminal),
        cmocka_unit_test (test_wait_reads_from_the_submission_time),
    };
    return cmocka_run_group_tests_name ("cli_stack_watch", tests, NULL, NULL);
}
