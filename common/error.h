/*
 * error.h: errors as values.
 *
 * A function that can fail takes `kiwi_error_t *err` as its last parameter and
 * returns < 0 (or NULL). The message is made once, where the failure happens,
 * with kiwi_error_make(); callers on the way up add context with
 * kiwi_error_wrap(), which prefixes "context: ". The top level (main) logs the
 * message and frees it with kiwi_error_free().
 *
 * Ownership: *err is owned by the caller that passed it; it must be NULL on
 * entry to a failing call and is freed (and reset to NULL) by kiwi_error_free.
 */
#ifndef KIWI_COMMON_ERROR_H
#define KIWI_COMMON_ERROR_H

#include <stdarg.h>

typedef struct kiwi_error_s {
    int errno_;   /* errno at the failure, or 0 */
    int code;     /* module-specific code, or 0 */
    char *msg;    /* human-readable, owned */
} kiwi_error_s;

typedef kiwi_error_s *kiwi_error_t;

/* Sets *err to a new error. With errno_ != 0, ": strerror(errno_)" is appended.
 * Always returns -1, so failures can `return kiwi_error_make (...)`.
 * If *err is already set, the old error is freed first. */
int kiwi_error_make (kiwi_error_t *err, int errno_, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Same, with a module-specific code (see kiwi_error_code). */
int kiwi_error_make_code (kiwi_error_t *err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Prefixes the message in *err with "context: ". Returns -1.
 * If *err is NULL, makes a new error with just the context. */
int kiwi_error_wrap (kiwi_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* The message, or "" for NULL. Borrowed: valid until the error is freed. */
const char *kiwi_error_msg (kiwi_error_t err);

/* The module-specific code, or 0. */
int kiwi_error_code (kiwi_error_t err);

/* Frees *err and sets it to NULL. Safe on NULL. */
void kiwi_error_free (kiwi_error_t *err);

/* Moves the error out of *err (leaving NULL) into the return value. */
kiwi_error_t kiwi_error_steal (kiwi_error_t *err);

#endif
