/*
 * test_cli_stack_batch.c: `kiwi batch` against the real broker: 10,000
 * generated TSV lines with malformed ones at known places give exact
 * accepted/rejected counts, a report line per line, and every accepted task
 * on the topic (and nothing else); JSON lines with defaults from flags;
 * the throughput is printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "need.h"
#include "schemas/task.h"
#include "test_cli_util.h"

#define LINES 10000

static void
need_broker (void)
{
    KIWI_NEED (cli_broker_up (), "kafka at %s", cli_brokers ());
}

static int
cmp_str (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

/* What line i (1-based) of the generated file is: 0 good, else the kind of
 * fault. Five kinds, spread over the file. */
static int
fault (int i)
{
    if (i % 101 == 0)
        return 1; /* empty ref */
    if (i % 211 == 0)
        return 2; /* five cells */
    if (i % 307 == 0)
        return 3; /* URL starting with '-' */
    if (i % 401 == 0)
        return 4; /* no test command */
    if (i % 503 == 0)
        return 5; /* invalid UTF-8 in the goal */
    return 0;
}

static void
test_batch_10000_tsv (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.batch");
    char path[] = "/tmp/kiwi-test-batch-XXXXXX";
    int fd = mkstemp (path);
    FILE *f = fdopen (fd, "w");
    int want_rejected = 0;
    for (int i = 1; i <= LINES; i++) {
        switch (fault (i)) {
        case 0: fprintf (f, "https://git.example.test/org/repo-%05d.git\tmain\tmake test\tfix repo %d\n", i, i); break;
        case 1: fprintf (f, "https://git.example.test/org/repo-%05d.git\t\tmake test\tfix\n", i); break;
        case 2: fprintf (f, "https://git.example.test/org/repo-%05d.git\tmain\tmake test\tfix\textra\n", i); break;
        case 3: fprintf (f, "-https://git.example.test/org/repo-%05d.git\tmain\tmake test\tfix\n", i); break;
        case 4: fprintf (f, "https://git.example.test/org/repo-%05d.git\tmain\n", i); break;
        case 5: fprintf (f, "https://git.example.test/org/repo-%05d.git\tmain\tmake\tbad \xff byte\n", i); break;
        }
        want_rejected += fault (i) != 0;
    }
    fclose (f);
    int want_accepted = LINES - want_rejected;

    const char *argv[] = { "batch", "--brokers", cli_brokers (), "--tasks-topic", topic, path, NULL };
    char *out = NULL, *err = NULL;
    int64_t t0 = cli_now_ms ();
    int rc = cli_run (argv, NULL, 0, &out, &err, 240);
    int64_t ms = cli_now_ms () - t0;
    assert_int_equal (rc, 3); /* some lines were rejected */
    char summary[128];
    snprintf (summary, sizeof summary, "accepted %d, rejected %d, delivered %d\n", want_accepted, want_rejected,
              want_accepted);
    size_t ol = strlen (out), sl = strlen (summary);
    assert_true (ol >= sl);
    if (strcmp (out + ol - sl, summary) != 0)
        fail_msg ("summary: %s\nstderr: %s", out + (ol > 200 ? ol - 200 : 0), err);
    print_message ("batch: %d lines (%d accepted, %d rejected) produced and acknowledged in %lld ms: %.0f lines/s\n",
                   LINES, want_accepted, want_rejected, (long long) ms, LINES * 1000.0 / (double) (ms ? ms : 1));

    /* one report line per line, in order, saying the right thing */
    char **ids = calloc ((size_t) want_accepted, sizeof *ids);
    int n_ids = 0, lineno = 0;
    for (char *save = NULL, *line = strtok_r (out, "\n", &save); line; line = strtok_r (NULL, "\n", &save)) {
        if (strncmp (line, "accepted ", 9) == 0)
            break;
        lineno++;
        char head[32];
        int hl = snprintf (head, sizeof head, "line %d: ", lineno);
        if (strncmp (line, head, (size_t) hl) != 0)
            fail_msg ("report out of order at `%s` (want line %d)", line, lineno);
        const char *rest = line + hl;
        switch (fault (lineno)) {
        case 0:
            assert_true (strncmp (rest, "accepted: kiwi-", 15) == 0);
            ids[n_ids++] = strdup (rest + 10);
            break;
        case 1: assert_string_equal (rest, "rejected: task.repo.ref: required field missing"); break;
        case 2:
            assert_string_equal (rest,
                                 "rejected: 5 cells, but without a header the columns are url, ref, test_command, goal");
            break;
        case 3: assert_string_equal (rest, "rejected: task.repo.url: must not start with '-'"); break;
        case 4: assert_string_equal (rest, "rejected: task.test_command: required field missing"); break;
        case 5: assert_string_equal (rest, "rejected: task.goal: invalid UTF-8 at byte 4"); break;
        }
    }
    assert_int_equal (lineno, LINES);
    assert_int_equal (n_ids, want_accepted);

    /* every accepted task is on the topic, once, keyed by its URL; nothing else is */
    cli_msg *m = NULL;
    assert_int_equal (cli_topic_count (topic), want_accepted);
    size_t n = cli_consume (topic, (size_t) want_accepted, 60000, &m);
    assert_int_equal (n, (size_t) want_accepted);
    char **got = calloc (n, sizeof *got);
    for (size_t i = 0; i < n; i++) {
        kiwi_task t;
        kiwi_error_t e = NULL;
        if (kiwi_task_decode (m[i].value, m[i].len, &t, &e) < 0)
            fail_msg ("message %zu: %s", i, kiwi_error_msg (e));
        assert_string_equal (m[i].key, t.repo.url);
        int num = atoi (strstr (t.repo.url, "repo-") + 5);
        assert_int_equal (fault (num), 0);
        char goal[64];
        snprintf (goal, sizeof goal, "fix repo %d", num);
        assert_string_equal (t.goal, goal);
        assert_string_equal (t.source, "batch");
        got[i] = strdup (t.id);
        kiwi_task_clear (&t);
    }
    qsort (ids, (size_t) n_ids, sizeof *ids, cmp_str);
    qsort (got, n, sizeof *got, cmp_str);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal (ids[i], got[i]);
        if (i > 0)
            assert_string_not_equal (got[i - 1], got[i]);
    }
    for (size_t i = 0; i < n; i++)
        free (ids[i]), free (got[i]);
    free (ids), free (got);
    cli_msgs_free (m, n);
    unlink (path);
    free (out), free (err), free (topic);
}

