/*
 * test_worker_secrets.c: what the worker treats as secret (worker/task/secrets.h)
 * and that its event sinks and logger never carry one.
 *
 *   - the worker's mask holds every model key (the four known names and
 *     those KIWI_MODEL_KEY_VARS adds) and the git token (KIWI_GIT_TOKEN, or
 *     the variable KIWI_GIT_TOKEN_VAR names), and nothing else of the
 *     environment; a task's mask adds its test credentials' values, but
 *     not those of names no sandbox is given (KIWI_* settings);
 *   - both sinks (JSON lines for --once, frames on the task process's pipe)
 *     send payload strings and the result's reason and diff masked;
 *   - a log line is masked, also when the secret straddles the line's
 *     length limit.
 * Everything is checked on what leaves: the bytes written to the file, the
 * pipe and stderr.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/config.h"
#include "worker/events.h"
#include "common/log.h"
#include "worker/task/secrets.h"

#define ANTHROPIC "sk-ant-canary-1111"
#define OPENAI "sk-openai-canary-2222"
#define GEMINI "gemini-canary-3333"
#define GOOGLE "google-canary-4444"
#define EXTRA "extra-model-canary-5555"
#define GIT_TOKEN "ghp_gittoken_canary_6666"
#define PAT "ghp_other_pat_canary_7777"
#define CRED "app-test-token-8888"
#define UNRELATED "not-a-secret-9999"
#define SETTING "kiwi-setting-value-0000"

static const char *const env[] = {
    "ANTHROPIC_API_KEY=" ANTHROPIC, "OPENAI_API_KEY=" OPENAI, "GEMINI_API_KEY=" GEMINI, "GOOGLE_API_KEY=" GOOGLE,
    "EXTRA_MODEL_KEY=" EXTRA,       "KIWI_GIT_TOKEN=" GIT_TOKEN, "MY_PAT=" PAT,          "APP_TEST_TOKEN=" CRED,
    "UNRELATED=" UNRELATED,         "PATH=/usr/bin:/bin",        "KIWI_SOME_SETTING=" SETTING, NULL,
};

static void
load (kiwi_worker_config *c, const char *const *e)
{
    kiwi_worker_config_init (c);
    char *argv[] = { "kiwi-worker", NULL };
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_worker_config_load (c, NULL, e, 1, argv, 1, NULL, &err), 0);
}

static bool
masks (const kiwi_mask *m, const char *value)
{
    return kiwi_mask_hits (m, value, strlen (value));
}

static void
test_worker_mask_has_keys_and_token (void **state)
{
    const char *e[] = { "KIWI_MODEL_KEY_VARS=NOT_SET_KEY,EXTRA_MODEL_KEY", NULL };
    kiwi_worker_config c;
    load (&c, e);
    kiwi_error_t err = NULL;
    kiwi_mask *m = kiwi_worker_mask (&c, env, NULL, &err);
    assert_non_null (m);
    assert_true (masks (m, ANTHROPIC));
    assert_true (masks (m, OPENAI));
    assert_true (masks (m, GEMINI));
    assert_true (masks (m, GOOGLE));
    assert_true (masks (m, EXTRA));
    assert_true (masks (m, GIT_TOKEN)); /* KIWI_GIT_TOKEN, the default KIWI_GIT_TOKEN_VAR */
    assert_false (masks (m, PAT));
    assert_false (masks (m, CRED)); /* no task: no credentials */
    assert_false (masks (m, UNRELATED));
    assert_false (masks (m, "/usr/bin:/bin"));
    assert_int_equal (kiwi_mask_count (m), 6);
    kiwi_mask_free (m);
    kiwi_worker_config_clear (&c);
}

