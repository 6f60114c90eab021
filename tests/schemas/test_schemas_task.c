/*
 * test_schemas_task.c: the Task message: round trips (all fields, only the
 * required ones, every string at its limit), defaults, every decode rule
 * with the exact error message naming the field, the encoder's validation,
 * and the JSON rendering.
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
test_roundtrip_full (void **state)
{
    kiwi_task t;
    kiwi_task_init (&t);
    sample_task_full (&t);
    roundtrip_task (&t);
    kiwi_task_clear (&t);
}

static void
test_roundtrip_min (void **state)
{
    kiwi_task t, out;
    kiwi_error_t err = NULL;
    char *buf;
    size_t len;
    kiwi_task_init (&t);
    sample_task_min (&t);
    roundtrip_task (&t);

    expect_ok (kiwi_task_encode (&t, &buf, &len, &err), &err);
    expect_ok (kiwi_task_decode (buf, len, &out, &err), &err);
    assert_string_equal (out.id, "t1");
    assert_null (out.repo.subdir);
    assert_null (out.ci_context);
    assert_false (out.has_model);
    assert_int_equal (out.n_test_credentials, 0);
    assert_null (out.test_credentials);
    assert_null (out.source);
    assert_false (out.limits.has_session_budget_tokens);
    assert_false (out.limits.has_session_budget_usd_micros);
    kiwi_task_clear (&out);
    free (buf);
    kiwi_task_clear (&t);
}

static void
test_defaults_when_limits_absent (void **state)
{
    kiwi_task out;
    kiwi_error_t err = NULL;
    size_t len;
    msgpack_object none = obj_nil ();
    char *buf = wire_edit (base, base_len, "limits", EDIT_DEL, &none, &len);
    expect_ok (kiwi_task_decode (buf, len, &out, &err), &err);
    assert_int_equal (out.limits.max_rounds, 8);
    assert_int_equal (out.limits.timeout_seconds, 1800);
    assert_int_equal (out.limits.disk_mb, 2048);
    assert_false (out.limits.has_session_budget_tokens);
    kiwi_task_clear (&out);
    free (buf);

    /* An empty limits map: the same defaults. */
    msgpack_object empty = obj_map (NULL, 0);
    buf = wire_edit (base, base_len, "limits", EDIT_SET, &empty, &len);
    expect_ok (kiwi_task_decode (buf, len, &out, &err), &err);
    assert_int_equal (out.limits.max_rounds, 8);
    assert_int_equal (out.limits.timeout_seconds, 1800);
    assert_int_equal (out.limits.disk_mb, 2048);
    kiwi_task_clear (&out);
    free (buf);

    /* One field given, the others defaulted. */
    msgpack_object three = obj_uint (3);
    buf = wire_edit (base, base_len, "limits", EDIT_SET, &empty, &len);
    size_t len2;
    char *buf2 = wire_edit (buf, len, "limits.max_rounds", EDIT_SET, &three, &len2);
    expect_ok (kiwi_task_decode (buf2, len2, &out, &err), &err);
    assert_int_equal (out.limits.max_rounds, 3);
    assert_int_equal (out.limits.disk_mb, 2048);
    kiwi_task_clear (&out);
    free (buf);
    free (buf2);
}

/* Every string at its longest, every number at both ends of its range. */
static void
test_roundtrip_at_limits (void **state)
{
    kiwi_task t;
    kiwi_task_init (&t);
    t.id = repeat ('a', 128);
    t.repo.url = repeat ('u', 4096);
    t.repo.ref = repeat ('r', 256);
    t.repo.subdir = repeat ('s', 1024);
    t.test_command = repeat ('c', 8192);
    t.goal = repeat ('g', 65536);
    t.ci_context = repeat ('x', 262144);
    t.limits.max_rounds = 100;
    t.limits.has_session_budget_tokens = true;
    t.limits.session_budget_tokens = UINT64_MAX;
    t.limits.has_session_budget_usd_micros = true;
    t.limits.session_budget_usd_micros = 1;
    t.limits.timeout_seconds = 86400;
    t.limits.disk_mb = 1048576;
    t.has_model = true;
    t.model.provider = KIWI_PROVIDER_SCRIPTED;
    t.model.name = repeat ('n', 256);
    t.model.base_url = repeat ('b', 2048);
    t.n_test_credentials = 64;
    t.test_credentials = calloc (64, sizeof (char *));
    for (int i = 0; i < 64; i++) {
        t.test_credentials[i] = repeat ('A', 128);
        t.test_credentials[i][127] = (char) ('0' + i % 10);
    }
    t.submitted_at = INT64_MAX;
    t.source = repeat ('s', 64);
    roundtrip_task (&t);

    t.limits.max_rounds = 1;
    t.limits.timeout_seconds = 1;
    t.limits.disk_mb = 16;
    t.submitted_at = 0;
    free (t.ci_context);
    t.ci_context = xstrdup ("");
    roundtrip_task (&t);
    kiwi_task_clear (&t);
}

