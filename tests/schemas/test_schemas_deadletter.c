/*
 * test_schemas_deadletter.c: the DeadLetter message: round trips with the
 * original bytes kept exactly (empty, binary, at 16 MiB), every decode rule
 * with the exact error naming the field, the encoder's validation and the
 * JSON rendering (base64 plus the decoded original).
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
    kiwi_deadletter d, out;
    kiwi_error_t err = NULL;
    kiwi_deadletter_init (&d);
    sample_deadletter_full (&d);
    roundtrip_deadletter (&d);
    kiwi_deadletter_clear (&d);
    sample_deadletter_min (&d);
    roundtrip_deadletter (&d);

    /* Every byte value, and the largest original. */
    d.original_len = KIWI_DEADLETTER_ORIGINAL_MAX;
    d.original = malloc (d.original_len);
    for (size_t i = 0; i < d.original_len; i++)
        d.original[i] = (char) (i * 7 + (i >> 8));
    d.has_key = true; /* an empty key is still a key */
    d.partition = INT32_MAX;
    d.offset = INT64_MAX;
    free (d.topic);
    d.topic = repeat ('t', 249);
    roundtrip_deadletter (&d);

    char *buf;
    size_t len;
    expect_ok (kiwi_deadletter_encode (&d, &buf, &len, &err), &err);
    expect_ok (kiwi_deadletter_decode (buf, len, &out, &err), &err);
    assert_int_equal (out.original_len, d.original_len);
    assert_memory_equal (out.original, d.original, d.original_len);
    assert_true (out.has_key);
    assert_int_equal (out.key_len, 0);
    kiwi_deadletter_clear (&out);
    free (buf);
    kiwi_deadletter_clear (&d);
}

static void
test_decode_rules (void **state)
{
    msgpack_object x = obj_nil ();
    const char *required[] = { "reason", "topic", "partition", "offset", "original", "ts", "worker_id", "v" };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char msg[96];
        snprintf (msg, sizeof msg, "deadletter.%s: required field missing", required[i]);
        edit (required[i], EDIT_DEL, x, msg);
    }
    edit ("key", EDIT_DEL, x, NULL);

    edit ("original", EDIT_SET, obj_str ("text"), "deadletter.original: expected binary, got string");
    edit ("original", EDIT_SET, obj_bin (NULL, 0), NULL);
    edit ("key", EDIT_SET, obj_str ("k"), "deadletter.key: expected binary, got string");
    edit ("reason", EDIT_SET, obj_str (""), "deadletter.reason: must not be empty");
    edit ("reason", EDIT_SET, obj_str ("bad byte \xff in input"), NULL);
    edit ("topic", EDIT_SET, obj_str ("kiwi tasks"),
          "deadletter.topic: invalid character 0x20 at byte 4 (allowed: A-Z a-z 0-9 . _ : -)");
    char *t = repeat ('t', 250);
    edit ("topic", EDIT_SET, obj_str (t), "deadletter.topic: longer than 249 bytes");
    free (t);
    edit ("partition", EDIT_SET, obj_int (-1), NULL);
    edit ("partition", EDIT_SET, obj_int (-2), "deadletter.partition: must be between -1 and 2147483647, got -2");
    edit ("partition", EDIT_SET, obj_uint (1ull << 31), "deadletter.partition: out of range: 2147483648 does not fit in 32 bits");
    edit ("partition", EDIT_SET, obj_str ("0"), "deadletter.partition: expected integer, got string");
    edit ("offset", EDIT_SET, obj_int (-1), NULL);
    edit ("offset", EDIT_SET, obj_int (-1001), "deadletter.offset: must be at least -1, got -1001");
    edit ("ts", EDIT_SET, obj_int (INT64_MIN), "deadletter.ts: must be at least 0, got -9223372036854775808");
    edit ("original", EDIT_ADD, obj_bin ("x", 1), "deadletter.original: duplicate key");
    edit ("v", EDIT_SET, obj_uint (3), "deadletter.v: version 3 is newer than supported version 1");
    edit ("headers", EDIT_SET, obj_map (NULL, 0), NULL);

    size_t n = KIWI_DEADLETTER_ORIGINAL_MAX + 1;
    char *big = calloc (1, n);
    edit ("original", EDIT_SET, obj_bin (big, n - 1), NULL);
    edit ("original", EDIT_SET, obj_bin (big, n), "deadletter.original: longer than 16777216 bytes");
    edit ("key", EDIT_SET, obj_bin (big, KIWI_DEADLETTER_KEY_MAX), NULL);
    edit ("key", EDIT_SET, obj_bin (big, KIWI_DEADLETTER_KEY_MAX + 1), "deadletter.key: longer than 16384 bytes");
    free (big);
}

