/*
 * sha256.c: sha256.h over libcrypto's SHA256_Init/Update/Final.
 *
 * Those are the 1.1.1 API, deprecated in OpenSSL 3 in favour of EVP, whose
 * context is allocated and may fail at every step; a digest is a cache key
 * here, and a failed one would have to be handled at every one of some forty
 * callers or silently collide. SHA256_CTX on the stack cannot fail, and the
 * 1.1.1 API stays in every OpenSSL 3 release (OPENSSL_API_COMPAT below
 * states the level this file is written for).
 */
#define OPENSSL_API_COMPAT 10101
#include "common/sha256.h"

#include <openssl/sha.h>
#include <string.h>

_Static_assert (sizeof (SHA256_CTX) <= sizeof (((kiwi_sha256 *) 0)->state), "kiwi_sha256 holds a SHA256_CTX");
_Static_assert (_Alignof (SHA256_CTX) <= 8, "kiwi_sha256 is aligned for a SHA256_CTX");

void
kiwi_sha256_init (kiwi_sha256 *s)
{
    SHA256_Init ((SHA256_CTX *) s->state);
}

void
kiwi_sha256_update (kiwi_sha256 *s, const void *data, size_t n)
{
    SHA256_Update ((SHA256_CTX *) s->state, data, n);
}

void
kiwi_sha256_final (kiwi_sha256 *s, unsigned char out[32])
{
    SHA256_Final (out, (SHA256_CTX *) s->state);
}

void
kiwi_sha256_digest_hex (const unsigned char d[32], char out[65])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
}

void
kiwi_sha256_hex (const char *s, char out[65])
{
    unsigned char d[32];
    SHA256 ((const unsigned char *) s, strlen (s), d);
    kiwi_sha256_digest_hex (d, out);
}
