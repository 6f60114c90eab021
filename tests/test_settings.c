/*
 * test_settings.c: the one settings table of kiwi and kiwi-worker
 * (common/settings.h): a row of each type accepts its values and refuses
 * others naming the key; a per-program default; the rule for a key of
 * another program, of neither, or spelled the old way; one config file
 * shared by both programs' loaders; a Firecracker row reaching the
 * driver's struct from a config file; the derived git token; a KIWI_
 * variable that is no setting warned about.
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
#include "worker/config.h"
#include "common/settings.h"

static char *
write_tmp (const char *text)
{
    char *path = strdup ("/tmp/kiwi-settings-XXXXXX");
    assert_non_null (path);
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    return path;
}

/* Every row: a key, a KIWI_ variable, a help line, a program, and a
 * default that passes its own check. */
static void
test_every_row_is_complete (void **state)
{
    (void) state;
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = kiwi_setting_get ((kiwi_setting_id) i);
        assert_non_null (d);
        assert_int_equal (d->id, i);
        assert_true (strncmp (d->env, "KIWI_", 5) == 0);
        assert_non_null (d->help);
        assert_true (d->programs != 0);
        assert_ptr_equal (kiwi_setting_find (d->key, 0), d);
        assert_ptr_equal (kiwi_setting_find (d->env, 0), d);
        for (unsigned p = KIWI_PROGRAM_KIWI; p <= KIWI_PROGRAM_WORKER; p++) {
            const char *def = kiwi_setting_default (d, p);
            kiwi_error_t err = NULL;
            if ((d->programs & p) && def != NULL && kiwi_setting_check (d, def, "default", 0, &err) < 0)
                fail_msg ("default of %s fails its own check: %s", d->key, kiwi_error_msg (err));
        }
    }
}

static void
accepts (kiwi_setting_id id, const char *value)
{
    kiwi_error_t err = NULL;
    if (kiwi_setting_check (kiwi_setting_get (id), value, "test", 7, &err) < 0)
        fail_msg ("`%s` refused: %s", value, kiwi_error_msg (err));
}

static void
refuses (kiwi_setting_id id, const char *value, const char *want)
{
    kiwi_error_t err = NULL;
    const kiwi_setting_def *d = kiwi_setting_get (id);
    if (kiwi_setting_check (d, value, "test", 7, &err) == 0)
        fail_msg ("%s: `%s` accepted", d->key, value);
    const char *m = kiwi_error_msg (err);
    if (strncmp (m, d->key, strlen (d->key)) != 0 || strstr (m, "(from test)") == NULL || strstr (m, want) == NULL)
        fail_msg ("unexpected message: %s", m);
    assert_int_equal (kiwi_error_code (err), 7);
    kiwi_error_free (&err);
}

