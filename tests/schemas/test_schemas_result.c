/*
 * test_schemas_result.c: the Result message: round trips, the status
 * X-macro, the diff-iff-fixed rule, every decode rule with the exact error
 * naming the field, the encoder's validation and the JSON rendering; the
 * optional fields of a diff too large for the results topic.
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

/* base (shared) is status fixed; base_nf is status needs_network. */
static char *base_nf;
static size_t base_nf_len;

static int
setup (void **state)
{
    int rc = base_setup_result (state);
    if (rc != 0)
        return rc;
    kiwi_result r;
    kiwi_error_t err = NULL;
    kiwi_result_init (&r);
    sample_result_not_fixed (&r);
    rc = kiwi_result_encode (&r, &base_nf, &base_nf_len, &err);
    kiwi_result_clear (&r);
    kiwi_error_free (&err);
    return rc;
}

static int
teardown (void **state)
{
    free (base_nf);
    return base_teardown (state);
}

static void
edit_nf (const char *path, edit_op op, msgpack_object value, const char *msg)
{
    expect_edit (decode_result, base_nf, base_nf_len, path, op, value, msg);
}

static void
test_roundtrip (void **state)
{
    kiwi_result r;
    kiwi_result_init (&r);
    sample_result_fixed (&r);
    roundtrip_result (&r);
    kiwi_result_clear (&r);
    sample_result_not_fixed (&r);
    roundtrip_result (&r);

    /* At the limits. */
    free (r.reason);
    r.reason = repeat ('r', KIWI_RESULT_REASON_MAX);
    r.rounds = 100;
    r.tokens_in = r.tokens_out = r.cost_usd_micros = UINT64_MAX;
    r.finished_at = 0;
    roundtrip_result (&r);
    r.status = KIWI_RESULT_FIXED;
    r.diff = repeat ('d', KIWI_RESULT_DIFF_MAX);
    roundtrip_result (&r);
    free (r.diff);
    r.diff = xstrdup (""); /* fixed with an empty diff: the tests already passed */
    free (r.reason);
    r.reason = NULL;
    roundtrip_result (&r);
    kiwi_result_clear (&r);
}

/* Every status round-trips by its string; the X-macro keeps names and values together. */
static void
test_every_status (void **state)
{
    static const char *names[] = { "fixed",    "not_fixed",  "install_failed", "needs_network",
                                   "budget_exhausted", "max_rounds", "timed_out",      "error",
                                   "gave_up" };
    assert_int_equal (KIWI_RESULT__END - 1, 9);
    for (int i = 0; i < 9; i++) {
        kiwi_result_status s;
        assert_int_equal (kiwi_result_status_parse (names[i], &s), 0);
        assert_int_equal (s, i + 1);
        assert_string_equal (kiwi_result_status_name (s), names[i]);
        if (s == KIWI_RESULT_FIXED)
            edit_nf ("status", EDIT_SET, obj_str (names[i]), "result.diff: required when status is fixed");
        else
            edit_nf ("status", EDIT_SET, obj_str (names[i]), NULL);
    }
    assert_null (kiwi_result_status_name (KIWI_RESULT_UNSET));
    assert_null (kiwi_result_status_name (KIWI_RESULT__END));
    edit ("status", EDIT_SET, obj_str ("FIXED"),
          "result.status: unknown value \"FIXED\" (expected fixed, not_fixed, install_failed, needs_network, "
          "budget_exhausted, max_rounds, timed_out, error, gave_up)");
}

static void
test_diff_iff_fixed (void **state)
{
    msgpack_object x = obj_nil ();
    edit ("diff", EDIT_DEL, x, "result.diff: required when status is fixed");
    edit ("diff", EDIT_SET, obj_str (""), NULL);
    edit ("status", EDIT_SET, obj_str ("not_fixed"), "result.diff: only allowed when status is fixed, status is not_fixed");
    edit_nf ("diff", EDIT_SET, obj_str ("x"), "result.diff: only allowed when status is fixed, status is needs_network");
    edit ("diff", EDIT_SET, obj_str ("\xff\xfe binary-ish"), NULL); /* raw bytes are fine */
    edit ("diff", EDIT_SET, obj_strn ("a\0b", 3), "result.diff: contains a NUL byte at byte 1");
}