static void
test_every_provider (void **state)
{
    static const char *names[] = { "anthropic", "openai", "gemini", "scripted" };
    for (size_t i = 0; i < 4; i++) {
        kiwi_provider p;
        assert_int_equal (kiwi_provider_parse (names[i], &p), 0);
        assert_string_equal (kiwi_provider_name (p), names[i]);
        edit ("model.provider", EDIT_SET, obj_str (names[i]), NULL);
    }
    kiwi_provider p;
    assert_true (kiwi_provider_parse ("Anthropic", &p) < 0);
    assert_null (kiwi_provider_name (KIWI_PROVIDER_UNSET));
    assert_null (kiwi_provider_name (KIWI_PROVIDER__END));
}

static void
test_required_fields (void **state)
{
    msgpack_object x = obj_nil ();
    edit ("v", EDIT_DEL, x, "task.v: required field missing");
    edit ("id", EDIT_DEL, x, "task.id: required field missing");
    edit ("repo", EDIT_DEL, x, "task.repo: required field missing");
    edit ("repo.url", EDIT_DEL, x, "task.repo.url: required field missing");
    edit ("repo.ref", EDIT_DEL, x, "task.repo.ref: required field missing");
    edit ("test_command", EDIT_DEL, x, "task.test_command: required field missing");
    edit ("goal", EDIT_DEL, x, "task.goal: required field missing");
    edit ("submitted_at", EDIT_DEL, x, "task.submitted_at: required field missing");
    edit ("model.provider", EDIT_DEL, x, "task.model.provider: required field missing");
    edit ("model.name", EDIT_DEL, x, "task.model.name: required field missing");
    /* Optional ones may go. */
    edit ("repo.subdir", EDIT_DEL, x, NULL);
    edit ("ci_context", EDIT_DEL, x, NULL);
    edit ("limits", EDIT_DEL, x, NULL);
    edit ("limits.session_budget_tokens", EDIT_DEL, x, NULL);
    edit ("limits.session_budget_usd_micros", EDIT_DEL, x, NULL);
    edit ("model", EDIT_DEL, x, NULL);
    edit ("model.base_url", EDIT_DEL, x, NULL);
    edit ("test_credentials", EDIT_DEL, x, NULL);
    edit ("source", EDIT_DEL, x, NULL);
}

static void
test_wrong_types (void **state)
{
    edit ("v", EDIT_SET, obj_str ("1"), "task.v: expected integer, got string");
    edit ("v", EDIT_SET, obj_float (1.0), "task.v: expected integer, got float");
    edit ("id", EDIT_SET, obj_uint (7), "task.id: expected string, got integer");
    edit ("id", EDIT_SET, obj_nil (), "task.id: expected string, got nil");
    edit ("id", EDIT_SET, obj_bin ("ab", 2), "task.id: expected string, got binary");
    edit ("repo", EDIT_SET, obj_str ("https://x"), "task.repo: expected map, got string");
    edit ("repo.url", EDIT_SET, obj_bool (true), "task.repo.url: expected string, got boolean");
    edit ("repo.subdir", EDIT_SET, obj_array (NULL, 0), "task.repo.subdir: expected string, got array");
    edit ("goal", EDIT_SET, obj_map (NULL, 0), "task.goal: expected string, got map");
    edit ("limits", EDIT_SET, obj_array (NULL, 0), "task.limits: expected map, got array");
    edit ("limits.max_rounds", EDIT_SET, obj_str ("8"), "task.limits.max_rounds: expected integer, got string");
    edit ("limits.max_rounds", EDIT_SET, obj_int (-1), "task.limits.max_rounds: must not be negative, got -1");
    edit ("limits.timeout_seconds", EDIT_SET, obj_float (60.0),
          "task.limits.timeout_seconds: expected integer, got float");
    edit ("limits.session_budget_tokens", EDIT_SET, obj_nil (),
          "task.limits.session_budget_tokens: expected integer, got nil");
    edit ("model", EDIT_SET, obj_nil (), "task.model: expected map, got nil");
    edit ("model.provider", EDIT_SET, obj_uint (1), "task.model.provider: expected string, got integer");
    edit ("test_credentials", EDIT_SET, obj_str ("NPM_TOKEN"),
          "task.test_credentials: expected array, got string");
    edit ("test_credentials.1", EDIT_SET, obj_uint (5), "task.test_credentials[1]: expected string, got integer");
    edit ("submitted_at", EDIT_SET, obj_str ("2025"), "task.submitted_at: expected integer, got string");
    edit ("submitted_at", EDIT_SET, obj_uint ((uint64_t) INT64_MAX + 1),
          "task.submitted_at: out of range: 9223372036854775808 is greater than 9223372036854775807");
    edit ("source", EDIT_SET, obj_bool (false), "task.source: expected string, got boolean");
}

