/*
 * test_schemas_heartbeat.c: the Heartbeat message: round trips (with and
 * without egress checks), every decode rule with the exact error naming the
 * field (array entries by index), the encoder's validation and the JSON
 * rendering.
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
    kiwi_heartbeat h;
    kiwi_heartbeat_init (&h);
    sample_heartbeat_full (&h);
    roundtrip_heartbeat (&h);
    kiwi_heartbeat_clear (&h);
    sample_heartbeat_min (&h);
    roundtrip_heartbeat (&h);

    /* At the limits: 32 egress checks with the longest strings. */
    free (h.worker_id);
    h.worker_id = repeat ('w', 128);
    free (h.version);
    h.version = repeat ('1', 64);
    h.slots_total = h.slots_busy = KIWI_HEARTBEAT_SLOTS_MAX;
    h.tasks_done = h.tasks_failed = h.cache_hits = h.cache_misses = UINT64_MAX;
    h.degraded_reason = repeat ('r', 4096);
    h.n_egress = 32;
    h.egress = calloc (32, sizeof *h.egress);
    for (int i = 0; i < 32; i++) {
        h.egress[i].name = repeat ('n', 64);
        h.egress[i].ok = i % 2 == 0;
        h.egress[i].detail = i % 3 == 0 ? NULL : repeat ('d', 4096);
        h.egress[i].checked_at = i;
    }
    roundtrip_heartbeat (&h);
    kiwi_heartbeat_clear (&h);
}

static void
test_decode_rules (void **state)
{
    msgpack_object x = obj_nil ();
    const char *required[] = { "worker_id",    "version",    "ts",           "slots_total", "slots_busy",
                               "tasks_done",   "tasks_failed", "cache_hits", "cache_misses", "degraded",
                               "redis_ok",     "v" };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char msg[96];
        snprintf (msg, sizeof msg, "heartbeat.%s: required field missing", required[i]);
        edit (required[i], EDIT_DEL, x, msg);
    }
    edit ("degraded_reason", EDIT_DEL, x, NULL);
    edit ("egress", EDIT_DEL, x, NULL);
    edit ("egress.1.detail", EDIT_DEL, x, NULL);
    edit ("egress.0.name", EDIT_DEL, x, "heartbeat.egress[0].name: required field missing");
    edit ("egress.1.ok", EDIT_DEL, x, "heartbeat.egress[1].ok: required field missing");
    edit ("egress.1.checked_at", EDIT_DEL, x, "heartbeat.egress[1].checked_at: required field missing");

    edit ("degraded", EDIT_SET, obj_uint (1), "heartbeat.degraded: expected boolean, got integer");
    edit ("redis_ok", EDIT_SET, obj_str ("true"), "heartbeat.redis_ok: expected boolean, got string");
    edit ("egress", EDIT_SET, obj_map (NULL, 0), "heartbeat.egress: expected array, got map");
    edit ("egress.0", EDIT_SET, obj_str ("metadata"), "heartbeat.egress[0]: expected map, got string");
    edit ("egress.1.ok", EDIT_SET, obj_nil (), "heartbeat.egress[1].ok: expected boolean, got nil");
    edit ("egress.1.name", EDIT_SET, obj_str ("has space"),
          "heartbeat.egress[1].name: invalid character 0x20 at byte 3 (allowed: A-Z a-z 0-9 . _ : -)");
    edit ("egress.0.checked_at", EDIT_SET, obj_int (-2), "heartbeat.egress[0].checked_at: must be at least 0, got -2");
    edit ("egress.0.ok", EDIT_ADD, obj_bool (true), "heartbeat.egress[0].ok: duplicate key");
    edit ("egress.0.future", EDIT_SET, obj_uint (1), NULL);
    char *d = repeat ('d', 4097);
    edit ("egress.0.detail", EDIT_SET, obj_str (d), "heartbeat.egress[0].detail: longer than 4096 bytes");
    edit ("degraded_reason", EDIT_SET, obj_str (d), "heartbeat.degraded_reason: longer than 4096 bytes");
    free (d);
    edit ("egress.0.detail", EDIT_SET, obj_str ("curl: (7) \xff"), NULL);

    msgpack_object_kv kv[4] = {
        { obj_str ("name"), obj_str ("x") },
        { obj_str ("ok"), obj_bool (true) },
        { obj_str ("checked_at"), obj_uint (1) },
    };
    msgpack_object entries[33];
    for (int i = 0; i < 33; i++)
        entries[i] = obj_map (kv, 3);
    edit ("egress", EDIT_SET, obj_array (entries, 32), NULL);
    edit ("egress", EDIT_SET, obj_array (entries, 33), "heartbeat.egress: more than 32 entries");
    edit ("egress", EDIT_SET, obj_array (entries, 0), NULL);

    edit ("slots_total", EDIT_SET, obj_uint (4097), "heartbeat.slots_total: must be between 0 and 4096, got 4097");
    edit ("slots_busy", EDIT_SET, obj_uint (5), "heartbeat.slots_busy: 5 is greater than slots_total 4");
    edit ("slots_busy", EDIT_SET, obj_uint (4), NULL);
    edit ("version", EDIT_SET, obj_str ("0.1 beta"),
          "heartbeat.version: invalid character 0x20 at byte 3 (allowed: printable ASCII without spaces)");
    char *v = repeat ('1', 65);
    edit ("version", EDIT_SET, obj_str (v), "heartbeat.version: longer than 64 bytes");
    free (v);
    edit ("ts", EDIT_SET, obj_str ("now"), "heartbeat.ts: expected integer, got string");
    edit ("worker_id", EDIT_ADD, obj_str ("w2"), "heartbeat.worker_id: duplicate key");
    edit ("v", EDIT_SET, obj_uint (0), "heartbeat.v: unsupported version 0");
    edit ("load_avg", EDIT_SET, obj_float (0.3), NULL);
}

