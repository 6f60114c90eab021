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

#include "worker/task/wspath.h"

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
    int cut = 0;
    kiwi_ws_search_opts so = { .pattern = "b = 3", .max = 10 };
    assert_int_equal (kiwi_ws_search (root, "", &so, &hits, &cut, &err), 0);
    assert_int_equal (hits.n, 1);
    assert_string_equal (hits.v[0], "src/app.js:2:const b = 3;");
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
    int cut = 0;
    kiwi_ws_search_opts so = { .pattern = "TOP SECRET", .max = 10 };
    assert_int_equal (kiwi_ws_search (root, "", &so, &hits, &cut, &err), 0);
    assert_int_equal (hits.n, 0);
    kiwi_strv_free (&hits);
}

/* Every spelling of a path into git metadata is refused, at any depth, in
 * any case, whatever `.`, `//` and `..` surround it; nothing is written. */
static void
test_git_metadata_refused (void **state)
{
    static const char *const paths[] = {
        ".git/config",     "./.git/config",   ".//.git/config",  "a/../.git/config", "sub/.git/hooks/x",
        ".GIT/config",     ".Git/config",     ".git/",           ".git",             ".git//config",
        "./.git",          "x/./.git/HEAD",   "sub/.GIT",        ".git./config",     ".git /config",
        "src/.git",        "src//.git/config", "./././.git/info/attributes",
    };
    char p[256];
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        kiwi_error_t err = NULL;
        int rc = kiwi_ws_write (root, paths[i], "[core]\n\tfsmonitor = touch /tmp/kiwi-canary\n", 40, &err);
        if (rc != -1)
            fail_msg ("`%s` was written", paths[i]);
        /* refused for what it is: `..` or git metadata */
        if (strstr (kiwi_error_msg (err), ".git") == NULL && strstr (kiwi_error_msg (err), "`..`") == NULL)
            fail_msg ("`%s`: %s", paths[i], kiwi_error_msg (err));
        kiwi_error_free (&err);
        assert_int_equal (kiwi_ws_check (paths[i], &err), -1);
        kiwi_error_free (&err);
        char *data = NULL;
        size_t len = 0;
        int trunc = 0;
        assert_int_equal (kiwi_ws_read (root, paths[i], 0, 100, &data, &len, &trunc, &err), -1);
        kiwi_error_free (&err);
        assert_int_equal (kiwi_ws_edit (root, paths[i], "a", "b", &err), -1);
        kiwi_error_free (&err);
    }
    /* the root's .git holds nothing new; no sub/.git or .GIT appeared */
    snprintf (p, sizeof p, "%s/.git/config", root);
    assert_int_not_equal (access (p, F_OK), 0);
    snprintf (p, sizeof p, "%s/sub", root);
    assert_int_not_equal (access (p, F_OK), 0);
    snprintf (p, sizeof p, "%s/.GIT", root);
    assert_int_not_equal (access (p, F_OK), 0);
    /* listing and searching skip .git entries at any depth */
    snprintf (p, sizeof p, "%s/src/.Git", root);
    mkdir (p, 0755);
    kiwi_error_t err = NULL;
    kiwi_strv l = KIWI_STRV_INIT;
    assert_int_equal (kiwi_ws_list (root, "", 4, 100, &l, &err), 0);
    for (size_t i = 0; i < l.n; i++)
        if (strcasestr (l.v[i], ".git") != NULL)
            fail_msg ("listed `%s`", l.v[i]);
    kiwi_strv_free (&l);
    assert_int_equal (kiwi_ws_list (root, "src/.Git", 4, 100, &l, &err), -1);
    kiwi_error_free (&err);
    rmdir (p);
}

/* Normalisation: `.` and `//` collapse, trailing slashes go; what is left
 * must name something; absolute, `..` and NUL-free checks hold. */
static void
test_normalise (void **state)
{
    static const struct {
        const char *in, *out;
    } ok[] = {
        { "src/app.js", "src/app.js" },   { "./src/app.js", "src/app.js" }, { "src//app.js", "src/app.js" },
        { "src/./app.js", "src/app.js" }, { "src/", "src" },                { ".gitignore", ".gitignore" },
        { "a/.github/x", "a/.github/x" }, { ".git-blame-ignore", ".git-blame-ignore" },
        { "x.git", "x.git" },             { "..foo", "..foo" },
    };
    char out[KIWI_WS_PATH_MAX + 1];
    kiwi_error_t err = NULL;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (kiwi_ws_normalise (ok[i].in, 0, out, sizeof out, &err) < 0)
            fail_msg ("`%s`: %s", ok[i].in, kiwi_error_msg (err));
        assert_string_equal (out, ok[i].out);
    }
    static const char *const bad[] = { "", ".", "./", "//", "/etc/passwd", "..", "a/..", "../x", "a/../../x", NULL };
    for (size_t i = 0; bad[i]; i++) {
        if (kiwi_ws_normalise (bad[i], 0, out, sizeof out, &err) == 0)
            fail_msg ("`%s` accepted as `%s`", bad[i], out);
        kiwi_error_free (&err);
    }
    /* the root, where a directory is wanted */
    assert_int_equal (kiwi_ws_normalise (".", 1, out, sizeof out, &err), 0);
    assert_string_equal (out, "");
    assert_int_equal (kiwi_ws_normalise ("./", 1, out, sizeof out, &err), 0);
    assert_string_equal (out, "");
    expect_refused (kiwi_ws_normalise ("./.git", 1, out, sizeof out, &err), &err, ".git");
    expect_refused (kiwi_ws_normalise ("/", 1, out, sizeof out, &err), &err, "absolute");
    /* a too long path or component */
    char *lng = malloc (KIWI_WS_PATH_MAX + 10);
    memset (lng, 'a', KIWI_WS_PATH_MAX + 9);
    lng[KIWI_WS_PATH_MAX + 9] = '\0';
    expect_refused (kiwi_ws_normalise (lng, 0, out, sizeof out, &err), &err, "too long");
    lng[300] = '\0';
    expect_refused (kiwi_ws_normalise (lng, 0, out, sizeof out, &err), &err, "too long");
    free (lng);
    /* the tools take the normalised path */
    assert_int_equal (kiwi_ws_write (root, ".//new2/./f.txt", "x", 1, &err), 0);
    char p[256];
    snprintf (p, sizeof p, "%s/new2/f.txt", root);
    assert_int_equal (access (p, F_OK), 0);
    kiwi_strv l = KIWI_STRV_INIT;
    assert_int_equal (kiwi_ws_list (root, "./new2/", 2, 10, &l, &err), 0);
    assert_true (kiwi_strv_contains (&l, "new2/f.txt"));
    kiwi_strv_free (&l);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_reads_and_writes_inside),
        cmocka_unit_test (test_escapes_refused),
        cmocka_unit_test (test_git_metadata_refused),
        cmocka_unit_test (test_normalise),
    };
    return cmocka_run_group_tests_name ("wspath", tests, setup, teardown);
}