static void
test_lengths (void **state)
{
    struct {
        const char *path;
        size_t max;
        char fill;
        const char *msg;
    } cases[] = {
        { "id", 128, 'a', "task.id: longer than 128 bytes" },
        { "repo.url", 4096, 'u', "task.repo.url: longer than 4096 bytes" },
        { "repo.ref", 256, 'r', "task.repo.ref: longer than 256 bytes" },
        { "repo.subdir", 1024, 's', "task.repo.subdir: longer than 1024 bytes" },
        { "test_command", 8192, 'c', "task.test_command: longer than 8192 bytes" },
        { "goal", 65536, 'g', "task.goal: longer than 65536 bytes" },
        { "ci_context", 262144, 'x', "task.ci_context: longer than 262144 bytes" },
        { "model.name", 256, 'n', "task.model.name: longer than 256 bytes" },
        { "model.base_url", 2048, 'b', "task.model.base_url: longer than 2048 bytes" },
        { "test_credentials.0", 128, 'A', "task.test_credentials[0]: longer than 128 bytes" },
        { "source", 64, 's', "task.source: longer than 64 bytes" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = repeat (cases[i].fill, cases[i].max + 1);
        edit (cases[i].path, EDIT_SET, obj_strn (s, cases[i].max), NULL);
        edit (cases[i].path, EDIT_SET, obj_strn (s, cases[i].max + 1), cases[i].msg);
        free (s);
    }

    const char *empty[][2] = {
        { "id", "task.id: must not be empty" },
        { "repo.url", "task.repo.url: must not be empty" },
        { "repo.ref", "task.repo.ref: must not be empty" },
        { "repo.subdir", "task.repo.subdir: must not be empty" },
        { "test_command", "task.test_command: must not be empty" },
        { "goal", "task.goal: must not be empty" },
        { "model.name", "task.model.name: must not be empty" },
        { "model.base_url", "task.model.base_url: must not be empty" },
        { "test_credentials.2", "task.test_credentials[2]: must not be empty" },
        { "source", "task.source: must not be empty" },
    };
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++)
        edit (empty[i][0], EDIT_SET, obj_str (""), empty[i][1]);
    edit ("ci_context", EDIT_SET, obj_str (""), NULL);

    /* 64 credentials pass, 65 do not. */
    msgpack_object names[65];
    for (int i = 0; i < 65; i++)
        names[i] = obj_str ("TOKEN");
    edit ("test_credentials", EDIT_SET, obj_array (names, 64), NULL);
    edit ("test_credentials", EDIT_SET, obj_array (names, 65), "task.test_credentials: more than 64 entries");
    edit ("test_credentials", EDIT_SET, obj_array (names, 0), NULL);
}

