/*
 * test_digest.c: common/sha256.h and common/base64.h over libcrypto: the
 * FIPS 180-4 example digests (one-shot and streamed in uneven pieces, a
 * million bytes among them), RFC 4648's base64 vectors, the URL-safe forms
 * with and without padding, the JSON writer's chunked encoding equal to the
 * whole, and the decoder's refusals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/sha256.h"

static void
streamed (const char *piece, size_t times, size_t step, char out[65])
{
    kiwi_sha256 h;
    unsigned char d[32];
    size_t n = strlen (piece);
    kiwi_sha256_init (&h);
    for (size_t t = 0; t < times; t++)
        for (size_t i = 0; i < n; i += step)
            kiwi_sha256_update (&h, piece + i, n - i < step ? n - i : step);
    kiwi_sha256_final (&h, d);
    kiwi_sha256_digest_hex (d, out);
}

static void
test_sha256_vectors (void **state)
{
    (void) state;
    char hex[65];
    kiwi_sha256_hex ("", hex);
    assert_string_equal (hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    kiwi_sha256_hex ("abc", hex);
    assert_string_equal (hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    kiwi_sha256_hex (two, hex);
    assert_string_equal (hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    for (size_t step = 1; step <= 57; step += 7) {
        streamed (two, 1, step, hex);
        assert_string_equal (hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    }
    /* a million 'a', in pieces of 1000 bytes given 13 at a time */
    char thousand[1001];
    memset (thousand, 'a', 1000);
    thousand[1000] = '\0';
    streamed (thousand, 1000, 13, hex);
    assert_string_equal (hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void
check_b64 (const char *in, const char *want)
{
    char *b = kiwi_base64 (in, strlen (in));
    assert_non_null (b);
    assert_string_equal (b, want);
    size_t n = 0;
    unsigned char *back = want[0] ? kiwi_base64_decode (want, 1024, &n) : NULL;
    if (want[0]) {
        assert_non_null (back);
        assert_int_equal (n, strlen (in));
        assert_memory_equal (back, in, n);
        assert_int_equal (back[n], '\0');
    }
    free (back);
    free (b);
}

static void
test_base64_rfc4648 (void **state)
{
    (void) state;
    check_b64 ("", "");
    check_b64 ("f", "Zg==");
    check_b64 ("fo", "Zm8=");
    check_b64 ("foo", "Zm9v");
    check_b64 ("foob", "Zm9vYg==");
    check_b64 ("fooba", "Zm9vYmE=");
    check_b64 ("foobar", "Zm9vYmFy");
    assert_int_equal (kiwi_base64_len (0), 0);
    assert_int_equal (kiwi_base64_len (1), 4);
    assert_int_equal (kiwi_base64_len (189), 252);
}

static void
test_base64_forms (void **state)
{
    (void) state;
    const unsigned char in[] = { 0xfb, 0xff };
    size_t n = 0;
    char *s = kiwi_base64_form (in, 2, false, true, &n);
    assert_string_equal (s, "+/8=");
    assert_int_equal (n, 4);
    free (s);
    s = kiwi_base64_form (in, 2, true, true, &n);
    assert_string_equal (s, "-_8=");
    free (s);
    s = kiwi_base64_form (in, 2, true, false, &n);
    assert_string_equal (s, "-_8");
    assert_int_equal (n, 3);
    free (s);
    /* bytes with NULs, encoded in pieces of 189, equal the whole */
    unsigned char big[1000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char) (i * 37);
    char *whole = kiwi_base64 (big, sizeof big);
    char pieces[2000] = "", chunk[256];
    for (size_t i = 0; i < sizeof big; i += 189) {
        size_t k = sizeof big - i < 189 ? sizeof big - i : 189;
        size_t w = kiwi_base64_into (chunk, big + i, k);
        assert_int_equal (w, kiwi_base64_len (k));
        strcat (pieces, chunk);
    }
    assert_string_equal (pieces, whole);
    unsigned char *back = kiwi_base64_decode (whole, 4096, &n);
    assert_int_equal (n, sizeof big);
    assert_memory_equal (back, big, n);
    free (back);
    free (whole);
}

static void
test_base64_decode_refuses (void **state)
{
    (void) state;
    size_t n = 7;
    assert_null (kiwi_base64_decode ("", 64, &n));
    assert_null (kiwi_base64_decode ("Zm9", 64, &n));     /* not a multiple of 4 */
    assert_null (kiwi_base64_decode ("Zm9v!A==", 64, &n)); /* not base64 */
    assert_null (kiwi_base64_decode ("Zm9vYmFy", 4, &n));  /* longer than allowed */
    assert_int_equal (n, 7);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_sha256_vectors),
        cmocka_unit_test (test_base64_rfc4648),
        cmocka_unit_test (test_base64_forms),
        cmocka_unit_test (test_base64_decode_refuses),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
