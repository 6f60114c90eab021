/*
 * meter.c: a tar stream's size as it arrives (kiwi_tar_meter).
 *
 * Hand-written, not libarchive: the meter is pushed the bytes of a stream
 * (kiwi_tar_meter_feed(), called from the Docker response callback in
 * phases.c), a piece at a time, and must return at once, while libarchive's
 * reader pulls its input through a read callback that blocks until bytes
 * come. Feeding one from the other needs a thread, or the whole stream held
 * back until it ends, and the meter exists to stop an oversized stream
 * before it ends. It reads only the size field and type byte of each
 * header (and a pax `size=` record), never validates, and counts every
 * byte, so a malformed stream is still measured by its length.
 */
#include "sandbox/archive/archive.h"

#include <string.h>

#define METER_SIZE_MAX (UINT64_C (1) << 50)

static uint64_t
meter_size_field (const unsigned char *f, size_t n)
{
    uint64_t v = 0;
    if (f[0] & 0x80) { /* base-256 */
        for (size_t i = 1; i < n; i++) {
            if (v >> 50)
                return METER_SIZE_MAX;
            v = (v << 8) | f[i];
        }
        return v;
    }
    size_t i = 0;
    while (i < n && f[i] == ' ')
        i++;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++)
        v = v * 8 + (uint64_t) (f[i] - '0');
    return v;
}

/* The `size=` record of a pax header's first bytes, if there is one. */
static bool
pax_find_size (const char *p, size_t n, uint64_t *out)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        uint64_t len = 0;
        while (j < n && p[j] >= '0' && p[j] <= '9')
            len = len * 10 + (uint64_t) (p[j++] - '0');
        if (j >= n || p[j] != ' ' || len == 0 || len > n - i)
            return false;
        const char *kv = p + j + 1, *end = p + i + len;
        if ((size_t) (end - kv) > 5 && memcmp (kv, "size=", 5) == 0) {
            uint64_t v = 0;
            for (const char *q = kv + 5; q < end && *q >= '0' && *q <= '9'; q++)
                v = v > METER_SIZE_MAX ? METER_SIZE_MAX : v * 10 + (uint64_t) (*q - '0');
            *out = v;
            return true;
        }
        i += len;
    }
    return false;
}

static void
meter_header (kiwi_tar_meter *m)
{
    bool zero = true;
    for (size_t i = 0; i < 512 && zero; i++)
        zero = m->hdr[i] == 0;
    if (zero) { /* an end-of-archive block */
        m->next_header += 512;
        m->body_end = m->next_header;
        return;
    }
    char type = (char) m->hdr[156];
    uint64_t size = meter_size_field (m->hdr + 124, 12);
    bool meta = type == 'x' || type == 'g' || type == 'L' || type == 'K';
    if (!meta && m->pax_size_set && m->pax_size > size)
        size = m->pax_size;
    if (!meta)
        m->pax_size_set = false;
    m->in_pax = type == 'x';
    m->pax_fill = 0;
    if (size > METER_SIZE_MAX) /* more than any ceiling: the count says so, the stream stops */
        size = METER_SIZE_MAX;
    m->announced += size;
    m->body_end = m->next_header + 512 + size;
    m->next_header = m->next_header + 512 + (size + 511) / 512 * 512;
}

void
kiwi_tar_meter_feed (kiwi_tar_meter *m, const void *bytes, size_t len)
{
    const char *data = bytes;
    while (len > 0) {
        if (m->pos >= m->next_header && m->pos < m->next_header + 512) {
            size_t want = 512 - m->hdr_fill, take = len < want ? len : want;
            memcpy (m->hdr + m->hdr_fill, data, take);
            m->hdr_fill += take;
            m->pos += take;
            data += take;
            len -= take;
            if (m->hdr_fill == 512) {
                m->hdr_fill = 0;
                meter_header (m);
            }
            continue;
        }
        uint64_t until = m->next_header - m->pos;
        size_t take = until < len ? (size_t) until : len;
        if (m->in_pax && m->pos < m->body_end) {
            uint64_t body_left = m->body_end - m->pos;
            size_t room = sizeof m->pax - m->pax_fill;
            size_t copy = take < body_left ? take : (size_t) body_left;
            copy = copy < room ? copy : room;
            memcpy (m->pax + m->pax_fill, data, copy);
            m->pax_fill += copy;
            if (m->pos + take >= m->body_end || m->pax_fill == sizeof m->pax) {
                uint64_t v;
                if (pax_find_size (m->pax, m->pax_fill, &v)) {
                    m->pax_size_set = true;
                    m->pax_size = v;
                }
                m->in_pax = false;
            }
        }
        m->pos += take;
        data += take;
        len -= take;
    }
}

void
kiwi_tar_meter_init (kiwi_tar_meter *m)
{
    memset (m, 0, sizeof *m);
}

uint64_t
kiwi_tar_meter_size (const kiwi_tar_meter *m)
{
    return m->pos > m->announced ? m->pos : m->announced;
}