static void
test_each_type (void **state)
{
    (void) state;
    accepts (KIWI_SETTING_STATE_DIR, "/var/lib/kiwi"); /* STR */
    refuses (KIWI_SETTING_STATE_DIR, "", "a non-empty string");
    accepts (KIWI_SETTING_WORKER_ID, "w1"); /* NAME */
    refuses (KIWI_SETTING_WORKER_ID, "w+1", "1 to 64 characters of A-Z a-z 0-9 . _ -");
    refuses (KIWI_SETTING_WORKER_ID, "", "1 to 64 characters");
    accepts (KIWI_SETTING_CONFIG, ""); /* PATH */
    accepts (KIWI_SETTING_CI_TEST_COMMAND, "make check"); /* TEXT */
    refuses (KIWI_SETTING_CI_TEST_COMMAND, "a\tb", "control character");
    accepts (KIWI_SETTING_REPO_SCHEMES, ""); /* LIST */
    accepts (KIWI_SETTING_REDIS_PASSWORD, "x y"); /* SECRET */
    accepts (KIWI_SETTING_SANDBOX, "gvisor"); /* ENUM */
    refuses (KIWI_SETTING_SANDBOX, "lxc", "docker|runc|gvisor|runsc|firecracker");
    accepts (KIWI_SETTING_METRICS_ADDR, "[::1]:9100"); /* ADDR */
    accepts (KIWI_SETTING_METRICS_ADDR, "");
    refuses (KIWI_SETTING_METRICS_ADDR, "9464", "no `:PORT`");
    accepts (KIWI_SETTING_BROKERS, "a:1,b:2"); /* BROKERS */
    refuses (KIWI_SETTING_BROKERS, "a", "entry without host:port");
    accepts (KIWI_SETTING_TOPIC_DLQ, "team.dlq"); /* TOPIC */
    refuses (KIWI_SETTING_TOPIC_DLQ, "a b", "A-Z a-z 0-9 . _ -");
    accepts (KIWI_SETTING_CI_GOAL, "fix {name}"); /* TEMPLATE */
    refuses (KIWI_SETTING_CI_GOAL, "fix {nope}", "unknown placeholder");
    accepts (KIWI_SETTING_LOG_LEVEL, "debug"); /* LOGLEVEL */
    refuses (KIWI_SETTING_LOG_LEVEL, "loud", "debug, info, warn, error");
    accepts (KIWI_SETTING_SLOTS, "64"); /* INT */
    refuses (KIWI_SETTING_SLOTS, "65", "an integer from 1 to 64");
    refuses (KIWI_SETTING_SLOTS, "many", "not an integer");
    accepts (KIWI_SETTING_MODEL_PRICE_INPUT, "2.5"); /* NUM */
    refuses (KIWI_SETTING_MODEL_PRICE_INPUT, "-1", "a number from 0 to 1000000");
    accepts (KIWI_SETTING_DELIVERY_TIMEOUT, "86400"); /* SECONDS */
    refuses (KIWI_SETTING_DELIVERY_TIMEOUT, "0", "whole seconds from 1 to 86400");
    accepts (KIWI_SETTING_CI_MAX_BODY, "2M"); /* BYTES */
    refuses (KIWI_SETTING_CI_MAX_BODY, "2G", "optionally with a K, M or G suffix");
    accepts (KIWI_SETTING_SNAPSHOT_COPY, "yes"); /* BOOL */
    refuses (KIWI_SETTING_SNAPSHOT_COPY, "maybe", "true, false");
    accepts (KIWI_SETTING_FC_BOOT_TIMEOUT_MS, "1500");
    refuses (KIWI_SETTING_FC_BOOT_TIMEOUT_MS, "soon", "an integer from 1 to 3600000");

    /* a refused value is named in the message (a secret's never is:
     * test_git_token_read_when_loaded, test_worker_config's dump) */
    kiwi_error_t err = NULL;
    kiwi_settings s;
    memset (&s, 0, sizeof s);
    const char *envp[] = { "KIWI_FC_BOOT_TIMEOUT_MS=later", NULL };
    assert_int_equal (kiwi_settings_load (&s, KIWI_PROGRAM_WORKER, NULL, envp, 0, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "`later`"));
    kiwi_error_free (&err);
}

static void
test_per_program_default (void **state)
{
    (void) state;
    const kiwi_setting_def *d = kiwi_setting_get (KIWI_SETTING_DELIVERY_TIMEOUT);
    assert_string_equal (kiwi_setting_default (d, KIWI_PROGRAM_KIWI), "30");
    assert_string_equal (kiwi_setting_default (d, KIWI_PROGRAM_WORKER), "300");
    kiwi_settings s;
    kiwi_error_t err = NULL;
    const char *envp[] = { "KIWI_STACK_ENV=/nonexistent/stack.env", NULL };
    memset (&s, 0, sizeof s);
    assert_int_equal (kiwi_settings_load (&s, KIWI_PROGRAM_KIWI, NULL, envp, 0, &err), 0);
    assert_int_equal (s.delivery_timeout, 30);
    assert_null (s.group); /* kiwi-worker's only */
    assert_int_equal (kiwi_settings_load (&s, KIWI_PROGRAM_WORKER, NULL, envp, 0, &err), 0);
    assert_int_equal (s.delivery_timeout, 300);
    assert_string_equal (s.group, KIWI_GROUP_DEFAULT);
    assert_null (s.stack_env); /* kiwi's only */
    kiwi_settings_clear (&s);
}

