/*
 * strbuf.c: strings built in place (see strbuf.h).
 */
#include "common/strbuf.h"

#include "common/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
kiwi_strbuf_append (char **buf, size_t *len, size_t *cap, const void *data, size_t n)
{
    kiwi_buf b = { *buf, *len, *cap, 0 };
    if (kiwi_buf_append (&b, data, n, NULL) < 0)
        return -1;
    *buf = b.data;
    *len = b.len;
    *cap = b.cap;
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
