/*
 * test_cli_stack_wait.c: `kiwi wait` against the real broker: each result
 * status gives its exit status and the result's JSON on stdout, for results
 * produced before the wait started and after; a wait that runs out of time
 * is 124 (also on a results topic that does not exist); --progress streams
 * the task's progress events on stderr; a wait where nothing moves says
 * why from the heartbeats (none, or every worker degraded with its reason)
 * and, with a worker up, from the consumer groups (none reads the tasks
 * topic; one that does silences it); with --task-sha256 only the result
 * stamped with that task body hash is taken.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "producer/cli.h"
#include "need.h"
#include "schemas/heartbeat.h"
#include "schemas/result.h"
#include "test_cli_util.h"
#include "test_schemas_samples.h"

static void
need_broker (void)
{
    KIWI_NEED (cli_broker_up (), "kafka at %s", cli_brokers ());
}

/* Produces a result for task_id with status s, stamped with task_sha256
 * (NULL: none); *json receives its JSON. */
static void
produce_stamped (const char *topic, const char *task_id, kiwi_result_status s, const char *task_sha256, char **json)
{
    kiwi_result r;
    kiwi_result_init (&r);
    sample_result_not_fixed (&r);
    free (r.task_id);
    r.task_id = strdup (task_id);
    r.task_sha256 = task_sha256 ? strdup (task_sha256) : NULL;
    r.status = s;
    free (r.diff);
    r.diff = s == KIWI_RESULT_FIXED ? strdup ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+2\n") : NULL;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_result_encode (&r, &buf, &len, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    if (json)
        assert_int_equal (kiwi_result_to_json (&r, json, &err), 0);
    cli_produce (topic, task_id, buf, len);
    free (buf);
    kiwi_result_clear (&r);
}

static void
produce_result (const char *topic, const char *task_id, kiwi_result_status s, char **json)
{
    produce_stamped (topic, task_id, s, NULL, json);
}

static void
test_every_status_before_the_wait (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.waitall");
    static const struct {
        kiwi_result_status s;
        int code;
    } cases[] = {
        { KIWI_RESULT_FIXED, 0 },          { KIWI_RESULT_NOT_FIXED, 10 },     { KIWI_RESULT_INSTALL_FAILED, 11 },
        { KIWI_RESULT_NEEDS_NETWORK, 12 }, { KIWI_RESULT_BUDGET_EXHAUSTED, 13 }, { KIWI_RESULT_MAX_ROUNDS, 14 },
        { KIWI_RESULT_TIMED_OUT, 15 },     { KIWI_RESULT_ERROR, 16 },         { KIWI_RESULT_GAVE_UP, 17 },
    };
    const size_t n = sizeof cases / sizeof cases[0];
    assert_int_equal (n, KIWI_RESULT__END - 1); /* every status is covered */
    char *json[9];
    /* other tasks' results around them */
    produce_result (topic, "someone-else", KIWI_RESULT_FIXED, NULL);
    for (size_t i = 0; i < n; i++) {
        char id[64];
        snprintf (id, sizeof id, "w-%s", kiwi_result_status_name (cases[i].s));
        produce_result (topic, id, cases[i].s, &json[i]);
    }
    for (size_t i = 0; i < n; i++) {
        char id[64];
        snprintf (id, sizeof id, "w-%s", kiwi_result_status_name (cases[i].s));
        const char *argv[] = { "wait", "--brokers", cli_brokers (), "--results-topic", topic, "--timeout", "30", id,
                               NULL };
        char *out = NULL, *err = NULL;
        int rc = cli_run (argv, NULL, 0, &out, &err, 60);
        if (rc != cases[i].code)
            fail_msg ("%s: exit %d, want %d\n%s", id, rc, cases[i].code, err);
        size_t jl = strlen (json[i]);
        assert_memory_equal (out, json[i], jl);
        assert_string_equal (out + jl, "\n");
        free (out), free (err), free (json[i]);
    }
    free (topic);
}

