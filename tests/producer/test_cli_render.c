/*
 * test_cli_render.c: messages as `kiwi tail` prints them: each known type
 * through its schema's _to_json, unknown topics through the generic
 * msgpack renderer, undecodable bytes as an error line that keeps them in
 * base64, the --meta wrapper, and the task id used by --task.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "producer/render.h"
#include "test_schemas_samples.h"

static void
test_base64 (void **state)
{
    static const char *in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
    static const char *out[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
    for (size_t i = 0; i < 7; i++) {
        char *b = kiwi_base64 (in[i], strlen (in[i]));
        assert_string_equal (b, out[i]);
        free (b);
    }
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char) i;
    char *b = kiwi_base64 (all, 3);
    assert_string_equal (b, "AAEC");
    free (b);
    b = kiwi_base64 (all + 251, 5);
    assert_string_equal (b, "+/z9/v8=");
    free (b);
}

static void
test_type_names (void **state)
{
    kiwi_msg_type t;
    assert_int_equal (kiwi_msg_type_parse ("deadletter", &t), 0);
    assert_int_equal (t, KIWI_MSG_DEADLETTER);
    assert_int_equal (kiwi_msg_type_parse ("raw", &t), 0);
    assert_int_equal (t, KIWI_MSG_RAW);
    assert_int_equal (kiwi_msg_type_parse ("results", &t), -1);
    assert_int_equal (kiwi_msg_type_from_short ("results", &t), 0);
    assert_int_equal (t, KIWI_MSG_RESULT);
    assert_int_equal (kiwi_msg_type_from_short ("dlq", &t), 0);
    assert_int_equal (t, KIWI_MSG_DEADLETTER);
    assert_int_equal (kiwi_msg_type_from_short ("heartbeats", &t), 0);
    assert_int_equal (kiwi_msg_type_from_short ("raw", &t), -1);
    assert_int_equal (kiwi_msg_type_from_short ("kiwi.results", &t), -1);
}

/* Renders buf as `type` without wrapping. */
static char *
render (kiwi_msg_type type, const char *buf, size_t len, char **tid, bool *decoded)
{
    char *json = NULL;
    kiwi_error_t err = NULL;
    kiwi_msg_meta m = { "kiwi.test", 3, 42, 1764450000000, "k", 1 };
    assert_int_equal (kiwi_render_message (type, &m, buf, len, false, &json, tid, decoded, &err), 0);
    return json;
}

static void
test_known_types (void **state)
{
    kiwi_error_t err = NULL;
    char *buf = NULL, *want = NULL, *got = NULL, *tid = NULL;
    size_t len = 0;
    bool decoded = false;

    kiwi_task t;
    kiwi_task_init (&t);
    sample_task_full (&t);
    assert_int_equal (kiwi_task_encode (&t, &buf, &len, &err), 0);
    assert_int_equal (kiwi_task_to_json (&t, &want, &err), 0);
    got = render (KIWI_MSG_TASK, buf, len, &tid, &decoded);
    assert_true (decoded);
    assert_string_equal (got, want);
    assert_string_equal (tid, t.id);
    free (buf), free (want), free (got), free (tid);
    kiwi_task_clear (&t);

    kiwi_progress p;
    kiwi_progress_init (&p);
    sample_progress_full (&p);
    assert_int_equal (kiwi_progress_encode (&p, &buf, &len, &err), 0);
    assert_int_equal (kiwi_progress_to_json (&p, &want, &err), 0);
    got = render (KIWI_MSG_PROGRESS, buf, len, &tid, &decoded);
    assert_string_equal (got, want);
    assert_string_equal (tid, p.task_id);
    free (buf), free (want), free (got), free (tid);
    kiwi_progress_clear (&p);

    kiwi_result r;
    kiwi_result_init (&r);
    sample_result_fixed (&r);
    assert_int_equal (kiwi_result_encode (&r, &buf, &len, &err), 0);
    assert_int_equal (kiwi_result_to_json (&r, &want, &err), 0);
    got = render (KIWI_MSG_RESULT, buf, len, &tid, &decoded);
    assert_string_equal (got, want);
    assert_string_equal (tid, r.task_id);
    free (buf), free (want), free (got), free (tid);
    kiwi_result_clear (&r);

    kiwi_heartbeat h;
    kiwi_heartbeat_init (&h);
    sample_heartbeat_full (&h);
    assert_int_equal (kiwi_heartbeat_encode (&h, &buf, &len, &err), 0);
    assert_int_equal (kiwi_heartbeat_to_json (&h, &want, &err), 0);
    got = render (KIWI_MSG_HEARTBEAT, buf, len, &tid, &decoded);
    assert_string_equal (got, want);
    assert_null (tid); /* heartbeats are about a worker */
    free (buf), free (want), free (got);
    kiwi_heartbeat_clear (&h);

    kiwi_deadletter d;
    kiwi_deadletter_init (&d);
    sample_deadletter_full (&d);
    assert_int_equal (kiwi_deadletter_encode (&d, &buf, &len, &err), 0);
    assert_int_equal (kiwi_deadletter_to_json (&d, &want, &err), 0);
    got = render (KIWI_MSG_DEADLETTER, buf, len, NULL, &decoded);
    assert_string_equal (got, want);
    free (buf), free (want), free (got);
    kiwi_deadletter_clear (&d);
}

