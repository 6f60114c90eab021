/*
 * strbuf.h: strings built in place: a growing NUL-terminated buffer that
 * collects a response body piece by piece, and a string slot that a
 * formatted message replaces.
 *
 * Ownership: *buf and *dst are malloc'd and owned by the caller, who frees
 * them; these functions only reallocate or replace them.
 */
#ifndef KIWI_COMMON_STRBUF_H
#define KIWI_COMMON_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

/* Deprecated: use kiwi_buf (common/buf.h), which this wraps. Appends
 * data[0..n) to *buf (holding *len bytes in *cap) as kiwi_buf_append() does.
 * *buf may be NULL with *len and *cap 0. Returns < 0 on allocation failure
 * (the buffer is unchanged). Kept for worker/task/store.c until it moves to
 * kiwi_buf. */
int kiwi_strbuf_append (char **buf, size_t *len, size_t *cap, const void *data, size_t n);

/* Frees *dst and replaces it with the formatted string, or NULL when that
 * cannot be allocated. */
void kiwi_str_vset (char **dst, const char *fmt, va_list ap) __attribute__ ((format (printf, 2, 0)));

#endif
