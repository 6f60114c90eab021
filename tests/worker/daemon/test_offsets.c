/*
 * test_offsets.c: the commit rules of worker/daemon/offsets.h: only the leading
 * run of finished offsets is committed (one past its last), a gap holds
 * every later finished offset back until it finishes, partitions are
 * independent, a revoked partition's state is dropped (a late finish there
 * commits nothing, and the partition starts afresh when it comes back), and
 * a redelivered finished offset commits nothing twice.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "worker/daemon/offsets.h"

static void
add (kiwi_offsets *o, const char *topic, int32_t p, int64_t off)
{
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_offsets_add (o, topic, p, off, &err), 0);
    assert_null (err);
}

static void
test_contiguous_committed (void **state)
{
    (void) state;
    kiwi_offsets o = { 0 };
    int64_t c = -7;
    add (&o, "t", 0, 10);
    add (&o, "t", 0, 11);
    add (&o, "t", 0, 12);
    assert_true (kiwi_offsets_done (&o, "t", 0, 10, &c));
    assert_int_equal (c, 11);
    assert_true (kiwi_offsets_done (&o, "t", 0, 11, &c));
    assert_int_equal (c, 12);
    assert_int_equal (kiwi_offsets_pending (&o, "t", 0), 1);
    assert_true (kiwi_offsets_done (&o, "t", 0, 12, &c));
    assert_int_equal (c, 13);
    assert_int_equal (kiwi_offsets_pending (&o, "t", 0), 0);
    kiwi_offsets_clear (&o);
}

static void
test_gap_held (void **state)
{
    (void) state;
    kiwi_offsets o = { 0 };
    int64_t c = -7;
    for (int64_t off = 20; off < 25; off++)
        add (&o, "t", 3, off);
    /* 20 is slow: 21, 22 and 24 finish first and commit nothing */
    assert_false (kiwi_offsets_done (&o, "t", 3, 21, &c));
    assert_false (kiwi_offsets_done (&o, "t", 3, 22, &c));
    assert_false (kiwi_offsets_done (&o, "t", 3, 24, &c));
    assert_int_equal (c, -7);
    assert_int_equal (kiwi_offsets_pending (&o, "t", 3), 5);
    /* 20 finishes: committed up to 23, the next gap */
    assert_true (kiwi_offsets_done (&o, "t", 3, 20, &c));
    assert_int_equal (c, 23);
    assert_int_equal (kiwi_offsets_pending (&o, "t", 3), 2);
    c = -7;
    /* a finish reported again (a result republished) moves nothing */
    assert_false (kiwi_offsets_done (&o, "t", 3, 21, &c));
    assert_int_equal (c, -7);
    assert_true (kiwi_offsets_done (&o, "t", 3, 23, &c));
    assert_int_equal (c, 25);
    kiwi_offsets_clear (&o);
}

static void
test_partitions_independent (void **state)
{
    (void) state;
    kiwi_offsets o = { 0 };
    int64_t c = -7;
    add (&o, "t", 0, 5);
    add (&o, "t", 1, 5);
    add (&o, "u", 0, 5);
    add (&o, "t", 0, 6);
    /* a gap on t[0] does not hold t[1] or u[0] */
    assert_false (kiwi_offsets_done (&o, "t", 0, 6, &c));
    assert_true (kiwi_offsets_done (&o, "t", 1, 5, &c));
    assert_int_equal (c, 6);
    assert_true (kiwi_offsets_done (&o, "u", 0, 5, &c));
    assert_int_equal (c, 6);
    assert_int_equal (kiwi_offsets_pending (&o, "t", 0), 2);
    assert_true (kiwi_offsets_done (&o, "t", 0, 5, &c));
    assert_int_equal (c, 7);
    /* an offset never consumed here commits nothing */
    assert_false (kiwi_offsets_done (&o, "v", 9, 1, &c));
    kiwi_offsets_clear (&o);
}

static void
test_revoke_drops_state (void **state)
{
    (void) state;
    kiwi_offsets o = { 0 };
    int64_t c = -7;
    add (&o, "t", 0, 30);
    add (&o, "t", 0, 31);
    add (&o, "t", 1, 40);
    kiwi_offsets_revoke (&o, "t", 0);
    assert_int_equal (kiwi_offsets_pending (&o, "t", 0), 0);
    /* a task of the revoked partition finishing afterwards commits nothing:
     * the partition's offsets are the next owner's */
    assert_false (kiwi_offsets_done (&o, "t", 0, 30, &c));
    assert_false (kiwi_offsets_done (&o, "t", 0, 31, &c));
    assert_int_equal (c, -7);
    /* the other partition is untouched */
    assert_int_equal (kiwi_offsets_pending (&o, "t", 1), 1);
    assert_true (kiwi_offsets_done (&o, "t", 1, 40, &c));
    assert_int_equal (c, 41);
    /* assigned again later: the old held offsets are not there to hold it */
    add (&o, "t", 0, 33);
    assert_true (kiwi_offsets_done (&o, "t", 0, 33, &c));
    assert_int_equal (c, 34);
    kiwi_offsets_clear (&o);
}

static void
test_many_grow (void **state)
{
    (void) state;
    kiwi_offsets o = { 0 };
    int64_t c = -7;
    for (int64_t off = 0; off < 100; off++)
        add (&o, "t", 0, off);
    for (int64_t off = 99; off >= 1; off--)
        assert_false (kiwi_offsets_done (&o, "t", 0, off, &c));
    assert_true (kiwi_offsets_done (&o, "t", 0, 0, &c));
    assert_int_equal (c, 100);
    assert_int_equal (kiwi_offsets_pending (&o, "t", 0), 0);
    kiwi_offsets_clear (&o);
    assert_null (o.head);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_contiguous_committed),
        cmocka_unit_test (test_gap_held),
        cmocka_unit_test (test_partitions_independent),
        cmocka_unit_test (test_revoke_drops_state),
        cmocka_unit_test (test_many_grow),
    };
    return cmocka_run_group_tests_name ("offsets", tests, NULL, NULL);
}