static void
test_batch_jsonl_defaults (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.batchjson");
    const char input[]
        = "{\"id\":\"j-1\",\"repo\":{\"url\":\"https://x/a.git\",\"ref\":\"main\"}}\n"
          "{\"id\":\"j-2\",\"repo\":{\"url\":\"https://x/b.git\",\"ref\":\"main\"},\"goal\":\"own\",\"limits\":"
          "{\"max_rounds\":2}}\n"
          "\n"
          "{\"id\":\"j-1\",\"repo\":{\"url\":\"https://x/c.git\",\"ref\":\"main\"}}\n"
          "{\"id\":\"j-3\",\"repo\":{\"url\":\"https://x/d.git\"}}\n"
          "{\"id\":\"j-4\",\"repo\":{\"url\":\"https://x/e.git\",\"ref\":\"main\"},\"ci_context\":\"a\\tb\\nc\"}\n";
    const char *argv[] = { "batch", "--brokers", cli_brokers (), "--tasks-topic", topic, "--test", "make check",
                           "--goal", "default goal", "--max-rounds", "4", "--cred", "TOKEN", "--json", "-", NULL };
    char *out = NULL, *err = NULL;
    assert_int_equal (cli_run (argv, input, sizeof input - 1, &out, &err, 60), 3);
    const char *want[] = {
        "{\"line\":1,\"status\":\"accepted\",\"id\":\"j-1\"}",
        "{\"line\":2,\"status\":\"accepted\",\"id\":\"j-2\"}",
        "{\"line\":4,\"status\":\"rejected\",\"error\":\"task.id: `j-1` already used on line 1\"}",
        "{\"line\":5,\"status\":\"rejected\",\"error\":\"task.repo.ref: required field missing\"}",
        "{\"line\":6,\"status\":\"accepted\",\"id\":\"j-4\"}",
        "{\"accepted\":3,\"rejected\":2,\"delivered\":3,\"not_delivered\":0}",
    };
    char *p = out;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char *nl = strchr (p, '\n');
        assert_non_null (nl);
        *nl = '\0';
        json_t *a = json_loads (p, 0, NULL), *b = json_loads (want[i], 0, NULL);
        if (!json_equal (a, b))
            fail_msg ("report line %zu: %s, want %s", i, p, want[i]);
        json_decref (a), json_decref (b);
        p = nl + 1;
    }
    assert_string_equal (p, "");

    cli_msg *m = NULL;
    assert_int_equal (cli_topic_count (topic), 3);
    size_t n = cli_consume (topic, 3, 30000, &m);
    assert_int_equal (n, 3);
    for (size_t i = 0; i < n; i++) {
        kiwi_task t;
        kiwi_error_t e = NULL;
        assert_int_equal (kiwi_task_decode (m[i].value, m[i].len, &t, &e), 0);
        assert_string_equal (t.test_command, "make check");
        assert_int_equal (t.n_test_credentials, 1);
        if (strcmp (t.id, "j-2") == 0) {
            assert_string_equal (t.goal, "own");
            assert_int_equal (t.limits.max_rounds, 2);
        } else {
            assert_string_equal (t.goal, "default goal");
            assert_int_equal (t.limits.max_rounds, 4);
        }
        if (strcmp (t.id, "j-4") == 0)
            assert_string_equal (t.ci_context, "a\tb\nc");
        kiwi_task_clear (&t);
    }
    cli_msgs_free (m, n);
    free (out), free (err), free (topic);
}

