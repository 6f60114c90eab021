/*
 * test_wspath.c: paths the model gives stay inside the workspace: no
 * absolute paths, no "..", no symlink escape, no .git.
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
#include <sys/stat.h>
#include <unistd.h>

#include "wspath.h"

static char root[64], outside[64];

static int
setup (void **state)
{
    snprintf (root, sizeof root, "/tmp/kiwi-ws-XXXXXX");
    snprintf (outside, sizeof outside, "/tmp/kiwi-out-XXXXXX");
    if (mkdtemp (root) == NULL || mkdtemp (outside) == NULL)
        return -1;
    char p[256];
    snprintf (p, sizeof p, "%s/secret.txt", outside);
    FILE *f = fopen (p, "w");
    fputs ("TOP SECRET\n", f);
    fclose (f);
    snprintf (p, sizeof p, "%s/src", root);
    mkdir (p, 0755);
    snprintf (p, sizeof p, "%s/src/app.js", root);
    f = fopen (p, "w");
    fputs ("const a = 1;\nconst b = 2;\n", f);
    fclose (f);
    snprintf (p, sizeof p, "%s/.git", root);
    mkdir (p, 0755);
    char target[256];
    snprintf (target, sizeof target, "%s/secret.txt", outside);
    snprintf (p, sizeof p, "%s/evil", root);
    symlink (target, p);
    snprintf (p, sizeof p, "%s/evildir", root);
    symlink (outside, p);
    return 0;
}

static int
teardown (void **state)
{
    char cmd[256];
    snprintf (cmd, sizeof cmd, "rm -rf %s %s", root, outside);
    return system (cmd);
}

static void
expect_refused (int rc, kiwi_error_t *err, const char *needle)
{
    assert_int_equal (rc, -1);
    if (strstr (kiwi_error_msg (*err), needle) == NULL)
        fail_msg ("error `%s` lacks `%s`", kiwi_error_msg (*err), needle);
    kiwi_error_free (err);
}

static void
test_reads_and_writes_inside (void **state)
{
    kiwi_error_t err = NULL;
    char *data = NULL;
    size_t len = 0;
    int trunc = 0;
    assert_int_equal (kiwi_ws_read (root, "src/app.js", 0, 1000, &data, &len, &trunc, &err), 0);
    assert_string_equal (data, "const a = 1;\nconst b = 2;\n");
    free (data);
    assert_int_equal (kiwi_ws_read (root, "src/app.js", 6, 5, &data, &len, &trunc, &err), 0);
    assert_string_equal (data, "a = 1");
    assert_true (trunc);
    free (data);
    assert_int_equal (kiwi_ws_edit (root, "src/app.js", "b = 2", "b = 3", &err), 0);
    expect_refused (kiwi_ws_edit (root, "src/app.js", "const", "let", &err), &err, "more than once");
    expect_refused (kiwi_ws_edit (root, "src/app.js", "zzz", "y", &err), &err, "not found");
    assert_int_equal (kiwi_ws_write (root, "new/dir/file.txt", "hi\n", 3, &err), 0);
    kiwi_strv hits = KIWI_STRV_INIT;
    assert_int_equal (kiwi_ws_search (root, "", "b = 3", 10, &hits, &err), 0);
    assert_int_equal (hits.n, 1);
    assert_string_equal (hits.v[0], "src/app.js:2: const b = 3;");
    kiwi_strv_free (&hits);
}

static void
test_escapes_refused (void **state)
{
    kiwi_error_t err = NULL;
    char *data = NULL;
    size_t len = 0;
    int trunc = 0;
    expect_refused (kiwi_ws_read (root, "/etc/passwd", 0, 100, &data, &len, &trunc, &err), &err, "absolute");
    expect_refused (kiwi_ws_read (root, "../x", 0, 100, &data, &len, &trunc, &err), &err, "`..`");
    expect_refused (kiwi_ws_read (root, "src/../../x", 0, 100, &data, &len, &trunc, &err), &err, "`..`");
    expect_refused (kiwi_ws_read (root, "evil", 0, 100, &data, &len, &trunc, &err), &err, "symlink");
    expect_refused (kiwi_ws_read (root, "evildir/secret.txt", 0, 100, &data, &len, &trunc, &err), &err, "symlink");
    expect_refused (kiwi_ws_write (root, "evil", "x", 1, &err), &err, "symlink");
    expect_refused (kiwi_ws_write (root, "evildir/planted", "x", 1, &err), &err, "symlink");
    expect_refused (kiwi_ws_write (root, ".git/config", "x", 1, &err), &err, ".git");
    expect_refused (kiwi_ws_write (root, "/tmp/abs", "x", 1, &err), &err, "absolute");
    /* nothing appeared outside, the secret is untouched */
    char p[256];
    snprintf (p, sizeof p, "%s/planted", outside);
    assert_int_not_equal (access (p, F_OK), 0);
    snprintf (p, sizeof p, "%s/secret.txt", outside);
    FILE *f = fopen (p, "r");
    char buf[64] = { 0 };
    fread (buf, 1, sizeof buf - 1, f);
    fclose (f);
    assert_string_equal (buf, "TOP SECRET\n");
    /* listing shows the links as links and never walks into them */
    kiwi_strv l = KIWI_STRV_INIT;
    assert_int_equal (kiwi_ws_list (root, "", 4, 100, &l, &err), 0);
    for (size_t i = 0; i < l.n; i++)
        assert_null (strstr (l.v[i], "secret"));
    assert_true (kiwi_strv_contains (&l, "evil -> (symlink)"));
    kiwi_strv_free (&l);
    kiwi_strv hits = KIWI_STRV_INIT;
    assert_int_equal (kiwi_ws_search (root, "", "TOP SECRET", 10, &hits, &err), 0);
    assert_int_equal (hits.n, 0);
    kiwi_strv_free (&hits);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_reads_and_writes_inside),
        cmocka_unit_test (test_escapes_refused),
    };
    return cmocka_run_group_tests_name ("wspath", tests, setup, teardown);
}