static void
test_deadletter_of_a_task_has_its_id (void **state)
{
    kiwi_error_t err = NULL;
    kiwi_task t;
    kiwi_task_init (&t);
    sample_task_min (&t);
    char *orig = NULL;
    size_t olen = 0;
    assert_int_equal (kiwi_task_encode (&t, &orig, &olen, &err), 0);
    kiwi_deadletter d;
    kiwi_deadletter_init (&d);
    d.reason = strdup ("task.limits.max_rounds: must be between 1 and 100, got 0");
    d.topic = strdup ("kiwi.tasks");
    d.partition = 1;
    d.offset = 7;
    d.original = orig;
    d.original_len = olen;
    d.ts = 1764450000000;
    d.worker_id = strdup ("w-1");
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal (kiwi_deadletter_encode (&d, &buf, &len, &err), 0);
    char *tid = NULL;
    bool decoded;
    char *got = render (KIWI_MSG_DEADLETTER, buf, len, &tid, &decoded);
    assert_string_equal (tid, t.id);
    free (got), free (tid), free (buf);
    kiwi_deadletter_clear (&d);
    kiwi_task_clear (&t);
}

static void
test_undecodable (void **state)
{
    char *tid = NULL;
    bool decoded = true;
    /* 0xc1 is never used in msgpack */
    const char garbage[] = "\xc1\xff\x00zz";
    char *got = render (KIWI_MSG_RESULT, garbage, 5, &tid, &decoded);
    assert_false (decoded);
    assert_null (tid);
    json_t *o = json_loads (got, 0, NULL);
    assert_non_null (o);
    assert_non_null (json_string_value (json_object_get (o, "error")));
    assert_string_equal (json_string_value (json_object_get (o, "type")), "result");
    assert_string_equal (json_string_value (json_object_get (o, "topic")), "kiwi.test");
    assert_int_equal (json_integer_value (json_object_get (o, "partition")), 3);
    assert_int_equal (json_integer_value (json_object_get (o, "offset")), 42);
    assert_string_equal (json_string_value (json_object_get (o, "key")), "k");
    assert_string_equal (json_string_value (json_object_get (o, "raw_base64")), "wf8Aeno=");
    assert_null (json_object_get (o, "raw_msgpack"));
    json_decref (o);
    free (got);

    /* valid msgpack, wrong message: the reason names the field, the value is kept */
    const char map[] = "\x82\xa1v\x01\xa6status\xa5" "fixed"; /* {"v":1,"status":"fixed"} */
    got = render (KIWI_MSG_RESULT, map, sizeof map - 1, &tid, &decoded);
    o = json_loads (got, 0, NULL);
    assert_string_equal (json_string_value (json_object_get (o, "error")), "result.rounds: required field missing");
    json_t *raw = json_object_get (o, "raw_msgpack");
    assert_string_equal (json_string_value (json_object_get (raw, "status")), "fixed");
    json_decref (o);
    free (got);

    /* empty message */
    got = render (KIWI_MSG_PROGRESS, "", 0, &tid, &decoded);
    o = json_loads (got, 0, NULL);
    assert_non_null (json_object_get (o, "error"));
    assert_string_equal (json_string_value (json_object_get (o, "raw_base64")), "");
    json_decref (o);
    free (got);
}

