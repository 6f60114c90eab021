/*
 * sha256.h: SHA-256 (FIPS 180-4) of a NUL-terminated string, as 64 hex
 * digits and a NUL in `out`. For names and cache keys, not for secrets.
 */
#ifndef KIWI_COMMON_SHA256_H
#define KIWI_COMMON_SHA256_H

void kiwi_sha256_hex (const char *s, char out[65]);

#endif
