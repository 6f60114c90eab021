/*
 * test_docker_stream.c: the multiplexed stream decoder under every split of
 * its input, and the bounded tail buffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/tail.h"
#include "sandbox/docker/docker-stream.h"

typedef struct {
    char out[256], err[256];
    size_t olen, elen;
} collected;

static int
collect (int stream, const char *data, size_t len, void *ud)
{
    collected *c = ud;
    if (stream == KIWI_STREAM_STDERR) {
        memcpy (c->err + c->elen, data, len);
        c->elen += len;
    } else {
        memcpy (c->out + c->olen, data, len);
        c->olen += len;
    }
    return 0;
}

static size_t
frame (unsigned char *buf, int stream, const char *s)
{
    size_t n = strlen (s);
    buf[0] = (unsigned char) stream;
    buf[1] = buf[2] = buf[3] = 0;
    buf[4] = (unsigned char) (n >> 24);
    buf[5] = (unsigned char) (n >> 16);
    buf[6] = (unsigned char) (n >> 8);
    buf[7] = (unsigned char) n;
    memcpy (buf + 8, s, n);
    return 8 + n;
}

static void
test_every_split (void **state)
{
    unsigned char buf[256];
    size_t n = frame (buf, 1, "hello ");
    n += frame (buf + n, 2, "oops");
    n += frame (buf + n, 1, "world");
    n += frame (buf + n, 1, "");
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b++) {
            collected c = { 0 };
            kiwi_demux d;
            kiwi_demux_init (&d, collect, &c);
            assert_int_equal (kiwi_demux_feed (&d, (char *) buf, a), 0);
            assert_int_equal (kiwi_demux_feed (&d, (char *) buf + a, b - a), 0);
            assert_int_equal (kiwi_demux_feed (&d, (char *) buf + b, n - b), 0);
            assert_true (kiwi_demux_complete (&d));
            assert_int_equal (c.olen, 11);
            assert_memory_equal (c.out, "hello world", 11);
            assert_int_equal (c.elen, 4);
            assert_memory_equal (c.err, "oops", 4);
        }
}

static void
test_truncated_is_incomplete (void **state)
{
    unsigned char buf[64];
    size_t n = frame (buf, 1, "abcdef");
    collected c = { 0 };
    kiwi_demux d;
    kiwi_demux_init (&d, collect, &c);
    assert_int_equal (kiwi_demux_feed (&d, (char *) buf, n - 2), 0);
    assert_false (kiwi_demux_complete (&d));
}

static void
test_not_multiplexed_is_rejected (void **state)
{
    collected c = { 0 };
    kiwi_demux d;
    kiwi_demux_init (&d, collect, &c);
    assert_true (kiwi_demux_feed (&d, "plain text output", 17) < 0);
    assert_false (kiwi_demux_complete (&d));
}

static void
test_tail_keeps_last_bytes_and_counts_rest (void **state)
{
    kiwi_tailbuf t;
    assert_int_equal (kiwi_tailbuf_init (&t, 8), 0);
    kiwi_tailbuf_write (&t, "abc", 3);
    kiwi_tailbuf_write (&t, "defgh", 5);
    char *s = kiwi_tailbuf_dup (&t);
    assert_string_equal (s, "abcdefgh");
    free (s);
    kiwi_tailbuf_write (&t, "ij", 2);
    s = kiwi_tailbuf_dup (&t);
    assert_string_equal (s, "cdefghij");
    assert_int_equal (t.dropped, 2);
    free (s);
    kiwi_tailbuf_write (&t, "0123456789ABCDEF", 16);
    s = kiwi_tailbuf_dup (&t);
    assert_string_equal (s, "89ABCDEF");
    assert_int_equal (t.dropped, 2 + 8 + 8);
    free (s);
    /* many small writes wrapping around */
    for (int i = 0; i < 1000; i++)
        kiwi_tailbuf_write (&t, "xyz", 3);
    s = kiwi_tailbuf_dup (&t);
    assert_int_equal (strlen (s), 8);
    assert_true (strcmp (s, "zxyzxyzx") == 0 || strcmp (s, "yzxyzxyz") == 0 || strcmp (s, "xyzxyzxy") == 0
                 || strcmp (s, "xyzxyzxyz" + 1) == 0);
    assert_int_equal (t.dropped + t.len, 2 + 8 + 8 + 8 + 3000);
    free (s);
    kiwi_tailbuf_clear (&t);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_every_split),
        cmocka_unit_test (test_truncated_is_incomplete),
        cmocka_unit_test (test_not_multiplexed_is_rejected),
        cmocka_unit_test (test_tail_keeps_last_bytes_and_counts_rest),
    };
    return cmocka_run_group_tests_name ("docker_stream", tests, NULL, NULL);
}