static void
test_result_after_the_wait_started (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.waitlate");
    char *ptopic = kiwi_test_unique ("kiwi.test.cli.waitprogress");
    /* neither topic exists when the wait starts */
    const char *argv[] = { "wait", "--brokers", cli_brokers (), "--results-topic", topic, "--progress-topic", ptopic,
                           "--progress", "--timeout", "60", "late-task", NULL };
    int out_fd = -1, err_fd = -1;
    pid_t pid = cli_spawn (argv, &out_fd, &err_fd);
    usleep (1500000);
    kiwi_progress p;
    kiwi_progress_init (&p);
    sample_progress_min (&p);
    free (p.task_id);
    p.task_id = strdup ("late-task");
    char *buf = NULL, *pjson = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_progress_encode (&p, &buf, &len, &err), 0);
    assert_int_equal (kiwi_progress_to_json (&p, &pjson, &err), 0);
    cli_produce (ptopic, "late-task", buf, len);
    free (buf);
    kiwi_progress_clear (&p);
    usleep (1500000);
    char *json = NULL;
    produce_result (topic, "late-task", KIWI_RESULT_BUDGET_EXHAUSTED, &json);
    assert_int_equal (cli_wait (pid, 60000), 13);
    char *out = cli_slurp (out_fd, 2000), *log = cli_slurp (err_fd, 2000);
    close (out_fd);
    close (err_fd);
    size_t jl = strlen (json);
    assert_memory_equal (out, json, jl);
    assert_string_equal (out + jl, "\n");
    if (strstr (log, pjson) == NULL)
        fail_msg ("progress event not streamed: %s", log);
    free (out), free (log), free (json), free (pjson), free (topic), free (ptopic);
}

static void
test_wait_times_out (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.waitnone");
    /* on a topic that does not exist */
    const char *argv[] = { "wait", "--brokers", cli_brokers (), "--results-topic", topic, "--timeout", "2", "nobody",
                           NULL };
    char *out = NULL, *err = NULL;
    int64_t t0 = cli_now_ms ();
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 60), KIWI_EXIT_WAIT_TIMEOUT);
    assert_true (cli_now_ms () - t0 < 15000);
    assert_non_null (strstr (err, "no result for task nobody within 2 s"));
    assert_string_equal (out, "");
    free (out), free (err);
    /* on a topic with other tasks' results */
    produce_result (topic, "somebody", KIWI_RESULT_FIXED, NULL);
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 60), KIWI_EXIT_WAIT_TIMEOUT);
    free (out), free (err);
    /* interrupted */
    const char *argv2[] = { "wait", "--brokers", cli_brokers (), "--results-topic", topic, "nobody", NULL };
    int err_fd = -1;
    pid_t pid = cli_spawn (argv2, NULL, &err_fd);
    usleep (800000);
    kill (pid, SIGINT);
    assert_int_equal (cli_wait (pid, 20000), 1);
    close (err_fd);
    free (topic);
}

static void
test_undecodable_result (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.waitbad");
    cli_produce (topic, "broken", "\x81\xa1v\x01", 4);
    const char *argv[] = { "wait", "--brokers", cli_brokers (), "--results-topic", topic, "--timeout", "20", "broken",
                           NULL };
    char *out = NULL, *err = NULL;
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 60), 1);
    assert_non_null (strstr (err, "the result of task broken"));
    assert_non_null (strstr (err, "does not decode"));
    free (out), free (err), free (topic);
}

/* needle is in hay exactly once */
static void
once (const char *hay, const char *needle)
{
    const char *p = strstr (hay, needle);
    if (p == NULL || strstr (p + 1, needle) != NULL)
        fail_msg ("`%s` not once in: %s", needle, hay);
}

/* A wait where nothing moves says why, once per diagnosis, from the test's
 * own heartbeats topic: no heartbeat at all, then (a degraded worker's
 * heartbeat produced) every worker degraded, with its reason on one line. */
/* A heartbeat of worker id, now: degraded with `reason` unless it is NULL. */
static void
beat (const char *topic, const char *id, const char *reason)
{
    kiwi_heartbeat h;
    kiwi_heartbeat_init (&h);
    h.worker_id = strdup (id);
    h.version = strdup ("0.1.0");
    h.ts = cli_wall_ms ();
    h.slots_total = 2;
    h.redis_ok = true;
    h.degraded = reason != NULL;
    h.degraded_reason = reason ? strdup (reason) : NULL;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t e = NULL;
    if (kiwi_heartbeat_encode (&h, &buf, &len, &e) < 0)
        fail_msg ("%s", kiwi_error_msg (e));
    cli_produce (topic, h.worker_id, buf, len);
    free (buf);
    kiwi_heartbeat_clear (&h);
}