static void
test_foreign_rule (void **state)
{
    (void) state;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_setting_key_foreign ("worker.slots", KIWI_PROGRAM_KIWI, "f:1", 2, &err), 0);
    assert_int_equal (kiwi_setting_key_foreign ("batch.dir", KIWI_PROGRAM_WORKER, "f:2", 0, &err), 0);
    assert_int_equal (kiwi_setting_key_foreign ("firecracker.bin", KIWI_PROGRAM_KIWI, "f:2", 0, &err), 0);
    assert_null (err);
    assert_int_equal (kiwi_setting_key_foreign ("topic_tasks", KIWI_PROGRAM_KIWI, "f:3", 2, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "f:3: unknown key `topic_tasks`: it is spelled `topic.tasks` now"));
    assert_int_equal (kiwi_error_code (err), 2);
    kiwi_error_free (&err);
    assert_int_equal (kiwi_setting_key_foreign ("topic.taks", KIWI_PROGRAM_WORKER, "f:4", 0, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "f:4: unknown key `topic.taks`: neither kiwi nor kiwi-worker"));
    kiwi_error_free (&err);
    /* an environment name is not a config-file key */
    assert_int_equal (kiwi_setting_key_foreign ("KIWI_SLOTS", KIWI_PROGRAM_KIWI, "f:5", 0, &err), -1);
    kiwi_error_free (&err);
}

/* One file, both loaders: the shared keys set both, each program's own
 * key is ignored by the other, and a typo stops both. */
static void
test_one_file_both_programs (void **state)
{
    (void) state;
    char *path = write_tmp ("# one file for the fleet\n"
                            "kafka.brokers = 10.0.0.5:9092\n"
                            "topic.tasks = acme.tasks\n"
                            "topic.results = \"acme.results\"\n"
                            "kafka.delivery_timeout = 45\n"
                            "log.level = warn\n"
                            "worker.slots = 6\n"      /* kiwi-worker's */
                            "ci.goal = fix {name}\n"); /* kiwi's */
    kiwi_worker_config w;
    kiwi_worker_config_init (&w);
    kiwi_error_t err = NULL;
    char *argv[] = { "kiwi-worker", NULL };
    if (kiwi_worker_config_load (&w, path, NULL, 1, argv, 1, NULL, &err) < 0)
        fail_msg ("kiwi-worker refused the shared file: %s", kiwi_error_msg (err));
    assert_string_equal (w.brokers, "10.0.0.5:9092");
    assert_string_equal (w.topic_tasks, "acme.tasks");
    assert_string_equal (w.topic_results, "acme.results");
    assert_int_equal (w.delivery_timeout, 45);
    assert_string_equal (w.log_level, "warn");
    assert_int_equal (w.slots, 6);
    assert_null (w.ci_goal);
    kiwi_worker_config_clear (&w);

    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    char *cfgvar = NULL;
    assert_true (asprintf (&cfgvar, "KIWI_CONFIG=%s", path) > 0);
    char *envp[] = { cfgvar, "KIWI_STACK_ENV=/nonexistent", NULL };
    if (kiwi_cli_settings_load (&s, NULL, envp, &err) < 0)
        fail_msg ("kiwi refused the shared file: %s", kiwi_error_msg (err));
    assert_string_equal (s.brokers, "10.0.0.5:9092");
    assert_string_equal (s.topic_tasks, "acme.tasks");
    assert_int_equal (s.delivery_timeout, 45);
    assert_string_equal (s.log_level, "warn");
    assert_string_equal (s.ci_goal, "fix {name}");
    assert_int_equal (s.slots, 0);
    kiwi_cli_settings_clear (&s);

    /* a typo: both stop, naming the line */
    FILE *f = fopen (path, "a");
    fputs ("topic.taks = x\n", f);
    fclose (f);
    kiwi_worker_config_init (&w);
    assert_int_equal (kiwi_worker_config_load (&w, path, NULL, 1, argv, 1, NULL, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), ":9: unknown key `topic.taks`"));
    kiwi_error_free (&err);
    kiwi_worker_config_clear (&w);
    assert_int_equal (kiwi_cli_settings_load (&s, NULL, envp, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), ":9: unknown key `topic.taks`"));
    kiwi_error_free (&err);
    free (cfgvar);
    unlink (path);
    free (path);
}

/* firecracker.* keys of a config file reach the driver's struct, the
 * environment over the file, and a bad one is refused naming the key. */
