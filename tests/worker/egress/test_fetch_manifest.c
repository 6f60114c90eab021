/*
 * test_fetch_manifest.c: one install's fetch manifest from the fetch
 * digest's log (worker/egress/fetch-manifest.h): only the sandbox's
 * address in its window, across a rotation; host and path split; the
 * counts; fetched.json written whole with the digest the event carries;
 * a line out of shape skipped.
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

#include "common/sha256.h"
#include "worker/egress/fetch-manifest.h"

static char dir[64], log_path[128];

static int
setup (void **state)
{
    (void) state;
    snprintf (dir, sizeof dir, "/tmp/kiwi-fetch-manifest.XXXXXX");
    assert_non_null (mkdtemp (dir));
    snprintf (log_path, sizeof log_path, "%s/fetch.log", dir);
    return 0;
}

static int
teardown (void **state)
{
    (void) state;
    char cmd[256];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal (system (cmd), 0);
    return 0;
}

static void
append (const char *path, const char *text)
{
    FILE *f = fopen (path, "a");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
}

#define SHA_A "a591a6d40bf420404a011733cfb7b190d62c65bf0bcda32b57b277d9ad9f146e"
#define SHA_B "0000000000000000000000000000000000000000000000000000000000000001"

static void
test_read_and_write (void **state)
{
    (void) state;
    append (log_path, "1000.000 10.9.0.2 GET 200 5 " SHA_A " https://early/\n"); /* before the mark */
    kiwi_egress_log_pos mark = kiwi_egress_log_mark (log_path);
    append (log_path,
            "1999.000 10.9.0.2 GET 200 5 " SHA_A " https://before-window/\n"            /* another container's */
            "2000.500 10.9.0.2 GET 200 11 " SHA_A " https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz\n"
            "2001.000 10.9.0.3 GET 200 9 " SHA_B " https://registry.npmjs.org/other\n"  /* another sandbox */
            "2001.500 10.9.0.2 HEAD 200 0 - https://pypi.org/simple/six/\n"
            "not a line of the log\n"
            "2002.000 10.9.0.2 GET 404 20 " SHA_B " https://pypi.org/simple/nope/\n"
            "2002.500 10.9.0.2 GET 200 7 cut http://deb.example:8080/pool/x.deb?a=b\n");
    /* rotated: the rest of the marked file is in fetch.log.0 */
    char old[192];
    snprintf (old, sizeof old, "%s.0", log_path);
    assert_int_equal (rename (log_path, old), 0);
    append (log_path, "2003.000 10.9.0.2 GET 200 3 " SHA_B " https://files.pythonhosted.org/p/six.whl\n"
                      "2099.000 10.9.0.2 GET 200 3 " SHA_B " https://after-window/\n");
    kiwi_fetch_manifest m;
    kiwi_error_t err = NULL;
    kiwi_egress_window w = { .since_ms = 2000000, .until_ms = 2010000 };
    assert_int_equal (kiwi_fetch_manifest_read (log_path, mark, "10.9.0.2", w, &m, &err), 0);
    assert_int_equal (m.requests, 5);
    assert_int_equal (m.bytes, 11 + 0 + 20 + 7 + 3);
    assert_int_equal (m.files, 2); /* the 200s with a digest */
    assert_int_equal (m.cut, 1);
    assert_false (m.incomplete);
    assert_int_equal (json_array_size (m.fetched), 5);
    json_t *e0 = json_array_get (m.fetched, 0);
    assert_string_equal (json_string_value (json_object_get (e0, "host")), "registry.npmjs.org");
    assert_string_equal (json_string_value (json_object_get (e0, "path")), "/left-pad/-/left-pad-1.3.0.tgz");
    assert_string_equal (json_string_value (json_object_get (e0, "sha256")), SHA_A);
    assert_int_equal (json_integer_value (json_object_get (e0, "size")), 11);
    json_t *e1 = json_array_get (m.fetched, 1);
    assert_null (json_object_get (e1, "sha256"));
    assert_string_equal (json_string_value (json_object_get (e1, "method")), "HEAD");
    json_t *e3 = json_array_get (m.fetched, 3);
    assert_string_equal (json_string_value (json_object_get (e3, "host")), "deb.example:8080");
    assert_string_equal (json_string_value (json_object_get (e3, "path")), "/pool/x.deb?a=b");
    assert_true (json_is_true (json_object_get (e3, "cut")));
    assert_null (json_object_get (e3, "sha256"));

    char path[192], hex[65];
    snprintf (path, sizeof path, "%s/fetched.json", dir);
    assert_int_equal (kiwi_fetch_manifest_write (&m, path, hex, &err), 0);
    /* the digest is the file's */
    FILE *f = fopen (path, "r");
    char buf[8192];
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    fclose (f);
    buf[n] = '\0';
    char want[65];
    kiwi_sha256_hex (buf, want);
    assert_string_equal (hex, want);
    json_error_t je;
    json_t *doc = json_loads (buf, 0, &je);
    assert_non_null (doc);
    assert_int_equal (json_integer_value (json_object_get (doc, "version")), 1);
    assert_int_equal (json_integer_value (json_object_get (doc, "files")), 2);
    assert_true (json_equal (json_object_get (doc, "fetched"), m.fetched));
    json_decref (doc);

    json_t *sum = kiwi_fetch_manifest_summary (&m, hex);
    assert_string_equal (json_string_value (json_object_get (sum, "manifest")), "fetched.json");
    assert_string_equal (json_string_value (json_object_get (sum, "sha256")), hex);
    assert_int_equal (json_integer_value (json_object_get (sum, "cut")), 1);
    assert_null (json_object_get (sum, "incomplete"));
    json_decref (sum);
    /* a failed install keeps no file: the summary says so */
    sum = kiwi_fetch_manifest_summary (&m, NULL);
    assert_true (json_is_null (json_object_get (sum, "manifest")));
    assert_true (json_is_null (json_object_get (sum, "sha256")));
    json_decref (sum);
    kiwi_fetch_manifest_clear (&m);
}

