/*
 * test_mask.c: the secret mask (common/mask.h): every occurrence of a
 * secret becomes "***" (overlapping, adjacent, repeated, at either edge of
 * the buffer, inside binary bytes), so do its base64, URL-encoded and
 * JSON-escaped forms, its hex (any case, any common dump's separators),
 * the value spaced out or listed character by character, and what is left
 * of one at a cut edge of the text; values too short to mask are ignored; an empty set
 * changes nothing; JSON trees are masked in every string and key; a large
 * output with dozens of secrets keeps none of them. The base64 forms
 * expected here were computed independently (Python's base64 module).
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

#include "common/mask.h"

static kiwi_mask *
mask_of (const char *const *values)
{
    kiwi_error_t err = NULL;
    kiwi_mask *m = kiwi_mask_new (&err);
    assert_non_null (m);
    for (size_t i = 0; values[i] != NULL; i++)
        assert_int_equal (kiwi_mask_add (m, values[i], &err), 0);
    return m;
}

static void
expect_masked (const kiwi_mask *m, const char *in, const char *want)
{
    char *got = kiwi_mask_apply (m, in);
    assert_non_null (got);
    if (strcmp (got, want) != 0)
        fail_msg ("masking \"%s\": got \"%s\", want \"%s\"", in, got, want);
    free (got);
}

static void
test_plain_and_repeated (void **state)
{
    const char *v[] = { "s3cr3t-T0ken-42", NULL };
    kiwi_mask *m = mask_of (v);
    assert_int_equal (kiwi_mask_count (m), 1);
    expect_masked (m, "token is s3cr3t-T0ken-42 here", "token is *** here");
    expect_masked (m, "s3cr3t-T0ken-42 s3cr3t-T0ken-42\ns3cr3t-T0ken-42", "*** ***\n***");
    /* adjacent repeats are one run */
    expect_masked (m, "[s3cr3t-T0ken-42s3cr3t-T0ken-42]", "[***]");
    /* a near miss stays */
    expect_masked (m, "s3cr3t-T0ken-4 and 3cr3t-T0ken-42", "s3cr3t-T0ken-4 and 3cr3t-T0ken-42");
    expect_masked (m, "nothing secret", "nothing secret");
    kiwi_mask_free (m);
}

static void
test_edges (void **state)
{
    const char *v[] = { "EDGE-secret", NULL };
    kiwi_mask *m = mask_of (v);
    expect_masked (m, "EDGE-secret", "***");
    expect_masked (m, "EDGE-secret at the start", "*** at the start");
    expect_masked (m, "at the end EDGE-secret", "at the end ***");
    /* in place over a buffer with NULs, secret at both edges, nothing
     * written past the new length */
    char buf[64];
    const char raw[] = "EDGE-secret\0mid\0EDGE-secret";
    size_t n = sizeof raw - 1;
    memcpy (buf, raw, n);
    memset (buf + n, 'Z', sizeof buf - n);
    size_t nn = kiwi_mask_apply_buf (m, buf, n);
    assert_int_equal (nn, 3 + 1 + 3 + 1 + 3);
    assert_memory_equal (buf, "***\0mid\0***", nn);
    assert_int_equal (buf[n], 'Z');
    /* a buffer shorter than the secret, and an empty one */
    memcpy (buf, "EDGE", 4);
    assert_int_equal (kiwi_mask_apply_buf (m, buf, 4), 4);
    assert_int_equal (kiwi_mask_apply_buf (m, buf, 0), 0);
    kiwi_mask_free (m);
}

static void
test_cut_edges (void **state)
{
    /* an output tail cut inside a secret, at either end */
    const char *v[] = { "s3cr3t-T0ken-42", NULL };
    kiwi_mask *m = mask_of (v);
    expect_masked (m, "T0ken-42 rest of the output", "*** rest of the output");
    expect_masked (m, "start of the output s3cr3t-T", "start of the output ***");
    expect_masked (m, "3cr3t-T0ken-42\nmiddle\ns3cr3t-T0k", "***\nmiddle\n***");
    /* a base64 form cut too */
    expect_masked (m, "LVQwa2VuLTQy\n", "***\n");
    /* shorter than KIWI_MASK_MIN_PARTIAL: ordinary text, kept */
    expect_masked (m, "0ken-42 rest", "0ken-42 rest");
    expect_masked (m, "rest s3cr3t-", "rest s3cr3t-");
    /* a cut form in the middle of the text is not an edge */
    expect_masked (m, "a T0ken-42 b", "a T0ken-42 b");
    kiwi_mask_free (m);
}

