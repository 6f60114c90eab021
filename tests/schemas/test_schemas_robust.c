/*
 * test_schemas_robust.c: untrusted bytes through every decoder. Random
 * buffers, every truncation of every sample, bit flips, inserted and
 * overwritten bytes, splices of two messages, and structure-aware edits
 * (a random value of a random type at a real field path) go through the five
 * message decoders and the generic JSON renderer. Nothing may crash or leak
 * (the sanitizer build runs this), and whatever a decoder accepts must
 * survive encode → decode unchanged (decode accepts nothing that encode's
 * validation would refuse).
 *
 * Seeded deterministically; the seed is printed, and KIWI_FUZZ_SEED=<n>
 * repeats a run, KIWI_FUZZ_SCALE=<n> multiplies the number of cases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_schemas_util.h"
#include "schemas/wire.h"

#define DEFAULT_SEED UINT64_C(0x4b6977692d777972)

static uint64_t rng_state;
static unsigned long scale = 1;
static unsigned long cases_run, cases_accepted;

static uint64_t
rnd64 (void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static size_t
rnd (size_t n)
{
    return n == 0 ? 0 : (size_t) (rnd64 () % n);
}

/* ------------------------------------------------------------------ checks */

typedef int (*to_json_fn) (const void *msg, char **out, kiwi_error_t *err);

static void
hexdump_fail (const char *what, const char *buf, size_t len, const char *detail)
{
    fprintf (stderr, "robust: %s failed on %zu bytes:", what, len);
    for (size_t i = 0; i < len && i < 512; i++)
        fprintf (stderr, "%s%02x", i % 32 == 0 ? "\n  " : " ", (unsigned char) buf[i]);
    fprintf (stderr, "\n  %s\n", detail);
    fail ();
}

