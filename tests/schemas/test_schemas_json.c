/*
 * test_schemas_json.c: kiwi_msgpack_to_json(), the renderer `kiwi tail` uses
 * for any topic: every msgpack type, string escaping (control characters,
 * invalid UTF-8, U+2028), base64, non-string keys, and the framing rules
 * (empty, truncated, malformed, trailing bytes, nesting depth).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_schemas_util.h"
#include "schemas/wire.h"

/* Renders the n bytes at s and compares with want. */
static void
renders (const char *s, size_t n, const char *want)
{
    kiwi_error_t err = NULL;
    char *out = NULL;
    if (kiwi_msgpack_to_json (s, n, &out, &err) < 0)
        fail_msg ("rendering failed: %s (want %s)", kiwi_error_msg (err), want);
    assert_string_equal (out, want);
    free (out);
}
#define RENDERS(lit, want) renders (lit, sizeof lit - 1, want)

static void
rejects (const char *s, size_t n, const char *msg)
{
    kiwi_error_t err = NULL;
    char *out = NULL;
    expect_invalid (kiwi_msgpack_to_json (s, n, &out, &err), &err, msg);
    assert_null (out);
}
#define REJECTS(lit, msg) rejects (lit, sizeof lit - 1, msg)

/* Packs one object and renders it. */
static void
renders_obj (msgpack_object o, const char *want)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init (&sb);
    msgpack_packer_init (&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_object (&pk, o);
    renders (sb.data, sb.size, want);
    msgpack_sbuffer_destroy (&sb);
}

static void
test_scalars (void **state)
{
    RENDERS ("\xc0", "null");
    RENDERS ("\xc3", "true");
    RENDERS ("\xc2", "false");
    RENDERS ("\x00", "0");
    RENDERS ("\x7f", "127");
    RENDERS ("\xff", "-1");
    RENDERS ("\xe0", "-32");
    RENDERS ("\xcc\xff", "255");
    RENDERS ("\xcf\xff\xff\xff\xff\xff\xff\xff\xff", "18446744073709551615");
    RENDERS ("\xd3\x80\x00\x00\x00\x00\x00\x00\x00", "-9223372036854775808");
    RENDERS ("\xd0\x05", "5"); /* a signed format holding a positive value */
    RENDERS ("\xcb\x3f\xe0\x00\x00\x00\x00\x00\x00", "0.5");
    RENDERS ("\xca\x3f\xc0\x00\x00", "1.5");
    RENDERS ("\xcb\x3f\xf1\x99\x99\x99\x99\x99\x9a", "1.1000000000000001");
    RENDERS ("\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00", "null"); /* NaN */
    RENDERS ("\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00", "null"); /* +inf */
    RENDERS ("\xcb\xff\xf0\x00\x00\x00\x00\x00\x00", "null"); /* -inf */
    RENDERS ("\xcb\x80\x00\x00\x00\x00\x00\x00\x00", "-0.0");
    RENDERS ("\xcb\x40\x08\x00\x00\x00\x00\x00\x00", "3.0");
    RENDERS ("\xca\x4b\x18\x96\x80", "10000000.0");
    RENDERS ("\xcb\x7e\x37\xe4\x3c\x88\x00\x75\x9c", "1.0000000000000001e+300");
    RENDERS ("\xcb\x54\x47\x68\x8b\xb5\x39\x4c\x25", "1e+98");
    RENDERS ("\xcb\x40\x5e\xdd\x2f\x1a\x9f\xbe\x77", "123.456");
}

