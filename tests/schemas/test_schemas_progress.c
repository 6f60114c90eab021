/*
 * test_schemas_progress.c: the ProgressEvent message: round trips, the
 * payload kept as msgpack bytes and rendered as JSON, every decode rule with
 * the exact error naming the field, and the encoder's validation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_schemas_util.h"

static void
test_roundtrip (void **state)
{
    kiwi_progress p, out;
    kiwi_error_t err = NULL;
    kiwi_progress_init (&p);
    sample_progress_full (&p);
    roundtrip_progress (&p);

    /* The payload bytes survive exactly (they were encoded shortest-form). */
    expect_ok (kiwi_progress_decode (base, base_len, &out, &err), &err);
    assert_int_equal (out.payload_len, p.payload_len);
    assert_memory_equal (out.payload, p.payload, p.payload_len);
    assert_int_equal (out.stage, KIWI_STAGE_ROUND);
    assert_int_equal (out.seq, 42);
    assert_int_equal (out.attempt, 2);
    kiwi_progress_clear (&out);
    kiwi_progress_clear (&p);

    sample_progress_min (&p);
    roundtrip_progress (&p);
    kiwi_progress_clear (&p);
}

/* attempt: which run of the task; absent (an older producer) decodes as 0,
 * unknown, and is written back as 0. */
static void
test_attempt (void **state)
{
    kiwi_progress out;
    kiwi_error_t err = NULL;
    size_t len = 0;
    char *old = wire_edit (base, base_len, "attempt", EDIT_DEL, NULL, &len);
    assert_non_null (old);
    assert_true (len < base_len);
    expect_ok (kiwi_progress_decode (old, len, &out, &err), &err);
    assert_int_equal (out.attempt, 0);
    assert_int_equal (out.seq, 42);
    char *json = NULL;
    expect_ok (kiwi_progress_to_json (&out, &json, &err), &err);
    assert_non_null (strstr (json, "\"seq\":42,\"attempt\":0,"));
    free (json);
    kiwi_progress_clear (&out);
    free (old);

    /* two runs of one task, same seq: equal but for attempt */
    kiwi_progress p;
    kiwi_progress_init (&p);
    sample_progress_min (&p);
    char *a1, *a2;
    size_t l1, l2;
    p.attempt = 1;
    expect_ok (kiwi_progress_encode (&p, &a1, &l1, &err), &err);
    p.attempt = 2;
    expect_ok (kiwi_progress_encode (&p, &a2, &l2, &err), &err);
    assert_true (l1 != l2 || memcmp (a1, a2, l1) != 0);
    expect_ok (kiwi_progress_decode (a2, l2, &out, &err), &err);
    assert_int_equal (out.attempt, 2);
    assert_int_equal (out.seq, 1);
    kiwi_progress_clear (&out);
    free (a1);
    free (a2);
    kiwi_progress_clear (&p);
}

static void
test_every_phase (void **state)
{
    static const char *names[] = { "accepted", "install", "step0", "round", "finished" };
    for (size_t i = 0; i < 5; i++) {
        kiwi_stage ph;
        assert_int_equal (kiwi_stage_parse (names[i], &ph), 0);
        assert_string_equal (kiwi_stage_name (ph), names[i]);
        edit ("phase", EDIT_SET, obj_str (names[i]), NULL);
    }
    edit ("phase", EDIT_SET, obj_str ("verify"),
          "progress.phase: unknown value \"verify\" (expected accepted, install, step0, round, finished)");
}

static void
test_at_limits (void **state)
{
    kiwi_progress p;
    kiwi_progress_init (&p);
    sample_progress_min (&p);
    free (p.task_id);
    p.task_id = repeat ('t', 128);
    free (p.kind);
    p.kind = repeat ('k', 64);
    free (p.worker_id);
    p.worker_id = repeat ('w', 128);
    p.seq = UINT64_MAX;
    p.round = 100;
    p.ts = INT64_MAX;
    /* A payload of exactly 1 MiB: a map with one bin value. */
    size_t body = KIWI_PROGRESS_PAYLOAD_MAX - 1 - 2 - 5;
    p.payload_len = KIWI_PROGRESS_PAYLOAD_MAX;
    p.payload = malloc (p.payload_len);
    memcpy (p.payload, "\x81\xa1x\xc6", 4);
    p.payload[4] = (char) (body >> 24);
    p.payload[5] = (char) (body >> 16);
    p.payload[6] = (char) (body >> 8);
    p.payload[7] = (char) body;
    memset (p.payload + 8, 0xab, body);
    roundtrip_progress (&p);

    p.payload_len++;
    p.payload = realloc (p.payload, p.payload_len);
    body++;
    p.payload[4] = (char) (body >> 24);
    p.payload[5] = (char) (body >> 16);
    p.payload[6] = (char) (body >> 8);
    p.payload[7] = (char) body;
    p.payload[p.payload_len - 1] = 0;
    expect_encode_refused_progress (&p, "progress.payload: larger than 1048576 bytes");
    kiwi_progress_clear (&p);
}

