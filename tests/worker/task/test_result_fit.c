/*
 * test_result_fit.c: results cut to fit the results topic (worker/
 * result-fit.h): a 100 KB diff cut to whole lines within the ceiling, the
 * whole diff handed to `keep` once with its size and SHA-256 in the
 * result; the minimal result of a refused one is small whatever the task
 * printed, carries where the whole diff is, and keeps the status; the diff
 * file is written whole.
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

#include "worker/task/result-fit.h"
#include "common/sha256.h"

typedef struct {
    int calls;
    char *diff;
    size_t len;
} keep_log;

static void
fake_keep (const char *task_id, const char *diff, size_t len, char *loc, size_t cap, void *ud)
{
    keep_log *k = ud;
    k->calls++;
    free (k->diff);
    k->diff = strndup (diff, len);
    k->len = len;
    snprintf (loc, cap, "redis:kiwi:diff:%s file://host/state/results/%s.diff", task_id, task_id);
}

static char *
big_diff (size_t bytes)
{
    char *d = malloc (bytes + 200);
    size_t n = 0;
    n += (size_t) sprintf (d, "diff --git a/big.txt b/big.txt\n--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1 @@\n");
    for (int i = 0; n < bytes; i++)
        n += (size_t) sprintf (d + n, "+line %06d of a large generated file\n", i);
    return d;
}

static void
encode (kiwi_result_status st, const char *diff, const char *reason, char **out, size_t *len)
{
    kiwi_result r;
    kiwi_result_init (&r);
    r.task_id = strdup ("t-fit-1");
    r.worker_id = strdup ("worker-a");
    r.status = st;
    r.diff = diff ? strdup (diff) : NULL;
    r.reason = reason ? strdup (reason) : NULL;
    r.rounds = 3;
    r.tokens_in = 1234;
    r.finished_at = 1764454562123;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_result_encode (&r, out, len, &err), 0);
    kiwi_result_clear (&r);
}

static void
sha_hex (const char *s, size_t len, char hex[65])
{
    kiwi_sha256 h;
    unsigned char d[32];
    kiwi_sha256_init (&h);
    kiwi_sha256_update (&h, s, len);
    kiwi_sha256_final (&h, d);
    kiwi_sha256_digest_hex (d, hex);
}

static void
test_fit_cuts_whole_lines (void **state)
{
    char *whole = big_diff (100000);
    char *in, *out = NULL;
    size_t in_len, out_len;
    encode (KIWI_RESULT_FIXED, whole, "tests pass after 3 rounds", &in, &in_len);
    keep_log k = { 0 };
    kiwi_error_t err = NULL;

    /* fits: untouched */
    assert_int_equal (kiwi_result_fit (in, in_len, in_len, fake_keep, &k, &out, &out_len, &err), 0);
    assert_null (out);
    assert_int_equal (k.calls, 0);

    assert_int_equal (kiwi_result_fit (in, in_len, 20000, fake_keep, &k, &out, &out_len, &err), 1);
    assert_true (out_len <= 20000);
    assert_true (out_len > 15000); /* most of the room is used */
    kiwi_result r;
    assert_int_equal (kiwi_result_decode (out, out_len, &r, &err), 0);
    assert_int_equal (r.status, KIWI_RESULT_FIXED);
    assert_true (r.diff_truncated);
    assert_int_equal (r.diff_bytes, strlen (whole));
    size_t cut = strlen (r.diff);
    assert_true (cut > 0 && cut < strlen (whole));
    assert_memory_equal (r.diff, whole, cut);
    assert_int_equal (r.diff[cut - 1], '\n');
    char hex[65];
    sha_hex (whole, strlen (whole), hex);
    assert_string_equal (r.diff_sha256, hex);
    assert_string_equal (r.diff_location, "redis:kiwi:diff:t-fit-1 file://host/state/results/t-fit-1.diff");
    assert_int_equal (k.calls, 1);
    assert_int_equal (k.len, strlen (whole));
    assert_string_equal (k.diff, whole);
    char want[256];
    snprintf (want, sizeof want, "tests pass after 3 rounds; diff cut to its first %zu of %zu bytes", cut,
              strlen (whole));
    if (strstr (r.reason, want) == NULL)
        fail_msg ("reason: %s", r.reason);
    assert_non_null (strstr (r.reason, "whole diff at redis:kiwi:diff:t-fit-1"));
    assert_int_equal (r.rounds, 3);
    assert_int_equal (r.tokens_in, 1234);
    kiwi_result_clear (&r);

    /* a ceiling with room for hardly a line: whole lines or nothing */
    free (out);
    assert_int_equal (kiwi_result_fit (in, in_len, 600, fake_keep, &k, &out, &out_len, &err), 1);
    assert_true (out_len <= 600);
    assert_int_equal (kiwi_result_decode (out, out_len, &r, &err), 0);
    cut = strlen (r.diff);
    assert_true (cut < 300);
    assert_memory_equal (r.diff, whole, cut);
    assert_true (cut == 0 || r.diff[cut - 1] == '\n');
    assert_true (r.diff_truncated);
    kiwi_result_clear (&r);

    /* the minimal result of a fitted one: where the whole diff is, no new keep */
    int calls = k.calls;
    char *min = NULL;
    size_t min_len;
    assert_int_equal (kiwi_result_minimal (out, out_len, 4242, fake_keep, &k, &min, &min_len, &err), 0);
    assert_int_equal (k.calls, calls);
    assert_int_equal (kiwi_result_decode (min, min_len, &r, &err), 0);
    assert_string_equal (r.diff_sha256, hex);
    assert_non_null (strstr (r.reason, "result too large for the topic (4242 bytes): diff left out; whole diff at "
                                       "redis:kiwi:diff:t-fit-1"));
    kiwi_result_clear (&r);
    free (min);
    free (out);
    free (in);
    free (whole);
    free (k.diff);
}

