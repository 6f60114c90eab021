/*
 * test_image_gc.c: the record of pulled images and the collection's
 * selection (sandbox/docker/image-gc.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/docker/image-gc.h"

#define DAY 86400
#define NOW 1800000000

static kiwi_image_gc_policy
policy (void)
{
    return (kiwi_image_gc_policy) { .now_s = NOW, .idle_s = 7 * DAY, .grace_s = 900, .used_pct = -1,
                                    .disk_high = 85, .disk_low = 75 };
}

/* By age: older than the bound goes, unless a container is of it or the
 * catalogue names it. */
static void
test_select_age (void **state)
{
    (void) state;
    kiwi_image_gc_item it[] = {
        { .ref = "old", .last_used_s = NOW - 8 * DAY },
        { .ref = "young", .last_used_s = NOW - 6 * DAY },
        { .ref = "old-in-use", .last_used_s = NOW - 30 * DAY, .in_use = true },
        { .ref = "old-catalogue", .last_used_s = NOW - 30 * DAY, .catalogue = true },
        { .ref = "at-bound", .last_used_s = NOW - 7 * DAY },
    };
    kiwi_image_gc_policy p = policy ();
    assert_int_equal (kiwi_image_gc_select (it, 5, &p), 1);
    assert_true (it[0].remove);
    assert_false (it[0].by_watermark);
    assert_false (it[1].remove);
    assert_false (it[2].remove);
    assert_false (it[3].remove);
    assert_false (it[4].remove);
    /* no bound by age: nothing by age */
    p.idle_s = 0;
    assert_int_equal (kiwi_image_gc_select (it, 5, &p), 0);
    assert_false (it[0].remove);
}

/* Above the watermark: least recently used first, until the sizes removed
 * bring it to the low mark; in use, catalogue and just used stay. */
static void
test_select_watermark (void **state)
{
    (void) state;
    const uint64_t G = 1ull << 30;
    kiwi_image_gc_item it[] = {
        { .ref = "b", .last_used_s = NOW - 3 * DAY, .size = 5 * G },
        { .ref = "a", .last_used_s = NOW - 4 * DAY, .size = 5 * G },
        { .ref = "in-use", .last_used_s = NOW - 9 * DAY, .size = 50 * G, .in_use = true },
        { .ref = "catalogue", .last_used_s = NOW - 9 * DAY, .size = 50 * G, .catalogue = true },
        { .ref = "c", .last_used_s = NOW - 2 * DAY, .size = 5 * G },
        { .ref = "just-pulled", .last_used_s = NOW - 60, .size = 50 * G },
    };
    kiwi_image_gc_policy p = policy ();
    p.total_bytes = 100 * G;
    p.used_pct = 90; /* 5 points to go below 85, 15 to reach 75: a, b and c */
    assert_int_equal (kiwi_image_gc_select (it, 6, &p), 3);
    assert_true (it[0].remove && it[0].by_watermark);
    assert_true (it[1].remove && it[1].by_watermark);
    assert_true (it[4].remove && it[4].by_watermark);
    assert_false (it[2].remove);
    assert_false (it[3].remove);
    assert_false (it[5].remove);
    /* 80%: below the high mark, nothing by the watermark */
    p.used_pct = 80;
    assert_int_equal (kiwi_image_gc_select (it, 6, &p), 0);
    /* 86% down to 80: a (81%), then b (76%) */
    p.used_pct = 86;
    p.disk_low = 80;
    assert_int_equal (kiwi_image_gc_select (it, 6, &p), 2);
    assert_true (it[1].remove);
    assert_true (it[0].remove);
    assert_false (it[4].remove);
    /* unknown usage: no watermark */
    p.used_pct = -1;
    assert_int_equal (kiwi_image_gc_select (it, 6, &p), 0);
    /* what went by age counts toward the watermark */
    p.used_pct = 86;
    p.idle_s = 3 * DAY + 1;
    assert_int_equal (kiwi_image_gc_select (it, 6, &p), 2);
    assert_true (it[1].remove && !it[1].by_watermark);
    assert_true (it[0].remove && it[0].by_watermark);
}

/* <dir>/<n as 64 digits> holding `text`, its path into path. */
static void
put_file (char *path, size_t cap, const char *dir, int n, const char *text)
{
    snprintf (path, cap, "%s/%064d", dir, n);
    FILE *f = fopen (path, "w");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
}

/* The record: made by a pull that brought the reference, kept up to date
 * by a later use, never made for a reference that was already there. */
static void
test_record (void **state)
{
    (void) state;
    char dir[] = "/tmp/kiwi-image-gc-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char sub[300];
    snprintf (sub, sizeof sub, "%s/images", dir);
    kiwi_error_t err = NULL;
    /* not Kiwi's: nothing recorded, not even the directory */
    assert_int_equal (kiwi_image_record_note (sub, "operator/own:1", "sha256:aaaa", false, &err), 0);
    kiwi_image_record *r = NULL;
    size_t n = 9;
    assert_int_equal (kiwi_image_records_read (sub, &r, &n, &err), 0);
    assert_int_equal (n, 0);
    kiwi_image_records_free (r, n);
    /* pulled: recorded; used again with a new Id (the tag moved): both */
    assert_int_equal (kiwi_image_record_note (sub, "127.0.0.1:5000/kiwi/x:1", "sha256:1111", true, &err), 0);
    assert_int_equal (kiwi_image_record_note (sub, "127.0.0.1:5000/kiwi/x:1", "sha256:2222", false, &err), 0);
    assert_int_equal (kiwi_image_record_note (sub, "127.0.0.1:5000/kiwi/x:1", "sha256:2222", false, &err), 0);
    assert_int_equal (kiwi_image_record_note (sub, "operator/own:1", "sha256:aaaa", false, &err), 0);
    /* a stray file is not a record, nor one whose reference or Id a pull
     * would not write */
    char stray[400], odd[400], odd_id[400];
    put_file (stray, sizeof stray, sub, 0, "not json");
    put_file (odd, sizeof odd, sub, 1, "{\"ref\":\"x/../../containers/y?force=1\",\"ids\":[]}");
    put_file (odd_id, sizeof odd_id, sub, 2, "{\"ref\":\"x:1\",\"ids\":[\"sha256:ab/../x\"]}");
    assert_int_equal (kiwi_image_records_read (sub, &r, &n, &err), 0);
    assert_int_equal (n, 1);
    assert_string_equal (r[0].ref, "127.0.0.1:5000/kiwi/x:1");
    assert_int_equal (r[0].ids.n, 2);
    assert_string_equal (r[0].ids.v[0], "sha256:1111");
    assert_string_equal (r[0].ids.v[1], "sha256:2222");
    assert_true (r[0].last_used_s > 0);
    unlink (r[0].file);
    kiwi_image_records_free (r, n);
    unlink (stray);
    unlink (odd);
    unlink (odd_id);
    rmdir (sub);
    rmdir (dir);
    /* a missing directory has no records */
    assert_int_equal (kiwi_image_records_read (sub, &r, &n, &err), 0);
    assert_int_equal (n, 0);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_select_age),
        cmocka_unit_test (test_select_watermark),
        cmocka_unit_test (test_record),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
