/*
 * test_resolv.c: Phase A's resolver file under gVisor (sandbox/docker/resolv.h):
 * the host's nameservers without loopback ones, search and options kept,
 * everything else dropped, written atomically with mode 0644.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/docker/resolv.h"

static char dir[] = "/tmp/kiwi-resolv-XXXXXX";

static int
setup (void **state)
{
    (void) state;
    return mkdtemp (dir) ? 0 : -1;
}

static int
teardown (void **state)
{
    (void) state;
    char cmd[128];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system (cmd) == 0 ? 0 : -1;
}

/* Writes `text` as the host file, filters it; the output in `out`. */
static int
filter (const char *text, char *out, size_t cap)
{
    char src[128], dst[128];
    snprintf (src, sizeof src, "%s/host.conf", dir);
    snprintf (dst, sizeof dst, "%s/" KIWI_RESOLV_NAME, dir);
    FILE *f = fopen (src, "w");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
    kiwi_error_t err = NULL;
    int n = kiwi_resolv_write_upstream (src, dst, &err);
    assert_null (err);
    struct stat st;
    assert_int_equal (stat (dst, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0644);
    f = fopen (dst, "r");
    assert_non_null (f);
    size_t len = fread (out, 1, cap - 1, f);
    out[len] = '\0';
    fclose (f);
    return n;
}

static void
test_keeps_upstream_drops_loopback (void **state)
{
    (void) state;
    char out[1024];
    int n = filter ("# generated\nnameserver 127.0.0.53\nnameserver 10.255.255.53\nnameserver ::1\n"
                    "nameserver\t192.0.2.53\nsearch example.internal\noptions edns0 trust-ad\n"
                    "domain example.internal\nsortlist 10.0.0.0\n",
                    out, sizeof out);
    assert_int_equal (n, 2);
    assert_non_null (strstr (out, "nameserver 10.255.255.53\n"));
    assert_non_null (strstr (out, "nameserver 192.0.2.53\n"));
    assert_null (strstr (out, "127.0.0.53"));
    assert_null (strstr (out, "::1"));
    assert_non_null (strstr (out, "search example.internal\n"));
    assert_non_null (strstr (out, "options edns0 trust-ad\n"));
    assert_null (strstr (out, "domain "));
    assert_null (strstr (out, "sortlist"));
}

static void
test_only_loopback_gives_none (void **state)
{
    (void) state;
    char out[1024];
    assert_int_equal (filter ("nameserver 127.0.0.53\nnameservers 10.0.0.1\n", out, sizeof out), 0);
    assert_null (strstr (out, "nameserver "));
}

static void
test_missing_host_file_is_an_error (void **state)
{
    (void) state;
    char dst[128];
    snprintf (dst, sizeof dst, "%s/x.conf", dir);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_resolv_write_upstream ("/nonexistent/resolv.conf", dst, &err), -1);
    assert_non_null (err);
    kiwi_error_free (&err);
    assert_int_equal (access (dst, F_OK), -1);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_keeps_upstream_drops_loopback),
        cmocka_unit_test (test_only_loopback_gives_none),
        cmocka_unit_test (test_missing_host_file_is_an_error),
    };
    return cmocka_run_group_tests (tests, setup, teardown);
}