static void
test_minimal_is_small (void **state)
{
    char *whole = big_diff (100000);
    char *reason = malloc (60001);
    memset (reason, 'r', 60000);
    reason[60000] = '\0';
    char *in, *out = NULL;
    size_t in_len, out_len;
    encode (KIWI_RESULT_FIXED, whole, reason, &in, &in_len);
    keep_log k = { 0 };
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_result_minimal (in, in_len, in_len, fake_keep, &k, &out, &out_len, &err), 0);
    assert_true (out_len < 1024);
    assert_int_equal (k.calls, 1);
    assert_string_equal (k.diff, whole);
    kiwi_result r;
    assert_int_equal (kiwi_result_decode (out, out_len, &r, &err), 0);
    assert_int_equal (r.status, KIWI_RESULT_FIXED);
    assert_string_equal (r.task_id, "t-fit-1");
    assert_string_equal (r.worker_id, "worker-a");
    assert_string_equal (r.diff, "");
    assert_true (r.diff_truncated);
    assert_int_equal (r.diff_bytes, strlen (whole));
    assert_int_equal (r.rounds, 3);
    assert_int_equal (r.finished_at, 1764454562123);
    char want[128];
    snprintf (want, sizeof want, "result too large for the topic (%zu bytes): diff left out; whole diff at redis:",
              in_len);
    assert_non_null (strstr (r.reason, want));
    assert_non_null (strstr (r.reason, ".diff (reason left out too)"));
    kiwi_result_clear (&r);
    free (out);
    free (in);

    /* no diff: the status and a reason saying what went, no diff fields */
    encode (KIWI_RESULT_NOT_FIXED, NULL, reason, &in, &in_len);
    assert_int_equal (kiwi_result_minimal (in, in_len, 77777, fake_keep, &k, &out, &out_len, &err), 0);
    assert_int_equal (kiwi_result_decode (out, out_len, &r, &err), 0);
    assert_int_equal (r.status, KIWI_RESULT_NOT_FIXED);
    assert_null (r.diff);
    assert_false (r.diff_truncated);
    assert_null (r.diff_location);
    assert_string_equal (r.reason, "result too large for the topic (77777 bytes): reason left out");
    assert_int_equal (k.calls, 1);
    kiwi_result_clear (&r);
    free (out);
    free (in);
    free (reason);
    free (whole);
    free (k.diff);
}

