/*
 * bench_catchup.c: how fast `kiwi watch` and `kiwi wait` catch up on a
 * results topic that holds many other results, as a ratio to kcat reading
 * the same range (`kcat -C -o s@<ms> -e`), measured in one run.
 *
 * It makes its own topics on the stack's broker and fills them with the
 * schemas/ encoders (no worker): a batch of --batch tasks (each carrying the
 * batch id) and their results, and --others results of other batches'
 * tasks, in two layouts:
 *
 *   before: the others are older than the batch (a long-lived topic): a
 *           reader that seeks to the submission time skips them;
 *   during: the others are produced while the batch runs, interleaved with
 *           its results: every reader of the range reads them all.
 *
 * For `kiwi wait`, a task whose result comes after --others older ones.
 * Each measurement is the median of --runs runs, kiwi and kcat interleaved;
 * kcat from the beginning of the topic is printed alongside, for scale.
 *
 *   set -a; . /var/lib/kiwi/stack.env; set +a
 *   build/bench/bench_catchup --others 100000 --batch 1000 --runs 5
 */
#include <errno.h>
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "schemas/result.h"
#include "schemas/task-input.h"
#include "schemas/task.h"
#include "producer/watch.h"

extern char **environ;

static const char *brokers;

static int64_t
mono_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double
mono_s (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void
die (const char *what)
{
    fprintf (stderr, "bench_catchup: %s\n", what);
    exit (1);
}

static rd_kafka_t *
producer (void)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new ();
    if (rd_kafka_conf_set (conf, "bootstrap.servers", brokers, errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (conf, "linger.ms", "20", errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (conf, "compression.codec", "lz4", errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (conf, "queue.buffering.max.messages", "500000", errstr, sizeof errstr)
               != RD_KAFKA_CONF_OK)
        die (errstr);
    rd_kafka_t *rk = rd_kafka_new (RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (rk == NULL)
        die (errstr);
    return rk;
}

static void
send_msg (rd_kafka_t *rk, const char *topic, const char *key, const char *buf, size_t len, int64_t ts)
{
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev (rk, RD_KAFKA_V_TOPIC (topic), RD_KAFKA_V_KEY (key, strlen (key)),
                                                   RD_KAFKA_V_VALUE ((void *) buf, len),
                                                   RD_KAFKA_V_MSGFLAGS (RD_KAFKA_MSG_F_COPY),
                                                   RD_KAFKA_V_TIMESTAMP (ts), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll (rk, 50);
            continue;
        }
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
            die (rd_kafka_err2str (e));
        rd_kafka_poll (rk, 0);
        return;
    }
}

static void
send_result (rd_kafka_t *rk, const char *topic, const char *id, int i, int64_t ts)
{
    static const kiwi_result_status st[] = { KIWI_RESULT_FIXED, KIWI_RESULT_NOT_FIXED, KIWI_RESULT_MAX_ROUNDS,
                                             KIWI_RESULT_TIMED_OUT };
    kiwi_result r;
    kiwi_result_init (&r);
    r.task_id = (char *) id;
    r.status = st[i % 4];
    r.diff = r.status == KIWI_RESULT_FIXED ? (char *) "--- a/src/x.c\n+++ b/src/x.c\n@@ -1 +1 @@\n-int x = 1;\n+int x = 2;\n"
                                           : NULL;
    r.reason = r.status == KIWI_RESULT_FIXED ? NULL : (char *) "the tests still fail after the last round";
    r.rounds = 3;
    r.tokens_in = 12000;
    r.tokens_out = 3000;
    r.duration_ms = 42000;
    r.worker_id = (char *) "bench-worker-1";
    r.finished_at = ts;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_result_encode (&r, &buf, &len, &err) < 0)
        die (kiwi_error_msg (err));
    send_msg (rk, topic, id, buf, len, ts);
    free (buf);
}

static void
send_task (rd_kafka_t *rk, const char *topic, const char *id, const char *batch_id, int i, int64_t ts)
{
    kiwi_task t;
    kiwi_task_init (&t);
    char url[128];
    snprintf (url, sizeof url, "https://git.example.com/acme/repo-%d.git", i);
    t.id = (char *) id;
    t.repo.url = url;
    t.repo.ref = (char *) "main";
    t.test_command = (char *) "make test";
    t.goal = (char *) "make the tests pass";
    t.submitted_at = ts;
    t.source = (char *) "batch";
    t.batch_id = (char *) batch_id;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_task_encode (&t, &buf, &len, &err) < 0)
        die (kiwi_error_msg (err));
    send_msg (rk, topic, url, buf, len, ts);
    free (buf);
}

static void
flush (rd_kafka_t *rk)
{
    if (rd_kafka_flush (rk, 120000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        die ("flush: not every message was acknowledged");
}

/* Runs argv with stdout and stderr to /dev/null; returns the seconds it took
 * and fails on an unexpected exit status. */
static double
timed (char *const *argv, int want_status)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init (&fa);
    posix_spawn_file_actions_addopen (&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen (&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
    double t0 = mono_s ();
    pid_t pid;
    if (posix_spawnp (&pid, argv[0], &fa, NULL, argv, environ) != 0)
        die ("spawn");
    posix_spawn_file_actions_destroy (&fa);
    int st = 0;
    waitpid (pid, &st, 0);
    double t = mono_s () - t0;
    if (!WIFEXITED (st) || WEXITSTATUS (st) != want_status) {
        fprintf (stderr, "bench_catchup: `%s %s` exited %d (want %d)\n", argv[0], argv[1],
                 WIFEXITED (st) ? WEXITSTATUS (st) : -1, want_status);
        exit (1);
    }
    return t;
}

static int
cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double
median (double *v, int n)
{
    qsort (v, (size_t) n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct scenario {
    const char *name;
    char tasks[128], results[128], progress[128];
    char batch_id[64];
    int64_t since; /* the submission time minus the clock skew */
} scenario;

static void
fill (scenario *sc, const char *name, int n_others, int n_batch, bool during, const char *run)
{
    sc->name = name;
    snprintf (sc->tasks, sizeof sc->tasks, "kiwi.bench.catchup.%s.%s.tasks", run, name);
    snprintf (sc->results, sizeof sc->results, "kiwi.bench.catchup.%s.%s.results", run, name);
    snprintf (sc->progress, sizeof sc->progress, "kiwi.bench.catchup.%s.%s.progress", run, name);
    kiwi_error_t err = NULL;
    if (kiwi_batch_id_new (sc->batch_id, sizeof sc->batch_id, &err) < 0)
        die (kiwi_error_msg (err));
    int64_t submitted = kiwi_id_time_ms (sc->batch_id);
    sc->since = submitted - 60000;
    rd_kafka_t *rk = producer ();
    char id[96];
    /* before: the others over the two hours before the batch */
    if (!during)
        for (int i = 0; i < n_others; i++) {
            snprintf (id, sizeof id, "kiwi-20261201T000000.000Z-other%08d", i);
            send_result (rk, sc->results, id, i, submitted - 7200000 + (int64_t) i * 7000000 / n_others);
        }
    for (int i = 0; i < n_batch; i++) {
        snprintf (id, sizeof id, "kiwi-bench-%s-%06d", name, i);
        send_task (rk, sc->tasks, id, sc->batch_id, i, submitted + 1);
    }
    /* the batch's results, every n_others / n_batch others between two */
    int per = n_batch > 0 ? n_others / n_batch : 0;
    int o = 0;
    for (int i = 0; i < n_batch; i++) {
        if (during)
            for (int k = 0; k < per; k++, o++) {
                snprintf (id, sizeof id, "kiwi-20261201T000000.000Z-other%08d", o);
                send_result (rk, sc->results, id, o, submitted + 10 + o);
            }
        snprintf (id, sizeof id, "kiwi-bench-%s-%06d", name, i);
        send_result (rk, sc->results, id, i, submitted + 10 + o);
    }
    flush (rk);
    rd_kafka_destroy (rk);
}

int
main (int argc, char **argv)
{
    int n_others = 100000, n_batch = 1000, runs = 5;
    const char *kiwi = KIWI_CLI_BIN;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--others") == 0 && i + 1 < argc)
            n_others = atoi (argv[++i]);
        else if (strcmp (argv[i], "--batch") == 0 && i + 1 < argc)
            n_batch = atoi (argv[++i]);
        else if (strcmp (argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi (argv[++i]);
        else if (strcmp (argv[i], "--kiwi") == 0 && i + 1 < argc)
            kiwi = argv[++i];
        else {
            fprintf (stderr, "usage: bench_catchup [--others N] [--batch N] [--runs N] [--kiwi PATH]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 50 || n_batch < 1 || n_others < 0)
        die ("bad arguments");
    brokers = getenv ("KIWI_KAFKA_BROKERS");
    if (brokers == NULL)
        brokers = "127.0.0.1:19092";
    char run[32];
    snprintf (run, sizeof run, "%lld", (long long) kiwi_wall_ms ());

    scenario sc[2];
    int64_t t0 = mono_ms ();
    fill (&sc[0], "before", n_others, n_batch, false, run);
    fill (&sc[1], "during", n_others, n_batch, true, run);
    /* kiwi wait: one task's result after n_others older ones */
    char wtopic[128], wid[64];
    snprintf (wtopic, sizeof wtopic, "kiwi.bench.catchup.%s.wait.results", run);
    kiwi_error_t err = NULL;
    if (kiwi_task_id_new (wid, sizeof wid, &err) < 0)
        die (kiwi_error_msg (err));
    int64_t wsub = kiwi_id_time_ms (wid);
    rd_kafka_t *rk = producer ();
    for (int i = 0; i < n_others; i++) {
        char id[96];
        snprintf (id, sizeof id, "kiwi-20261201T000000.000Z-other%08d", i);
        send_result (rk, wtopic, id, i, wsub - 7200000 + (int64_t) i * 7000000 / (n_others ? n_others : 1));
    }
    send_result (rk, wtopic, wid, 0, wsub + 5);
    flush (rk);
    rd_kafka_destroy (rk);
    printf ("produced %d + %d results x 2 layouts and %d + 1 for wait in %.1f s (broker %s)\n", n_others, n_batch,
            n_others, (double) (mono_ms () - t0) / 1000.0, brokers);

    char tmpl[] = "/tmp/kiwi-bench-catchup-XXXXXX";
    char *dir = mkdtemp (tmpl);
    if (dir == NULL)
        die ("mkdtemp");
    printf ("%-34s %8s %8s %6s %14s %14s\n", "", "kiwi s", "kcat s", "ratio", "kcat +tasks s", "kcat -o beg s");
    for (int s = 0; s < 2; s++) {
        double tk[50], tc[50], tb[50], tt[50];
        char rfile[256], since[32], total[32], ts[64];
        snprintf (rfile, sizeof rfile, "%s/%s.jsonl", dir, sc[s].name);
        snprintf (since, sizeof since, "%lld", (long long) (sc[s].since + 60000));
        snprintf (total, sizeof total, "%d", n_batch);
        snprintf (ts, sizeof ts, "s@%lld", (long long) sc[s].since);
        for (int r = 0; r < runs; r++) {
            unlink (rfile); /* every run catches up from nothing */
            char *kargv[] = { (char *) kiwi,      "watch",       "--brokers",   (char *) brokers, "--tasks-topic",
                              sc[s].tasks,        "--results-topic", sc[s].results, "--progress-topic",
                              sc[s].progress,     "--batch-dir", dir,           "--results",      rfile,
                              "--since",          since,         "--total",     total,            "--quiet",
                              sc[s].batch_id,     NULL };
            char *cargv[] = { "kcat", "-q", "-C", "-b", (char *) brokers, "-t", sc[s].results, "-o", ts, "-e", NULL };
            char *bargv[] = { "kcat", "-q", "-C", "-b", (char *) brokers, "-t", sc[s].results, "-o", "beginning", "-e",
                              NULL };
            char *targv[] = { "kcat", "-q", "-C", "-b", (char *) brokers, "-t", sc[s].tasks, "-o", ts, "-e", NULL };
            tk[r] = timed (kargv, 0);
            tc[r] = timed (cargv, 0);
            tt[r] = timed (targv, 0) + tc[r]; /* what kiwi reads: the tasks, then the results */
            tb[r] = timed (bargv, 0);
        }
        double k = median (tk, runs), c = median (tc, runs), b = median (tb, runs), t = median (tt, runs);
        char label[64];
        snprintf (label, sizeof label, "kiwi watch, others %s the batch", sc[s].name);
        printf ("%-34s %8.3f %8.3f %6.2f %14.3f %14.3f\n", label, k, c, k / c, t, b);
        unlink (rfile);
    }
    {
        double tk[50], tc[50], tb[50];
        char ts[64];
        snprintf (ts, sizeof ts, "s@%lld", (long long) (wsub - 60000));
        for (int r = 0; r < runs; r++) {
            char *kargv[] = { (char *) kiwi, "wait", "--brokers", (char *) brokers, "--results-topic", wtopic,
                              "--timeout", "120", wid, NULL };
            char *cargv[] = { "kcat", "-q", "-C", "-b", (char *) brokers, "-t", wtopic, "-o", ts, "-e", NULL };
            char *bargv[] = { "kcat", "-q", "-C", "-b", (char *) brokers, "-t", wtopic, "-o", "beginning", "-e",
                              NULL };
            tk[r] = timed (kargv, 0);
            tc[r] = timed (cargv, 0);
            tb[r] = timed (bargv, 0);
        }
        double k = median (tk, runs), c = median (tc, runs), b = median (tb, runs);
        printf ("%-34s %8.3f %8.3f %6.2f %14s %14.3f\n", "kiwi wait, others before the task", k, c, k / c, "-", b);
    }
    rmdir (dir);
    printf ("(medians of %d runs; topics kiwi.bench.catchup.%s.* are left on the broker)\n", runs, run);
    return 0;
}
