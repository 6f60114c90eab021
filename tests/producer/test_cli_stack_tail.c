/*
 * test_cli_stack_tail.c: `kiwi tail` against the real broker: progress,
 * result, heartbeat and dead-letter messages produced with librdkafka come
 * out as exactly their schema's JSON, an undecodable message as an error
 * line carrying its bytes, --task and --limit filter, --follow prints new
 * messages as they arrive (line by line through a pipe) and stops cleanly
 * on SIGTERM, and a missing topic is an error without --follow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "need.h"
#include "producer/render.h"
#include "test_cli_util.h"
#include "test_schemas_samples.h"

static void
need_broker (void)
{
    KIWI_NEED (cli_broker_up (), "kafka at %s", cli_brokers ());
}

/* Runs `kiwi tail` with extra args; returns stdout (exit status 0 expected). */
static char *
tail (const char *const *args)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = "tail";
    argv[n++] = "--brokers";
    argv[n++] = cli_brokers ();
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char *out = NULL, *err = NULL;
    int rc = cli_run (argv, NULL, 0, &out, &err, 60);
    if (rc != 0)
        fail_msg ("kiwi tail: exit %d: %s", rc, err);
    free (err);
    return out;
}

static void
test_each_type_renders_as_its_schema (void **state)
{
    need_broker ();
    kiwi_error_t err = NULL;
    char *buf = NULL, *json = NULL;
    size_t len = 0;

    /* progress: a good event, then bytes that are no message at all, then a second event */
    char *ptopic = kiwi_test_unique ("kiwi.test.cli.progress");
    kiwi_progress p;
    kiwi_progress_init (&p);
    sample_progress_full (&p);
    assert_int_equal (kiwi_progress_encode (&p, &buf, &len, &err), 0);
    assert_int_equal (kiwi_progress_to_json (&p, &json, &err), 0);
    cli_produce (ptopic, p.task_id, buf, len);
    static const char garbage[] = "\xc1not msgpack";
    cli_produce (ptopic, p.task_id, garbage, sizeof garbage - 1);
    free (buf);
    kiwi_progress_clear (&p);
    /* all on one partition (same key): the order is kept */
    const char *a1[] = { "progress", "--progress-topic", ptopic, NULL };
    char *out = tail (a1);
    char *nl = strchr (out, '\n');
    assert_non_null (nl);
    *nl = '\0';
    assert_string_equal (out, json);
    json_t *o = json_loads (nl + 1, 0, NULL);
    assert_non_null (o);
    assert_non_null (json_string_value (json_object_get (o, "error")));
    assert_string_equal (json_string_value (json_object_get (o, "type")), "progress");
    assert_string_equal (json_string_value (json_object_get (o, "topic")), ptopic);
    assert_int_equal (json_integer_value (json_object_get (o, "offset")), 1);
    char *b64 = kiwi_base64 (garbage, sizeof garbage - 1);
    assert_string_equal (json_string_value (json_object_get (o, "raw_base64")), b64);
    free (b64);
    json_decref (o);
    free (out), free (json);

    /* result */
    char *rtopic = kiwi_test_unique ("kiwi.test.cli.results");
    kiwi_result r;
    kiwi_result_init (&r);
    sample_result_fixed (&r);
    assert_int_equal (kiwi_result_encode (&r, &buf, &len, &err), 0);
    assert_int_equal (kiwi_result_to_json (&r, &json, &err), 0);
    cli_produce (rtopic, r.task_id, buf, len);
    free (buf);
    kiwi_result_clear (&r);
    const char *a2[] = { "results", "--results-topic", rtopic, NULL };
    out = tail (a2);
    size_t jl = strlen (json);
    assert_memory_equal (out, json, jl);
    assert_string_equal (out + jl, "\n");
    free (out), free (json);

    /* heartbeat */
    char *htopic = kiwi_test_unique ("kiwi.test.cli.heartbeats");
    kiwi_heartbeat h;
    kiwi_heartbeat_init (&h);
    sample_heartbeat_full (&h);
    assert_int_equal (kiwi_heartbeat_encode (&h, &buf, &len, &err), 0);
    assert_int_equal (kiwi_heartbeat_to_json (&h, &json, &err), 0);
    cli_produce (htopic, h.worker_id, buf, len);
    free (buf);
    kiwi_heartbeat_clear (&h);
    const char *a3[] = { "heartbeats", "--heartbeats-topic", htopic, NULL };
    out = tail (a3);
    jl = strlen (json);
    assert_memory_equal (out, json, jl);
    assert_string_equal (out + jl, "\n");
    free (out);
    /* the topic named directly, typed by --type */
    const char *a3b[] = { htopic, "--type", "heartbeat", NULL };
    out = tail (a3b);
    assert_memory_equal (out, json, jl);
    free (out), free (json);

    /* dead letter */
    char *dtopic = kiwi_test_unique ("kiwi.test.cli.dlq");
    kiwi_deadletter d;
    kiwi_deadletter_init (&d);
    sample_deadletter_full (&d);
    assert_int_equal (kiwi_deadletter_encode (&d, &buf, &len, &err), 0);
    assert_int_equal (kiwi_deadletter_to_json (&d, &json, &err), 0);
    cli_produce (dtopic, NULL, buf, len);
    free (buf);
    kiwi_deadletter_clear (&d);
    const char *a4[] = { "dlq", "--dlq-topic", dtopic, "--meta", NULL };
    out = tail (a4);
    o = json_loads (out, 0, NULL);
    assert_non_null (o);
    assert_string_equal (json_string_value (json_object_get (o, "topic")), dtopic);
    assert_true (json_is_null (json_object_get (o, "key")));
    json_t *inner = json_loads (json, 0, NULL);
    assert_true (json_equal (json_object_get (o, "message"), inner));
    json_decref (inner);
    json_decref (o);
    free (out), free (json);

    /* a topic of no known type: generic msgpack */
    const char map[] = "\x81\xa5hello\xa5world";
    char *xtopic = kiwi_test_unique ("kiwi.test.cli.other");
    cli_produce (xtopic, "k", map, sizeof map - 1);
    const char *a5[] = { xtopic, NULL };
    out = tail (a5);
    assert_string_equal (out, "{\"hello\":\"world\"}\n");
    free (out);
    free (ptopic), free (rtopic), free (htopic), free (dtopic), free (xtopic);
}

