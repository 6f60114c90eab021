/*
 * buf.c: the growable byte buffer (see buf.h).
 */
#include "common/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIWI__BUF_FIRST 256

void
kiwi_buf_init (kiwi_buf *b, size_t max)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->max = max;
}

int
kiwi_buf_reserve (kiwi_buf *b, size_t more, kiwi_error_t *err)
{
    size_t max = b->max ? b->max : SIZE_MAX - 1;
    if (b->len > max || more > max - b->len)
        return kiwi_error_make (err, E2BIG, "a buffer of %zu bytes cannot grow by %zu bytes past its limit of %zu",
                                b->len, more, max);
    size_t need = b->len + more + 1;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : KIWI__BUF_FIRST;
        while (cap < need)
            cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        if (b->max && cap > b->max + 1)
            cap = b->max + 1; /* never more than the limit can use */
        char *p = realloc (b->data, cap);
        if (p == NULL)
            return kiwi_error_make (err, ENOMEM, "growing a buffer to %zu bytes", cap);
        b->data = p;
        b->cap = cap;
    }
    b->data[b->len] = '\0';
    return 0;
}

int
kiwi_buf_append (kiwi_buf *b, const void *data, size_t n, kiwi_error_t *err)
{
    if (kiwi_buf_reserve (b, n, err) < 0)
        return -1;
    if (n > 0)
        memcpy (b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int
kiwi_buf_append_str (kiwi_buf *b, const char *s, kiwi_error_t *err)
{
    return kiwi_buf_append (b, s, strlen (s), err);
}

int
kiwi_buf_vappendf (kiwi_buf *b, kiwi_error_t *err, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy (aq, ap);
    int n = vsnprintf (NULL, 0, fmt, aq);
    va_end (aq);
    if (n < 0)
        return kiwi_error_make (err, errno, "formatting into a buffer");
    if (kiwi_buf_reserve (b, (size_t) n, err) < 0)
        return -1;
    vsnprintf (b->data + b->len, (size_t) n + 1, fmt, ap);
    b->len += (size_t) n;
    return 0;
}

int
kiwi_buf_appendf (kiwi_buf *b, kiwi_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int rc = kiwi_buf_vappendf (b, err, fmt, ap);
    va_end (ap);
    return rc;
}

const char *
kiwi_buf_str (const kiwi_buf *b)
{
    return b->data ? b->data : "";
}

void
kiwi_buf_reset (kiwi_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

char *
kiwi_buf_steal (kiwi_buf *b, size_t *len)
{
    if (len)
        *len = b->len;
    char *d = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

void
kiwi_buf_free (kiwi_buf *b)
{
    free (b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void
kiwi_str_vset (char **dst, const char *fmt, va_list ap)
{
    free (*dst);
    *dst = NULL;
    if (vasprintf (dst, fmt, ap) < 0)
        *dst = NULL;
}