static void
test_firecracker_rows (void **state)
{
    (void) state;
    char *path = write_tmp ("firecracker.kernel = /k/vmlinux\n"
                            "firecracker.boot_timeout_ms = 1500\n"
                            "firecracker.skip_kvm_check = yes\n");
    kiwi_worker_config w;
    kiwi_worker_config_init (&w);
    kiwi_error_t err = NULL;
    char *argv[] = { "kiwi-worker", NULL };
    const char *envp[] = { "KIWI_FC_INSTALL_BRIDGE=kiwi-fc0", NULL };
    assert_int_equal (kiwi_worker_config_load (&w, path, envp, 1, argv, 1, NULL, &err), 0);
    assert_string_equal (w.fc.kernel, "/k/vmlinux");
    assert_int_equal (w.fc.boot_timeout_ms, 1500);
    assert_true (w.fc.skip_kvm_check);
    assert_string_equal (w.fc.install_bridge, "kiwi-fc0");
    assert_string_equal (w.fc.bin, "firecracker");
    assert_string_equal (w.fc.kvm_device, "/dev/kvm");
    kiwi_worker_config_clear (&w);
    unlink (path);
    free (path);

    const char *bad[] = { "KIWI_FC_KERNEL=", NULL };
    kiwi_worker_config_init (&w);
    assert_int_equal (kiwi_worker_config_load (&w, NULL, bad, 1, argv, 1, NULL, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "firecracker.kernel: invalid value `` (from environment KIWI_FC_KERNEL)"));
    kiwi_error_free (&err);
    kiwi_worker_config_clear (&w);
}

/* The worker id goes into container names, labels and file names as it is:
 * only a name's characters are taken. */
static void
test_worker_id_is_a_name (void **state)
{
    (void) state;
    char *argv[] = { "kiwi-worker", NULL };
    static const char *const refused[] = { "a+b", "a/../../etc", "-x", "a b", "a\tb", "", NULL };
    for (size_t i = 0; refused[i]; i++) {
        char var[128];
        snprintf (var, sizeof var, "KIWI_WORKER_ID=%s", refused[i]);
        const char *envp[] = { var, NULL };
        kiwi_worker_config w;
        kiwi_worker_config_init (&w);
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_worker_config_load (&w, NULL, envp, 1, argv, 1, NULL, &err), -1);
        if (strstr (kiwi_error_msg (err), "worker.id: invalid value") == NULL)
            fail_msg ("KIWI_WORKER_ID=%s: %s", refused[i], kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi_worker_config_clear (&w);
    }
    char long_id[80];
    memset (long_id, 'a', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';
    char var[128];
    snprintf (var, sizeof var, "KIWI_WORKER_ID=%s", long_id);
    const char *too_long[] = { var, NULL };
    kiwi_worker_config w;
    kiwi_worker_config_init (&w);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_worker_config_load (&w, NULL, too_long, 1, argv, 1, NULL, &err), -1);
    kiwi_error_free (&err);
    kiwi_worker_config_clear (&w);
    const char *ok[] = { "KIWI_WORKER_ID=host-1.example_2", NULL };
    kiwi_worker_config_init (&w);
    assert_int_equal (kiwi_worker_config_load (&w, NULL, ok, 1, argv, 1, NULL, &err), 0);
    assert_string_equal (w.worker_id, "host-1.example_2");
    kiwi_worker_config_clear (&w);
}

/* The variable git.token_var names is read once, when loading. */
static void
test_git_token_read_when_loaded (void **state)
{
    (void) state;
    kiwi_worker_config w;
    kiwi_worker_config_init (&w);
    kiwi_error_t err = NULL;
    char *argv[] = { "kiwi-worker", NULL };
    const char *envp[] = { "KIWI_GIT_TOKEN_VAR=MY_PAT", "MY_PAT=hunter2-pat", "KIWI_GIT_TOKEN=other", NULL };
    assert_int_equal (kiwi_worker_config_load (&w, NULL, envp, 1, argv, 1, NULL, &err), 0);
    assert_string_equal (w.git_token, "hunter2-pat");
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream (&out, &len);
    kiwi_worker_config_dump (&w, m);
    fclose (m);
    assert_null (strstr (out, "hunter2"));
    free (out);
    kiwi_worker_config_clear (&w);

    /* kiwi's batch directory default comes from HOME */
    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    char *kenv[] = { "HOME=/home/k", "KIWI_STACK_ENV=/nonexistent", NULL };
    assert_int_equal (kiwi_cli_settings_load (&s, NULL, kenv, &err), 0);
    assert_string_equal (s.batch_dir, "/home/k/.kiwi/batches");
    kiwi_cli_settings_clear (&s);
}