static void
test_characters (void **state)
{
    edit ("id", EDIT_SET, obj_str ("a/b"),
          "task.id: invalid character '/' at byte 1 (allowed: A-Z a-z 0-9 . _ : -)");
    edit ("id", EDIT_SET, obj_str ("a b"),
          "task.id: invalid character 0x20 at byte 1 (allowed: A-Z a-z 0-9 . _ : -)");
    edit ("id", EDIT_SET, obj_str ("\xc3\xa9"),
          "task.id: invalid character 0xc3 at byte 0 (allowed: A-Z a-z 0-9 . _ : -)");
    edit ("id", EDIT_SET, obj_str ("Az09._:-"), NULL);
    edit ("id", EDIT_SET, obj_strn ("a\0b", 3), "task.id: contains a NUL byte at byte 1");
    edit ("goal", EDIT_SET, obj_strn ("ok\0", 3), "task.goal: contains a NUL byte at byte 2");
    edit ("repo.url", EDIT_SET, obj_str ("--upload-pack=evil"), "task.repo.url: must not start with '-'");
    edit ("repo.ref", EDIT_SET, obj_str ("-b"), "task.repo.ref: must not start with '-'");
    edit ("repo.ref", EDIT_SET, obj_str ("main\n"), "task.repo.ref: control character 0x0a at byte 4");
    edit ("repo.url", EDIT_SET, obj_str ("https://x/\x7f"), "task.repo.url: control character 0x7f at byte 10");
    edit ("model.base_url", EDIT_SET, obj_str ("-x"), "task.model.base_url: must not start with '-'");
    edit ("repo.subdir", EDIT_SET, obj_str ("/etc"), "task.repo.subdir: must be a relative path");
    edit ("repo.subdir", EDIT_SET, obj_str (".."), "task.repo.subdir: must not contain a '..' component");
    edit ("repo.subdir", EDIT_SET, obj_str ("a/../b"), "task.repo.subdir: must not contain a '..' component");
    edit ("repo.subdir", EDIT_SET, obj_str ("a/.."), "task.repo.subdir: must not contain a '..' component");
    edit ("repo.subdir", EDIT_SET, obj_str ("../a"), "task.repo.subdir: must not contain a '..' component");
    edit ("repo.subdir", EDIT_SET, obj_str ("a/..b/c.."), NULL);
    edit ("repo.subdir", EDIT_SET, obj_str ("./a/b/"), NULL);
    edit ("test_credentials.0", EDIT_SET, obj_str ("npm_token"),
          "task.test_credentials[0]: invalid character 'n' at byte 0 (allowed: A-Z _)");
    edit ("test_credentials.0", EDIT_SET, obj_str ("1ABC"),
          "task.test_credentials[0]: invalid character '1' at byte 0 (allowed: A-Z _)");
    edit ("test_credentials.1", EDIT_SET, obj_str ("A-B"),
          "task.test_credentials[1]: invalid character '-' at byte 1 (allowed: A-Z 0-9 _)");
    edit ("test_credentials.1", EDIT_SET, obj_str ("_A1_B2"), NULL);
    edit ("model.name", EDIT_SET, obj_str ("claude sonnet"),
          "task.model.name: invalid character 0x20 at byte 6 (allowed: printable ASCII without spaces)");
    edit ("model.provider", EDIT_SET, obj_str ("mistral"),
          "task.model.provider: unknown value \"mistral\" (expected anthropic, openai, gemini, scripted)");
    edit ("model.provider", EDIT_SET, obj_str ("\x01x"),
          "task.model.provider: unknown value \"?x\" (expected anthropic, openai, gemini, scripted)");
    edit ("source", EDIT_SET, obj_str ("ci event"),
          "task.source: invalid character 0x20 at byte 2 (allowed: A-Z a-z 0-9 . _ : -)");
    edit ("source", EDIT_SET, obj_str ("some-future-source"), NULL);
}

static void
test_utf8 (void **state)
{
    /* Text fields need valid UTF-8 ... */
    edit ("goal", EDIT_SET, obj_str ("ok \xff"), "task.goal: invalid UTF-8 at byte 3");
    edit ("goal", EDIT_SET, obj_str ("\xc0\xaf"), "task.goal: invalid UTF-8 at byte 0");     /* overlong */
    edit ("goal", EDIT_SET, obj_str ("a\xed\xa0\x80"), "task.goal: invalid UTF-8 at byte 1"); /* surrogate */
    edit ("goal", EDIT_SET, obj_str ("\xf4\x90\x80\x80"), "task.goal: invalid UTF-8 at byte 0"); /* > U+10FFFF */
    edit ("goal", EDIT_SET, obj_str ("ab\xe2\x82"), "task.goal: invalid UTF-8 at byte 2");     /* truncated */
    edit ("goal", EDIT_SET, obj_str ("\xf0\x9f\x90\x9d \xe2\x82\xac \xc2\xa2"), NULL);
    edit ("test_command", EDIT_SET, obj_str ("\x80"), "task.test_command: invalid UTF-8 at byte 0");
    edit ("repo.url", EDIT_SET, obj_str ("https://\xfe"), "task.repo.url: invalid UTF-8 at byte 8");
    /* ... the CI log may carry any bytes but NUL. */
    edit ("ci_context", EDIT_SET, obj_str ("\xff\xfe\x80\xc0\xaf"), NULL);
}

