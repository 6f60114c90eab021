/*
 * strbuf.c: strings built in place (see strbuf.h).
 */
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
kiwi_strbuf_append (char **buf, size_t *len, size_t *cap, const void *data, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 1024;
        while (c < *len + n + 1)
            c *= 2;
        char *nb = realloc (*buf, c);
        if (nb == NULL)
            return -1;
        *buf = nb;
        *cap = c;
    }
    if (n > 0)
        memcpy (*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

void
kiwi_str_vset (char **dst, const char *fmt, va_list ap)
{
    free (*dst);
    *dst = NULL;
    if (vasprintf (dst, fmt, ap) < 0)
        *dst = NULL;
}
