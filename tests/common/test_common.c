/*
 * test_common.c: the small tools of common/ that everything shares: the
 * growable buffer (buf.h: appends, formatting, its limit, in-place writes,
 * handing the data over), the list splitter and lookups (strv.h), the two clocks
 * (clock.h) and the command-line parser (opts.h) in kiwi-worker's ways.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/opts.h"
#include "common/strv.h"

static void
test_buf_append (void **state)
{
    (void) state;
    cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
    assert_string_equal (kiwi_buf_str (&b), "");
    assert_int_equal (kiwi_buf_append_str (&b, "abc", NULL), 0);
    assert_int_equal (kiwi_buf_appendf (&b, NULL, "-%d-%s", 42, "x"), 0);
    assert_int_equal (kiwi_buf_append (&b, NULL, 0, NULL), 0);
    assert_string_equal (b.data, "abc-42-x");
    assert_int_equal (b.len, 8);
    kiwi_buf_reset (&b);
    assert_string_equal (kiwi_buf_str (&b), "");
    for (int i = 0; i < 1000; i++)
        assert_int_equal (kiwi_buf_appendf (&b, NULL, "%04d", i), 0);
    assert_int_equal (b.len, 4000);
    assert_int_equal (b.data[4000], '\0');
    assert_memory_equal (b.data + 3996, "0999", 4);
    size_t len = 0;
    char *d = kiwi_buf_steal (&b, &len);
    assert_int_equal (len, 4000);
    assert_null (b.data);
    free (d);
    assert_null (kiwi_buf_steal (&b, &len));
    assert_int_equal (len, 0);
}

static void
test_buf_limit (void **state)
{
    (void) state;
    kiwi_buf b;
    kiwi_buf_init (&b, 10);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_buf_append (&b, "0123456789", 10, &err), 0);
    assert_int_equal (kiwi_buf_append (&b, "x", 1, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "limit of 10"));
    kiwi_error_free (&err);
    assert_int_equal (b.len, 10); /* unchanged */
    assert_string_equal (b.data, "0123456789");
    assert_true (b.cap <= 11);     /* never more than the limit can use */
    assert_int_equal (kiwi_buf_appendf (&b, &err, "%s", "y"), -1);
    kiwi_error_free (&err);
    kiwi_buf_free (&b);
    assert_int_equal (b.max, 10); /* the limit stays for reuse */
    kiwi_buf_free (&b);
}

static void
test_buf_in_place (void **state)
{
    (void) state;
    cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
    assert_int_equal (kiwi_buf_reserve (&b, 0, NULL), 0); /* an empty string, allocated */
    assert_non_null (b.data);
    assert_string_equal (b.data, "");
    assert_int_equal (kiwi_buf_reserve (&b, 5, NULL), 0);
    assert_true (b.cap - b.len >= 6);
    memcpy (b.data + b.len, "hello", 5);
    b.len += 5;
    assert_int_equal (kiwi_buf_reserve (&b, 0, NULL), 0); /* terminates */
    assert_string_equal (b.data, "hello");
}

static void
test_split_list (void **state)
{
    (void) state;
    cleanup_strv kiwi_strv v = KIWI_STRV_INIT;
    assert_int_equal (kiwi_strv_split_list (&v, " a, b ,,\tc d ,", NULL, NULL), 3);
    assert_int_equal (v.n, 3);
    assert_string_equal (v.v[0], "a");
    assert_string_equal (v.v[1], "b");
    assert_string_equal (v.v[2], "c d");
    assert_null (v.v[3]);
    assert_int_equal (kiwi_strv_split_list (&v, "x y,\tz", ", \t", NULL), 3);
    assert_int_equal (v.n, 6);
    assert_string_equal (v.v[3], "x");
    assert_string_equal (v.v[5], "z");
    assert_int_equal (kiwi_strv_split_list (&v, NULL, NULL, NULL), 0);
    assert_int_equal (kiwi_strv_split_list (&v, " , ,", NULL, NULL), 0);
    assert_int_equal (v.n, 6);
}

static void
test_listed (void **state)
{
    (void) state;
    static const char *const names[] = { "mvn", "mvnw", NULL };
    assert_true (kiwi_str_listed (names, "mvnw"));
    assert_false (kiwi_str_listed (names, "mvn2"));
    assert_false (kiwi_str_listed (names, "mv"));
    assert_false (kiwi_str_listed (NULL, "mvn"));
    cleanup_strv kiwi_strv v = KIWI_STRV_INIT;
    assert_false (kiwi_strv_contains (&v, "a")); /* an empty vector */
    assert_int_equal (kiwi_strv_add (&v, "a"), 0);
    assert_int_equal (kiwi_strv_add (&v, "b c"), 0);
    assert_true (kiwi_strv_contains (&v, "b c"));
    assert_false (kiwi_strv_contains (&v, "b"));
}