static void
test_raw_topic (void **state)
{
    char *tid = NULL;
    bool decoded = false;
    const char map[] = "\x82\xa7task_id\xa3t-1\xa1n\x2a"; /* {"task_id":"t-1","n":42} */
    char *got = render (KIWI_MSG_RAW, map, sizeof map - 1, &tid, &decoded);
    assert_true (decoded);
    assert_string_equal (got, "{\"task_id\":\"t-1\",\"n\":42}");
    assert_string_equal (tid, "t-1");
    free (got), free (tid);
    got = render (KIWI_MSG_RAW, "not msgpack\xc1", 12, &tid, &decoded);
    assert_false (decoded);
    json_t *o = json_loads (got, 0, NULL);
    assert_string_equal (json_string_value (json_object_get (o, "type")), "raw");
    json_decref (o);
    free (got);
}

static void
test_wrap_and_keys (void **state)
{
    kiwi_error_t err = NULL;
    kiwi_result r;
    kiwi_result_init (&r);
    sample_result_not_fixed (&r);
    r.duration_ms = 1234; /* the sample's UINT64_MAX is beyond what jansson reads back */
    char *buf = NULL, *want = NULL;
    size_t len = 0;
    assert_int_equal (kiwi_result_encode (&r, &buf, &len, &err), 0);
    assert_int_equal (kiwi_result_to_json (&r, &want, &err), 0);
    char *json = NULL;
    bool decoded;
    kiwi_msg_meta m = { "kiwi.results", 0, 9, 1764450000123, "\xff\xfe", 2 };
    assert_int_equal (kiwi_render_message (KIWI_MSG_RESULT, &m, buf, len, true, &json, NULL, &decoded, &err), 0);
    json_t *o = json_loads (json, 0, NULL);
    assert_non_null (o);
    assert_string_equal (json_string_value (json_object_get (o, "topic")), "kiwi.results");
    assert_int_equal (json_integer_value (json_object_get (o, "offset")), 9);
    assert_int_equal (json_integer_value (json_object_get (o, "timestamp")), 1764450000123LL);
    assert_string_equal (json_string_value (json_object_get (json_object_get (o, "key"), "base64")), "//4=");
    json_t *inner = json_loads (want, 0, NULL);
    assert_true (json_equal (json_object_get (o, "message"), inner));
    /* the message is embedded as the schema printed it, byte for byte */
    assert_non_null (strstr (json, want));
    json_decref (inner);
    json_decref (o);
    free (json);

    kiwi_msg_meta nokey = { "kiwi.results", 0, 9, -1, NULL, 0 };
    assert_int_equal (kiwi_render_message (KIWI_MSG_RESULT, &nokey, buf, len, true, &json, NULL, &decoded, &err), 0);
    o = json_loads (json, 0, NULL);
    assert_true (json_is_null (json_object_get (o, "key")));
    assert_null (json_object_get (o, "timestamp"));
    json_decref (o);
    free (json);
    free (buf), free (want);
    kiwi_result_clear (&r);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_base64),      cmocka_unit_test (test_type_names),
        cmocka_unit_test (test_known_types), cmocka_unit_test (test_deadletter_of_a_task_has_its_id),
        cmocka_unit_test (test_undecodable), cmocka_unit_test (test_raw_topic),
        cmocka_unit_test (test_wrap_and_keys),
    };
    return cmocka_run_group_tests_name ("cli_render", tests, NULL, NULL);
}