/* Loads `program`'s settings from envp and returns what was logged
 * (stderr captured), malloc'd. */
static char *
load_logged (unsigned program, const char *const *envp)
{
    FILE *f = tmpfile ();
    assert_non_null (f);
    fflush (stderr);
    int saved = dup (2);
    dup2 (fileno (f), 2);
    kiwi_settings s;
    memset (&s, 0, sizeof s);
    kiwi_error_t err = NULL;
    int rc = kiwi_settings_load (&s, program, NULL, envp, 0, &err);
    fflush (stderr);
    dup2 (saved, 2);
    close (saved);
    if (rc < 0)
        fail_msg ("load: %s", kiwi_error_msg (err));
    kiwi_settings_clear (&s);
    long n = ftell (f);
    assert_true (n >= 0);
    char *out = calloc ((size_t) n + 1, 1);
    assert_non_null (out);
    rewind (f);
    assert_int_equal (fread (out, 1, (size_t) n, f), (size_t) n);
    fclose (f);
    return out;
}

static size_t
count (const char *hay, const char *needle)
{
    size_t k = 0;
    for (const char *p = hay; (p = strstr (p, needle)) != NULL; p += strlen (needle))
        k++;
    return k;
}

/* A KIWI_ variable that is no setting warns once, naming the setting it
 * probably meant (a typo or the same words reordered) or none when none is
 * close; a row of the other program, the alias and the harness's variables
 * do not; no value is ever printed. */
static void
test_unknown_env_warns (void **state)
{
    (void) state;
    const char *envp[] = { "KIWI_STACK_ENV=/nonexistent",
                           "KIWI_TASKS_TOPIC=value-reordered",
                           "KIWI_TOPIC_TAKS=value-typo",
                           "KIWI_ZEBRA_QUOKKA=value-far",
                           "KIWI_ZEBRA_QUOKKA=value-far-again",
                           "KIWI_SANDBOX_RUNTIME=runc",
                           "KIWI_REQUIRE_SERVICES=1",
                           "KIWI_TEST_ANYTHING=value-known",
                           "KIWI_KAFKA_CONTROLLER=127.0.0.1:1",
                           "KIWI_SLOTS=3", /* kiwi-worker's row, read by kiwi too */
                           "KIWI_GIT_TOKEN=value-secret",
                           "NOT_KIWI_TOPIC=x",
                           NULL };
    for (unsigned p = KIWI_PROGRAM_KIWI; p <= KIWI_PROGRAM_WORKER; p++) {
        char *out = load_logged (p, envp);
        assert_int_equal (count (out, " warn: "), 3);
        assert_non_null (strstr (out, "KIWI_TASKS_TOPIC is no setting of kiwi or kiwi-worker; ignored (did you mean "
                                      "KIWI_TOPIC_TASKS?)"));
        assert_non_null (strstr (out, "KIWI_TOPIC_TAKS is no setting of kiwi or kiwi-worker; ignored (did you mean "
                                      "KIWI_TOPIC_TASKS?)"));
        assert_non_null (strstr (out, "KIWI_ZEBRA_QUOKKA is no setting of kiwi or kiwi-worker; ignored\n"));
        assert_int_equal (count (out, "KIWI_ZEBRA_QUOKKA"), 1);
        assert_null (strstr (out, "value"));
        assert_null (strstr (out, "RUNTIME"));
        assert_null (strstr (out, "KIWI_TEST_"));
        assert_null (strstr (out, "CONTROLLER"));
        assert_null (strstr (out, "SERVICES"));
        assert_null (strstr (out, "KIWI_SLOTS"));
        assert_null (strstr (out, "NOT_KIWI"));
        free (out);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_every_row_is_complete),
        cmocka_unit_test (test_each_type),
        cmocka_unit_test (test_per_program_default),
        cmocka_unit_test (test_foreign_rule),
        cmocka_unit_test (test_one_file_both_programs),
        cmocka_unit_test (test_firecracker_rows),
        cmocka_unit_test (test_git_token_read_when_loaded),
        cmocka_unit_test (test_worker_id_is_a_name),
        cmocka_unit_test (test_unknown_env_warns),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
