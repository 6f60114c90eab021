/*
 * test_cli_settings.c: the kiwi command's settings table: sources in
 * order (default, stack env file, config file, environment, flags), every
 * bad value named with its key, origin and what is accepted, and the
 * dump that is itself a config file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "producer/cli-settings.h"

static char dir[] = "/tmp/kiwi-test-settings-XXXXXX";

static int
setup (void **state)
{
    return mkdtemp (dir) ? 0 : -1;
}

static int
teardown (void **state)
{
    char cmd[128];
    snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
    return system (cmd) == 0 ? 0 : -1;
}

static char *
write_file (const char *name, const char *text)
{
    char *path = NULL;
    assert_true (asprintf (&path, "%s/%s", dir, name) > 0);
    FILE *f = fopen (path, "w");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
    return path;
}

/* Loads with a fixed environment: no stack env file unless one is named. */
static int
load (kiwi_cli_settings *s, const char *const *flags, char **envp, kiwi_error_t *err)
{
    kiwi_cli_settings_init (s);
    return kiwi_cli_settings_load (s, flags, envp, err);
}

static char env_nostack[] = "KIWI_STACK_ENV=/nonexistent/stack.env";

static void
test_defaults (void **state)
{
    char *envp[] = { env_nostack, NULL };
    kiwi_cli_settings s;
    kiwi_error_t err = NULL;
    assert_int_equal (load (&s, NULL, envp, &err), 0);
    assert_string_equal (s.brokers, KIWI_BROKERS_DEFAULT);
    assert_string_equal (s.topic_tasks, "kiwi.tasks");
    assert_string_equal (s.topic_progress, "kiwi.progress");
    assert_string_equal (s.topic_results, "kiwi.results");
    assert_string_equal (s.topic_heartbeats, "kiwi.heartbeats");
    assert_string_equal (s.topic_dlq, "kiwi.dlq");
    assert_int_equal (s.delivery_timeout, 30);
    assert_int_equal (s.ci_max_body, 25 * 1024 * 1024);
    assert_string_equal (s.ci_goal, KIWI_CI_GOAL_DEFAULT);
    assert_string_equal (s.ci_webhook_secret, "");
    assert_string_equal (s.origin[KIWI_SETTING_BROKERS], "default");
    kiwi_cli_settings_clear (&s);
}

static void
test_every_entry_is_complete (void **state)
{
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = kiwi_setting_def_get ((kiwi_setting_id) i);
        if (d == NULL) /* kiwi-worker's only */
            continue;
        assert_int_equal (d->id, i);
        assert_non_null (d->key);
        assert_true (strncmp (d->env, "KIWI_", 5) == 0);
        assert_non_null (d->help);
        kiwi_error_t err = NULL;
        if (kiwi_setting_check (d, kiwi_setting_default (d, KIWI_PROGRAM_KIWI), "default", 0, &err) < 0)
            fail_msg ("default of %s fails its own check: %s", d->key, kiwi_error_msg (err));
        assert_ptr_equal (kiwi_setting_by_key (d->key), d);
        if (d->flag)
            assert_ptr_equal (kiwi_setting_by_flag (d->flag), d);
    }
    assert_null (kiwi_setting_by_flag ("no-such-flag"));
}

static void
test_env_then_flag (void **state)
{
    char e1[] = "KIWI_KAFKA_BROKERS=10.1.1.1:9092,10.1.1.2:9092";
    char e2[] = "KIWI_TOPIC_TASKS=team.tasks";
    char *envp[] = { env_nostack, e1, e2, NULL };
    const char *flags[KIWI_SETTING__COUNT] = { 0 };
    kiwi_cli_settings s;
    kiwi_error_t err = NULL;
    assert_int_equal (load (&s, flags, envp, &err), 0);
    assert_string_equal (s.brokers, "10.1.1.1:9092,10.1.1.2:9092");
    assert_string_equal (s.origin[KIWI_SETTING_BROKERS], "environment KIWI_KAFKA_BROKERS");
    assert_string_equal (s.topic_tasks, "team.tasks");
    kiwi_cli_settings_clear (&s);

    flags[KIWI_SETTING_BROKERS] = "broker.example:19092";
    flags[KIWI_SETTING_TOPIC_RESULTS] = "team.results";
    assert_int_equal (load (&s, flags, envp, &err), 0);
    assert_string_equal (s.brokers, "broker.example:19092");
    assert_string_equal (s.origin[KIWI_SETTING_BROKERS], "flag --brokers");
    assert_string_equal (s.topic_tasks, "team.tasks");
    assert_string_equal (s.topic_results, "team.results");
    kiwi_cli_settings_clear (&s);
}

