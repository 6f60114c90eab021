/*
 * test_outbox.c: worker/daemon/outbox.h, the messages held while the producer's
 * queue is full: they come out in the order they went in, with their bytes
 * copied (the caller's buffer may go at once), the bound refuses a message
 * past max_bytes and holds nothing of it, the backoff doubles from 50 ms to
 * at most 1 s and starts again when the head moves, the head's age decides
 * when it is given up, and clearing hands every opaque back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "worker/daemon/outbox.h"

static void
push (kiwi_outbox *o, const char *topic, const char *key, const char *value, void *opaque, int64_t now)
{
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_outbox_push (o, topic, key, value, strlen (value), opaque, now, &err), 0);
    assert_null (err);
}

static void
test_fifo_and_copies (void **state)
{
    (void) state;
    kiwi_outbox o = { 0 };
    char buf[16];
    int a, b, c;
    strcpy (buf, "first");
    push (&o, "kiwi.progress", "t1", buf, &a, 1000);
    strcpy (buf, "XXXXX"); /* the held copy is not the caller's buffer */
    push (&o, "kiwi.results", NULL, "second", &b, 1001);
    push (&o, "kiwi.progress", "t1", "third", &c, 1002);
    assert_int_equal (o.count, 3);
    assert_int_equal (o.bytes, 5 + 6 + 5);
    const kiwi_outbox_msg *m = kiwi_outbox_head (&o);
    assert_string_equal (m->topic, "kiwi.progress");
    assert_string_equal (m->key, "t1");
    assert_int_equal (m->len, 5);
    assert_memory_equal (m->value, "first", 5);
    assert_ptr_equal (kiwi_outbox_pop (&o), &a);
    m = kiwi_outbox_head (&o);
    assert_null (m->key);
    assert_memory_equal (m->value, "second", 6);
    assert_ptr_equal (kiwi_outbox_pop (&o), &b);
    assert_ptr_equal (kiwi_outbox_pop (&o), &c);
    assert_null (kiwi_outbox_head (&o));
    assert_null (kiwi_outbox_pop (&o));
    assert_int_equal (o.count, 0);
    assert_int_equal (o.bytes, 0);
    /* empty again: a push after the last pop is the new head and tail */
    push (&o, "t", "k", "again", &a, 2000);
    assert_ptr_equal (kiwi_outbox_pop (&o), &a);
    assert_null (o.tail);
}

static void
test_bound (void **state)
{
    (void) state;
    kiwi_outbox o = { .max_bytes = 10 };
    kiwi_error_t err = NULL;
    push (&o, "t", NULL, "123456", NULL, 0);
    assert_int_equal (kiwi_outbox_push (&o, "t", NULL, "12345", 5, NULL, 0, &err), -1);
    assert_non_null (err);
    assert_non_null (strstr (kiwi_error_msg (err), "not held"));
    kiwi_error_free (&err);
    assert_int_equal (o.count, 1);
    assert_int_equal (o.bytes, 6);
    push (&o, "t", NULL, "1234", NULL, 0); /* exactly at the bound */
    assert_int_equal (o.bytes, 10);
    /* a message larger than the bound on its own is refused too */
    kiwi_outbox big = { .max_bytes = 3 };
    assert_int_equal (kiwi_outbox_push (&big, "t", NULL, "1234", 4, NULL, 0, &err), -1);
    kiwi_error_free (&err);
    assert_null (kiwi_outbox_head (&big));
    kiwi_outbox_clear (&o, NULL);
    assert_int_equal (o.bytes, 0);
}

static void
test_backoff (void **state)
{
    (void) state;
    kiwi_outbox o = { 0 };
    push (&o, "t", NULL, "a", NULL, 0);
    push (&o, "t", NULL, "b", NULL, 0);
    assert_float_equal (kiwi_outbox_backoff_s (&o), 0.05, 1e-9);
    kiwi_outbox_refused (&o);
    assert_float_equal (kiwi_outbox_backoff_s (&o), 0.1, 1e-9);
    kiwi_outbox_refused (&o);
    assert_float_equal (kiwi_outbox_backoff_s (&o), 0.2, 1e-9);
    for (int i = 0; i < 100; i++)
        kiwi_outbox_refused (&o);
    assert_float_equal (kiwi_outbox_backoff_s (&o), 1.0, 1e-9);
    kiwi_outbox_pop (&o); /* the head moved: short waits again */
    assert_float_equal (kiwi_outbox_backoff_s (&o), 0.05, 1e-9);
    kiwi_outbox_clear (&o, NULL);
}

static void
test_expiry (void **state)
{
    (void) state;
    kiwi_outbox o = { 0 };
    assert_false (kiwi_outbox_head_expired (&o, 1000000, 1));
    push (&o, "t", NULL, "old", NULL, 1000);
    push (&o, "t", NULL, "new", NULL, 5000);
    assert_false (kiwi_outbox_head_expired (&o, 30999, 30000));
    assert_true (kiwi_outbox_head_expired (&o, 31000, 30000));
    kiwi_outbox_pop (&o);
    /* the next head's own age counts */
    assert_false (kiwi_outbox_head_expired (&o, 31000, 30000));
    assert_true (kiwi_outbox_head_expired (&o, 35000, 30000));
    kiwi_outbox_clear (&o, NULL);
}

static int freed;
static void
count_free (void *p)
{
    freed++;
    free (p);
}

static void
test_clear_hands_back (void **state)
{
    (void) state;
    kiwi_outbox o = { 0 };
    for (int i = 0; i < 5; i++)
        push (&o, "t", "k", "v", malloc (8), i);
    freed = 0;
    kiwi_outbox_clear (&o, count_free);
    assert_int_equal (freed, 5);
    assert_int_equal (o.count, 0);
    assert_null (o.head);
    assert_null (o.tail);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_fifo_and_copies), cmocka_unit_test (test_bound), cmocka_unit_test (test_backoff),
        cmocka_unit_test (test_expiry), cmocka_unit_test (test_clear_hands_back),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
