/*
 * test_setting_keys.c: one spelling per setting across kiwi and
 * kiwi-worker (common/setting-keys.h): every key of each program's table is
 * in the common list with the same environment variable and that program
 * marked, every key the list gives a program is in its table, and the rule
 * for a key a program does not read: another program's is ignored, an
 * earlier spelling is refused naming the new one, any other is refused.
 * Then one config file shared by both programs' loaders.
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

#include "config.h"
#include "setting-keys.h"
#include "settings.h"

static void
test_worker_table_in_list (void **state)
{
    (void) state;
    const char *env = NULL, *key;
    size_t n = 0;
    for (size_t i = 0; (key = kiwi_worker_setting_key (i, &env)) != NULL; i++, n++) {
        const kiwi_setting_key *k = kiwi_setting_key_find (key);
        if (k == NULL)
            fail_msg ("kiwi-worker's `%s` is not in common/setting-keys.c", key);
        if (!(k->programs & KIWI_PROGRAM_WORKER))
            fail_msg ("`%s` is not marked as kiwi-worker's", key);
        if ((env == NULL) != (k->env == NULL) || (env && strcmp (env, k->env) != 0))
            fail_msg ("`%s`: kiwi-worker reads %s, the list says %s", key, env ? env : "no variable",
                      k->env ? k->env : "none");
    }
    size_t marked = 0;
    for (size_t i = 0; i < kiwi_n_setting_keys; i++)
        if (kiwi_setting_keys[i].programs & KIWI_PROGRAM_WORKER)
            marked++;
    assert_int_equal (marked, n);
}

static void
test_kiwi_table_in_list (void **state)
{
    (void) state;
    size_t n = 0;
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = kiwi_setting_def_get ((kiwi_setting_id) i);
        if (d->id == KIWI_SETTING_CONFIG)
            continue; /* not a file key */
        n++;
        const kiwi_setting_key *k = kiwi_setting_key_find (d->key);
        if (k == NULL)
            fail_msg ("kiwi's `%s` is not in common/setting-keys.c", d->key);
        if (!(k->programs & KIWI_PROGRAM_KIWI))
            fail_msg ("`%s` is not marked as kiwi's", d->key);
        if (k->env == NULL || strcmp (k->env, d->env) != 0)
            fail_msg ("`%s`: kiwi reads %s, the list says %s", d->key, d->env, k->env ? k->env : "none");
    }
    size_t marked = 0;
    for (size_t i = 0; i < kiwi_n_setting_keys; i++)
        if (kiwi_setting_keys[i].programs & KIWI_PROGRAM_KIWI)
            marked++;
    assert_int_equal (marked, n);
    /* one variable, one key: a variable both read has the same key in both */
    for (size_t i = 0; i < kiwi_n_setting_keys; i++)
        for (size_t j = i + 1; j < kiwi_n_setting_keys; j++)
            if (kiwi_setting_keys[i].env && kiwi_setting_keys[j].env
                && strcmp (kiwi_setting_keys[i].env, kiwi_setting_keys[j].env) == 0)
                fail_msg ("%s is read under two keys: `%s` and `%s`", kiwi_setting_keys[i].env,
                          kiwi_setting_keys[i].key, kiwi_setting_keys[j].key);
}

static void
test_foreign_rule (void **state)
{
    (void) state;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_setting_key_foreign ("worker.slots", KIWI_PROGRAM_KIWI, "kiwi", "f:1", 2, &err), 0);
    assert_int_equal (kiwi_setting_key_foreign ("batch.dir", KIWI_PROGRAM_WORKER, "kiwi-worker", "f:2", 0, &err), 0);
    assert_null (err);
    assert_int_equal (kiwi_setting_key_foreign ("topic_tasks", KIWI_PROGRAM_KIWI, "kiwi", "f:3", 2, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "f:3: unknown key `topic_tasks`: it is spelled `topic.tasks` now"));
    assert_int_equal (kiwi_error_code (err), 2);
    kiwi_error_free (&err);
    assert_int_equal (kiwi_setting_key_foreign ("topic.taks", KIWI_PROGRAM_WORKER, "kiwi-worker", "f:4", 0, &err),
                      -1);
    assert_non_null (strstr (kiwi_error_msg (err), "f:4: unknown key `topic.taks`: neither kiwi nor kiwi-worker"));
    kiwi_error_free (&err);
}

/* One file, both loaders: the shared keys set both, each program's own
 * key is ignored by the other, and a typo stops both. */
static void
test_one_file_both_programs (void **state)
{
    (void) state;
    char path[] = "/tmp/kiwi-shared-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    const char *text = "# one file for the fleet\n"
                       "kafka.brokers = 10.0.0.5:9092\n"
                       "topic.tasks = acme.tasks\n"
                       "topic.results = \"acme.results\"\n"
                       "kafka.delivery_timeout = 45\n"
                       "log.level = warn\n"
                       "worker.slots = 6\n"      /* kiwi-worker's */
                       "ci.goal = fix {name}\n"; /* kiwi's */
    assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);

    kiwi_worker_config w;
    kiwi_worker_config_init (&w);
    kiwi_error_t err = NULL;
    char *argv[] = { "kiwi-worker", NULL };
    if (kiwi_worker_config_load (&w, path, NULL, 1, argv, 1, NULL, &err) < 0)
        fail_msg ("kiwi-worker refused the shared file: %s", kiwi_error_msg (err));
    assert_string_equal (w.brokers, "10.0.0.5:9092");
    assert_string_equal (w.topic_tasks, "acme.tasks");
    assert_string_equal (w.topic_results, "acme.results");
    assert_int_equal (w.delivery_timeout_s, 45);
    assert_string_equal (w.log_level, "warn");
    assert_int_equal (w.slots, 6);
    kiwi_worker_config_clear (&w);

    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    char *envp[] = { NULL, NULL };
    char *cfgvar = NULL;
    assert_true (asprintf (&cfgvar, "KIWI_CONFIG=%s", path) > 0);
    envp[0] = cfgvar;
    if (kiwi_cli_settings_load (&s, NULL, envp, &err) < 0)
        fail_msg ("kiwi refused the shared file: %s", kiwi_error_msg (err));
    assert_string_equal (s.brokers, "10.0.0.5:9092");
    assert_string_equal (s.topic_tasks, "acme.tasks");
    assert_string_equal (s.topic_results, "acme.results");
    assert_int_equal (s.delivery_timeout, 45);
    assert_string_equal (s.log_level, "warn");
    assert_string_equal (s.ci_goal, "fix {name}");
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
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_worker_table_in_list),
        cmocka_unit_test (test_kiwi_table_in_list),
        cmocka_unit_test (test_foreign_rule),
        cmocka_unit_test (test_one_file_both_programs),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