static void
test_ranges (void **state)
{
    edit ("limits.max_rounds", EDIT_SET, obj_uint (0), "task.limits.max_rounds: must be between 1 and 100, got 0");
    edit ("limits.max_rounds", EDIT_SET, obj_uint (101), "task.limits.max_rounds: must be between 1 and 100, got 101");
    edit ("limits.max_rounds", EDIT_SET, obj_uint (1), NULL);
    edit ("limits.max_rounds", EDIT_SET, obj_uint (100), NULL);
    edit ("limits.max_rounds", EDIT_SET, obj_uint (1ull << 33),
          "task.limits.max_rounds: out of range: 8589934592 is greater than 4294967295");
    edit ("limits.timeout_seconds", EDIT_SET, obj_uint (0),
          "task.limits.timeout_seconds: must be between 1 and 86400, got 0");
    edit ("limits.timeout_seconds", EDIT_SET, obj_uint (86401),
          "task.limits.timeout_seconds: must be between 1 and 86400, got 86401");
    edit ("limits.disk_mb", EDIT_SET, obj_uint (15), "task.limits.disk_mb: must be between 16 and 1048576, got 15");
    edit ("limits.disk_mb", EDIT_SET, obj_uint (1048577),
          "task.limits.disk_mb: must be between 16 and 1048576, got 1048577");
    edit ("limits.session_budget_tokens", EDIT_SET, obj_uint (0),
          "task.limits.session_budget_tokens: must be at least 1, got 0");
    edit ("limits.session_budget_usd_micros", EDIT_SET, obj_uint (0),
          "task.limits.session_budget_usd_micros: must be at least 1, got 0");
    edit ("limits.session_budget_usd_micros", EDIT_SET, obj_uint (UINT64_MAX), NULL);
    edit ("submitted_at", EDIT_SET, obj_int (-1), "task.submitted_at: must be at least 0, got -1");
    edit ("submitted_at", EDIT_SET, obj_int (0), NULL);
}

static void
test_version (void **state)
{
    edit ("v", EDIT_SET, obj_uint (2), "task.v: version 2 is newer than supported version 1");
    edit ("v", EDIT_SET, obj_uint (UINT64_MAX),
          "task.v: version 18446744073709551615 is newer than supported version 1");
    edit ("v", EDIT_SET, obj_uint (0), "task.v: unsupported version 0");
    edit ("v", EDIT_SET, obj_int (-1), "task.v: must not be negative, got -1");
    edit ("v", EDIT_SET, obj_uint (1), NULL);
}

static void
test_unknown_keys_ignored (void **state)
{
    msgpack_object inner[2] = { obj_uint (1), obj_str ("x") };
    msgpack_object_kv kv[1] = { { obj_str ("deep"), obj_array (inner, 2) } };
    edit ("zz_future", EDIT_SET, obj_map (kv, 1), NULL);
    edit ("repo.mirror", EDIT_SET, obj_str ("https://mirror"), NULL);
    edit ("limits.max_memory_mb", EDIT_SET, obj_uint (1), NULL);
    edit ("model.temperature", EDIT_SET, obj_float (0.2), NULL);
    edit ("x", EDIT_SET, obj_bin ("\0\1", 2), NULL);
    edit ("", EDIT_SET, obj_nil (), NULL); /* an empty key is just another unknown key */

    /* The decoded message equals the one without the extra keys. */
    size_t len;
    msgpack_object extra = obj_map (kv, 1);
    char *buf = wire_edit (base, base_len, "zz_future", EDIT_SET, &extra, &len);
    kiwi_task a, b;
    kiwi_error_t err = NULL;
    char *ja, *jb;
    expect_ok (kiwi_task_decode (buf, len, &a, &err), &err);
    expect_ok (kiwi_task_decode (base, base_len, &b, &err), &err);
    expect_ok (kiwi_task_to_json (&a, &ja, &err), &err);
    expect_ok (kiwi_task_to_json (&b, &jb, &err), &err);
    assert_string_equal (ja, jb);
    free (ja);
    free (jb);
    free (buf);
    kiwi_task_clear (&a);
    kiwi_task_clear (&b);
}