static void
test_decode_rules (void **state)
{
    msgpack_object x = obj_nil ();
    const char *required[] = { "task_id", "status", "rounds", "tokens_in", "tokens_out", "cost_usd_micros",
                               "duration_ms", "worker_id", "finished_at", "v" };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char msg[96];
        snprintf (msg, sizeof msg, "result.%s: required field missing", required[i]);
        edit (required[i], EDIT_DEL, x, msg);
    }
    edit ("reason", EDIT_DEL, x, NULL);
    edit_nf ("reason", EDIT_DEL, x, NULL);

    edit ("task_id", EDIT_SET, obj_bool (true), "result.task_id: expected string, got boolean");
    edit ("status", EDIT_SET, obj_uint (1), "result.status: expected string, got integer");
    edit ("tokens_in", EDIT_SET, obj_str ("5"), "result.tokens_in: expected integer, got string");
    edit ("tokens_out", EDIT_SET, obj_int (-5), "result.tokens_out: must not be negative, got -5");
    edit ("cost_usd_micros", EDIT_SET, obj_float (0.01), "result.cost_usd_micros: expected integer, got float");
    edit ("duration_ms", EDIT_SET, obj_uint (UINT64_MAX), NULL);
    edit ("rounds", EDIT_SET, obj_uint (101), "result.rounds: must be between 0 and 100, got 101");
    edit ("finished_at", EDIT_SET, obj_int (-1), "result.finished_at: must be at least 0, got -1");
    edit ("worker_id", EDIT_SET, obj_str (""), "result.worker_id: must not be empty");
    edit ("task_id", EDIT_SET, obj_str ("x y"),
          "result.task_id: invalid character 0x20 at byte 1 (allowed: A-Z a-z 0-9 . _ : -)");

    char *reason = repeat ('r', KIWI_RESULT_REASON_MAX + 1);
    edit ("reason", EDIT_SET, obj_strn (reason, KIWI_RESULT_REASON_MAX), NULL);
    edit ("reason", EDIT_SET, obj_strn (reason, KIWI_RESULT_REASON_MAX + 1), "result.reason: longer than 65536 bytes");
    free (reason);
    char *diff = repeat ('d', KIWI_RESULT_DIFF_MAX + 1);
    edit ("diff", EDIT_SET, obj_strn (diff, KIWI_RESULT_DIFF_MAX), NULL);
    edit ("diff", EDIT_SET, obj_strn (diff, KIWI_RESULT_DIFF_MAX + 1), "result.diff: longer than 16777216 bytes");
    free (diff);
    edit ("reason", EDIT_SET, obj_str ("output: \xff\x01"), NULL);

    edit ("status", EDIT_ADD, obj_str ("fixed"), "result.status: duplicate key");
    edit ("v", EDIT_SET, obj_uint (9), "result.v: version 9 is newer than supported version 1");
    edit ("attempt", EDIT_SET, obj_uint (2), NULL);
}

static void
test_encode_validates (void **state)
{
    kiwi_result r;
    kiwi_error_t err = NULL;
    char *out = NULL;
    size_t len;
    kiwi_result_init (&r);
    expect_encode_refused_result (&r, "result.task_id: required field missing");
    sample_result_fixed (&r);
    r.status = KIWI_RESULT_UNSET;
    expect_encode_refused_result (&r, "result.status: required field missing");
    r.status = (kiwi_result_status) 42;
    expect_encode_refused_result (&r, "result.status: unknown status 42");
    r.status = KIWI_RESULT_TIMED_OUT;
    expect_encode_refused_result (&r, "result.diff: only allowed when status is fixed, status is timed_out");
    free (r.diff);
    r.diff = NULL;
    expect_ok (kiwi_result_encode (&r, &out, &len, &err), &err);
    free (out);
    r.status = KIWI_RESULT_FIXED;
    expect_encode_refused_result (&r, "result.diff: required when status is fixed");
    kiwi_result_clear (&r);
}

