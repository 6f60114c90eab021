/*
 * test_wstext.c: a file's text as the tools show it: lines counted with or
 * without a last newline, where a byte falls, numbered lines under a byte
 * cap, every occurrence of a text, and the lines most like a probe.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "worker/task/wstext.h"

#define T(s) (s), strlen (s)

static void
test_lines (void **state)
{
    assert_int_equal (kiwi_text_count_lines (T ("")), 0);
    assert_int_equal (kiwi_text_count_lines (T ("a")), 1);
    assert_int_equal (kiwi_text_count_lines (T ("a\n")), 1);
    assert_int_equal (kiwi_text_count_lines (T ("a\n\nb")), 3);
    const char *t = "one\ntwo\nthree\n";
    assert_int_equal (kiwi_text_line_at (T (t), 0), 1);
    assert_int_equal (kiwi_text_line_at (T (t), 3), 1); /* the newline ends its line */
    assert_int_equal (kiwi_text_line_at (T (t), 4), 2);
    assert_int_equal (kiwi_text_line_at (T (t), 1000), 4);
    assert_int_equal (kiwi_text_line_start (T (t), 1), 0);
    assert_int_equal (kiwi_text_line_start (T (t), 3), 8);
    assert_int_equal (kiwi_text_line_start (T (t), 4), strlen (t));
    assert_int_equal (kiwi_text_line_start (T (t), 99), strlen (t));
}

static void
test_number_under_a_cap (void **state)
{
    kiwi_buf b = KIWI_BUF_INIT;
    const char *t = "one\ntwo\nthree";
    assert_int_equal (kiwi_text_number (&b, T (t), 2, 99, 1000), 3);
    assert_string_equal (kiwi_buf_str (&b), "     2\ttwo\n     3\tthree\n");
    kiwi_buf_reset (&b);
    /* room for one line only: it stops before the cap, whole lines */
    assert_int_equal (kiwi_text_number (&b, T (t), 1, 3, 16), 1);
    assert_string_equal (kiwi_buf_str (&b), "     1\tone\n");
    kiwi_buf_reset (&b);
    /* a long line is cut with a note */
    char *longl = malloc (5001);
    memset (longl, 'x', 5000);
    longl[5000] = '\0';
    assert_int_equal (kiwi_text_number (&b, longl, 5000, 1, 1, 1 << 20), 1);
    assert_non_null (strstr (kiwi_buf_str (&b), "[... 3000 more bytes of this line]"));
    assert_true (b.len < 2100);
    free (longl);
    kiwi_buf_free (&b);
}

static void
test_find_all (void **state)
{
    size_t offs[2];
    assert_int_equal (kiwi_text_find_all (T ("aaaa"), "aa", 2, offs, 2), 2); /* not overlapping */
    assert_int_equal (offs[0], 0);
    assert_int_equal (offs[1], 2);
    assert_int_equal (kiwi_text_find_all (T ("x.x.x.x"), "x", 1, offs, 2), 4); /* all counted, 2 kept */
    assert_int_equal (kiwi_text_find_all (T ("abc"), "", 0, NULL, 0), 0);
    assert_int_equal (kiwi_text_find_all (T ("abc"), "abcd", 4, offs, 2), 0);
}

static void
test_nearest (void **state)
{
    const char *t = "import os\n\ndef total(xs):\n    return sum(xs)\n\nprint(total([1, 2]))\n";
    size_t lines[3];
    /* the probe's indentation differs: the line is still the nearest */
    assert_true (kiwi_text_nearest (T (t), "  return sum(xs)\nmore", lines, 1) == 1);
    assert_int_equal (lines[0], 4);
    /* several, in the file's order */
    size_t n = kiwi_text_nearest (T (t), "total(xs)", lines, 3);
    assert_true (n >= 2);
    for (size_t i = 1; i < n; i++)
        assert_true (lines[i - 1] < lines[i]);
    /* nothing shared, or a probe too short to compare */
    assert_int_equal (kiwi_text_nearest (T (t), "@@@@", lines, 3), 0);
    assert_int_equal (kiwi_text_nearest (T (t), "x", lines, 3), 0);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_lines),
        cmocka_unit_test (test_number_under_a_cap),
        cmocka_unit_test (test_find_all),
        cmocka_unit_test (test_nearest),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