static void
test_overlapping (void **state)
{
    /* two secrets sharing bytes, one inside another, a self-overlapping one */
    const char *v[] = { "abcdefgh", "efghijkl", "0123456789", "345678", "zzzzzz", NULL };
    kiwi_mask *m = mask_of (v);
    expect_masked (m, "xxabcdefghijklyy", "xx***yy");
    expect_masked (m, "xxefghijklabcdefghyy", "xx***yy");
    expect_masked (m, "<0123456789> <345678>", "<***> <***>");
    expect_masked (m, "-zzzzzzzz-", "-***-");
    /* whatever order they were added in */
    const char *w[] = { "345678", "efghijkl", "abcdefgh", "0123456789", NULL };
    kiwi_mask *m2 = mask_of (w);
    expect_masked (m2, "xxabcdefghijklyy <0123456789>", "xx***yy <***>");
    kiwi_mask_free (m2);
    kiwi_mask_free (m);
}

static void
test_short_values_ignored (void **state)
{
    const char *v[] = { "1", "true", "12345", "", NULL };
    kiwi_mask *m = mask_of (v);
    assert_int_equal (kiwi_mask_count (m), 0);
    expect_masked (m, "1 true 12345 stays", "1 true 12345 stays");
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_mask_add (m, "123456", &err), 0);
    assert_int_equal (kiwi_mask_add (m, "123456", &err), 0); /* twice is once */
    assert_int_equal (kiwi_mask_add (m, NULL, &err), 0);
    assert_int_equal (kiwi_mask_count (m), 1);
    expect_masked (m, "12345 123456", "12345 ***");
    kiwi_mask_free (m);
}

static void
test_value_that_is_another_ones_encoding (void **state)
{
    /* the second value is the base64 of the first: it is a value of its
     * own all the same, with its own encodings */
    const char *v[] = { "s3cr3t-T0ken-42", "czNjcjN0LVQwa2VuLTQy", NULL };
    kiwi_mask *m = mask_of (v);
    assert_int_equal (kiwi_mask_count (m), 2);
    /* base64 of "czNjcjN0LVQwa2VuLTQy" */
    expect_masked (m, "b64 Y3pOamNqTjBMVlF3YTJWdUxUUXk= end", "b64 *** end");
    kiwi_mask_free (m);
}

static void
test_empty_set (void **state)
{
    kiwi_error_t err = NULL;
    kiwi_mask *m = kiwi_mask_new (&err);
    expect_masked (m, "anything at all", "anything at all");
    expect_masked (NULL, "anything at all", "anything at all");
    assert_null (kiwi_mask_apply (m, NULL));
    char buf[] = "some bytes";
    assert_int_equal (kiwi_mask_apply_buf (NULL, buf, strlen (buf)), strlen (buf));
    assert_false (kiwi_mask_hits (m, buf, strlen (buf)));
    json_t *j = json_pack ("{s:s}", "k", "v");
    assert_int_equal (kiwi_mask_json (m, j), 0);
    assert_int_equal (kiwi_mask_json (NULL, j), 0);
    json_decref (j);
    kiwi_mask_free (m);
    kiwi_mask_free (NULL);
}

static void
test_base64_forms (void **state)
{
    const char *v[] = { "s3cr3t-T0ken-42", "key>>>???~~~", NULL };
    kiwi_mask *m = mask_of (v);
    /* base64 of the value; of the value and a newline (echo | base64) */
    expect_masked (m, "b64 czNjcjN0LVQwa2VuLTQy.", "b64 ***.");
    expect_masked (m, "b64 czNjcjN0LVQwa2VuLTQyCg==.", "b64 ***.");
    /* the git header form, whole */
    expect_masked (m, "Authorization: Basic eC1hY2Nlc3MtdG9rZW46czNjcjN0LVQwa2VuLTQy",
                   "Authorization: Basic ***");
    /* base64 of "user:VALUE": the value sits two bytes into a group; what
     * depends only on the value goes (its last group also holds the
     * padding: 14 bits of the end stay, as with any unaligned encoding) */
    expect_masked (m, "Basic dXNlcjpzM2NyM3QtVDBrZW4tNDI=", "Basic dXNlcjp***NDI=");
    /* one byte into a group: "ab:VALUEzz" */
    char *got = kiwi_mask_apply (m, "YWI6czNjcjN0LVQwa2VuLTQyeno=");
    assert_non_null (got);
    assert_null (strstr (got, "czNjcjN0LVQwa2VuLT"));
    assert_non_null (strstr (got, "***"));
    free (got);
    /* the standard and the URL-safe alphabet */
    expect_masked (m, "a2V5Pj4+Pz8/fn5+", "***");
    expect_masked (m, "url a2V5Pj4-Pz8_fn5- end", "url *** end");
    kiwi_mask_free (m);
}