static void
test_decode_rules (void **state)
{
    msgpack_object x = obj_nil ();
    edit ("task_id", EDIT_DEL, x, "progress.task_id: required field missing");
    edit ("seq", EDIT_DEL, x, "progress.seq: required field missing");
    edit ("attempt", EDIT_DEL, x, NULL); /* an older producer's event */
    edit ("round", EDIT_DEL, x, "progress.round: required field missing");
    edit ("phase", EDIT_DEL, x, "progress.phase: required field missing");
    edit ("kind", EDIT_DEL, x, "progress.kind: required field missing");
    edit ("ts", EDIT_DEL, x, "progress.ts: required field missing");
    edit ("worker_id", EDIT_DEL, x, "progress.worker_id: required field missing");
    edit ("v", EDIT_DEL, x, "progress.v: required field missing");
    edit ("payload", EDIT_DEL, x, NULL);

    edit ("task_id", EDIT_SET, obj_uint (1), "progress.task_id: expected string, got integer");
    edit ("seq", EDIT_SET, obj_str ("1"), "progress.seq: expected integer, got string");
    edit ("seq", EDIT_SET, obj_uint (0), "progress.seq: must be at least 1, got 0");
    edit ("seq", EDIT_SET, obj_int (-3), "progress.seq: must not be negative, got -3");
    edit ("attempt", EDIT_SET, obj_uint (0), NULL);
    edit ("attempt", EDIT_SET, obj_uint (UINT32_MAX), NULL);
    edit ("attempt", EDIT_SET, obj_str ("2"), "progress.attempt: expected integer, got string");
    edit ("attempt", EDIT_SET, obj_int (-1), "progress.attempt: must not be negative, got -1");
    edit ("attempt", EDIT_SET, obj_uint (1ull << 32),
          "progress.attempt: out of range: 4294967296 is greater than 4294967295");
    edit ("attempt", EDIT_ADD, obj_uint (3), "progress.attempt: duplicate key");
    edit ("round", EDIT_SET, obj_uint (0), NULL);
    edit ("round", EDIT_SET, obj_uint (101), "progress.round: must be between 0 and 100, got 101");
    edit ("round", EDIT_SET, obj_uint (1ull << 32), "progress.round: out of range: 4294967296 is greater than 4294967295");
    edit ("phase", EDIT_SET, obj_uint (3), "progress.phase: expected string, got integer");
    edit ("kind", EDIT_SET, obj_str (""), "progress.kind: must not be empty");
    char *k65 = repeat ('k', 65);
    edit ("kind", EDIT_SET, obj_str (k65), "progress.kind: longer than 64 bytes");
    free (k65);
    edit ("kind", EDIT_SET, obj_str ("tool call"),
          "progress.kind: invalid character 0x20 at byte 4 (allowed: A-Z a-z 0-9 . _ : -)");
    edit ("ts", EDIT_SET, obj_int (-1), "progress.ts: must be at least 0, got -1");
    edit ("ts", EDIT_SET, obj_float (1.5), "progress.ts: expected integer, got float");
    char *w129 = repeat ('w', 129);
    edit ("worker_id", EDIT_SET, obj_str (w129), "progress.worker_id: longer than 128 bytes");
    free (w129);
    edit ("task_id", EDIT_SET, obj_str ("a/b"),
          "progress.task_id: invalid character '/' at byte 1 (allowed: A-Z a-z 0-9 . _ : -)");

    edit ("payload", EDIT_SET, obj_str ("{}"), "progress.payload: expected map, got string");
    edit ("payload", EDIT_SET, obj_array (NULL, 0), "progress.payload: expected map, got array");
    edit ("payload", EDIT_SET, obj_nil (), "progress.payload: expected map, got nil");
    edit ("payload", EDIT_SET, obj_map (NULL, 0), NULL);
    edit ("payload.tool", EDIT_ADD, obj_str ("again"), NULL); /* inside the payload: not ours to judge */
    edit ("payload.nested.a.b", EDIT_SET, obj_float (1e300), NULL);

    edit ("seq", EDIT_ADD, obj_uint (2), "progress.seq: duplicate key");
    edit ("v", EDIT_SET, obj_uint (2), "progress.v: version 2 is newer than supported version 1");
    edit ("future", EDIT_SET, obj_str ("ignored"), NULL);
}

