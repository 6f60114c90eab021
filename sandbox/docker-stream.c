/*
 * docker-stream.c: incremental decoder for Docker's stdout/stderr
 * multiplexing, and the bounded tail buffer for command output.
 */
#include "sandbox/docker-stream.h"

#include <stdlib.h>
#include <string.h>

void
kiwi_demux_init (kiwi_demux *d, kiwi_demux_emit emit, void *userdata)
{
    memset (d, 0, sizeof *d);
    d->emit = emit;
    d->userdata = userdata;
}

int
kiwi_demux_feed (kiwi_demux *d, const char *data, size_t len)
{
    while (len > 0) {
        if (d->bad)
            return -1;
        if (d->remaining == 0) {
            size_t want = 8 - d->header_have;
            size_t take = len < want ? len : want;
            memcpy (d->header + d->header_have, data, take);
            d->header_have += take;
            data += take;
            len -= take;
            if (d->header_have < 8)
                return 0;
            d->header_have = 0;
            if (d->header[0] > KIWI_STREAM_STDERR || d->header[1] || d->header[2] || d->header[3]) {
                d->bad = 1;
                return -1;
            }
            d->stream = d->header[0];
            d->remaining = ((uint32_t) d->header[4] << 24) | ((uint32_t) d->header[5] << 16)
                           | ((uint32_t) d->header[6] << 8) | (uint32_t) d->header[7];
            continue;
        }
        size_t take = len < d->remaining ? len : d->remaining;
        if (d->emit && d->emit (d->stream, data, take, d->userdata) < 0)
            return -1;
        d->remaining -= (uint32_t) take;
        data += take;
        len -= take;
    }
    return 0;
}

int
kiwi_demux_complete (const kiwi_demux *d)
{
    return !d->bad && d->remaining == 0 && d->header_have == 0;
}

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
