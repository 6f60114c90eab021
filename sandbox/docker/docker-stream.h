/*
 * docker-stream.h: decoding Docker's multiplexed stdout/stderr stream.
 *
 * A container without a TTY sends frames: 8-byte header {stream, 0, 0, 0,
 * size as big-endian uint32} followed by `size` bytes. Frames can be split
 * anywhere across reads, so the decoder is incremental: feed it bytes as they
 * arrive and it calls `emit` once per contiguous payload piece.
 */
#ifndef KIWI_SANDBOX_DOCKER_STREAM_H
#define KIWI_SANDBOX_DOCKER_STREAM_H

#include <stddef.h>
#include <stdint.h>

enum { KIWI_STREAM_STDIN = 0, KIWI_STREAM_STDOUT = 1, KIWI_STREAM_STDERR = 2 };

/* Receives one piece of payload for `stream`. Return < 0 to stop. */
typedef int (*kiwi_demux_emit) (int stream, const char *data, size_t len, void *userdata);

typedef struct kiwi_demux {
    unsigned char header[8];
    size_t header_have;   /* bytes of the current header collected */
    uint32_t remaining;   /* payload bytes left in the current frame */
    int stream;
    int bad;              /* a header with an unknown stream type was seen */
    kiwi_demux_emit emit;
    void *userdata;
} kiwi_demux;

void kiwi_demux_init (kiwi_demux *d, kiwi_demux_emit emit, void *userdata);

/* Feeds bytes. Returns 0, or < 0 if `emit` stopped or the stream is not a
 * multiplexed stream (d->bad set). */
int kiwi_demux_feed (kiwi_demux *d, const char *data, size_t len);

/* True when the input ended cleanly on a frame boundary. */
int kiwi_demux_complete (const kiwi_demux *d);

#endif