static void
test_batch_all_good_and_bad_header (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.batchok");
    const char good[] = "url\tref\ttest\tgoal\tmax_rounds\n"
                        "https://x/a.git\tmain\tmake\tg\t2\n"
                        "https://x/b.git\tmain\tmake\tg\t\n";
    const char *argv[] = { "batch", "--brokers", cli_brokers (), "--tasks-topic", topic, "-q", "-", NULL };
    char *out = NULL, *err = NULL;
    assert_int_equal (cli_run (argv, good, sizeof good - 1, &out, &err, 60), 0);
    assert_string_equal (out, "accepted 2, rejected 0, delivered 2\n");
    free (out), free (err);

    char *topic2 = kiwi_test_unique ("kiwi.test.cli.batchbad");
    const char bad[] = "url\tref\tbranch\nhttps://x/a.git\tmain\tdev\n";
    const char *argv2[] = { "batch", "--brokers", cli_brokers (), "--tasks-topic", topic2, "-", NULL };
    assert_int_equal (cli_run (argv2, bad, sizeof bad - 1, &out, &err, 60), 3);
    assert_non_null (strstr (err, "batch: line 1: header: unknown column `branch`"));
    assert_string_equal (out, "accepted 0, rejected 0, delivered 0\n");
    assert_false (cli_topic_exists (topic2));
    free (out), free (err), free (topic), free (topic2);
}

static void
test_batch_undelivered (void **state)
{
    const char good[] = "https://x/a.git\tmain\tmake\tg\nhttps://x/b.git\tmain\tmake\tg\n";
    const char *argv[] = { "batch", "--brokers", "127.0.0.1:1", "--delivery-timeout", "2", "-", NULL };
    char *out = NULL, *err = NULL;
    assert_int_equal (cli_run (argv, good, sizeof good - 1, &out, &err, 60), 1);
    assert_non_null (strstr (out, "line 1: not delivered: kiwi-"));
    assert_non_null (strstr (out, "line 2: not delivered: kiwi-"));
    assert_non_null (strstr (out, "accepted 2, rejected 0, delivered 0\n"));
    free (out), free (err);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_batch_10000_tsv),
        cmocka_unit_test (test_batch_jsonl_defaults),
        cmocka_unit_test (test_batch_all_good_and_bad_header),
        cmocka_unit_test (test_batch_undelivered),
    };
    return kiwi_run_group ("cli_stack_batch", tests, NULL, NULL);
}