static void
test_url_and_json_forms (void **state)
{
    const char *v[] = { "p@ss/w0rd+x", "ab\"cd\\ef", NULL };
    kiwi_mask *m = mask_of (v);
    expect_masked (m, "https://u:p%40ss%2Fw0rd%2Bx@host/", "https://u:***@host/");
    expect_masked (m, "https://u:p%40ss%2fw0rd%2bx@host/", "https://u:***@host/");
    expect_masked (m, "{\"token\":\"ab\\\"cd\\\\ef\"}", "{\"token\":\"***\"}");
    expect_masked (m, "raw ab\"cd\\ef", "raw ***");
    kiwi_mask_free (m);
}

static void
test_json_tree (void **state)
{
    const char *v[] = { "tree-secret-1", NULL };
    kiwi_mask *m = mask_of (v);
    json_t *j = json_pack ("{s:s,s:[s,i,{s:s}],s:s,s:b}", "output", "line\ntree-secret-1\n", "nested", "a tree-secret-1",
                           7, "deep", "dGhlIHRyZWUtc2VjcmV0LTE=", "tree-secret-1", "as a key", "ok", 1);
    assert_int_equal (kiwi_mask_json (m, j), 0);
    char *s = json_dumps (j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null (s);
    assert_null (strstr (s, "tree-secret-1"));
    assert_string_equal (s, "{\"***\":\"as a key\",\"nested\":[\"a ***\",7,{\"deep\":\"dGhlIH***LTE=\"}],\"ok\":true,"
                            "\"output\":\"line\\n***\\n\"}");
    free (s);
    json_decref (j);
    kiwi_mask_free (m);
}

static void
test_env (void **state)
{
    const char *env[] = { "PATH=/usr/bin", "MY_TOKEN=env-token-value", "MY_TOKEN_2=other-value-9", NULL };
    kiwi_error_t err = NULL;
    kiwi_mask *m = kiwi_mask_new (&err);
    assert_int_equal (kiwi_mask_add_env (m, env, "MY_TOKEN", &err), 0);
    assert_int_equal (kiwi_mask_add_env (m, env, "ABSENT", &err), 0);
    assert_int_equal (kiwi_mask_count (m), 1);
    expect_masked (m, "env-token-value other-value-9 /usr/bin", "*** other-value-9 /usr/bin");
    kiwi_mask_free (m);
}

static void
test_large_input (void **state)
{
    /* 64 KiB of text with 40 secrets, each planted 10 times (some back to
     * back), in their raw and base64 forms */
    enum { N = 40, TIMES = 10, SIZE = 64 * 1024 };
    char values[N][40];
    const char *list[N + 1];
    for (int i = 0; i < N; i++) {
        snprintf (values[i], sizeof values[i], "ghp_%02dQx7vLk2mZp9RtWq%04d", i, i * 37);
        list[i] = values[i];
    }
    list[N] = NULL;
    kiwi_mask *m = mask_of (list);
    assert_int_equal (kiwi_mask_count (m), N);
    char *text = malloc (SIZE + 1);
    assert_non_null (text);
    for (int i = 0; i < SIZE; i++)
        text[i] = (char) ('a' + (i * 7 + i / 13) % 26);
    text[SIZE] = '\0';
    size_t at = 17;
    for (int t = 0; t < TIMES; t++)
        for (int i = 0; i < N; i++) {
            size_t l = strlen (values[i]);
            memcpy (text + at, values[i], l);
            at += l + (size_t) ((i + t) % 3 == 0 ? 0 : 11); /* some adjacent */
        }
    assert_true (at < SIZE);
    /* and the base64 of the first one near the end */
    memcpy (text + SIZE - 60, "Z2hwXzAwUXg3dkxrMm1acDlSdFdxMDAwMA==", 36);
    char *out = kiwi_mask_apply (m, text);
    assert_non_null (out);
    for (int i = 0; i < N; i++)
        assert_null (strstr (out, values[i]));
    assert_null (strstr (out, "Z2hwXzAwUXg3dkxr"));
    assert_false (kiwi_mask_hits (m, out, strlen (out)));
    assert_true (strlen (out) < SIZE);
    /* what was not a secret is still there */
    assert_memory_equal (out, text, 17);
    assert_memory_equal (out + strlen (out) - 24, text + SIZE - 24, 24);
    free (out);
    free (text);
    kiwi_mask_free (m);
}

static void
test_hex_and_spaced (void **state)
{
    /* hex of s3cr3t-T0ken-42 is 7333637233742d54306b656e2d3432 */
    const char *v[] = { "s3cr3t-T0ken-42", "ab-cd-ef", NULL };
    kiwi_mask *m = mask_of (v);
    /* hex in either case, and mixed */
    expect_masked (m, "hex: 7333637233742d54306b656e2d3432 end", "hex: *** end");
    expect_masked (m, "HEX: 7333637233742D54306B656E2D3432", "HEX: ***");
    expect_masked (m, "7333637233742D54306b656e2d3432", "***");
    /* what the common dumps print: od -An -tx1, xxd -p wrapped, xxd's
     * groups, hexdump -C's line, C and shell escapes, a 0x list, a
     * percent-encoding of every byte, a line break escaped inside JSON */
    expect_masked (m, " 73 33 63 72 33 74 2d 54 30 6b 65 6e 2d 34 32\n", " ***\n");
    expect_masked (m, "7333637233742d54\n306b656e2d3432\n", "***\n");
    expect_masked (m, "00000000: 7333 6372 3374 2d54 306b 656e 2d34 32", "00000000: ***");
    expect_masked (m, "73 33 63 72 33 74 2d 54  30 6b 65 6e 2d 34 32  |", "***  |");
    expect_masked (m, "printf '\\x73\\x33\\x63\\x72\\x33\\x74\\x2d\\x54\\x30\\x6b\\x65\\x6e\\x2d\\x34\\x32'",
                   "printf '\\x***'");
    expect_masked (m, "{0x73, 0x33, 0x63, 0x72, 0x33, 0x74, 0x2d, 0x54, 0x30, 0x6b, 0x65, 0x6e, 0x2d, 0x34, 0x32}",
                   "{0x***}");
    expect_masked (m, "%73%33%63%72%33%74%2D%54%30%6B%65%6E%2D%34%32", "%***");
    expect_masked (m, "\"7333637233742d54\\n306b656e2d3432\"", "\"***\"");
    /* the value spaced out, listed character by character, dashed */
    expect_masked (m, "t: s 3 c r 3 t - T 0 k e n - 4 2.", "t: ***.");
    expect_masked (m, "['s', '3', 'c', 'r', '3', 't', '-', 'T', '0', 'k', 'e', 'n', '-', '4', '2']", "['***']");
    expect_masked (m, "s-3-c-r-3-t---T-0-k-e-n---4-2", "***");
    expect_masked (m, "s\n3\nc\nr\n3\nt\n-\nT\n0\nk\ne\nn\n-\n4\n2\n", "***\n");
    /* a value holding separator bytes of its own */
    expect_masked (m, "[a b - c d - e f] [a:b:-:c:d:-:e:f]", "[***] [***]");
    /* near misses stay: part of the hex, another value's hex, the value's
     * characters too far apart, a character missing */
    expect_masked (m, "7333637233742d54306b656e2d34", "7333637233742d54306b656e2d34");
    expect_masked (m, "7433637233742d54306b656e2d3432", "7433637233742d54306b656e2d3432");
    expect_masked (m, "s 3 c r 3 t -          T 0 k e n - 4 2", "s 3 c r 3 t -          T 0 k e n - 4 2");
    expect_masked (m, "s 3 c r 3 t - T 0 k n - 4 2", "s 3 c r 3 t - T 0 k n - 4 2");
    expect_masked (m, "a b c d e f", "a b c d e f");
    /* the '*' fallback agrees on where the hex was */
    char buf[] = "x 73 33 63 72 33 74 2d 54 30 6b 65 6e 2d 34 32 y";
    assert_true (kiwi_mask_hits (m, buf, strlen (buf)));
    kiwi_mask_free (m);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_plain_and_repeated), cmocka_unit_test (test_edges),
        cmocka_unit_test (test_cut_edges),
        cmocka_unit_test (test_overlapping),        cmocka_unit_test (test_short_values_ignored),
        cmocka_unit_test (test_empty_set),          cmocka_unit_test (test_base64_forms),
        cmocka_unit_test (test_url_and_json_forms), cmocka_unit_test (test_json_tree),
        cmocka_unit_test (test_env),                cmocka_unit_test (test_large_input),
        cmocka_unit_test (test_value_that_is_another_ones_encoding),
        cmocka_unit_test (test_hex_and_spaced),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