static void
produce_progress (const char *topic, const char *task_id, uint64_t seq)
{
    kiwi_progress p;
    kiwi_progress_init (&p);
    sample_progress_min (&p);
    free (p.task_id);
    p.task_id = strdup (task_id);
    p.seq = seq;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_progress_encode (&p, &buf, &len, &err), 0);
    cli_produce (topic, task_id, buf, len);
    free (buf);
    kiwi_progress_clear (&p);
}

static void
test_task_filter_and_limit (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.filter");
    for (uint64_t i = 1; i <= 3; i++) {
        produce_progress (topic, "task-a", i);
        produce_progress (topic, "task-b", i);
    }
    const char *a1[] = { "progress", "--progress-topic", topic, "--task", "task-b", NULL };
    char *out = tail (a1);
    int lines = 0;
    for (char *s = NULL, *l = strtok_r (out, "\n", &s); l; l = strtok_r (NULL, "\n", &s), lines++) {
        json_t *o = json_loads (l, 0, NULL);
        assert_string_equal (json_string_value (json_object_get (o, "task_id")), "task-b");
        assert_int_equal (json_integer_value (json_object_get (o, "seq")), lines + 1);
        json_decref (o);
    }
    assert_int_equal (lines, 3);
    free (out);

    const char *a2[] = { "progress", "--progress-topic", topic, "-n", "4", NULL };
    out = tail (a2);
    lines = 0;
    for (char *p = out; (p = strchr (p, '\n')); p++)
        lines++;
    assert_int_equal (lines, 4);
    free (out);
    free (topic);
}

static void
test_follow (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.follow");
    /* the topic does not exist yet: --follow waits for it */
    const char *argv[] = { "tail", "-f", "progress", "--brokers", cli_brokers (), "--progress-topic", topic, NULL };
    int out_fd = -1, err_fd = -1;
    pid_t pid = cli_spawn (argv, &out_fd, &err_fd);
    usleep (1500000);
    produce_progress (topic, "task-f", 1);
    char line[8192];
    assert_true (cli_read_line (out_fd, line, sizeof line, 20000) > 0);
    json_t *o = json_loads (line, 0, NULL);
    assert_int_equal (json_integer_value (json_object_get (o, "seq")), 1);
    json_decref (o);
    /* each new message comes out as its own line, at once */
    for (uint64_t i = 2; i <= 4; i++) {
        int64_t t0 = cli_now_ms ();
        produce_progress (topic, "task-f", i);
        assert_true (cli_read_line (out_fd, line, sizeof line, 20000) > 0);
        o = json_loads (line, 0, NULL);
        assert_int_equal (json_integer_value (json_object_get (o, "seq")), i);
        json_decref (o);
        print_message ("tail -f: event %llu printed %lld ms after its produce started\n", (unsigned long long) i,
                       (long long) (cli_now_ms () - t0));
    }
    kill (pid, SIGTERM);
    assert_int_equal (cli_wait (pid, 20000), 0);
    close (out_fd);
    close (err_fd);
    free (topic);
}

static void
test_missing_topic (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.missing");
    const char *argv[] = { "tail", "--brokers", cli_brokers (), topic, NULL };
    char *out = NULL, *err = NULL;
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 60), 1);
    assert_non_null (strstr (err, "does not exist"));
    assert_string_equal (out, "");
    free (out), free (err);

    const char *argv2[] = { "tail", "--brokers", cli_brokers (), "--type", "nonsense", topic, NULL };
    assert_int_equal (cli_run (argv2, NULL, 0, &out, &err, 60), 2);
    free (out), free (err), free (topic);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_each_type_renders_as_its_schema),
        cmocka_unit_test (test_task_filter_and_limit),
        cmocka_unit_test (test_follow),
        cmocka_unit_test (test_missing_topic),
    };
    return kiwi_run_group ("cli_stack_tail", tests, NULL, NULL);
}