static void
test_git_token_var (void **state)
{
    const char *e[] = { "KIWI_GIT_TOKEN_VAR=MY_PAT", NULL };
    kiwi_worker_config c;
    load (&c, e);
    kiwi_error_t err = NULL;
    kiwi_mask *m = kiwi_worker_mask (&c, env, NULL, &err);
    assert_non_null (m);
    assert_true (masks (m, PAT));
    assert_false (masks (m, GIT_TOKEN)); /* not the token any more */
    assert_false (masks (m, EXTRA));     /* not a model key without KIWI_MODEL_KEY_VARS */
    kiwi_mask_free (m);
    kiwi_worker_config_clear (&c);
}

static void
test_task_mask_adds_credentials (void **state)
{
    kiwi_worker_config c;
    load (&c, NULL);
    kiwi_task t;
    kiwi_task_init (&t);
    char *creds[] = { "APP_TEST_TOKEN", "ABSENT_CRED", "KIWI_GIT_TOKEN", "KIWI_SOME_SETTING" };
    t.test_credentials = creds;
    t.n_test_credentials = 4;
    kiwi_error_t err = NULL;
    kiwi_mask *m = kiwi_worker_mask (&c, env, &t, &err);
    assert_non_null (m);
    assert_true (masks (m, CRED));
    assert_true (masks (m, ANTHROPIC));
    assert_true (masks (m, GIT_TOKEN));
    assert_false (masks (m, UNRELATED));
    /* a name the policy never lets into a sandbox is not the task's to mask */
    assert_false (masks (m, SETTING));
    assert_int_equal (kiwi_mask_count (m), 6); /* 4 model keys, the token, the credential */
    kiwi_mask_free (m);
    kiwi_worker_config_clear (&c);
}

/* The whole of a FILE's contents (from its start). */
static char *
slurp (int fd, size_t *len)
{
    lseek (fd, 0, SEEK_SET);
    size_t cap = 1 << 16, n = 0;
    char *b = malloc (cap + 1);
    ssize_t r;
    while ((r = read (fd, b + n, cap - n)) > 0) {
        n += (size_t) r;
        if (n == cap)
            b = realloc (b, (cap *= 2) + 1);
    }
    b[n] = '\0';
    *len = n;
    return b;
}

static kiwi_mask *
task_mask (void)
{
    kiwi_worker_config c;
    load (&c, NULL);
    kiwi_task t;
    kiwi_task_init (&t);
    char *creds[] = { "APP_TEST_TOKEN" };
    t.test_credentials = creds;
    t.n_test_credentials = 1;
    kiwi_error_t err = NULL;
    kiwi_mask *m = kiwi_worker_mask (&c, env, &t, &err);
    kiwi_worker_config_clear (&c);
    assert_non_null (m);
    return m;
}

static void
send_all (kiwi_events *ev)
{
    kiwi_events_emit (ev, KIWI_STAGE_STEP0, "step0", 0,
                      json_pack ("{s:s,s:{s:[s]}}", "output_tail", "token: " CRED "\n", "verify", "lines",
                                 "key " ANTHROPIC " and git " GIT_TOKEN));
    kiwi_result r;
    kiwi_result_init (&r);
    r.task_id = strdup ("t-1");
    r.worker_id = strdup ("w-1");
    r.status = KIWI_RESULT_FIXED;
    r.reason = strdup ("the test printed " CRED);
    r.diff = strdup ("+const token = '" CRED "';\n");
    assert_int_equal (ev->result (ev, &r), 0);
    /* the caller's result is left as it was */
    assert_non_null (strstr (r.reason, CRED));
    kiwi_result_clear (&r);
}

static void
expect_clean (const char *buf, size_t len, int want_stars)
{
    const char *secrets[] = { CRED, ANTHROPIC, GIT_TOKEN };
    for (size_t i = 0; i < 3; i++)
        if (memmem (buf, len, secrets[i], strlen (secrets[i])) != NULL)
            fail_msg ("%s sent: %.*s", secrets[i], (int) len, buf);
    int stars = 0;
    for (const char *p = buf; (p = memmem (p, len - (size_t) (p - buf), "***", 3)) != NULL; p += 3)
        stars++;
    assert_int_equal (stars, want_stars);
}

