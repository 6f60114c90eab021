/*
 * base64.h: base64 (RFC 4648), by libcrypto's EVP_EncodeBlock and
 * EVP_DecodeBlock, with the forms Kiwi needs: standard with padding, URL-safe
 * with padding (what dockerd reads in X-Registry-Auth), URL-safe without
 * (what a secret looks like in a JWT, for the mask), and a bounded decoder.
 */
#ifndef KIWI_COMMON_BASE64_H
#define KIWI_COMMON_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* The characters kiwi_base64_into writes for n bytes, without the NUL. */
size_t kiwi_base64_len (size_t n);

/* Standard base64 with padding of n bytes into out, which has room for
 * kiwi_base64_len (n) + 1; returns the length written (NUL-terminated).
 * n is at most 1 GiB. */
size_t kiwi_base64_into (char *out, const void *in, size_t n);

/* A new NUL-terminated string: standard base64 with padding of n bytes.
 * NULL when out of memory or n is over 1 GiB. */
char *kiwi_base64 (const void *in, size_t n);

/* The same, standard (+/) or, with url, URL-safe (-_); with padding unless
 * url && !pad. *out_len (may be NULL) gets its length. */
char *kiwi_base64_form (const void *in, size_t n, bool url, bool pad, size_t *out_len);

/* Decodes standard base64 with padding (length a multiple of 4, at most
 * max_in characters) into a new buffer with a NUL after its *out_len
 * bytes. NULL when it is not such base64, too long, or out of memory. */
unsigned char *kiwi_base64_decode (const char *in, size_t max_in, size_t *out_len);

#endif