static void
test_stack_env_file (void **state)
{
    char *path = write_file ("stack.env", "# written by ops/stack.sh\nKIWI_STATE_DIR=/elsewhere\n"
                                          "KIWI_KAFKA_BROKERS=127.0.0.1:29092\nKIWI_REDIS_PORT=16379\n");
    char *e1 = NULL;
    assert_true (asprintf (&e1, "KIWI_STATE_DIR=%s", dir) > 0);
    char *envp[] = { e1, NULL };
    kiwi_cli_settings s;
    kiwi_error_t err = NULL;
    /* found through the state directory */
    assert_int_equal (load (&s, NULL, envp, &err), 0);
    assert_string_equal (s.brokers, "127.0.0.1:29092");
    assert_non_null (strstr (s.origin[KIWI_SETTING_BROKERS], "stack env file"));
    assert_string_equal (s.state_dir, dir); /* not taken from the file it names */
    kiwi_cli_settings_clear (&s);

    /* the environment wins over the file */
    char e2[] = "KIWI_KAFKA_BROKERS=127.0.0.1:39092";
    char *envp2[] = { e1, e2, NULL };
    assert_int_equal (load (&s, NULL, envp2, &err), 0);
    assert_string_equal (s.brokers, "127.0.0.1:39092");
    kiwi_cli_settings_clear (&s);

    /* named directly, with quotes and export */
    char *p2 = write_file ("other.env", "export KIWI_KAFKA_BROKERS=\"127.0.0.2:9092\"\n");
    const char *flags[KIWI_SETTING__COUNT] = { 0 };
    flags[KIWI_SETTING_STACK_ENV] = p2;
    assert_int_equal (load (&s, flags, envp, &err), 0);
    assert_string_equal (s.brokers, "127.0.0.2:9092");
    kiwi_cli_settings_clear (&s);

    /* a bad value in it is named with the file */
    char *p3 = write_file ("bad.env", "KIWI_KAFKA_BROKERS=nohostport\n");
    flags[KIWI_SETTING_STACK_ENV] = p3;
    assert_int_equal (load (&s, flags, envp, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "brokers: invalid value `nohostport`"));
    assert_non_null (strstr (kiwi_error_msg (err), p3));
    kiwi_error_free (&err);
    free (path);
    free (p2);
    free (p3);
    free (e1);
}

