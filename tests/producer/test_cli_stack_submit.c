/*
 * test_cli_stack_submit.c: `kiwi submit` against the real broker: the
 * message on the topic decodes equal to the task the flags (or the file and
 * flags) describe, keyed by the repository URL; an invalid task is refused
 * before anything is produced; an unreachable broker is exit 1.
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
#include "schemas/task-input.h"
#include "schemas/task.h"
#include "test_cli_util.h"

static void
need_broker (void)
{
    KIWI_NEED (cli_broker_up (), "kafka at %s", cli_brokers ());
}

static void
test_submit_flags (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.submit");
    char *id = kiwi_test_unique ("task");
    char ctx_path[] = "/tmp/kiwi-test-ci-XXXXXX";
    int fd = mkstemp (ctx_path);
    const char ctx[] = "FAIL src/sum.test.js\n  expected 3, received 4\n";
    assert_int_equal (write (fd, ctx, sizeof ctx - 1), (ssize_t) sizeof ctx - 1);
    close (fd);

    const char *argv[] = { "submit", "--brokers", cli_brokers (), "--tasks-topic", topic, "--id", id, "--repo",
                           "https://git.example.test/acme/widgets.git", "--ref", "main", "--subdir", "services/api",
                           "--test", "npm test", "--goal", "Make the tests pass: \"quoted\" ünïcödé", "--ci-context",
                           ctx_path, "--max-rounds", "5", "--budget-tokens", "200000", "--budget-usd", "2.5",
                           "--timeout", "900", "--disk-mb", "4096", "--provider", "anthropic", "--model",
                           "claude-sonnet-4-5", "--cred", "DATABASE_URL", "--cred", "NPM_TOKEN", "--json", NULL };
    char *out = NULL, *err = NULL;
    int rc = cli_run (argv, NULL, 0, &out, &err, 60);
    if (rc != 0)
        fail_msg ("kiwi submit: exit %d\n%s", rc, err);
    json_t *o = json_loads (out, 0, NULL);
    assert_non_null (o);
    assert_string_equal (json_string_value (json_object_get (o, "id")), id);
    assert_string_equal (json_string_value (json_object_get (o, "topic")), topic);
    int partition = (int) json_integer_value (json_object_get (o, "partition"));
    int64_t offset = json_integer_value (json_object_get (o, "offset"));
    assert_true (partition >= 0);
    assert_int_equal (offset, 0);
    json_decref (o);

    cli_msg *m = NULL;
    size_t n = cli_consume (topic, 1, 30000, &m);
    assert_int_equal (n, 1);
    assert_string_equal (m[0].key, "https://git.example.test/acme/widgets.git");
    assert_int_equal (m[0].partition, partition);
    kiwi_task t;
    kiwi_error_t e = NULL;
    assert_int_equal (kiwi_task_decode (m[0].value, m[0].len, &t, &e), 0);
    assert_string_equal (t.id, id);
    assert_string_equal (t.repo.url, "https://git.example.test/acme/widgets.git");
    assert_string_equal (t.repo.ref, "main");
    assert_string_equal (t.repo.subdir, "services/api");
    assert_string_equal (t.test_command, "npm test");
    assert_string_equal (t.goal, "Make the tests pass: \"quoted\" ünïcödé");
    assert_string_equal (t.ci_context, ctx);
    assert_int_equal (t.limits.max_rounds, 5);
    assert_int_equal (t.limits.session_budget_tokens, 200000);
    assert_int_equal (t.limits.session_budget_usd_micros, 2500000);
    assert_int_equal (t.limits.timeout_seconds, 900);
    assert_int_equal (t.limits.disk_mb, 4096);
    assert_int_equal (t.model.provider, KIWI_PROVIDER_ANTHROPIC);
    assert_string_equal (t.model.name, "claude-sonnet-4-5");
    assert_null (t.model.base_url);
    assert_int_equal (t.n_test_credentials, 2);
    assert_string_equal (t.test_credentials[0], "DATABASE_URL");
    assert_string_equal (t.test_credentials[1], "NPM_TOKEN");
    assert_string_equal (t.source, "submit");
    assert_true (t.submitted_at > 1700000000000LL);
    kiwi_task_clear (&t);
    cli_msgs_free (m, n);
    unlink (ctx_path);
    free (out), free (err), free (topic), free (id);
}

static void
test_submit_file_with_overrides (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.submitfile");
    const char file[] = "{\"id\": \"file-task-1\",\n"
                        " \"repo\": {\"url\": \"https://git.example.test/acme/gadgets.git\", \"ref\": \"dev\"},\n"
                        " \"test_command\": \"pytest -q\", \"goal\": \"fix the parser\",\n"
                        " \"limits\": {\"max_rounds\": 3, \"timeout_seconds\": 600},\n"
                        " \"test_credentials\": [\"PGPASSWORD\"],\n"
                        " \"submitted_at\": 1764450000123, \"source\": \"nightly\"}\n";
    /* stdin as the file; a flag overrides one field */
    const char *argv[] = { "submit", "--brokers", cli_brokers (), "--tasks-topic", topic, "--file", "-",
                           "--ref", "release-1.2", "--max-rounds", "9", NULL };
    char *out = NULL, *err = NULL;
    int rc = cli_run (argv, file, sizeof file - 1, &out, &err, 60);
    if (rc != 0)
        fail_msg ("kiwi submit --file -: exit %d\n%s", rc, err);
    assert_string_equal (out, "file-task-1\n");

    /* the same task, built here from the same file and overrides */
    kiwi_task want;
    kiwi_task_init (&want);
    kiwi_error_t e = NULL;
    assert_int_equal (kiwi_task_input_parse (file, sizeof file - 1, &want, &e), 0);
    free (want.repo.ref);
    want.repo.ref = strdup ("release-1.2");
    want.limits.max_rounds = 9;
    char *want_buf = NULL;
    size_t want_len = 0;
    assert_int_equal (kiwi_task_encode (&want, &want_buf, &want_len, &e), 0);

    cli_msg *m = NULL;
    size_t n = cli_consume (topic, 1, 30000, &m);
    assert_int_equal (n, 1);
    assert_string_equal (m[0].key, "https://git.example.test/acme/gadgets.git");
    /* the bytes on the topic are exactly what our encoder makes of that task */
    assert_int_equal (m[0].len, want_len);
    assert_memory_equal (m[0].value, want_buf, want_len);
    kiwi_task back;
    assert_int_equal (kiwi_task_decode (m[0].value, m[0].len, &back, &e), 0);
    assert_string_equal (back.source, "nightly");
    assert_int_equal (back.limits.timeout_seconds, 600);
    kiwi_task_clear (&back);
    cli_msgs_free (m, n);
    kiwi_task_clear (&want);
    free (want_buf), free (out), free (err), free (topic);
}