static void
test_encode_validates (void **state)
{
    kiwi_deadletter d;
    kiwi_deadletter_init (&d);
    expect_encode_refused_deadletter (&d, "deadletter.reason: required field missing");
    sample_deadletter_full (&d);
    size_t n = d.original_len;
    d.original_len = KIWI_DEADLETTER_ORIGINAL_MAX + 1;
    expect_encode_refused_deadletter (&d, "deadletter.original: longer than 16777216 bytes");
    d.original_len = n;
    char *saved = d.original;
    d.original = NULL;
    expect_encode_refused_deadletter (&d, "deadletter.original: length 11 but no buffer");
    d.original = saved;
    d.partition = -7;
    expect_encode_refused_deadletter (&d, "deadletter.partition: must be between -1 and 2147483647, got -7");
    kiwi_deadletter_clear (&d);
}

static void
test_to_json (void **state)
{
    kiwi_deadletter d;
    kiwi_error_t err = NULL;
    char *json;
    kiwi_deadletter_init (&d);
    sample_deadletter_full (&d);
    expect_ok (kiwi_deadletter_to_json (&d, &json, &err), &err);
    assert_string_equal (json, "{\"v\":1,\"reason\":\"task.repo: required field missing\",\"topic\":\"kiwi.tasks\","
                               "\"partition\":3,\"offset\":1234567890123,\"original\":\"gqF2AaJpZKN0LTE=\","
                               "\"key\":\"aHR0cHM6Ly9naXQuZXhhbXBsZS5jb20vYWNtZS93aWRnZXRzLmdpdA==\","
                               "\"ts\":1764454490000,\"worker_id\":\"worker-a:7\","
                               "\"original_decoded\":{\"v\":1,\"id\":\"t-1\"}}");
    free (json);

    /* An original that is not msgpack: no original_decoded. */
    free (d.original);
    d.original = xstrdup ("\xc1garbage");
    d.original_len = 8;
    d.has_key = false;
    expect_ok (kiwi_deadletter_to_json (&d, &json, &err), &err);
    assert_non_null (strstr (json, "\"original\":\"wWdhcmJhZ2U=\",\"ts\""));
    assert_null (strstr (json, "original_decoded"));
    assert_null (strstr (json, "\"key\""));
    free (json);
    kiwi_deadletter_clear (&d);

    sample_deadletter_min (&d);
    expect_ok (kiwi_deadletter_to_json (&d, &json, &err), &err);
    assert_string_equal (json, "{\"v\":1,\"reason\":\"task: empty message\",\"topic\":\"kiwi.tasks\",\"partition\":-1,"
                               "\"offset\":-1,\"original\":\"\",\"ts\":3,\"worker_id\":\"w1\"}");
    free (json);
    kiwi_deadletter_clear (&d);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_roundtrip),
        cmocka_unit_test (test_decode_rules),
        cmocka_unit_test (test_encode_validates),
        cmocka_unit_test (test_to_json),
    };
    return cmocka_run_group_tests_name ("schemas_deadletter", tests, base_setup_deadletter, base_teardown);
}
