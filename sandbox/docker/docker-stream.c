/*
 * docker-stream.c: incremental decoder for Docker's stdout/stderr
 * multiplexing.
 */
#include "sandbox/docker/docker-stream.h"

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