static void
test_jsonl_sink_masks (void **state)
{
    kiwi_mask *m = task_mask ();
    FILE *f = tmpfile ();
    kiwi_events ev;
    kiwi_events_jsonl_init (&ev, f, "t-1", "w-1");
    ev.mask = m;
    send_all (&ev);
    fflush (f);
    size_t len;
    char *out = slurp (fileno (f), &len);
    expect_clean (out, len, 5);
    assert_non_null (strstr (out, "\"reason\":\"the test printed ***\""));
    free (out);
    fclose (f);
    kiwi_mask_free (m);
}

static void
test_pipe_sink_masks (void **state)
{
    kiwi_mask *m = task_mask ();
    FILE *f = tmpfile (); /* a file stands in for the pipe: the same bytes */
    kiwi_events ev;
    kiwi_events_pipe_init (&ev, fileno (f), "t-1", "w-1");
    ev.mask = m;
    send_all (&ev);
    size_t len;
    char *out = slurp (fileno (f), &len);
    expect_clean (out, len, 5);
    free (out);
    fclose (f);
    kiwi_mask_free (m);
}

static void
test_without_mask_nothing_changes (void **state)
{
    /* the same events with no mask carry the values: the checks above can fail */
    FILE *f = tmpfile ();
    kiwi_events ev;
    kiwi_events_jsonl_init (&ev, f, "t-1", "w-1");
    send_all (&ev);
    fflush (f);
    size_t len;
    char *out = slurp (fileno (f), &len);
    assert_non_null (strstr (out, CRED));
    assert_non_null (strstr (out, ANTHROPIC));
    free (out);
    fclose (f);
}

static void
test_mask_result (void **state)
{
    kiwi_mask *m = task_mask ();
    kiwi_result r;
    kiwi_result_init (&r);
    r.reason = strdup ("printed " CRED);
    r.diff = strdup ("+x = \"" GIT_TOKEN "\"\n");
    assert_int_equal (kiwi_events_mask_result (m, &r), 0);
    assert_string_equal (r.reason, "printed ***");
    assert_string_equal (r.diff, "+x = \"***\"\n");
    assert_int_equal (kiwi_events_mask_result (NULL, &r), 0);
    kiwi_result_clear (&r);
    kiwi_mask_free (m);
}

static void
test_log_lines_masked (void **state)
{
    kiwi_mask *m = task_mask ();
    FILE *f = tmpfile ();
    fflush (stderr);
    int saved = dup (2);
    dup2 (fileno (f), 2);
    const kiwi_mask *prev = kiwi_log_set_mask (m);
    kiwi_warn ("verify printed %s and %s", CRED, ANTHROPIC);
    /* a secret across the 4096-byte cut of a long line */
    char *pad = malloc (4100);
    memset (pad, 'p', 4085);
    pad[4085] = '\0';
    kiwi_warn ("%s%s", pad, GIT_TOKEN);
    free (pad);
    assert_ptr_equal (kiwi_log_set_mask (prev), m);
    kiwi_warn ("unmasked again: %s", CRED);
    fflush (stderr);
    dup2 (saved, 2);
    close (saved);
    size_t len;
    char *out = slurp (fileno (f), &len);
    char *last = strstr (out, "unmasked again: ");
    assert_non_null (last);
    assert_non_null (strstr (last, CRED)); /* the mask was what hid it */
    *last = '\0';
    expect_clean (out, strlen (out), 3);
    assert_non_null (strstr (out, "verify printed *** and ***"));
    free (out);
    fclose (f);
    kiwi_mask_free (m);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_worker_mask_has_keys_and_token),
        cmocka_unit_test (test_git_token_var),
        cmocka_unit_test (test_task_mask_adds_credentials),
        cmocka_unit_test (test_jsonl_sink_masks),
        cmocka_unit_test (test_pipe_sink_masks),
        cmocka_unit_test (test_without_mask_nothing_changes),
        cmocka_unit_test (test_mask_result),
        cmocka_unit_test (test_log_lines_masked),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
