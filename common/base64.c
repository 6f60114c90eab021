/*
 * base64.c: base64.h over libcrypto's block encoder and decoder.
 */
#include "common/base64.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IN (1u << 30)

size_t
kiwi_base64_len (size_t n)
{
    return (n + 2) / 3 * 4;
}

size_t
kiwi_base64_into (char *out, const void *in, size_t n)
{
    if (n > MAX_IN) {
        out[0] = '\0';
        return 0;
    }
    return (size_t) EVP_EncodeBlock ((unsigned char *) out, in, (int) n);
}

char *
kiwi_base64 (const void *in, size_t n)
{
    return kiwi_base64_form (in, n, false, true, NULL);
}

char *
kiwi_base64_form (const void *in, size_t n, bool url, bool pad, size_t *out_len)
{
    if (n > MAX_IN)
        return NULL;
    char *o = malloc (kiwi_base64_len (n) + 1);
    if (o == NULL)
        return NULL;
    size_t len = kiwi_base64_into (o, in, n);
    if (url) {
        for (size_t i = 0; i < len; i++)
            o[i] = o[i] == '+' ? '-' : o[i] == '/' ? '_' : o[i];
        if (!pad)
            while (len > 0 && o[len - 1] == '=')
                o[--len] = '\0';
    }
    if (out_len)
        *out_len = len;
    return o;
}

unsigned char *
kiwi_base64_decode (const char *in, size_t max_in, size_t *out_len)
{
    size_t n = strlen (in);
    if (n == 0 || n % 4 != 0 || n > max_in || n > MAX_IN)
        return NULL;
    unsigned char *out = malloc (n / 4 * 3 + 1);
    if (out == NULL)
        return NULL;
    int got = EVP_DecodeBlock (out, (const unsigned char *) in, (int) n);
    if (got < 0) {
        free (out);
        return NULL;
    }
    /* the block decoder counts padding as zero bytes */
    size_t pad = (in[n - 1] == '=') + (in[n - 2] == '=');
    size_t len = (size_t) got - pad;
    out[len] = '\0';
    if (out_len)
        *out_len = len;
    return out;
}
