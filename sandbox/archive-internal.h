/*
 * archive-internal.h: the pieces of archive.c that tests reach directly.
 *
 * kiwi__archive_write_raw() writes one entry exactly as described, without
 * the checks the public builders make: tests use it to build hostile
 * archives (absolute names, `..`, hardlinks, devices, GNU long names).
 * kiwi__archive_clean_path() is the name check extraction applies.
 */
#ifndef KIWI_SANDBOX_ARCHIVE_INTERNAL_H
#define KIWI_SANDBOX_ARCHIVE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "archive.h"

#define KIWI__TAR_BLOCK 512

/* One raw entry. Strings are borrowed. */
typedef struct kiwi__tar_raw {
    char typeflag;          /* '0' file, '1' hardlink, '2' symlink, '3' char, '4' block, '5' dir,
                               '6' fifo, 'x', 'g', 'L', 'K', ... */
    const char *name;       /* stored as given: no normalisation */
    const char *linkname;   /* NULL = none */
    uint32_t mode;          /* stored as given (& 07777) */
    uint32_t uid, gid;
    int64_t mtime;
    uint32_t devmajor, devminor;
    const void *data;       /* len bytes of content, stored after the header */
    size_t len;
    bool gnu_long;          /* a name or link too long for ustar goes in a GNU 'L'/'K' record
                               instead of a pax header */
} kiwi__tar_raw;

/* Appends the entry (with a pax or GNU long-name record first when needed)
 * to `out`. `max_bytes` bounds out->len (0 = none). Out unchanged on error. */
int kiwi__archive_write_raw (kiwi_buf *out, const kiwi__tar_raw *e, size_t max_bytes, kiwi_error_t *err);

/* Normalises an archive entry name for extraction: removes "." components
 * and repeated or trailing slashes, then the first `strip` components.
 * Rejects (error naming the entry) an empty name, an absolute name, and any
 * `..` component, before stripping. *out is a new string owned by the
 * caller, or NULL when nothing is left (the entry names the destination
 * itself or is stripped away). */
int kiwi__archive_clean_path (const char *name, unsigned strip, char **out, kiwi_error_t *err);

#endif
