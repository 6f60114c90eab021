/*
 * mask.h: secret values masked out of everything Kiwi says.
 *
 * A kiwi_mask is a set of secret values (the task's test credentials, the
 * model keys, the git token) and the forms they are commonly printed in.
 * kiwi_mask_apply() replaces every occurrence of any of them with "***", as
 * CI systems do with registered secrets (GitHub Actions prints `***`).
 *
 * For each value the set holds:
 *   - the value itself;
 *   - its base64, of the value alone, of the value and a newline (what
 *     `echo $T | base64` prints), and of "x-access-token:VALUE" (the git
 *     Basic-auth header form);
 *   - the part of its base64 that does not depend on what surrounds it, at
 *     each of the three byte alignments, so base64 of "user:VALUE" or of
 *     VALUE inside a longer text is caught too; and the URL-safe alphabet
 *     (-_ for +/) of every base64 form;
 *   - its URL-encoded form (RFC 3986, upper- and lower-case hex) and its
 *     JSON-escaped form, when they differ from the value;
 *   - loosely, with up to 8 separator bytes (spaces, line breaks, listing
 *     punctuation, quotes, an escaped line break) between characters: the
 *     value spaced out or listed character by character, and its hex in
 *     any case, separated between bytes as the common dumps print it (also
 *     "0x", "\x" and "%" before a byte).
 * No mask stops a test that means to leak (a value reversed, encrypted, or
 * split by a dump's offsets): it catches what a careless test prints.
 * Values shorter than KIWI_MASK_MIN_LEN bytes are ignored, and so is any
 * encoded form that short: masking "1" or "true" would destroy the output
 * and protect nothing.
 *
 * Overlapping and adjacent occurrences are masked as a whole: every byte
 * covered by any occurrence of any form is removed, and each run of removed
 * bytes becomes one "***". The result is never longer than the input.
 *
 * Cut edges: output tails are cut at a byte count, which may fall inside a
 * secret. A text that starts with the end of a form, or ends with its
 * start, has that part masked too when it is at least KIWI_MASK_MIN_PARTIAL
 * bytes long (so at most KIWI_MASK_MIN_PARTIAL - 1 bytes of a secret show at
 * a cut; shorter matches would mask ordinary text).
 *
 * Cost: one memmem() scan of the text per form (a few dozen secrets give a
 * few hundred forms) and two byte-wise scans per value for the loose forms:
 * plenty for the 64 KiB output tails Kiwi handles, and
 * kept that simple on purpose.
 *
 * Ownership: a mask owns copies of its values; it is immutable once built,
 * so a const mask may be read from several threads. Everything that masks
 * takes the mask explicitly, except the logger (log.h), which holds one
 * process-wide mask pointer.
 */
#ifndef KIWI_COMMON_MASK_H
#define KIWI_COMMON_MASK_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define KIWI_MASK_MIN_LEN 6
#define KIWI_MASK_MIN_PARTIAL 8
#define KIWI_MASK_REPLACEMENT "***"

typedef struct kiwi_mask kiwi_mask;

/* An empty set. NULL with *err on allocation failure. */
kiwi_mask *kiwi_mask_new (kiwi_error_t *err);

/* Adds `value` and its encodings. A value shorter than KIWI_MASK_MIN_LEN
 * (or NULL) is ignored and 0 returned; adding a value twice is harmless.
 * Returns < 0 with *err on allocation failure. */
int kiwi_mask_add (kiwi_mask *m, const char *value, kiwi_error_t *err);

/* Adds the value of variable `name` in `envp` ("K=V" entries, NULL-
 * terminated). An unset variable adds nothing. */
int kiwi_mask_add_env (kiwi_mask *m, const char *const *envp, const char *name, kiwi_error_t *err);

/* How many secret values the set holds (not counting their encodings).
 * 0 for NULL. */
size_t kiwi_mask_count (const kiwi_mask *m);

/* Whether any form of any secret occurs in the first len bytes of buf. */
bool kiwi_mask_hits (const kiwi_mask *m, const char *buf, size_t len);

/* `text` with every secret replaced by "***", as a new string (caller
 * frees). A NULL or empty mask gives a plain copy. NULL when text is NULL
 * or on allocation failure. */
char *kiwi_mask_apply (const kiwi_mask *m, const char *text);

/* The same in place over the first len bytes of buf (any bytes, NULs
 * included). Returns the new length (<= len); nothing is written past it
 * and no terminator is added. Never fails: without memory for its work
 * array it overwrites each occurrence with '*' instead (length kept). */
size_t kiwi_mask_apply_buf (const kiwi_mask *m, char *buf, size_t len);

/* Masks every string in the JSON value `j` (a jansson json_t), object keys
 * included, in place. Returns < 0 on allocation failure (j may then be
 * partly masked). In the kiwi_common_json library (mask-json.c). */
struct json_t;
int kiwi_mask_json (const kiwi_mask *m, struct json_t *j);

void kiwi_mask_free (kiwi_mask *m);

static inline void
kiwi__mask_freep (kiwi_mask **m)
{
    kiwi_mask_free (*m);
    *m = NULL;
}
#define cleanup_mask __attribute__ ((cleanup (kiwi__mask_freep)))

#endif