static void
test_encode_validates (void **state)
{
    kiwi_heartbeat h;
    kiwi_error_t err = NULL;
    char *out = NULL;
    size_t len;
    kiwi_heartbeat_init (&h);
    sample_heartbeat_full (&h);
    h.slots_busy = 5;
    expect_encode_refused_heartbeat (&h, "heartbeat.slots_busy: 5 is greater than slots_total 4");
    h.slots_busy = 0;
    free (h.egress[1].name);
    h.egress[1].name = NULL;
    expect_encode_refused_heartbeat (&h, "heartbeat.egress[1].name: required field missing");
    h.egress[1].name = xstrdup ("ok");
    h.n_egress = 33;
    expect_encode_refused_heartbeat (&h, "heartbeat.egress: more than 32 entries");
    h.n_egress = 2;
    expect_ok (kiwi_heartbeat_encode (&h, &out, &len, &err), &err);
    free (out);
    kiwi_heartbeat_clear (&h);
}

static void
test_to_json (void **state)
{
    kiwi_heartbeat h;
    kiwi_error_t err = NULL;
    char *json;
    kiwi_heartbeat_init (&h);
    sample_heartbeat_full (&h);
    expect_ok (kiwi_heartbeat_to_json (&h, &json, &err), &err);
    assert_string_equal (json, "{\"v\":1,\"worker_id\":\"worker-a:7\",\"version\":\"0.1.0+g1a2b3c\",\"ts\":1764454480000,"
                               "\"slots_total\":4,\"slots_busy\":3,\"tasks_done\":1000,\"tasks_failed\":7,"
                               "\"cache_hits\":50,\"cache_misses\":12,\"degraded\":true,"
                               "\"degraded_reason\":\"egress check metadata-blocked failed\",\"redis_ok\":false,"
                               "\"egress\":[{\"name\":\"metadata-blocked\",\"ok\":false,"
                               "\"detail\":\"GET http://169.254.169.254/ answered 200\",\"checked_at\":1764454479000},"
                               "{\"name\":\"https-reachable\",\"ok\":true,\"checked_at\":1764454479500}]}");
    free (json);
    kiwi_heartbeat_clear (&h);
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
    return cmocka_run_group_tests_name ("schemas_heartbeat", tests, base_setup_heartbeat, base_teardown);
}