static void
test_stall_says_why (void **state)
{
    need_broker ();
    char *results = kiwi_test_unique ("kiwi.test.cli.waitstall");
    char *hbs = kiwi_test_unique ("kiwi.test.cli.waitstallhb");
    char *tasks = kiwi_test_unique ("kiwi.test.cli.waitstalltasks");
    const char *argv[] = { "wait", "--brokers", cli_brokers (), "--results-topic", results, "--heartbeats-topic", hbs,
                           "--tasks-topic", tasks, "--stall-after", "1", "--timeout", "4", "nobody", NULL };
    char *out = NULL, *err = NULL;
    /* no heartbeats topic at all */
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 60), KIWI_EXIT_WAIT_TIMEOUT);
    once (err, "wait: task nobody: nothing moved for ");
    assert_non_null (strstr (err, ": no worker heartbeat on "));
    free (out), free (err);

    beat (hbs, "w-stalled", "egress check https-reachable failed\nno route to host\n");
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 60), KIWI_EXIT_WAIT_TIMEOUT);
    once (err, "nothing moved for ");
    assert_non_null (strstr (err, ": every worker is degraded: w-stalled (egress check https-reachable failed; no "
                                  "route to host)\n"));
    free (out), free (err);

    /* a worker up, but no consumer group reads the tasks topic */
    beat (hbs, "w-elsewhere", NULL);
    cli_produce (tasks, "not-a-task", "x", 1); /* the topic exists, and no one reads it */
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 60), KIWI_EXIT_WAIT_TIMEOUT);
    once (err, "nothing moved for ");
    char want[512];
    snprintf (want, sizeof want, ": no worker reads %s: no consumer group has a member on it, though 1 worker is up on "
              "%s (w-elsewhere)", tasks, hbs);
    assert_non_null (strstr (err, want));
    free (out), free (err);

    /* a member of a group on the tasks topic: nothing to say */
    cli_member *m = cli_group_join (tasks, 60000);
    beat (hbs, "w-elsewhere", NULL); /* still up */
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 60), KIWI_EXIT_WAIT_TIMEOUT);
    assert_null (strstr (err, "nothing moved for "));
    cli_group_leave (m);
    free (out), free (err), free (results), free (hbs), free (tasks);
}

/* --task-sha256: results of the id for another task (another stamp, or
 * none) come first and are passed over, said on stderr; the one stamped
 * with the given hash is the answer. A malformed hash is a usage error. */
static void
test_task_sha256 (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.waitsha");
    static const char mine[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    static const char theirs[] = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
    char *json = NULL;
    produce_stamped (topic, "gh-run-1-1", KIWI_RESULT_FIXED, NULL, NULL);
    produce_stamped (topic, "gh-run-1-1", KIWI_RESULT_FIXED, theirs, NULL);
    produce_stamped (topic, "gh-run-1-1", KIWI_RESULT_ERROR, mine, &json);
    /* upper case is the same hash */
    const char *argv[] = { "wait", "--brokers", cli_brokers (), "--results-topic", topic, "--timeout", "30",
                           "--task-sha256", "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff",
                           "gh-run-1-1", NULL };
    char *out = NULL, *err = NULL;
    int rc = cli_run (argv, NULL, 0, &out, &err, 60);
    if (rc != 16)
        fail_msg ("exit %d, want 16 (error)\n%s", rc, err);
    size_t jl = strlen (json);
    assert_memory_equal (out, json, jl);
    assert_string_equal (out + jl, "\n");
    assert_non_null (strstr (err, "a task it does not name (no task_sha256): passed over"));
    assert_non_null (strstr (err, "another task under the same id (its task_sha256 differs): passed over"));
    free (out), free (err), free (json);

    /* without it, the first result of the id is taken, as before */
    const char *argv2[] = { "wait", "--brokers", cli_brokers (), "--results-topic", topic, "--timeout", "30",
                            "gh-run-1-1", NULL };
    assert_int_equal (cli_run (argv2, NULL, 0, &out, &err, 60), 0);
    free (out), free (err);

    const char *argv3[] = { "wait", "--brokers", cli_brokers (), "--results-topic", topic, "--task-sha256", "abc",
                            "gh-run-1-1", NULL };
    assert_int_equal (cli_run (argv3, NULL, 0, &out, &err, 60), 2);
    assert_non_null (strstr (err, "wait: --task-sha256: `abc` is not 64 hex digits"));
    free (out), free (err), free (topic);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_every_status_before_the_wait),
        cmocka_unit_test (test_result_after_the_wait_started),
        cmocka_unit_test (test_wait_times_out),
        cmocka_unit_test (test_undecodable_result),
        cmocka_unit_test (test_task_sha256),
        cmocka_unit_test (test_stall_says_why),
    };
    return kiwi_run_group ("cli_stack_wait", tests, NULL, NULL);
}