static void
test_config_file (void **state)
{
    char *conf = write_file ("kiwi.conf", "# shared with kiwi-worker\n"
                                          "kafka.brokers = 127.0.0.1:49092\n"
                                          "topic.dlq = 'team.dlq'\n"
                                          "worker.slots = 4\n"
                                          "ci.test_command = make check\n"
                                          "\n"
                                          "kafka.delivery_timeout=12\n");
    char *e1 = NULL;
    assert_true (asprintf (&e1, "KIWI_CONFIG=%s", conf) > 0);
    char e2[] = "KIWI_TOPIC_DLQ=env.dlq";
    char *envp[] = { env_nostack, e1, NULL };
    kiwi_cli_settings s;
    kiwi_error_t err = NULL;
    assert_int_equal (load (&s, NULL, envp, &err), 0);
    assert_string_equal (s.brokers, "127.0.0.1:49092");
    assert_string_equal (s.topic_dlq, "team.dlq");
    assert_string_equal (s.ci_test_command, "make check");
    assert_int_equal (s.delivery_timeout, 12);
    char *where = NULL;
    assert_true (asprintf (&where, "%s:2", conf) > 0);
    assert_string_equal (s.origin[KIWI_SETTING_BROKERS], where);
    free (where);
    kiwi_cli_settings_clear (&s);

    char *envp2[] = { env_nostack, e1, e2, NULL };
    assert_int_equal (load (&s, NULL, envp2, &err), 0);
    assert_string_equal (s.topic_dlq, "env.dlq");
    kiwi_cli_settings_clear (&s);

    char *bad = write_file ("bad.conf", "kafka.brokers = 127.0.0.1:1\nthis line has no equals sign\n");
    const char *flags[KIWI_SETTING__COUNT] = { 0 };
    flags[KIWI_SETTING_CONFIG] = bad;
    assert_int_equal (load (&s, flags, envp, &err), -1);
    char *want = NULL;
    assert_true (asprintf (&want, "%s:2: expected `key = value`", bad) > 0);
    assert_string_equal (kiwi_error_msg (err), want);
    kiwi_error_free (&err);
    free (want);

    char *self = write_file ("self.conf", "config = /etc/other.conf\n");
    flags[KIWI_SETTING_CONFIG] = self;
    assert_int_equal (load (&s, flags, envp, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "`config` cannot be set in a config file"));
    kiwi_error_free (&err);

    flags[KIWI_SETTING_CONFIG] = "/nonexistent/kiwi.conf";
    assert_int_equal (load (&s, flags, envp, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "config: cannot open `/nonexistent/kiwi.conf`"));
    kiwi_error_free (&err);
    free (conf);
    free (bad);
    free (self);
    free (e1);
}

/* One bad value: the error names the key, the origin, and what is accepted. */
static void
bad (kiwi_setting_id id, const char *value, const char *want_key, const char *want_why, const char *want_accepted)
{
    const char *flags[KIWI_SETTING__COUNT] = { 0 };
    flags[id] = value;
    char *envp[] = { env_nostack, NULL };
    kiwi_cli_settings s;
    kiwi_error_t err = NULL;
    if (load (&s, flags, envp, &err) == 0)
        fail_msg ("%s=%s was accepted", want_key, value);
    const char *m = kiwi_error_msg (err);
    char head[256];
    snprintf (head, sizeof head, "%s: invalid value `%s` (from flag --", want_key, value);
    if (strncmp (m, head, strlen (head)) != 0 || strstr (m, want_why) == NULL || strstr (m, want_accepted) == NULL)
        fail_msg ("unexpected message: %s", m);
    assert_int_equal (kiwi_error_code (err), 0x4301);
    kiwi_error_free (&err);
}

static void
test_bad_values (void **state)
{
    bad (KIWI_SETTING_BROKERS, "localhost", "kafka.brokers", "entry without host:port", "accepted: host:port[,host:port...]");
    bad (KIWI_SETTING_BROKERS, "a:1,,b:2", "kafka.brokers", "empty entry", "host:port");
    bad (KIWI_SETTING_BROKERS, "a:99999", "kafka.brokers", "port out of range", "host:port");
    bad (KIWI_SETTING_BROKERS, "a:x1", "kafka.brokers", "port is not a number", "host:port");
    bad (KIWI_SETTING_BROKERS, "a: 1", "kafka.brokers", "whitespace", "host:port");
    bad (KIWI_SETTING_TOPIC_TASKS, "my tasks", "topic.tasks", "invalid character", "A-Z a-z 0-9 . _ -");
    bad (KIWI_SETTING_TOPIC_RESULTS, "..", "topic.results", "not topic names", "Kafka topic name");
    bad (KIWI_SETTING_DELIVERY_TIMEOUT, "abc", "kafka.delivery_timeout", "not a number", "whole seconds from 1 to 86400");
    bad (KIWI_SETTING_DELIVERY_TIMEOUT, "0", "kafka.delivery_timeout", "out of range", "whole seconds from 1 to 86400");
    bad (KIWI_SETTING_DELIVERY_TIMEOUT, "86401", "kafka.delivery_timeout", "out of range", "from 1 to 86400");
    bad (KIWI_SETTING_DELIVERY_TIMEOUT, "-5", "kafka.delivery_timeout", "not a number", "from 1 to 86400");
    bad (KIWI_SETTING_CI_MAX_BODY, "10X", "ci.max_body", "not a number", "optionally with a K, M or G suffix");
    bad (KIWI_SETTING_CI_MAX_BODY, "2G", "ci.max_body", "out of range", "bytes from 1024 to 1073741824");
    bad (KIWI_SETTING_CI_MAX_BODY, "99999999999999999999", "ci.max_body", "too large", "bytes");
    bad (KIWI_SETTING_LOG_LEVEL, "loud", "log.level", "unknown level", "debug, info, warn, error");
}