static void
test_keep_file (void **state)
{
    char dir[] = "/tmp/kiwi-fit-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char path[512];
    kiwi_error_t err = NULL;
    char *whole = big_diff (50000);
    assert_int_equal (kiwi_diff_keep_file (dir, "t-fit-2", whole, strlen (whole), path, sizeof path, &err), 0);
    char want[512];
    snprintf (want, sizeof want, "%s/results/t-fit-2.diff", dir);
    assert_string_equal (path, want);
    FILE *f = fopen (path, "rb");
    assert_non_null (f);
    char *back = calloc (1, strlen (whole) + 16);
    size_t n = fread (back, 1, strlen (whole) + 16, f);
    fclose (f);
    assert_int_equal (n, strlen (whole));
    assert_memory_equal (back, whole, n);
    snprintf (want, sizeof want, "%s/results/t-fit-2.diff.partial", dir);
    assert_int_not_equal (access (want, F_OK), 0);
    char cmd[600];
    snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal (system (cmd), 0);
    free (back);
    free (whole);
}

/* A diff beyond what a Result may carry: kept on the worker, cut. */
static void
test_keep_oversized (void **state)
{
    char dir[] = "/tmp/kiwi-fit-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char *whole = big_diff (5000);
    kiwi_result r;
    kiwi_result_init (&r);
    r.task_id = strdup ("t-fit-3");
    r.worker_id = strdup ("worker-a");
    r.status = KIWI_RESULT_FIXED;
    r.reason = strdup ("tests pass");
    r.diff = strdup (whole);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_result_keep_oversized (&r, dir, 100000, &err), 0);
    assert_string_equal (r.diff, whole);
    assert_int_equal (kiwi_result_keep_oversized (&r, dir, 1000, &err), 1);
    size_t cut = strlen (r.diff);
    assert_true (cut > 0 && cut <= 1000 && r.diff[cut - 1] == '\n');
    assert_memory_equal (r.diff, whole, cut);
    assert_true (r.diff_truncated);
    assert_int_equal (r.diff_bytes, strlen (whole));
    char path[512];
    snprintf (path, sizeof path, "%s/results/t-fit-3.diff", dir);
    assert_non_null (strstr (r.diff_location, path));
    assert_true (strncmp (r.diff_location, "file://", 7) == 0);
    assert_non_null (strstr (r.reason, "tests pass; diff cut to its first"));
    char *out = NULL;
    size_t len;
    assert_int_equal (kiwi_result_encode (&r, &out, &len, &err), 0);
    free (out);
    FILE *f = fopen (path, "rb");
    assert_non_null (f);
    char *back = calloc (1, strlen (whole) + 1);
    assert_int_equal (fread (back, 1, strlen (whole) + 1, f), strlen (whole));
    fclose (f);
    assert_string_equal (back, whole);
    kiwi_result_clear (&r);
    /* nowhere to keep it: an error result naming why, no diff */
    kiwi_result_init (&r);
    r.task_id = strdup ("t-fit-4");
    r.worker_id = strdup ("worker-a");
    r.status = KIWI_RESULT_FIXED;
    r.diff = strdup (whole);
    assert_int_equal (kiwi_result_keep_oversized (&r, "/nonexistent/state", 1000, &err), -1);
    kiwi_error_free (&err);
    assert_int_equal (r.status, KIWI_RESULT_ERROR);
    assert_null (r.diff);
    assert_non_null (strstr (r.reason, "larger than a result may carry"));
    assert_int_equal (kiwi_result_encode (&r, &out, &len, &err), 0);
    free (out);
    kiwi_result_clear (&r);
    char cmd[600];
    snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal (system (cmd), 0);
    free (back);
    free (whole);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_fit_cuts_whole_lines),
        cmocka_unit_test (test_minimal_is_small),
        cmocka_unit_test (test_keep_file),
        cmocka_unit_test (test_keep_oversized),
    };
    return cmocka_run_group_tests_name ("result_fit", tests, NULL, NULL);
}