static void
test_invalid_task_produces_nothing (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.invalid");
    const char *argv[] = { "submit", "--brokers", cli_brokers (), "--tasks-topic", topic, "--repo",
                           "https://x/y.git", "--test", "make", "--goal", "g", NULL };
    char *out = NULL, *err = NULL;
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 30), 3);
    assert_non_null (strstr (err, "submit: invalid task: task.repo.ref: required field missing"));
    assert_string_equal (out, "");
    free (out), free (err);

    const char *argv2[] = { "submit", "--brokers", cli_brokers (), "--tasks-topic", topic, "--repo", "https://x/y.git",
                            "--ref", "main", "--test", "make", "--goal", "g", "--max-rounds", "0", NULL };
    assert_int_equal (cli_run (argv2, NULL, 0, &out, &err, 30), 3);
    assert_non_null (strstr (err, "task.limits.max_rounds: must be between 1 and 100, got 0"));
    free (out), free (err);

    const char bad_json[] = "{\"repo\": {\"url\": \"https://x/y.git\", \"ref\": \"main\"}, \"tests\": \"make\"}";
    const char *argv3[] = { "submit", "--brokers", cli_brokers (), "--tasks-topic", topic, "--file", "-", NULL };
    assert_int_equal (cli_run (argv3, bad_json, sizeof bad_json - 1, &out, &err, 30), 3);
    assert_non_null (strstr (err, "submit: stdin: task.tests: unknown field (known: v, id, repo,"));
    free (out), free (err);

    const char *argv4[] = { "submit", "--brokers", cli_brokers (), "--tasks-topic", "bad topic", NULL };
    assert_int_equal (cli_run (argv4, NULL, 0, &out, &err, 30), 2);
    assert_non_null (strstr (err, "topic.tasks: invalid value `bad topic` (from flag --tasks-topic)"));
    free (out), free (err);

    assert_false (cli_topic_exists (topic));
    free (topic);
}

static void
test_dry_run (void **state)
{
    char *topic = kiwi_test_unique ("kiwi.test.cli.dry");
    const char *argv[] = { "submit", "--brokers", "127.0.0.1:1", "--tasks-topic", topic, "--repo", "https://x/y.git",
                           "--ref", "main", "--test", "make", "--goal", "g", "--dry-run", NULL };
    char *out = NULL, *err = NULL;
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 30), 0);
    json_t *o = json_loads (out, 0, NULL);
    assert_non_null (o);
    assert_string_equal (json_string_value (json_object_get (json_object_get (o, "repo"), "url")), "https://x/y.git");
    assert_string_equal (json_string_value (json_object_get (o, "source")), "submit");
    json_decref (o);
    free (out), free (err), free (topic);
}

static void
test_unreachable_broker (void **state)
{
    const char *argv[] = { "submit", "--brokers", "127.0.0.1:1", "--delivery-timeout", "2", "--repo", "https://x/y.git",
                           "--ref", "main", "--test", "make", "--goal", "g", NULL };
    char *out = NULL, *err = NULL;
    int64_t t0 = cli_now_ms ();
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 30), 1);
    assert_true (cli_now_ms () - t0 < 15000);
    assert_non_null (strstr (err, "not delivered: Local: Message timed out"));
    assert_string_equal (out, "");
    free (out), free (err);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_submit_flags),
        cmocka_unit_test (test_submit_file_with_overrides),
        cmocka_unit_test (test_invalid_task_produces_nothing),
        cmocka_unit_test (test_dry_run),
        cmocka_unit_test (test_unreachable_broker),
    };
    return kiwi_run_group ("cli_stack_submit", tests, NULL, NULL);
}