static void
test_clocks (void **state)
{
    (void) state;
    int64_t w = kiwi_wall_ms (), m = kiwi_mono_ms ();
    assert_true (w > (int64_t) 1700000000 * 1000); /* after November 2023 */
    assert_true (m >= 0);
    assert_true (kiwi_mono_ms () >= m);
}

/* argv from a NULL-terminated list, "prog" first. */
static int
argv_of (char **argv, const char *first, va_list ap)
{
    int argc = 0;
    argv[argc++] = (char *) "prog";
    for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
        argv[argc++] = (char *) a;
    argv[argc] = NULL;
    return argc;
}

static int
parse (const kiwi_opts_spec *spec, kiwi_args *a, kiwi_error_t *err, const char *first, ...)
{
    static char *argv[32];
    va_list ap;
    va_start (ap, first);
    int argc = argv_of (argv, first, ap);
    va_end (ap);
    memset (a, 0, sizeof *a);
    return kiwi_opts_parse (spec, argc, argv, 1, a, err);
}

static const kiwi_opt worker_like[] = {
    { KIWI_OPT_SETTING (KIWI_SETTING_SANDBOX), "sandbox-runtime", 0, "NAME", NULL },
    { 0, NULL, 0, NULL, NULL },
};

static void
test_opts_worker_ways (void **state)
{
    (void) state;
    kiwi_opts_spec spec = { .opts = worker_like, .settings = KIWI_PROGRAM_WORKER, .help_hint = "--help",
                            .flags = KIWI_OPTS_STOP | KIWI_OPTS_ONE_DASH | KIWI_OPTS_BOOL_ALONE
                                     | KIWI_OPTS_QUOTE_ARG };
    kiwi_args a;
    kiwi_error_t err = NULL;
    assert_int_equal (parse (&spec, &a, &err, "-sandbox-runtime", "docker", "--slots=3", "--allow-local-repos",
                             "--brokers", "b:1", "rest", "--slots", "9", NULL),
                      0);
    assert_string_equal (a.settings[KIWI_SETTING_SANDBOX], "docker");
    assert_string_equal (a.settings[KIWI_SETTING_SLOTS], "3");
    assert_string_equal (a.settings[KIWI_SETTING_ALLOW_LOCAL_REPOS], "true"); /* an option follows */
    assert_string_equal (a.settings[KIWI_SETTING_BROKERS], "b:1");
    assert_int_equal (a.end, 7); /* "rest": nothing from there is read */
    kiwi_args_clear (&a);
    assert_int_equal (parse (&spec, &a, &err, "--allow-local-repos", NULL), 0);
    assert_string_equal (a.settings[KIWI_SETTING_ALLOW_LOCAL_REPOS], "true");
    kiwi_args_clear (&a);
    assert_int_equal (parse (&spec, &a, &err, "--", "x", NULL), 0);
    assert_int_equal (a.end, 2);
    kiwi_args_clear (&a);
    assert_int_equal (parse (&spec, &a, &err, "--nope=1", NULL), -1);
    assert_string_equal (kiwi_error_msg (err), "unknown option `--nope=1` (see --help)");
    kiwi_error_free (&err);
    kiwi_args_clear (&a);
    assert_int_equal (parse (&spec, &a, &err, "-slots", NULL), -1);
    assert_string_equal (kiwi_error_msg (err), "option `-slots` needs a value");
    kiwi_error_free (&err);
    kiwi_args_clear (&a);
}

static void
test_opts_keep (void **state)
{
    (void) state;
    static const kiwi_opt modes[] = {
        { 1, "help", 'h', NULL, NULL },
        { 2, "once", 0, "FILE", NULL },
        { 0, NULL, 0, NULL, NULL },
    };
    kiwi_opts_spec spec = { .opts = modes, .help_hint = "--help", .flags = KIWI_OPTS_KEEP };
    kiwi_args a;
    kiwi_error_t err = NULL;
    assert_int_equal (parse (&spec, &a, &err, "--slots", "2", "--once", "t.json", "-hx", "--", "-h", "--help=1",
                             "--once", NULL),
                      0);
    assert_int_equal (a.n_opts, 2);
    assert_int_equal (a.opts[0].id, 2);
    assert_string_equal (a.opts[0].value, "t.json");
    assert_int_equal (a.opts[1].id, 1);
    const char *kept[] = { "--slots", "2", "-hx", "--", "--help=1", "--once" };
    assert_int_equal (a.n_pos, 6);
    for (size_t i = 0; i < 6; i++)
        assert_string_equal (a.pos[i], kept[i]);
    kiwi_args_clear (&a);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_buf_append),      cmocka_unit_test (test_buf_limit),
        cmocka_unit_test (test_buf_in_place),    cmocka_unit_test (test_split_list), cmocka_unit_test (test_listed),
        cmocka_unit_test (test_clocks),          cmocka_unit_test (test_opts_worker_ways),
        cmocka_unit_test (test_opts_keep),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
