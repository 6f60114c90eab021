/*
 * wstext.h: a file's text as the session's tools show it to the model:
 * lines counted and numbered ("    12\tcode"), where a byte falls, every
 * occurrence of a text, and the lines most like a given one. Pure
 * functions over a buffer (data, len), which need not end with '\n'; a
 * last line without one still counts. Lines are 1-based.
 */
#ifndef KIWI_WORKER_WSTEXT_H
#define KIWI_WORKER_WSTEXT_H

#include <stddef.h>

#include "common/buf.h"

#define KIWI_TEXT_LINE_SHOWN 2000 /* bytes of one line shown; the rest is cut with a note */

/* How many lines data holds ("" holds 0). */
size_t kiwi_text_count_lines (const char *data, size_t len);

/* The line byte `off` is on. */
size_t kiwi_text_line_at (const char *data, size_t len, size_t off);

/* Where line `n` starts, or len when there is no such line. */
size_t kiwi_text_line_start (const char *data, size_t len, size_t n);

/* Appends lines first..last (clamped to the text), each numbered and cut at
 * KIWI_TEXT_LINE_SHOWN bytes, and stops before `out` would pass `cap`
 * bytes. Returns the last line appended (first - 1 when none fitted). */
size_t kiwi_text_number (kiwi_buf *out, const char *data, size_t len, size_t first, size_t last, size_t cap);

/* The offsets of the non-overlapping occurrences of `needle` (nlen > 0):
 * up to `max` of them in offs (which may be NULL when max is 0). Returns
 * how many there are in all. */
size_t kiwi_text_find_all (const char *data, size_t len, const char *needle, size_t nlen, size_t *offs, size_t max);

/* The (at most) n lines most like `probe`, whitespace around both ignored
 * (shared pairs of bytes), in ascending order into lines[]; lines sharing
 * nothing with it are left out. Returns how many. */
size_t kiwi_text_nearest (const char *data, size_t len, const char *probe, size_t *lines, size_t n);

#endif