static void
test_payload_too_large_on_decode (void **state)
{
    size_t n = KIWI_PROGRESS_PAYLOAD_MAX;
    char *big = malloc (n);
    memset (big, 'z', n);
    msgpack_object_kv kv[1] = { { obj_str ("blob"), obj_bin (big, n) } };
    edit ("payload", EDIT_SET, obj_map (kv, 1), "progress.payload: larger than 1048576 bytes");
    kv[0].val = obj_bin (big, n - 12); /* 1 + 5 + 5 + n - 12 = n - 1 */
    edit ("payload", EDIT_SET, obj_map (kv, 1), NULL);
    free (big);
}

static void
test_payload_depth (void **state)
{
    /* The payload map sits at level 2; its contents may go to level 16. */
    msgpack_object chain[16];
    chain[15] = obj_uint (1);
    for (int i = 14; i >= 0; i--)
        chain[i] = obj_array (&chain[i + 1], 1);
    msgpack_object_kv kv[1] = { { obj_str ("d"), chain[1] } }; /* 14 arrays */
    edit ("payload", EDIT_SET, obj_map (kv, 1), NULL);
    kv[0].val = chain[0]; /* 15 arrays: 17 levels */
    edit ("payload", EDIT_SET, obj_map (kv, 1), "progress: nested deeper than 16 levels");
}

static void
test_encode_validates (void **state)
{
    kiwi_progress p;
    kiwi_error_t err = NULL;
    char *out = NULL;
    size_t len;
    kiwi_progress_init (&p);
    sample_progress_full (&p);

    p.stage = KIWI_STAGE_UNSET;
    expect_encode_refused_progress (&p, "progress.phase: required field missing");
    p.stage = KIWI_STAGE__END;
    expect_encode_refused_progress (&p, "progress.phase: unknown phase 6");
    p.stage = KIWI_STAGE_FINISHED;

    p.seq = 0;
    expect_encode_refused_progress (&p, "progress.seq: must be at least 1, got 0");
    p.seq = 1;

    /* The payload must be exactly one map. */
    char *saved = p.payload;
    size_t saved_len = p.payload_len;
    p.payload = "\x91\x01";
    p.payload_len = 2;
    expect_encode_refused_progress (&p, "progress.payload: expected map");
    p.payload = "\x80\x80";
    expect_encode_refused_progress (&p, "progress.payload: trailing bytes after the map");
    p.payload = "\x81\xa1x";
    p.payload_len = 3;
    expect_encode_refused_progress (&p, "progress.payload: truncated message (3 bytes)");
    p.payload = "";
    p.payload_len = 0;
    expect_encode_refused_progress (&p, "progress.payload: empty buffer (leave payload NULL when absent)");
    p.payload = NULL;
    p.payload_len = 4;
    expect_encode_refused_progress (&p, "progress.payload: length 4 but no buffer");
    p.payload = saved;
    p.payload_len = saved_len;
    expect_ok (kiwi_progress_encode (&p, &out, &len, &err), &err);
    free (out);
    kiwi_progress_clear (&p);
}

static void
test_to_json (void **state)
{
    kiwi_progress p;
    kiwi_error_t err = NULL;
    char *json;
    kiwi_progress_init (&p);
    sample_progress_full (&p);
    expect_ok (kiwi_progress_to_json (&p, &json, &err), &err);
    assert_string_equal (json,
                         "{\"v\":1,\"task_id\":\"task-0001:retry.2_x\",\"seq\":42,\"attempt\":2,\"round\":3,"
                         "\"phase\":\"round\","
                         "\"kind\":\"tool_call\",\"ts\":1764454470000,\"worker_id\":\"worker-a:7\","
                         "\"payload\":{\"tool\":\"run\",\"argv\":[\"npm\",\"test\"],\"exit\":-1,\"ok\":false,"
                         "\"ratio\":0.5,\"blob\":\"AAH/\",\"nested\":{\"a\":{\"b\":[1,2,null]}},"
                         "\"big\":18446744073709551615,\"neg\":-9223372036854775808,\"text\":\"\xc3\xa9\\n\\u0001\"}}");
    free (json);
    kiwi_progress_clear (&p);

    sample_progress_min (&p);
    expect_ok (kiwi_progress_to_json (&p, &json, &err), &err);
    assert_string_equal (json, "{\"v\":1,\"task_id\":\"t1\",\"seq\":1,\"attempt\":0,\"round\":0,\"phase\":\"accepted\","
                               "\"kind\":\"accepted\",\"ts\":1,\"worker_id\":\"w1\"}");
    free (json);
    kiwi_progress_clear (&p);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_roundtrip),
        cmocka_unit_test (test_attempt),
        cmocka_unit_test (test_every_phase),
        cmocka_unit_test (test_at_limits),
        cmocka_unit_test (test_decode_rules),
        cmocka_unit_test (test_payload_too_large_on_decode),
        cmocka_unit_test (test_payload_depth),
        cmocka_unit_test (test_encode_validates),
        cmocka_unit_test (test_to_json),
    };
    return cmocka_run_group_tests_name ("schemas_progress", tests, base_setup_progress, base_teardown);
}
