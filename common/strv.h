/*
 * strv.h: a growable, NULL-terminated vector of owned strings, the shape
 * execve, Docker's Env and Cmd, and posix_spawn all take.
 *
 * Ownership: the vector owns its strings; kiwi_strv_free() frees them all.
 * kiwi_strv_add() copies; kiwi_strv_take() adopts a malloc'd string.
 */
#ifndef KIWI_COMMON_STRV_H
#define KIWI_COMMON_STRV_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

typedef struct kiwi_strv {
    char **v;   /* NULL-terminated once anything was added; may be NULL when empty */
    size_t n;
    size_t cap;
} kiwi_strv;

#define KIWI_STRV_INIT { NULL, 0, 0 }

/* Returns < 0 on allocation failure (the vector is unchanged). */
int kiwi_strv_add (kiwi_strv *s, const char *str);
int kiwi_strv_take (kiwi_strv *s, char *str);
int kiwi_strv_addf (kiwi_strv *s, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* The vector as a NULL-terminated list (never NULL: an empty list when empty). */
const char *const *kiwi_strv_list (const kiwi_strv *s);

bool kiwi_strv_contains (const kiwi_strv *s, const char *str);

/* Whether `str` is one of the NULL-terminated `list` (NULL: an empty one):
 * the lookup for a vector's list and for a static table of names alike. */
bool kiwi_str_listed (const char *const *list, const char *str);

/* For "KEY=VALUE" vectors: the entry whose key is `key`, or NULL. */
const char *kiwi_strv_env_get (const kiwi_strv *s, const char *key);

/* The strings, each followed by a newline, in one new string (empty when
 * the vector is). Caller frees; NULL on allocation failure. */
char *kiwi_strv_join_lines (const kiwi_strv *s);

/* Splits a list setting such as "a, b,,c" at any of the characters in
 * `seps` (NULL means ","), trims white space (isspace) off both ends of each
 * item, skips the items left empty, and appends copies of the others to *out
 * in order. `list` may be NULL or empty (no items). Returns the number of
 * items added, or < 0 with ENOMEM in *err (*out then keeps what it had
 * before the call). The one splitter for comma-separated settings. */
int kiwi_strv_split_list (kiwi_strv *out, const char *list, const char *seps, kiwi_error_t *err);

void kiwi_strv_free (kiwi_strv *s);

#define cleanup_strv __attribute__ ((cleanup (kiwi_strv_free)))

#endif