/* No log yet (no response went through the proxy): an empty manifest. */
static void
test_missing_log (void **state)
{
    (void) state;
    kiwi_egress_log_pos mark = kiwi_egress_log_mark (log_path);
    kiwi_fetch_manifest m;
    kiwi_error_t err = NULL;
    kiwi_egress_window w = { 0 };
    assert_int_equal (kiwi_fetch_manifest_read (log_path, mark, "10.9.0.2", w, &m, &err), 0);
    assert_int_equal (m.requests, 0);
    assert_int_equal (json_array_size (m.fetched), 0);
    kiwi_fetch_manifest_clear (&m);
}

/* Past the bound: counted, not listed. */
static void
test_bound (void **state)
{
    (void) state;
    kiwi_egress_log_pos mark = kiwi_egress_log_mark (log_path);
    FILE *f = fopen (log_path, "a");
    for (int i = 0; i < KIWI_FETCH_MANIFEST_MAX + 3; i++)
        fprintf (f, "2000.000 10.9.0.2 GET 200 1 " SHA_A " https://r/p%d\n", i);
    fclose (f);
    kiwi_fetch_manifest m;
    kiwi_error_t err = NULL;
    kiwi_egress_window w = { 0 };
    assert_int_equal (kiwi_fetch_manifest_read (log_path, mark, "10.9.0.2", w, &m, &err), 0);
    assert_int_equal (m.requests, KIWI_FETCH_MANIFEST_MAX + 3);
    assert_int_equal (json_array_size (m.fetched), KIWI_FETCH_MANIFEST_MAX);
    assert_int_equal (m.left_out, 3);
    json_t *sum = kiwi_fetch_manifest_summary (&m, NULL);
    assert_int_equal (json_integer_value (json_object_get (sum, "left_out")), 3);
    json_decref (sum);
    kiwi_fetch_manifest_clear (&m);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_read_and_write, setup, teardown),
        cmocka_unit_test_setup_teardown (test_missing_log, setup, teardown),
        cmocka_unit_test_setup_teardown (test_bound, setup, teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