static void
test_strings (void **state)
{
    RENDERS ("\xa0", "\"\"");
    RENDERS ("\xa5hello", "\"hello\"");
    RENDERS ("\xa6" "a\"b\\c/", "\"a\\\"b\\\\c/\"");
    RENDERS ("\xa7\n\r\t\b\f\x01\x1f", "\"\\n\\r\\t\\b\\f\\u0001\\u001f\"");
    RENDERS ("\xa3" "a\x7f" "b", "\"a\\u007fb\"");
    RENDERS ("\xa9" "\xc3\xa9\xe2\x82\xac\xf0\x9f\x90\x9d", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x90\x9d\"");
    RENDERS ("\xa6" "\xe2\x80\xa8\xe2\x80\xa9", "\"\\u2028\\u2029\"");
    /* Invalid UTF-8: one U+FFFD per maximal invalid subsequence. */
    RENDERS ("\xa3" "a\xff" "b", "\"a\\ufffdb\"");
    RENDERS ("\xa2\xe2\x82", "\"\\ufffd\"");               /* truncated 3-byte sequence */
    RENDERS ("\xa3\xe2\x82" "x", "\"\\ufffdx\"");
    RENDERS ("\xa3\xf0\x9f\x90", "\"\\ufffd\"");           /* truncated 4-byte sequence */
    RENDERS ("\xa2\xc0\xaf", "\"\\ufffd\\ufffd\"");        /* overlong: nothing valid to join */
    RENDERS ("\xa3\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""); /* surrogate */
    RENDERS ("\xa4\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* above U+10FFFF */
    RENDERS ("\xa2\x80\x80", "\"\\ufffd\\ufffd\"");        /* lone continuation bytes */
    RENDERS ("\xa4\xc3\xa9\xc3\x28", "\"\xc3\xa9\\ufffd(\"");
    RENDERS ("\xa3" "a\x00" "b", "\"a\\u0000b\"");         /* NUL inside a generic string is fine */
}

static void
test_bin_and_ext (void **state)
{
    RENDERS ("\xc4\x00", "\"\"");
    RENDERS ("\xc4\x01" "f", "\"Zg==\"");
    RENDERS ("\xc4\x02" "fo", "\"Zm8=\"");
    RENDERS ("\xc4\x03" "foo", "\"Zm9v\"");
    RENDERS ("\xc4\x06" "foobar", "\"Zm9vYmFy\"");
    RENDERS ("\xc4\x03\x00\x01\xff", "\"AAH/\"");
    RENDERS ("\xc4\x02\xfb\xff", "\"+/8=\"");
    RENDERS ("\xd4\x01\x02", "{\"ext_type\":1,\"data\":\"Ag==\"}");
    RENDERS ("\xd6\xff\x00\x00\x00\x01", "{\"ext_type\":-1,\"data\":\"AAAAAQ==\"}");
    RENDERS ("\xc7\x03\x05" "abc", "{\"ext_type\":5,\"data\":\"YWJj\"}");
    RENDERS ("\xd8\x07" "0123456789abcdef", "{\"ext_type\":7,\"data\":\"MDEyMzQ1Njc4OWFiY2RlZg==\"}");

    /* Long binary, across the encoder's internal chunks. */
    size_t n = 3000;
    char *b = malloc (n);
    for (size_t i = 0; i < n; i++)
        b[i] = (char) 0xff;
    msgpack_object o = obj_bin (b, n);
    char *want = malloc (4 * n / 3 + 3);
    want[0] = '"';
    for (size_t i = 0; i < 4 * n / 3; i++)
        want[1 + i] = '/';
    want[1 + 4 * n / 3] = '"';
    want[2 + 4 * n / 3] = '\0';
    renders_obj (o, want);
    free (want);
    free (b);
}

static void
test_containers (void **state)
{
    RENDERS ("\x90", "[]");
    RENDERS ("\x80", "{}");
    RENDERS ("\x93\x01\xa1" "a\xc0", "[1,\"a\",null]");
    RENDERS ("\x82\xa1" "a\x01\xa1" "b\x92\x80\x90", "{\"a\":1,\"b\":[{},[]]}");
    RENDERS ("\xdc\x00\x02\xc3\xc2", "[true,false]");
    RENDERS ("\xde\x00\x01\xa1k\xa1v", "{\"k\":\"v\"}");
    RENDERS ("\x81\xa2\n\"\x01", "{\"\\n\\\"\":1}");
    /* Keys that are not strings: their JSON text becomes the key. */
    RENDERS ("\x81\x01\xa1" "a", "{\"1\":\"a\"}");
    RENDERS ("\x81\xff\x00", "{\"-1\":0}");
    RENDERS ("\x81\xc0\x00", "{\"null\":0}");
    RENDERS ("\x81\xc3\x00", "{\"true\":0}");
    RENDERS ("\x81\x92\x01\x02\x00", "{\"[1,2]\":0}");
    RENDERS ("\x81\xc4\x01" "f\x00", "{\"\\\"Zg==\\\"\":0}");
    /* Duplicate keys are rendered as they come: this is a view, not a decoder. */
    RENDERS ("\x82\xa1" "a\x01\xa1" "a\x02", "{\"a\":1,\"a\":2}");
}

static void
test_depth (void **state)
{
    char buf[64];
    for (int levels = 1; levels <= 20; levels++) {
        memset (buf, 0x91, (size_t) levels - 1);
        buf[levels - 1] = (char) 0x90; /* the innermost array is empty */
        if (levels <= KIWI_WIRE_MAX_DEPTH) {
            char want[64];
            memset (want, '[', (size_t) levels);
            memset (want + levels, ']', (size_t) levels);
            want[2 * levels] = '\0';
            renders (buf, (size_t) levels, want);
        } else {
            rejects (buf, (size_t) levels, "msgpack: nested deeper than 16 levels");
        }
    }
    /* Scalars are not levels: 16 arrays around an integer are fine. */
    memset (buf, 0x91, 16);
    buf[16] = 0x01;
    renders (buf, 17, "[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]");
    /* Maps count the same, and a non-string key nested inside is bounded too. */
    memset (buf, 0x81, 16);
    buf[15] = (char) 0x81;
    buf[16] = (char) 0x90; /* key: an empty array, level 17 */
    buf[17] = 0x00;
    memset (buf, 0x91, 15);
    rejects (buf, 18, "msgpack: nested deeper than 16 levels");
}

static void
test_framing (void **state)
{
    REJECTS ("", "msgpack: empty message");
    rejects (NULL, 0, "msgpack: empty message");
    REJECTS ("\xc1", "msgpack: invalid msgpack: byte 0xc1 at offset 0");
    REJECTS ("\x92\x01\xc1", "msgpack: invalid msgpack: byte 0xc1 at offset 2");
    REJECTS ("\x01\x02", "msgpack: trailing bytes after message (1 of 2 bytes used)");
    REJECTS ("\x80\x80", "msgpack: trailing bytes after message (1 of 2 bytes used)");
    REJECTS ("\xa5" "abc", "msgpack: truncated message (4 bytes)");
    REJECTS ("\xcb\x00\x00", "msgpack: truncated message (3 bytes)");
    REJECTS ("\xcd\x00", "msgpack: truncated message (2 bytes)");
    REJECTS ("\xd9", "msgpack: truncated message (1 bytes)");
    REJECTS ("\xc5\x01", "msgpack: truncated message (2 bytes)");
    REJECTS ("\xc6\xff\xff\xff\xff" "a", "msgpack: truncated message (6 bytes)");
    REJECTS ("\xc9\x00\x00\x00\x02\x01" "a", "msgpack: truncated message (7 bytes)");
    REJECTS ("\xd8\x01" "abc", "msgpack: truncated message (5 bytes)");
    REJECTS ("\x92\x01", "msgpack: truncated message: array at offset 0 declares 2 entries but only 1 bytes follow");
    REJECTS ("\x93\x01\x02\x03\x04\x05",
             "msgpack: trailing bytes after message (4 of 6 bytes used)");
    REJECTS ("\x82\xa1" "a\x01", "msgpack: truncated message: map at offset 0 declares 2 entries but only 3 bytes follow");
    REJECTS ("\x82\xa1" "a\x01\xa1" "b", "msgpack: truncated message (6 bytes)");
    REJECTS ("\xdd\xff\xff\xff\xff", "msgpack: truncated message: array at offset 0 declares 4294967295 entries but only 0 bytes follow");
    REJECTS ("\xdc\x00", "msgpack: truncated message (2 bytes)");
}

static void
test_every_message_renders_generically (void **state)
{
    /* Every encoded sample is valid input for the generic renderer. */
    kiwi_error_t err = NULL;
    char *buf, *json;
    size_t len;
    kiwi_heartbeat h;
    kiwi_heartbeat_init (&h);
    sample_heartbeat_min (&h);
    expect_ok (kiwi_heartbeat_encode (&h, &buf, &len, &err), &err);
    expect_ok (kiwi_msgpack_to_json (buf, len, &json, &err), &err);
    assert_string_equal (json, "{\"v\":1,\"worker_id\":\"w1\",\"version\":\"0.1.0\",\"ts\":2,\"slots_total\":0,"
                               "\"slots_busy\":0,\"tasks_done\":0,\"tasks_failed\":0,\"cache_hits\":0,"
                               "\"cache_misses\":0,\"degraded\":false,\"redis_ok\":true,\"egress\":[]}");
    /* The typed rendering agrees with the generic one for this message. */
    char *typed;
    expect_ok (kiwi_heartbeat_to_json (&h, &typed, &err), &err);
    assert_string_equal (typed, json);
    free (typed);
    free (json);
    free (buf);
    kiwi_heartbeat_clear (&h);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_scalars),
        cmocka_unit_test (test_strings),
        cmocka_unit_test (test_bin_and_ext),
        cmocka_unit_test (test_containers),
        cmocka_unit_test (test_depth),
        cmocka_unit_test (test_framing),
        cmocka_unit_test (test_every_message_renders_generically),
    };
    return cmocka_run_group_tests_name ("schemas_json", tests, NULL, NULL);
}