static void
test_duplicate_and_odd_keys (void **state)
{
    edit ("id", EDIT_ADD, obj_str ("other"), "task.id: duplicate key");
    edit ("repo.url", EDIT_ADD, obj_str ("https://other"), "task.repo.url: duplicate key");
    edit ("limits.disk_mb", EDIT_ADD, obj_uint (32), "task.limits.disk_mb: duplicate key");
    edit ("zz", EDIT_ADD, obj_uint (1), NULL);

    /* Duplicated unknown keys are rejected too, also in large maps. */
    size_t len = base_len, l2;
    char *buf = malloc (len);
    memcpy (buf, base, len);
    for (int i = 0; i < 30; i++) {
        char key[16];
        snprintf (key, sizeof key, "x%d", i);
        msgpack_object v = obj_uint ((uint64_t) i);
        char *next = wire_edit (buf, len, key, EDIT_SET, &v, &l2);
        free (buf);
        buf = next;
        len = l2;
    }
    assert_int_equal (decode_task (buf, len, NULL), 0);
    expect_edit (decode_task, buf, len, "x17", EDIT_ADD, obj_str ("again"), "task.x17: duplicate key");
    expect_edit (decode_task, buf, len, "id", EDIT_ADD, obj_str ("again"), "task.id: duplicate key");
    free (buf);

    /* A key that is not a string. */
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init (&sb);
    msgpack_packer_init (&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map (&pk, 2);
    msgpack_pack_str_with_body (&pk, "v", 1);
    msgpack_pack_uint64 (&pk, 1);
    msgpack_pack_uint64 (&pk, 7);
    msgpack_pack_nil (&pk);
    kiwi_error_t err = NULL;
    expect_invalid (decode_task (sb.data, sb.size, &err), &err, "task: key #1 is integer, expected string");
    msgpack_sbuffer_destroy (&sb);
}

static void
test_framing (void **state)
{
    kiwi_error_t err = NULL;
    char msg[128];

    expect_invalid (decode_task (base, 0, &err), &err, "task: empty message");
    expect_invalid (decode_task (NULL, 0, &err), &err, "task: empty message");

    for (size_t cut = 1; cut < base_len; cut += 7) {
        snprintf (msg, sizeof msg, "task: truncated message (%zu bytes)", cut);
        int r = decode_task (base, cut, &err);
        assert_true (r < 0);
        /* A cut inside a map header may also be reported as that map's declared size. */
        if (strncmp (kiwi_error_msg (err), "task: truncated message", 23) != 0)
            fail_msg ("cut at %zu: %s", cut, kiwi_error_msg (err));
        kiwi_error_free (&err);
    }
    expect_invalid (decode_task (base, base_len - 1, &err), &err,
                    (snprintf (msg, sizeof msg, "task: truncated message (%zu bytes)", base_len - 1), msg));

    char *longer = malloc (base_len + 3);
    memcpy (longer, base, base_len);
    memcpy (longer + base_len, "\x01\x02\x03", 3);
    snprintf (msg, sizeof msg, "task: trailing bytes after message (%zu of %zu bytes used)", base_len, base_len + 1);
    expect_invalid (decode_task (longer, base_len + 1, &err), &err, msg);
    snprintf (msg, sizeof msg, "task: trailing bytes after message (%zu of %zu bytes used)", base_len, base_len + 3);
    expect_invalid (decode_task (longer, base_len + 3, &err), &err, msg);
    free (longer);

    expect_invalid (decode_task ("\x93\x01\x02\x03", 4, &err), &err, "task: expected map, got array");
    expect_invalid (decode_task ("\xa3" "abc", 4, &err), &err, "task: expected map, got string");
    expect_invalid (decode_task ("\xc0", 1, &err), &err, "task: expected map, got nil");
    expect_invalid (decode_task ("\x2a", 1, &err), &err, "task: expected map, got integer");
    expect_invalid (decode_task ("\x80", 1, &err), &err, "task.v: required field missing");
    expect_invalid (decode_task ("\xc1", 1, &err), &err, "task: invalid msgpack: byte 0xc1 at offset 0");
    expect_invalid (decode_task ("\x81\xa1v\xc1", 4, &err), &err, "task: invalid msgpack: byte 0xc1 at offset 3");
    /* A container declaring more entries than bytes follow is refused before any allocation. */
    expect_invalid (decode_task ("\x81\xa1x\xdd\xff\xff\xff\xff\x01", 9, &err), &err,
                    "task: truncated message: array at offset 3 declares 4294967295 entries but only 1 bytes follow");
    expect_invalid (decode_task ("\xdf\x7f\xff\xff\xff\xc0\xc0", 7, &err), &err,
                    "task: truncated message: map at offset 0 declares 2147483647 entries but only 2 bytes follow");
    expect_invalid (decode_task ("\x81\xa1x\xdb\xff\xff\xff\xff", 8, &err), &err, "task: truncated message (8 bytes)");
}

static void
test_depth (void **state)
{
    /* An unknown key holding arrays nested 15 deep: 16 levels with the top map, accepted. */
    for (int levels = 15; levels <= 40; levels += 25) {
        msgpack_object *chain = calloc ((size_t) levels + 1, sizeof *chain);
        chain[levels] = obj_uint (1);
        for (int i = levels - 1; i >= 0; i--)
            chain[i] = obj_array (&chain[i + 1], 1);
        edit ("deep", EDIT_SET, chain[0], levels == 15 ? NULL : "task: nested deeper than 16 levels");
        free (chain);
    }
    msgpack_object chain[17];
    chain[16] = obj_array (NULL, 0); /* an empty container is a level too */
    for (int i = 15; i >= 0; i--)
        chain[i] = obj_array (&chain[i + 1], 1);
    edit ("deep", EDIT_SET, chain[1], "task: nested deeper than 16 levels");
    edit ("deep", EDIT_SET, chain[2], NULL);
}

static void
test_encode_validates (void **state)
{
    kiwi_task t;
    kiwi_error_t err = NULL;
    char *out = (char *) 0x1;

    kiwi_task_init (&t);
    expect_encode_refused_task (&t, "task.id: required field missing");
    assert_ptr_equal (out, (char *) 0x1);

    sample_task_full (&t);
    expect_ok (kiwi_task_validate (&t, &err), &err);

    t.model.provider = KIWI_PROVIDER_UNSET;
    expect_encode_refused_task (&t, "task.model.provider: required field missing");
    t.model.provider = (kiwi_provider) 99;
    expect_invalid (kiwi_task_validate (&t, &err), &err, "task.model.provider: unknown provider 99");
    t.has_model = false; /* the model map is left out entirely */
    expect_ok (kiwi_task_validate (&t, &err), &err);

    t.limits.max_rounds = 0;
    expect_encode_refused_task (&t, "task.limits.max_rounds: must be between 1 and 100, got 0");
    t.limits.max_rounds = 8;

    size_t n = t.n_test_credentials;
    t.n_test_credentials = 65;
    expect_invalid (kiwi_task_validate (&t, &err), &err, "task.test_credentials: more than 64 entries");
    t.n_test_credentials = n;

    free (t.test_credentials[1]);
    t.test_credentials[1] = NULL;
    expect_invalid (kiwi_task_validate (&t, &err), &err, "task.test_credentials[1]: required field missing");
    t.test_credentials[1] = xstrdup ("OK");

    free (t.goal);
    t.goal = xstrdup ("\xff");
    expect_encode_refused_task (&t, "task.goal: invalid UTF-8 at byte 0");
    free (t.goal);
    t.goal = xstrdup ("g");

    t.submitted_at = -5;
    expect_encode_refused_task (&t, "task.submitted_at: must be at least 0, got -5");
    assert_ptr_equal (out, (char *) 0x1);
    kiwi_task_clear (&t);
}

static void
test_decode_failure_leaves_nothing (void **state)
{
    /* Fails late (in validation, after every string was copied): *out is empty again. */
    size_t len;
    msgpack_object bad = obj_str ("a b");
    char *buf = wire_edit (base, base_len, "source", EDIT_SET, &bad, &len);
    kiwi_task out;
    kiwi_error_t err = NULL;
    assert_true (kiwi_task_decode (buf, len, &out, &err) < 0);
    kiwi_error_free (&err);
    assert_null (out.id);
    assert_null (out.goal);
    assert_null (out.test_credentials);
    assert_int_equal (out.n_test_credentials, 0);
    assert_int_equal (out.limits.max_rounds, 8);
    kiwi_task_clear (&out);
    free (buf);

    /* Fails in the middle of the credentials array. */
    msgpack_object num = obj_uint (1);
    buf = wire_edit (base, base_len, "test_credentials.2", EDIT_SET, &num, &len);
    assert_true (kiwi_task_decode (buf, len, &out, &err) < 0);
    kiwi_error_free (&err);
    assert_null (out.test_credentials);
    free (buf);
}

static void
test_to_json (void **state)
{
    kiwi_task t;
    kiwi_error_t err = NULL;
    char *json;
    kiwi_task_init (&t);
    sample_task_min (&t);
    expect_ok (kiwi_task_to_json (&t, &json, &err), &err);
    assert_string_equal (json, "{\"v\":1,\"id\":\"t1\",\"repo\":{\"url\":\"https://example.org/r.git\",\"ref\":\"main\"},"
                               "\"test_command\":\"make test\",\"goal\":\"fix the tests\","
                               "\"limits\":{\"max_rounds\":8,\"timeout_seconds\":1800,\"disk_mb\":2048},"
                               "\"test_credentials\":[],\"submitted_at\":0}");
    free (json);
    kiwi_task_clear (&t);

    sample_task_full (&t);
    expect_ok (kiwi_task_to_json (&t, &json, &err), &err);
    assert_non_null (strstr (json, "\"goal\":\"Make the tests pass. \xc3\x9c" "n" "\xc3\xaf" "c" "\xc3\xb6" "d" "\xc3\xa9"
                                   " \xe2\x9c\x93 \\\"quoted\\\"\\nsecond line\\ttab\""));
    assert_non_null (strstr (json, "\"ci_context\":\"FAIL src/a.test.js\\n\\u001b[31mred\\u001b[0m \\ufffd raw byte\""));
    assert_non_null (strstr (json, "\"model\":{\"provider\":\"anthropic\",\"name\":\"claude-sonnet-4-5\","
                                   "\"base_url\":\"http://127.0.0.1:8089/v1\"}"));
    assert_non_null (strstr (json, "\"test_credentials\":[\"NPM_TOKEN\",\"DATABASE_URL\",\"_PRIVATE2\"]"));
    assert_null (strchr (json, '\n'));
    free (json);
    kiwi_task_clear (&t);
}

/* The body's identity: the same after an encode/decode round trip (what a
 * producer computes is what the worker computes), blind to submitted_at
 * and source, changed by any other field. */
static void
test_body_sha256 (void **state)
{
    kiwi_task t, back;
    kiwi_task_init (&t);
    sample_task_full (&t);
    char a[65], b[65];
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_task_body_sha256 (&t, a, &err), 0);
    assert_int_equal (strlen (a), 64);
    for (const char *p = a; *p; p++)
        assert_true ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'));
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal (kiwi_task_encode (&t, &buf, &len, &err), 0);
    assert_int_equal (kiwi_task_decode (buf, len, &back, &err), 0);
    free (buf);
    assert_int_equal (kiwi_task_body_sha256 (&back, b, &err), 0);
    assert_string_equal (a, b);
    kiwi_task_clear (&back);
    /* the same task submitted again (another time, another source) */
    t.submitted_at += 1000;
    free (t.source);
    t.source = xstrdup ("ci-event");
    assert_int_equal (kiwi_task_body_sha256 (&t, b, &err), 0);
    assert_string_equal (a, b);
    /* a different task under the same id */
    free (t.goal);
    t.goal = xstrdup ("something else");
    assert_int_equal (kiwi_task_body_sha256 (&t, b, &err), 0);
    assert_string_not_equal (a, b);
    kiwi_task_clear (&t);
    kiwi_task_init (&t);
    sample_task_full (&t);
    t.limits.disk_mb = 64;
    assert_int_equal (kiwi_task_body_sha256 (&t, b, &err), 0);
    assert_string_not_equal (a, b);
    kiwi_task_clear (&t);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_roundtrip_full),
        cmocka_unit_test (test_roundtrip_min),
        cmocka_unit_test (test_defaults_when_limits_absent),
        cmocka_unit_test (test_roundtrip_at_limits),
        cmocka_unit_test (test_every_provider),
        cmocka_unit_test (test_required_fields),
        cmocka_unit_test (test_wrong_types),
        cmocka_unit_test (test_lengths),
        cmocka_unit_test (test_characters),
        cmocka_unit_test (test_utf8),
        cmocka_unit_test (test_ranges),
        cmocka_unit_test (test_version),
        cmocka_unit_test (test_unknown_keys_ignored),
        cmocka_unit_test (test_duplicate_and_odd_keys),
        cmocka_unit_test (test_framing),
        cmocka_unit_test (test_depth),
        cmocka_unit_test (test_encode_validates),
        cmocka_unit_test (test_decode_failure_leaves_nothing),
        cmocka_unit_test (test_to_json),
        cmocka_unit_test (test_body_sha256),
    };
    return cmocka_run_group_tests_name ("schemas_task", tests, base_setup_task, base_teardown);
}