/* Decoded → encode → decode → same JSON, for one message type. */
#define STABLE(name, type)                                                                       \
    static bool try_##name (const char *buf, size_t len)                                          \
    {                                                                                             \
        kiwi_error_t err = NULL;                                                                  \
        type a, b;                                                                                \
        if (kiwi_##name##_decode (buf, len, &a, &err) < 0) {                                      \
            if (err == NULL || kiwi_error_msg (err)[0] == '\0')                                   \
                hexdump_fail (#name "_decode", buf, len, "failure without a message");            \
            if (strncmp (kiwi_error_msg (err), #name, strlen (#name)) != 0)                       \
                hexdump_fail (#name "_decode", buf, len, kiwi_error_msg (err));                   \
            kiwi_error_free (&err);                                                               \
            /* The struct is empty after a failure; clearing is harmless. */                     \
            kiwi_##name##_clear (&a);                                                             \
            return false;                                                                         \
        }                                                                                         \
        char *enc = NULL, *ja = NULL, *jb = NULL;                                                 \
        size_t enc_len = 0;                                                                       \
        if (kiwi_##name##_encode (&a, &enc, &enc_len, &err) < 0)                                  \
            hexdump_fail (#name " re-encode", buf, len, kiwi_error_msg (err));                    \
        if (kiwi_##name##_decode (enc, enc_len, &b, &err) < 0)                                    \
            hexdump_fail (#name " decode of re-encoded", buf, len, kiwi_error_msg (err));         \
        if (kiwi_##name##_to_json (&a, &ja, &err) < 0 || kiwi_##name##_to_json (&b, &jb, &err) < 0) \
            hexdump_fail (#name "_to_json", buf, len, kiwi_error_msg (err));                      \
        if (strcmp (ja, jb) != 0)                                                                 \
            hexdump_fail (#name " round trip", buf, len, ja);                                     \
        free (enc);                                                                               \
        free (ja);                                                                                \
        free (jb);                                                                                \
        kiwi_##name##_clear (&a);                                                                 \
        kiwi_##name##_clear (&b);                                                                 \
        return true;                                                                              \
    }

STABLE (task, kiwi_task)
STABLE (progress, kiwi_progress)
STABLE (result, kiwi_result)
STABLE (heartbeat, kiwi_heartbeat)
STABLE (deadletter, kiwi_deadletter)

/* Every decoder, and the generic renderer, on one input. */
static void
check (const char *buf, size_t len)
{
    bool any = false;
    any |= try_task (buf, len);
    any |= try_progress (buf, len);
    any |= try_result (buf, len);
    any |= try_heartbeat (buf, len);
    any |= try_deadletter (buf, len);

    kiwi_error_t err = NULL;
    char *json = NULL;
    if (kiwi_msgpack_to_json (buf, len, &json, &err) < 0) {
        if (any)
            hexdump_fail ("kiwi_msgpack_to_json of an accepted message", buf, len, kiwi_error_msg (err));
        if (kiwi_error_code (err) != KIWI_WIRE_EINVALID)
            hexdump_fail ("kiwi_msgpack_to_json", buf, len, kiwi_error_msg (err));
        kiwi_error_free (&err);
    } else {
        if (json == NULL || json[0] == '\0' || strchr (json, '\n') != NULL)
            hexdump_fail ("kiwi_msgpack_to_json", buf, len, "empty or multi-line output");
        free (json);
    }
    cases_run++;
    if (any)
        cases_accepted++;
}

/* ------------------------------------------------------------------ corpus */

typedef struct {
    const char *name;
    char *buf;
    size_t len;
    const char *const *paths; /* field paths for structure-aware edits */
} sample;

static const char *const task_paths[] = { "v", "id", "repo", "repo.url", "repo.ref", "repo.subdir", "test_command",
                                          "goal", "ci_context", "limits", "limits.max_rounds",
                                          "limits.session_budget_tokens", "limits.session_budget_usd_micros",
                                          "limits.timeout_seconds", "limits.disk_mb", "model", "model.provider",
                                          "model.name", "model.base_url", "test_credentials", "test_credentials.0",
                                          "test_credentials.2", "submitted_at", "source", "zz", NULL };
static const char *const progress_paths[] = { "v", "task_id", "seq", "round", "phase", "kind", "ts", "worker_id",
                                              "payload", "payload.nested", "payload.nested.a", "payload.argv.1",
                                              "zz", NULL };
static const char *const result_paths[] = { "v", "task_id", "status", "reason", "diff", "rounds", "tokens_in",
                                            "tokens_out", "cost_usd_micros", "duration_ms", "worker_id",
                                            "finished_at", "zz", NULL };
static const char *const heartbeat_paths[] = { "v", "worker_id", "version", "ts", "slots_total", "slots_busy",
                                               "tasks_done", "tasks_failed", "cache_hits", "cache_misses",
                                               "degraded", "degraded_reason", "redis_ok", "egress", "egress.0",
                                               "egress.0.name", "egress.0.ok", "egress.0.detail",
                                               "egress.0.checked_at", "egress.1", "egress.1.name", "zz", NULL };
static const char *const deadletter_paths[] = { "v", "reason", "topic", "partition", "offset", "original", "key",
                                                "ts", "worker_id", "zz", NULL };

static sample samples[9];
static size_t n_samples;

#define ADD_SAMPLE(type, fn, paths_)                                          \
    do {                                                                      \
        kiwi_##type m;                                                        \
        kiwi_error_t err = NULL;                                              \
        kiwi_##type##_init (&m);                                              \
        fn (&m);                                                              \
        sample *s = &samples[n_samples++];                                    \
        s->name = #fn;                                                        \
        s->paths = paths_;                                                    \
        expect_ok (kiwi_##type##_encode (&m, &s->buf, &s->len, &err), &err);  \
        kiwi_##type##_clear (&m);                                             \
    } while (0)

static int
setup (void **state)
{
    const char *seed_env = getenv ("KIWI_FUZZ_SEED");
    const char *scale_env = getenv ("KIWI_FUZZ_SCALE");
    uint64_t seed = seed_env != NULL ? strtoull (seed_env, NULL, 0) : DEFAULT_SEED;
    if (scale_env != NULL && strtoul (scale_env, NULL, 10) > 0)
        scale = strtoul (scale_env, NULL, 10);
    rng_state = seed;
    printf ("schemas_robust: seed 0x%016" PRIx64 " scale %lu (repeat with KIWI_FUZZ_SEED=0x%" PRIx64 ")\n", seed,
            scale, seed);
    fflush (stdout);

    ADD_SAMPLE (task, sample_task_full, task_paths);
    ADD_SAMPLE (task, sample_task_min, task_paths);
    ADD_SAMPLE (progress, sample_progress_full, progress_paths);
    ADD_SAMPLE (progress, sample_progress_min, progress_paths);
    ADD_SAMPLE (result, sample_result_fixed, result_paths);
    ADD_SAMPLE (result, sample_result_not_fixed, result_paths);
    ADD_SAMPLE (heartbeat, sample_heartbeat_full, heartbeat_paths);
    ADD_SAMPLE (heartbeat, sample_heartbeat_min, heartbeat_paths);
    ADD_SAMPLE (deadletter, sample_deadletter_full, deadletter_paths);
    return 0;
}

static int
teardown (void **state)
{
    for (size_t i = 0; i < n_samples; i++)
        free (samples[i].buf);
    printf ("schemas_robust: %lu inputs, %lu accepted by a decoder\n", cases_run, cases_accepted);
    return 0;
}

/* ------------------------------------------------------------------ cases */

static void
test_samples_accepted (void **state)
{
    for (size_t i = 0; i < n_samples; i++) {
        unsigned long before = cases_accepted;
        check (samples[i].buf, samples[i].len);
        if (cases_accepted == before)
            fail_msg ("sample %s was not accepted", samples[i].name);
    }
}

static void
test_random_buffers (void **state)
{
    static const unsigned char starts[] = { 0x80, 0x81, 0x85, 0x87, 0x8c, 0x8f, 0xde, 0xdf, 0x90, 0xdc, 0xdd, 0xc1 };
    char buf[512];
    for (unsigned long n = 0; n < 10000 * scale; n++) {
        size_t len = rnd (n % 4 == 0 ? sizeof buf : 48);
        for (size_t i = 0; i < len; i++)
            buf[i] = (char) rnd64 ();
        if (len > 0 && n % 2 == 0)
            buf[0] = (char) starts[rnd (sizeof starts)];
        check (buf, len);
    }
}

static void
test_every_truncation (void **state)
{
    for (size_t s = 0; s < n_samples; s++)
        for (size_t len = 0; len < samples[s].len; len++) {
            /* A copy of exactly len bytes, so reading past it is caught. */
            char *copy = malloc (len > 0 ? len : 1);
            memcpy (copy, samples[s].buf, len);
            check (copy, len);
            free (copy);
        }
}

static void
test_bit_flips (void **state)
{
    for (size_t s = 0; s < n_samples; s++) {
        size_t len = samples[s].len;
        char *copy = malloc (len);
        for (unsigned long n = 0; n < 1500 * scale; n++) {
            memcpy (copy, samples[s].buf, len);
            size_t flips = 1 + rnd (n % 8 == 0 ? 16 : 3);
            for (size_t f = 0; f < flips; f++)
                copy[rnd (len)] ^= (char) (1u << rnd (8));
            check (copy, len);
        }
        free (copy);
    }
}

static const unsigned char interesting[] = { 0x00, 0x01, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1,
                                             0xc2, 0xc3, 0xc4, 0xc6, 0xc7, 0xc9, 0xca, 0xcb, 0xcf, 0xd3, 0xd4,
                                             0xd8, 0xd9, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff };

static void
test_inserted_and_overwritten_bytes (void **state)
{
    for (size_t s = 0; s < n_samples; s++) {
        size_t len = samples[s].len;
        char *copy = malloc (len + 16);
        /* One interesting byte inserted at every position, and one overwritten. */
        for (size_t at = 0; at <= len; at++) {
            unsigned char b = interesting[rnd (sizeof interesting)];
            memcpy (copy, samples[s].buf, at);
            copy[at] = (char) b;
            memcpy (copy + at + 1, samples[s].buf + at, len - at);
            check (copy, len + 1);
            if (at < len) {
                memcpy (copy, samples[s].buf, len);
                copy[at] = (char) interesting[rnd (sizeof interesting)];
                check (copy, len);
            }
        }
        /* Runs of random bytes inserted at random places. */
        for (unsigned long n = 0; n < 1000 * scale; n++) {
            size_t at = rnd (len + 1), k = 1 + rnd (16);
            memcpy (copy, samples[s].buf, at);
            for (size_t i = 0; i < k; i++)
                copy[at + i] = (char) (rnd (2) ? rnd64 () : interesting[rnd (sizeof interesting)]);
            memcpy (copy + at + k, samples[s].buf + at, len - at);
            check (copy, len + k);
        }
        free (copy);
    }
}

static void
test_splices (void **state)
{
    for (unsigned long n = 0; n < 5000 * scale; n++) {
        const sample *a = &samples[rnd (n_samples)], *b = &samples[rnd (n_samples)];
        size_t cut_a = rnd (a->len + 1), cut_b = rnd (b->len + 1);
        size_t len = cut_a + (b->len - cut_b);
        char *buf = malloc (len > 0 ? len : 1);
        memcpy (buf, a->buf, cut_a);
        memcpy (buf + cut_a, b->buf + cut_b, b->len - cut_b);
        check (buf, len);
        free (buf);
    }
}

/* A random msgpack value, biased towards values that sit on the rules' edges. */
static void
gen_value (msgpack_packer *pk, int depth)
{
    static const uint64_t uints[] = { 0, 1, 2, 8, 15, 16, 100, 101, 127, 128, 249, 250, 255, 256, 1800, 2048,
                                      4096, 4097, 65535, 65536, 86400, 86401, 1048576, 1048577, INT32_MAX,
                                      (uint64_t) INT32_MAX + 1, UINT32_MAX, (uint64_t) UINT32_MAX + 1, INT64_MAX,
                                      (uint64_t) INT64_MAX + 1, UINT64_MAX };
    static const int64_t ints[] = { -1, -2, -32, -33, -128, -129, -1001, INT32_MIN, (int64_t) INT32_MIN - 1,
                                    INT64_MIN };
    static const char *const strs[] = { "", "a", "fixed", "not_fixed", "error", "timed_out", "anthropic",
                                        "openai", "scripted", "accepted", "round", "finished", "step0",
                                        "ci-event", "NPM_TOKEN", "npm_token", "1ABC", "../etc", "a/../b",
                                        "/abs", "-rf", "a b", "\xff", "\xc3\xa9", "\xed\xa0\x80", "main",
                                        "https://x/y.git", "kiwi.tasks", "x\ny", "0.1.0" };
    static const size_t lens[] = { 63, 64, 65, 127, 128, 129, 248, 249, 250, 255, 256, 257, 1024, 1025, 2048, 2049,
                                   4096, 4097, 8192, 8193 };
    size_t kind = rnd (depth >= 4 ? 9 : 12);
    switch (kind) {
    case 0:
        msgpack_pack_nil (pk);
        break;
    case 1:
        rnd (2) ? msgpack_pack_true (pk) : msgpack_pack_false (pk);
        break;
    case 2:
        msgpack_pack_uint64 (pk, uints[rnd (sizeof uints / sizeof uints[0])]);
        break;
    case 3:
        msgpack_pack_int64 (pk, ints[rnd (sizeof ints / sizeof ints[0])]);
        break;
    case 4:
        rnd (2) ? msgpack_pack_double (pk, (double) rnd (1000) / 7.0) : msgpack_pack_float (pk, 1.5f);
        break;
    case 5:
    case 6: {
        const char *s = strs[rnd (sizeof strs / sizeof strs[0])];
        msgpack_pack_str_with_body (pk, s, strlen (s));
        break;
    }
    case 7: {
        size_t n = lens[rnd (sizeof lens / sizeof lens[0])];
        char *s = repeat ((char) ("aA_.-Z"[rnd (6)]), n);
        if (rnd (4) == 0)
            s[rnd (n)] = (char) rnd64 ();
        msgpack_pack_str_with_body (pk, s, n);
        free (s);
        break;
    }
    case 8: {
        char b[8];
        size_t n = rnd (sizeof b);
        for (size_t i = 0; i < n; i++)
            b[i] = (char) rnd64 ();
        msgpack_pack_bin_with_body (pk, b, n);
        break;
    }
    case 9: {
        size_t n = rnd (5);
        msgpack_pack_array (pk, n);
        for (size_t i = 0; i < n; i++)
            gen_value (pk, depth + 1);
        break;
    }
    case 10: {
        static const char *const keys[] = { "v", "id", "url", "ref", "name", "ok", "provider", "max_rounds",
                                            "checked_at", "detail", "x" };
        size_t n = rnd (5);
        msgpack_pack_map (pk, n);
        for (size_t i = 0; i < n; i++) {
            const char *k = keys[rnd (sizeof keys / sizeof keys[0])];
            msgpack_pack_str_with_body (pk, k, strlen (k));
            gen_value (pk, depth + 1);
        }
        break;
    }
    default: {
        /* Deep nesting around the limit. */
        size_t levels = 12 + rnd (8);
        for (size_t i = 0; i < levels; i++)
            msgpack_pack_array (pk, 1);
        msgpack_pack_nil (pk);
        break;
    }
    }
}

static void
test_structured_edits (void **state)
{
    for (unsigned long n = 0; n < 15000 * scale; n++) {
        const sample *s = &samples[rnd (n_samples)];
        size_t n_paths = 0;
        while (s->paths[n_paths] != NULL)
            n_paths++;
        const char *path = s->paths[rnd (n_paths)];
        /* Paths below a field the minimal samples lack cannot be edited there. */
        if (strchr (path, '.') != NULL && strstr (s->name, "full") == NULL && strstr (s->name, "fixed") == NULL
            && strcmp (s->name, "sample_result_not_fixed") != 0)
            continue;
        if (strchr (path, '.') != NULL && (strncmp (path, "model", 5) == 0 || strncmp (path, "test_cred", 9) == 0)
            && strcmp (s->name, "sample_task_full") != 0)
            continue;

        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_sbuffer_init (&sb);
        msgpack_packer_init (&pk, &sb, msgpack_sbuffer_write);
        gen_value (&pk, 1);
        msgpack_unpacked u;
        msgpack_unpacked_init (&u);
        size_t off = 0;
        assert_int_equal (msgpack_unpack_next (&u, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);

        edit_op op = rnd (6) == 0 ? EDIT_DEL : rnd (6) == 0 ? EDIT_ADD : EDIT_SET;
        size_t len;
        char *buf = wire_edit (s->buf, s->len, path, op, &u.data, &len);
        check (buf, len);
        /* And once more with a flipped bit on top. */
        if (len > 0 && rnd (3) == 0) {
            buf[rnd (len)] ^= (char) (1u << rnd (8));
            check (buf, len);
        }
        free (buf);
        msgpack_unpacked_destroy (&u);
        msgpack_sbuffer_destroy (&sb);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_samples_accepted),
        cmocka_unit_test (test_random_buffers),
        cmocka_unit_test (test_every_truncation),
        cmocka_unit_test (test_bit_flips),
        cmocka_unit_test (test_inserted_and_overwritten_bytes),
        cmocka_unit_test (test_splices),
        cmocka_unit_test (test_structured_edits),
    };
    return cmocka_run_group_tests_name ("schemas_robust", tests, setup, teardown);
}
