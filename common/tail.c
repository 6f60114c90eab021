/*
 * tail.c: the bounded tail buffer (see tail.h).
 */
#include "common/tail.h"

#include <stdlib.h>
#include <string.h>

int
kiwi_tailbuf_init (kiwi_tailbuf *t, size_t cap)
{
    memset (t, 0, sizeof *t);
    t->buf = malloc (cap ? cap : 1);
    if (t->buf == NULL)
        return -1;
    t->cap = cap;
    return 0;
}

void
kiwi_tailbuf_write (kiwi_tailbuf *t, const char *data, size_t len)
{
    if (t->cap == 0) {
        t->dropped += len;
        return;
    }
    if (len >= t->cap) {
        t->dropped += t->len + (len - t->cap);
        memcpy (t->buf, data + (len - t->cap), t->cap);
        t->start = 0;
        t->len = t->cap;
        return;
    }
    size_t overflow = t->len + len > t->cap ? t->len + len - t->cap : 0;
    if (overflow) {
        t->start = (t->start + overflow) % t->cap;
        t->len -= overflow;
        t->dropped += overflow;
    }
    size_t end = (t->start + t->len) % t->cap;
    size_t first = t->cap - end < len ? t->cap - end : len;
    memcpy (t->buf + end, data, first);
    memcpy (t->buf, data + first, len - first);
    t->len += len;
}

char *
kiwi_tailbuf_dup (const kiwi_tailbuf *t)
{
    char *s = malloc (t->len + 1);
    if (s == NULL)
        return NULL;
    size_t first = t->cap - t->start < t->len ? t->cap - t->start : t->len;
    if (t->len) {
        memcpy (s, t->buf + t->start, first);
        memcpy (s + first, t->buf, t->len - first);
    }
    s[t->len] = '\0';
    return s;
}

void
kiwi_tailbuf_clear (kiwi_tailbuf *t)
{
    free (t->buf);
    memset (t, 0, sizeof *t);
}
