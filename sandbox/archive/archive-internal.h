/*
 * archive-internal.h: what the parts of the tar code (archive-*.c) share,
 * and the pieces tests reach directly.
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

#include "sandbox/archive/archive.h"

#define KIWI__TAR_BLOCK 512

/* Header field offsets and widths (POSIX ustar). */
enum {
    H_NAME = 0, W_NAME = 100,
    H_MODE = 100, W_MODE = 8,
    H_UID = 108, W_UID = 8,
    H_GID = 116, W_GID = 8,
    H_SIZE = 124, W_SIZE = 12,
    H_MTIME = 136, W_MTIME = 12,
    H_CHKSUM = 148, W_CHKSUM = 8,
    H_TYPE = 156,
    H_LINK = 157, W_LINK = 100,
    H_MAGIC = 257, W_MAGIC = 6,
    H_VERSION = 263,
    H_DEVMAJOR = 329, W_DEVMAJOR = 8,
    H_DEVMINOR = 337, W_DEVMINOR = 8,
    H_PREFIX = 345, W_PREFIX = 155,
};

/* n rounded up to whole blocks. */
static inline size_t
kiwi__tar_padded (size_t n)
{
    return (n + KIWI__TAR_BLOCK - 1) / KIWI__TAR_BLOCK * KIWI__TAR_BLOCK;
}

/* Names in messages: archive names are hostile, so control bytes are
 * escaped and long names shortened. The struct is returned by value; its
 * storage lives until the end of the full expression using it. */
typedef struct kiwi__shown {
    char s[400];
} kiwi__shown;

kiwi__shown kiwi__show (const char *name);
/* The same for a fixed-width header field (not necessarily NUL-terminated,
 * at most 155 bytes). */
kiwi__shown kiwi__show_field (const unsigned char *f, size_t w);


/* opts, or the defaults (kiwi_archive_opts_init) in *storage. */
const kiwi_archive_opts *kiwi__archive_opts_or_default (const kiwi_archive_opts *opts, kiwi_archive_opts *storage);

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

/* A tar stream written entry by entry to a sink (archive.h's
 * kiwi_tar_sink_fn), by libarchive like the other writers: files' content
 * goes through as it is written, never gathered. Names are taken as given
 * (the caller cleaned them); type is KIWI_TAR_FILE, _DIR (name ending in
 * '/') or _SYMLINK. Once the sink refused bytes every call fails with its
 * error. Close with `trailer` to end the archive (two zero blocks); close
 * frees the stream in every case. */
typedef struct kiwi__tar_stream kiwi__tar_stream;
int kiwi__tar_stream_open (kiwi__tar_stream **out, kiwi_tar_sink_fn sink, void *userdata, kiwi_error_t *err);
int kiwi__tar_stream_add (kiwi__tar_stream *s, kiwi_tar_type type, const char *name, const char *link, uint32_t mode,
                          uint32_t uid, uint32_t gid, int64_t mtime, const void *data, size_t len,
                          kiwi_error_t *err);
int kiwi__tar_stream_close (kiwi__tar_stream *s, bool trailer, kiwi_error_t *err);

/* Normalises an archive entry name for extraction: removes "." components
 * and repeated or trailing slashes, then the first `strip` components.
 * Rejects (error naming the entry) an empty name, an absolute name, and any
 * `..` component, before stripping. *out is a new string owned by the
 * caller, or NULL when nothing is left (the entry names the destination
 * itself or is stripped away). */
int kiwi__archive_clean_path (const char *name, unsigned strip, char **out, kiwi_error_t *err);

#endif