static void
test_env_values_are_checked_too (void **state)
{
    char e1[] = "KIWI_CI_GOAL=fix {nope} now";
    char *envp[] = { env_nostack, e1, NULL };
    kiwi_cli_settings s;
    kiwi_error_t err = NULL;
    assert_int_equal (load (&s, NULL, envp, &err), -1);
    assert_string_equal (kiwi_error_msg (err),
                         "ci.goal: invalid value `fix {nope} now` (from environment KIWI_CI_GOAL): unknown placeholder "
                         "(accepted: text with the placeholders {name} {sha} {branch} {url} {repo} {event})");
    kiwi_error_free (&err);

    /* a lower source's bad value does not matter once a higher one wins */
    char e2[] = "KIWI_DELIVERY_TIMEOUT=never";
    char *envp2[] = { env_nostack, e2, NULL };
    const char *flags[KIWI_SETTING__COUNT] = { 0 };
    flags[KIWI_SETTING_DELIVERY_TIMEOUT] = "7";
    assert_int_equal (load (&s, flags, envp2, &err), 0);
    assert_int_equal (s.delivery_timeout, 7);
    kiwi_cli_settings_clear (&s);
}

static void
test_sizes_and_secret (void **state)
{
    char e1[] = "KIWI_CI_MAX_BODY=2M";
    char e2[] = "KIWI_CI_WEBHOOK_SECRET=hunter2-very-secret";
    char *envp[] = { env_nostack, e1, e2, NULL };
    kiwi_cli_settings s;
    kiwi_error_t err = NULL;
    assert_int_equal (load (&s, NULL, envp, &err), 0);
    assert_int_equal (s.ci_max_body, 2 * 1024 * 1024);
    assert_string_equal (s.ci_webhook_secret, "hunter2-very-secret");

    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&out, &len);
    kiwi_cli_settings_dump (&s, f);
    fclose (f);
    assert_null (strstr (out, "hunter2"));
    assert_non_null (strstr (out, "# ci.webhook_secret = (set, not shown)"));
    assert_non_null (strstr (out, "# KIWI_CI_MAX_BODY, from environment KIWI_CI_MAX_BODY\nci.max_body = 2097152\n"));

    /* the dump is a config file that loads back to the same values */
    char *conf = write_file ("dump.conf", out);
    const char *flags[KIWI_SETTING__COUNT] = { 0 };
    flags[KIWI_SETTING_CONFIG] = conf;
    kiwi_cli_settings back;
    char *envp2[] = { env_nostack, NULL };
    assert_int_equal (load (&back, flags, envp2, &err), 0);
    assert_int_equal (back.ci_max_body, 2 * 1024 * 1024);
    assert_string_equal (back.brokers, s.brokers);
    assert_string_equal (back.ci_goal, s.ci_goal);
    assert_string_equal (back.ci_webhook_secret, ""); /* never written out */
    kiwi_cli_settings_clear (&back);
    kiwi_cli_settings_clear (&s);
    free (out);
    free (conf);
}

