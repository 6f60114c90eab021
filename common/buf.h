/*
 * buf.h: the one growable byte buffer of the project. Response bodies,
 * encoded JSON, tar archives, protocol frames and lines read piece by piece
 * are all collected in a kiwi_buf; nothing else grows a byte array by hand.
 *
 * Semantics:
 *   - KIWI_BUF_INIT (or a zeroed struct) is an empty buffer with no limit
 *     but SIZE_MAX; kiwi_buf_init() sets a limit (`max`, in bytes of
 *     content, the NUL not counted). Nothing is allocated until the first
 *     append or reserve.
 *   - data[0..len) is the content. After every successful append, appendf
 *     and reserve, data[len] is '\0', so data is a C string whenever the
 *     content holds no NUL byte of its own. data is NULL until something
 *     was allocated: kiwi_buf_str() gives "" then.
 *   - Writing in place: after kiwi_buf_reserve (b, n, err), the caller may
 *     write up to cap - len bytes at data + len and add what it wrote to
 *     len itself; the buffer is terminated again by the next append or
 *     reserve (kiwi_buf_reserve (b, 0, err) just terminates).
 *   - Growth doubles the capacity (from 256 bytes) so appends cost
 *     amortised O(1).
 *
 * Errors are values: a function that can fail returns < 0 and sets *err
 * (err may be NULL when the caller needs no message), and leaves the buffer
 * exactly as it was. The failures are ENOMEM, and E2BIG for content that
 * would pass `max` (or SIZE_MAX). A buffer is never freed on failure.
 *
 * Ownership: the buffer owns data until kiwi_buf_steal() hands it to the
 * caller (who free()s it) or kiwi_buf_free() frees it; both leave an empty
 * buffer with the same limit, ready for reuse. cleanup_buf frees on scope
 * exit. Copying the struct copies the pointer, not the data: don't.
 */
#ifndef KIWI_COMMON_BUF_H
#define KIWI_COMMON_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "common/error.h"

typedef struct kiwi_buf {
    char *data;  /* NULL until allocated; NUL-terminated at data[len] (see above) */
    size_t len;  /* bytes of content */
    size_t cap;  /* bytes allocated (> len once allocated) */
    size_t max;  /* the most content the buffer may hold; 0 = no limit but SIZE_MAX */
} kiwi_buf;

#define KIWI_BUF_INIT { NULL, 0, 0, 0 }

/* An empty buffer whose content may not exceed `max` bytes (0: no limit). */
void kiwi_buf_init (kiwi_buf *b, size_t max);

/* Makes room for `more` bytes of content after len and a NUL after them,
 * and terminates the content. Returns < 0 with E2BIG past the limit, or
 * ENOMEM. */
int kiwi_buf_reserve (kiwi_buf *b, size_t more, kiwi_error_t *err);

/* Appends n bytes (n may be 0; data may then be NULL). Returns < 0 on
 * E2BIG or ENOMEM, the buffer unchanged. */
int kiwi_buf_append (kiwi_buf *b, const void *data, size_t n, kiwi_error_t *err);

/* Appends a C string, without its NUL. */
int kiwi_buf_append_str (kiwi_buf *b, const char *s, kiwi_error_t *err);

/* Appends printf-formatted text. The error comes before the format here,
 * as the variadic arguments must come last. */
int kiwi_buf_appendf (kiwi_buf *b, kiwi_error_t *err, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));
int kiwi_buf_vappendf (kiwi_buf *b, kiwi_error_t *err, const char *fmt, va_list ap)
    __attribute__ ((format (printf, 3, 0)));

/* The content as a C string: data, or "" before anything was allocated.
 * Borrowed: valid until the next change to the buffer. */
const char *kiwi_buf_str (const kiwi_buf *b);

/* Empties the content but keeps the memory (and the limit), for reuse. */
void kiwi_buf_reset (kiwi_buf *b);

/* Hands the data to the caller (free() it) and empties the buffer. *len (if
 * non-NULL) receives the length. NULL when nothing was allocated. */
char *kiwi_buf_steal (kiwi_buf *b, size_t *len);

/* Frees the data and empties the buffer. Safe on an empty buffer, twice. */
void kiwi_buf_free (kiwi_buf *b);

#define cleanup_buf __attribute__ ((cleanup (kiwi_buf_free)))

/* A string slot a formatted message replaces: frees *dst and sets it to
 * the formatted string (owned by the caller), or NULL when that cannot be
 * allocated. */
void kiwi_str_vset (char **dst, const char *fmt, va_list ap) __attribute__ ((format (printf, 2, 0)));

#endif