static void
test_to_json (void **state)
{
    kiwi_result r;
    kiwi_error_t err = NULL;
    char *json;
    kiwi_result_init (&r);
    sample_result_fixed (&r);
    expect_ok (kiwi_result_to_json (&r, &json, &err), &err);
    assert_string_equal (json, "{\"v\":1,\"task_id\":\"task-0001:retry.2_x\",\"status\":\"fixed\","
                               "\"reason\":\"tests pass after 2 rounds\","
                               "\"diff\":\"diff --git a/x.c b/x.c\\n--- a/x.c\\n+++ b/x.c\\n@@ -1 +1 @@\\n"
                               "-int x = 1;\\n+int x = 2; /* caf\\ufffd latin-1 */\\n\","
                               "\"rounds\":2,\"tokens_in\":123456,\"tokens_out\":7890,\"cost_usd_micros\":431000,"
                               "\"duration_ms\":98765,\"worker_id\":\"worker-a:7\",\"finished_at\":1764454562123}");
    free (json);
    kiwi_result_clear (&r);
}

/* diff_truncated, diff_bytes, diff_sha256, diff_location: optional, only
 * written when set, round-tripped, checked. */
static void
test_truncated_diff_fields (void **state)
{
    kiwi_result r;
    kiwi_error_t err = NULL;
    char *out = NULL, *json = NULL;
    size_t len;
    kiwi_result_init (&r);
    sample_result_fixed (&r);
    /* absent by default: the encoding is what it was */
    expect_ok (kiwi_result_encode (&r, &out, &len, &err), &err);
    assert_int_equal (len, base_len);
    assert_memory_equal (out, base, len);
    free (out);
    r.diff_truncated = true;
    r.diff_bytes = 123456;
    r.diff_sha256 = xstrdup ("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    r.diff_location = xstrdup ("redis:kiwi:diff:task-0001 file://worker-a/var/lib/kiwi/results/task-0001.diff");
    roundtrip_result (&r);
    expect_ok (kiwi_result_to_json (&r, &json, &err), &err);
    assert_non_null (strstr (json, "\"diff_truncated\":true,\"diff_bytes\":123456,\"diff_sha256\":\"0123"));
    assert_non_null (strstr (json, "\"diff_location\":\"redis:kiwi:diff:task-0001 file://"));
    free (json);
    /* the diff left out entirely */
    free (r.diff);
    r.diff = xstrdup ("");
    roundtrip_result (&r);
    /* rules */
    r.diff_bytes = 0;
    free (r.diff);
    r.diff = xstrdup ("abc");
    expect_encode_refused_result (&r, "result.diff_bytes: 0 is less than the diff carried (3 bytes)");
    r.diff_bytes = 3;
    r.diff_sha256[0] = 'A';
    expect_encode_refused_result (&r, "result.diff_sha256: not lowercase hex");
    free (r.diff_sha256);
    r.diff_sha256 = xstrdup ("abc");
    expect_encode_refused_result (&r, "result.diff_sha256: shorter than 64 bytes");
    free (r.diff_sha256);
    r.diff_sha256 = NULL;
    r.status = KIWI_RESULT_NOT_FIXED;
    free (r.diff);
    r.diff = NULL;
    expect_encode_refused_result (&r, "result.diff_truncated: only allowed with a diff (status fixed)");
    kiwi_result_clear (&r);
}

/* task_sha256: optional, written only when set (an older result encodes
 * as before), round-tripped, rendered, checked. */
static void
test_task_sha256 (void **state)
{
    kiwi_result r;
    kiwi_error_t err = NULL;
    char *json = NULL;
    kiwi_result_init (&r);
    sample_result_not_fixed (&r);
    r.task_sha256 = xstrdup ("fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210");
    roundtrip_result (&r);
    expect_ok (kiwi_result_to_json (&r, &json, &err), &err);
    assert_non_null (strstr (json, ",\"task_sha256\":\"fedcba98"));
    free (json);
    r.task_sha256[63] = 'G';
    expect_encode_refused_result (&r, "result.task_sha256: not lowercase hex");
    free (r.task_sha256);
    r.task_sha256 = xstrdup ("fedcba");
    expect_encode_refused_result (&r, "result.task_sha256: shorter than 64 bytes");
    kiwi_result_clear (&r);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_truncated_diff_fields),
        cmocka_unit_test (test_task_sha256),
        cmocka_unit_test (test_roundtrip),
        cmocka_unit_test (test_every_status),
        cmocka_unit_test (test_diff_iff_fixed),
        cmocka_unit_test (test_decode_rules),
        cmocka_unit_test (test_encode_validates),
        cmocka_unit_test (test_to_json),
    };
    return cmocka_run_group_tests_name ("schemas_result", tests, setup, teardown);
}
