/*
 * sha256.h: SHA-256, streaming, and of a NUL-terminated string as 64 hex
 * digits (libcrypto's, sha256.c). For names, cache keys and content
 * digests, not for secrets.
 */
#ifndef KIWI_COMMON_SHA256_H
#define KIWI_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* The hash state: libcrypto's SHA256_CTX held by value (no allocation, so
 * no step can fail); opaque here so that includers need no OpenSSL header. */
typedef struct kiwi_sha256 {
    _Alignas (8) unsigned char state[128];
} kiwi_sha256;

void kiwi_sha256_init (kiwi_sha256 *s);
void kiwi_sha256_update (kiwi_sha256 *s, const void *data, size_t n);
void kiwi_sha256_final (kiwi_sha256 *s, unsigned char out[32]);
/* The 32-byte digest as 64 hex digits and a NUL. */
void kiwi_sha256_digest_hex (const unsigned char d[32], char out[65]);

/* The SHA-256 of the string `s` as 64 hex digits and a NUL. */
void kiwi_sha256_hex (const char *s, char out[65]);

#endif