static void
test_kafka_properties (void **state)
{
    char *conf = write_file ("kafka.conf", "# shared with kiwi-worker\nkafka.property.security.protocol = SASL_SSL\n"
                                           "kafka.property.sasl.password = \"hunter2-file\"\n");
    char e1[] = "KIWI_KAFKA_PROPERTIES=client.id=kiwi-prop-test,sasl.username=kiwi";
    char *envp[] = { env_nostack, e1, NULL };
    const char *flags[KIWI_SETTING__COUNT] = { 0 };
    flags[KIWI_SETTING_CONFIG] = conf;
    kiwi_cli_settings s;
    kiwi_error_t err = NULL;
    assert_int_equal (load (&s, flags, envp, &err), 0);
    kiwi_strv p = KIWI_STRV_INIT;
    assert_int_equal (kiwi_cli_settings_kafka_props (&s, &p, &err), 0);
    assert_int_equal (p.n, 8); /* the file's, then the environment's */
    assert_string_equal (p.v[0], "security.protocol");
    assert_string_equal (p.v[3], "hunter2-file");
    assert_string_equal (p.v[4], "client.id");
    assert_string_equal (p.v[5], "kiwi-prop-test");
    kiwi_strv_free (&p);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&out, &len);
    kiwi_cli_settings_dump (&s, f);
    fclose (f);
    assert_null (strstr (out, "hunter2"));
    assert_non_null (strstr (out, "\nkafka.property.security.protocol = SASL_SSL\n"));
    assert_non_null (strstr (out, "# kafka.property.sasl.password = (set, not shown)"));
    assert_non_null (strstr (out, "# kafka.properties = (set, not shown)"));
    free (out);
    kiwi_cli_settings_clear (&s);
    /* a list that does not parse: named with where it came from */
    char e2[] = "KIWI_KAFKA_PROPERTIES=client.id=x,hunter2";
    char *envp2[] = { env_nostack, e2, NULL };
    assert_int_equal (load (&s, NULL, envp2, &err), 0);
    assert_int_equal (kiwi_cli_settings_kafka_props (&s, &p, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "environment KIWI_KAFKA_PROPERTIES"));
    assert_null (strstr (kiwi_error_msg (err), "hunter2"));
    kiwi_error_free (&err);
    kiwi_strv_free (&p);
    kiwi_cli_settings_clear (&s);
    free (conf);
}

static void
test_goal_template (void **state)
{
    kiwi_goal_vars v = { "CI", "abc123", "main", "https://x/run/1", "acme/widgets", "workflow_run" };
    kiwi_error_t err = NULL;
    char *g = kiwi_goal_expand ("{event} {name} on {repo}@{branch} ({sha}, {url}) {", &v, &err);
    assert_non_null (g);
    assert_string_equal (g, "workflow_run CI on acme/widgets@main (abc123, https://x/run/1) {");
    free (g);
    g = kiwi_goal_expand (KIWI_CI_GOAL_DEFAULT, &v, &err);
    assert_string_equal (g, "CI run CI failed on abc123: make it pass");
    free (g);
    kiwi_goal_vars empty = { 0 };
    g = kiwi_goal_expand ("x{branch}y", &empty, &err);
    assert_string_equal (g, "xy");
    free (g);
    assert_null (kiwi_goal_expand ("{shaa}", &v, &err));
    assert_non_null (strstr (kiwi_error_msg (err), "unknown placeholder `{shaa}`"));
    kiwi_error_free (&err);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_defaults),
        cmocka_unit_test (test_every_entry_is_complete),
        cmocka_unit_test (test_env_then_flag),
        cmocka_unit_test (test_stack_env_file),
        cmocka_unit_test (test_config_file),
        cmocka_unit_test (test_bad_values),
        cmocka_unit_test (test_env_values_are_checked_too),
        cmocka_unit_test (test_sizes_and_secret),
        cmocka_unit_test (test_goal_template),
        cmocka_unit_test (test_kafka_properties),
    };
    return cmocka_run_group_tests_name ("cli_settings", tests, setup, teardown);
}
