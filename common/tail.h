/*
 * tail.h: a bounded output buffer that keeps the last `cap` bytes written
 * and counts the bytes dropped before them ("keep the tail, count the
 * rest"): what every driver keeps of a command's output.
 *
 * Ownership: a kiwi_tailbuf owns its storage (kiwi_tailbuf_clear);
 * kiwi_tailbuf_dup returns a copy the caller frees.
 */
#ifndef KIWI_COMMON_TAIL_H
#define KIWI_COMMON_TAIL_H

#include <stddef.h>
#include <stdint.h>

typedef struct kiwi_tailbuf {
    char *buf;        /* ring storage, cap bytes */
    size_t cap;
    size_t start;     /* index of the oldest byte */
    size_t len;       /* bytes held, <= cap */
    uint64_t dropped; /* bytes that no longer fit */
} kiwi_tailbuf;

/* Returns < 0 on allocation failure. */
int kiwi_tailbuf_init (kiwi_tailbuf *t, size_t cap);
void kiwi_tailbuf_write (kiwi_tailbuf *t, const char *data, size_t len);
/* Copies the held bytes, oldest first, into a new NUL-terminated string.
 * Caller frees. */
char *kiwi_tailbuf_dup (const kiwi_tailbuf *t);
void kiwi_tailbuf_clear (kiwi_tailbuf *t);

#endif
