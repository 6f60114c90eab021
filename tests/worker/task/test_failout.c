/*
 * test_failout.c: a test run's output as a model is shown it (failout.h):
 * colour codes and overwritten progress removed from real captured output;
 * a long output fitted to its budget keeps the failing tests' lines and the
 * summary ahead of the passing noise, and says what it left out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "worker/task/failout.h"

static char *
captured (const char *name)
{
    char path[512];
    snprintf (path, sizeof path, "%s/tests/fixtures/captured/%s", KIWI_SOURCE_DIR, name);
    FILE *f = fopen (path, "r");
    if (f == NULL)
        fail_msg ("%s: missing", path);
    char *buf = calloc (1, 1 << 20);
    buf[fread (buf, 1, (1 << 20) - 1, f)] = '\0';
    fclose (f);
    return buf;
}

static void
has (const char *text, const char *want)
{
    if (strstr (text, want) == NULL)
        fail_msg ("lacks `%s` in:\n%s", want, text);
}

static void
test_clean_captured (void **state)
{
    const char *names[] = { "jest-console-error.txt", "mvn-test-fail.txt", "vitest-console-error.txt", NULL };
    for (size_t i = 0; names[i]; i++) {
        char *raw = captured (names[i]);
        assert_non_null (strchr (raw, 0x1b)); /* real colour codes */
        char *c = kiwi_failout_clean (raw);
        if (strchr (c, 0x1b) != NULL)
            fail_msg ("%s: an escape is left", names[i]);
        free (raw);
        if (i == 0) {
            has (c, ">  8 |     console.error(err);");
            has (c, "FAIL ./client.test.js");
        }
        free (c);
    }
}

static void
test_clean_sequences (void **state)
{
    char *c = kiwi_failout_clean ("\x1b[1;31mred\x1b[0m \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \x1b]0;title\x07"
                                  "\x1b(Bplain\x1b[?25l\n"
                                  "Downloading 10%\rDownloading 50%\rDownloading 100%\ndone\r\nlast\x1b[");
    assert_string_equal (c, "red link plain\nDownloading 100%\ndone\nlast");
    free (c);
    c = kiwi_failout_clean (NULL);
    assert_string_equal (c, "");
    free (c);
}

/* An event's tail: cleaned before it is cut, and cut at a character's
 * first byte (vitest's colours, which CI=true turns on, never reach a
 * dashboard). */
static void
test_clean_tail (void **state)
{
    size_t cut = 99;
    char *c = kiwi_failout_clean_tail ("\x1b[32m\xe2\x9c\x93\x1b[39m passed\n\x1b[2m Tests \x1b[22m 963 passed", 40,
                                       &cut);
    assert_string_equal (c, "\xe2\x9c\x93 passed\n Tests  963 passed");
    assert_int_equal (cut, 0);
    free (c);
    c = kiwi_failout_clean_tail ("\x1b[32m\xe2\x9c\x93\x1b[39m passed", 8, &cut); /* ✓'s first byte would be cut */
    assert_string_equal (c, " passed");
    assert_int_equal (cut, 3);
    free (c);
    c = kiwi_failout_clean_tail (NULL, 8, NULL);
    assert_string_equal (c, "");
    free (c);
}

/* Within the budget: only cleaned. */
static void
test_fit_within_budget (void **state)
{
    char *raw = captured ("pytest-assert-fail.txt");
    char *c = kiwi_failout_fit (raw, 12000);
    assert_string_equal (c, raw);
    free (c);
    free (raw);
}

/* A real pytest failure, then 3000 lines of passing tests, then its
 * summary: fitted to 12000 bytes, the failure's block and the summary are
 * there, the passing lines are said to be left out. The plain tail of the
 * same bytes (what the models were shown before) has only passing lines
 * and the summary. */
static void
test_fit_keeps_failures (void **state)
{
    char *fail = captured ("pytest-assert-fail.txt");
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_buf_appendf (&b, NULL, "\x1b[1m============ test session starts ============\x1b[0m\n%s", fail);
    for (int i = 0; i < 3000; i++)
        kiwi_buf_appendf (&b, NULL, "tests/test_many.py::test_case_%04d \x1b[32mPASSED\x1b[0m\n", i);
    kiwi_buf_append_str (&b, "===== 1 failed, 3000 passed in 4.20s =====\n", NULL);
    const char *raw = kiwi_buf_str (&b);
    const char *plain_tail = raw + strlen (raw) - 12000;
    assert_null (strstr (plain_tail, "assert 'hello_world' == 'hello-world'"));
    char *c = kiwi_failout_fit (raw, 12000);
    assert_true (strlen (c) <= 12000);
    assert_null (strchr (c, 0x1b));
    has (c, "=================================== FAILURES ===================================");
    has (c, ">       assert slugify(\"Hello World\") == \"hello-world\"");
    has (c, "E       AssertionError: assert 'hello_world' == 'hello-world'");
    has (c, "test_slug.py:5: AssertionError");
    has (c, "lines of passing output left out]\n");
    /* the summary is the last line, and the passing lines before it */
    const char *end = c + strlen (c) - strlen ("===== 1 failed, 3000 passed in 4.20s =====\n");
    assert_string_equal (end, "===== 1 failed, 3000 passed in 4.20s =====\n");
    has (c, "tests/test_many.py::test_case_2999 PASSED\n");
    /* the lines are in their order: the failure before the summary */
    assert_true (strstr (c, "test_slug.py:5: AssertionError") < strstr (c, "test_case_2999"));
    free (c);
    free (fail);
    kiwi_buf_free (&b);
}

/* No marker: the end, as before, with the left-out lines counted. */
static void
test_fit_no_marker (void **state)
{
    kiwi_buf b = KIWI_BUF_INIT;
    for (int i = 0; i < 1000; i++)
        kiwi_buf_appendf (&b, NULL, "line %04d ok\n", i);
    char *c = kiwi_failout_fit (kiwi_buf_str (&b), 1000);
    assert_true (strlen (c) <= 1000);
    assert_int_equal (strncmp (c, "[... ", 5), 0);
    has (c, "line 0999 ok\n");
    unsigned left = 0;
    assert_int_equal (sscanf (c, "[... %u lines of passing output left out]", &left), 1);
    size_t kept = 0;
    for (const char *p = strchr (c, '\n') + 1; *p; p++)
        kept += *p == '\n';
    assert_int_equal (left + kept, 1000);
    free (c);
    kiwi_buf_free (&b);
}

/* One line longer than the budget: its end, said to be cut. */
static void
test_fit_long_line (void **state)
{
    char *line = malloc (100001);
    memset (line, 'x', 100000);
    line[100000] = '\0';
    line[99990] = 'E';
    char *c = kiwi_failout_fit (line, 1000);
    assert_true (strlen (c) <= 1000);
    has (c, "bytes cut] ");
    has (c, "Exxxxxxxxx\n");
    free (c);
    free (line);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_clean_captured),     cmocka_unit_test (test_clean_sequences),
        cmocka_unit_test (test_clean_tail),
        cmocka_unit_test (test_fit_within_budget),  cmocka_unit_test (test_fit_keeps_failures),
        cmocka_unit_test (test_fit_no_marker),      cmocka_unit_test (test_fit_long_line),
    };
    return cmocka_run_group_tests_name ("failout", tests, NULL, NULL);
}
