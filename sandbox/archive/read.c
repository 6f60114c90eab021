/*
 * read.c: the reader (kiwi_tar_reader, kiwi_archive_list).
 *
 * libarchive turns the bytes into entries: headers and their checksums,
 * numeric fields (octal, base-256), ustar prefixes, pax records and GNU
 * long-name records, over the archive in memory (archive_read_open_memory,
 * tar formats only, no decompression).
 *
 * Kiwi keeps what makes the reader strict, since archives come from
 * sandboxes and are hostile: every warning libarchive gives (a malformed pax
 * record it would skip, a name it cannot convert) is an error; an archive
 * must end with its end-of-archive marker (two zero blocks, checked here in
 * the bytes after the last entry), where libarchive accepts a stream that
 * simply stops; an entry's data must be all there, in one piece, exactly
 * its size (a sparse file, or a GNU 'S' header without a map, is refused);
 * names and link targets are bounded (KIWI_ARCHIVE_MAX_PATH), not empty,
 * and symlinks and hardlinks have targets; types libarchive reads as plain
 * files (an unknown type byte, 'S' in a ustar header) are refused by the
 * type byte of the entry's own header, and a pax or long-name record with a
 * NUL byte in its text (which libarchive cuts there) by looking at the
 * record blocks. Names are returned as libarchive
 * gives them, unsanitised; extraction (extract.c) checks them.
 */
#include "sandbox/archive/archive.h"
#include "sandbox/archive/archive-internal.h"
#include "sandbox/archive/archive-la.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

#define BLOCK KIWI__TAR_BLOCK

static bool
is_zero_block (const unsigned char *b)
{
    for (size_t i = 0; i < BLOCK; i++)
        if (b[i])
            return false;
    return true;
}

void
kiwi_tar_reader_init (kiwi_tar_reader *r, const void *tar, size_t len)
{
    memset (r, 0, sizeof *r);
    r->tar = tar;
    r->len = tar ? len : 0;
}

void
kiwi_tar_reader_clear (kiwi_tar_reader *r)
{
    if (r->a)
        archive_read_free (r->a);
    r->a = NULL;
    free (r->name);
    free (r->linkname);
    r->name = r->linkname = NULL;
}

static int
reader_fail (kiwi_tar_reader *r)
{
    r->done = true;
    r->failed = true;
    return -1;
}

/* Where libarchive has read up to: the offset of the next header once an
 * entry's data is consumed. */
static size_t
reader_offset (kiwi_tar_reader *r)
{
    la_int64_t n = archive_filter_bytes (r->a, -1);
    return n < 0 ? r->len : (size_t) n;
}

static int
reader_open (kiwi_tar_reader *r, kiwi_error_t *err)
{
    r->a = archive_read_new ();
    if (r->a == NULL)
        return kiwi_error_make (err, ENOMEM, "making a tar reader");
    if (archive_read_support_format_tar (r->a) != ARCHIVE_OK
        || archive_read_open_memory (r->a, r->tar, r->len) != ARCHIVE_OK)
        return kiwi_error_make (err, 0, "malformed archive: %s", archive_error_string (r->a));
    return 0;
}

/* The name field of the header at `off`, as far as the archive has it. */
static kiwi__shown
header_name (const kiwi_tar_reader *r, size_t off)
{
    if (off >= r->len)
        return kiwi__show ("");
    size_t w = r->len - off < W_NAME ? r->len - off : W_NAME;
    return kiwi__show_field (r->tar + off + H_NAME, w);
}

/* libarchive's end of the archive: the end-of-archive marker must be there. */
static int
check_end (kiwi_tar_reader *r, kiwi_error_t *err)
{
    size_t off = r->pos;
    if (off >= r->len)
        return kiwi_error_make (err, 0,
                                "truncated archive: it ends at offset %zu without the end-of-archive marker", off);
    if (r->len - off < BLOCK)
        return kiwi_error_make (err, 0, "truncated archive: partial header at offset %zu (%zu bytes)", off,
                                r->len - off);
    const unsigned char *h = r->tar + off;
    if (!is_zero_block (h))
        return kiwi_error_make (err, 0, "malformed archive: a header with no entry at offset %zu (`%s`)", off,
                                header_name (r, off).s);
    if (r->len - off < 2 * BLOCK)
        return kiwi_error_make (err, 0, "truncated archive: end-of-archive marker incomplete at offset %zu", off);
    if (!is_zero_block (h + BLOCK))
        return kiwi_error_make (err, 0, "malformed archive: a zero block followed by data at offset %zu", off);
    return 0;
}

/* The data of a regular file: pointers into the archive, all of it, in one
 * piece, exactly the size the header gave. */
static int
read_data (kiwi_tar_reader *r, const char *name, size_t off, uint64_t size, kiwi_tar_entry *e, kiwi_error_t *err)
{
    const char *start = NULL;
    uint64_t got = 0;
    for (;;) {
        const void *buf;
        size_t n;
        la_int64_t at;
        int rc = archive_read_data_block (r->a, &buf, &n, &at);
        if (rc == ARCHIVE_EOF)
            break;
        if (rc != ARCHIVE_OK)
            return kiwi_error_make (err, 0, "truncated archive: entry `%s` at offset %zu declares %" PRIu64
                                            " bytes: %s",
                                    kiwi__show (name).s, off, size, archive_error_string (r->a));
        const char *p = buf;
        bool inside = p >= (const char *) r->tar && n <= r->len && p - (const char *) r->tar <= (ptrdiff_t) (r->len - n);
        if (start == NULL && n > 0)
            start = p;
        if (!inside || at < 0 || (uint64_t) at != got || (n > 0 && p != start + got))
            return kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: its data is not one piece of %" PRIu64
                                            " bytes (a sparse file?): not supported",
                                    kiwi__show (name).s, off, size);
        got += n;
    }
    if (got != size)
        return kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: %" PRIu64 " bytes of data for a size of %"
                                        PRIu64 " (a sparse file?): not supported",
                                kiwi__show (name).s, off, got, size);
    e->data = start ? start : (const char *) r->tar + off; /* an empty file: any pointer into the archive */
    e->size = (size_t) size;
    return 0;
}

/* libarchive takes a pax value or a long name up to its first NUL byte
 * ("path=a\0b" names `a`); Kiwi refuses such records. The blocks between
 * the entry's first header and its own are record headers (they carry the
 * ustar magic: skipped) and record bodies, whose text ends with padding: a
 * NUL followed by anything but NULs in a body block is a NUL in the text. */
static bool
records_hold_nul (const kiwi_tar_reader *r, size_t first, size_t own)
{
    for (size_t b = first + BLOCK; b + BLOCK <= own; b += BLOCK) {
        const unsigned char *blk = r->tar + b;
        if (memcmp (blk + H_MAGIC, "ustar", 5) == 0)
            continue;
        const unsigned char *nul = memchr (blk, '\0', BLOCK);
        for (const unsigned char *p = nul; p && p < blk + BLOCK; p++)
            if (*p)
                return true;
    }
    return false;
}

static int
entry_type (struct archive_entry *ae, kiwi_tar_type *t)
{
    if (archive_entry_hardlink (ae) != NULL) {
        *t = KIWI_TAR_HARDLINK;
        return 0;
    }
    switch (archive_entry_filetype (ae)) {
    case AE_IFREG:
        *t = KIWI_TAR_FILE;
        return 0;
    case AE_IFDIR:
        *t = KIWI_TAR_DIR;
        return 0;
    case AE_IFLNK:
        *t = KIWI_TAR_SYMLINK;
        return 0;
    case AE_IFCHR:
        *t = KIWI_TAR_CHAR;
        return 0;
    case AE_IFBLK:
        *t = KIWI_TAR_BLOCK;
        return 0;
    case AE_IFIFO:
        *t = KIWI_TAR_FIFO;
        return 0;
    }
    return -1;
}

static int
copy_name (char **dst, const char *s, const char *what, const char *name, size_t off, kiwi_error_t *err)
{
    free (*dst);
    *dst = strdup (s ? s : "");
    if (*dst == NULL)
        return kiwi_error_make (err, ENOMEM, "reading archive entry at offset %zu", off);
    if (strlen (*dst) > KIWI_ARCHIVE_MAX_PATH)
        return kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: %s longer than %d bytes",
                                kiwi__show (name).s, off, what, KIWI_ARCHIVE_MAX_PATH);
    return 0;
}

/* One entry from libarchive into *e. */
static int
read_entry (kiwi_tar_reader *r, kiwi_tar_entry *e, kiwi_error_t *err)
{
    size_t off = r->pos;
    struct archive_entry *ae;
    int rc = archive_read_next_header (r->a, &ae);
    if (rc == ARCHIVE_EOF)
        return check_end (r, err) < 0 ? -1 : 0;
    if (rc == ARCHIVE_RETRY) /* libarchive's answer to a header whose checksum is wrong */
        return kiwi_error_make (err, 0, "bad header checksum at offset %zu (entry `%s`): %s", off,
                                header_name (r, off).s, archive_error_string (r->a));
    /* A name libarchive cannot convert from UTF-8 to this thread's locale
     * (any non-ASCII name in the C locale) is a warning with libarchive's
     * private ARCHIVE_ERRNO_FILE_FORMAT, EILSEQ on Linux, and the entry
     * keeps the name's bytes: taken as they are. Every other warning (a
     * malformed pax record libarchive would skip, an unknown sparse format)
     * refuses the archive. */
    if (rc == ARCHIVE_WARN && archive_errno (r->a) == EILSEQ)
        rc = ARCHIVE_OK;
    const char *raw_name = rc == ARCHIVE_FATAL ? NULL : archive_entry_pathname (ae);
    if (rc != ARCHIVE_OK)
        return kiwi_error_make (err, 0, "malformed archive entry `%s` at offset %zu (bad header, pax record or "
                                        "long-name record): %s",
                                raw_name ? kiwi__show (raw_name).s : header_name (r, off).s,
                                off, archive_error_string (r->a));
    if (raw_name == NULL || raw_name[0] == '\0')
        return kiwi_error_make (err, 0, "archive entry at offset %zu has an empty name", off);
    if (copy_name (&r->name, raw_name, "name", raw_name, off, err) < 0)
        return -1;
    kiwi_tar_type t;
    if (entry_type (ae, &t) < 0)
        return kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: unsupported type (mode %o)",
                                kiwi__show (r->name).s, off, (unsigned) archive_entry_filetype (ae));
    const char *link = t == KIWI_TAR_HARDLINK ? archive_entry_hardlink (ae)
                       : t == KIWI_TAR_SYMLINK ? archive_entry_symlink (ae)
                                               : "";
    if (copy_name (&r->linkname, link, "link target", r->name, off, err) < 0)
        return -1;
    if ((t == KIWI_TAR_SYMLINK || t == KIWI_TAR_HARDLINK) && r->linkname[0] == '\0')
        return kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: %s without a target", kiwi__show (r->name).s,
                                off, kiwi_tar_type_str (t));
    /* libarchive reads a type it does not know (and 'S' in a ustar header)
     * as a regular file; Kiwi refuses them: the type byte of the entry's own
     * header, the block just before its data. */
    size_t data_off = reader_offset (r);
    char type = data_off >= off + BLOCK ? (char) r->tar[data_off - BLOCK + H_TYPE] : '0';
    if (type != '\0' && strchr ("01234567D", type) == NULL)
        return kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: unsupported type '%s'%s",
                                kiwi__show (r->name).s, off, kiwi__show ((char[]){ type, '\0' }).s,
                                type == 'S' ? " (sparse files are not supported)" : "");
    if (data_off >= off + BLOCK && records_hold_nul (r, off, data_off - BLOCK))
        return kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: a pax or long-name record holds a NUL byte",
                                kiwi__show (r->name).s, off);
    if (archive_entry_sparse_count (ae) > 0)
        return kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: sparse files are not supported",
                                kiwi__show (r->name).s, off);

    memset (e, 0, sizeof *e);
    e->name = r->name;
    e->linkname = r->linkname;
    e->type = t;
    e->mode = (uint32_t) archive_entry_perm (ae) & 07777;
    e->uid = (uint64_t) archive_entry_uid (ae);
    e->gid = (uint64_t) archive_entry_gid (ae);
    e->mtime = (int64_t) archive_entry_mtime (ae);
    e->devmajor = (uint64_t) archive_entry_rdevmajor (ae);
    e->devminor = (uint64_t) archive_entry_rdevminor (ae);
    e->offset = off;
    la_int64_t size = archive_entry_size (ae);
    if (t == KIWI_TAR_FILE) {
        if (size < 0 || (uint64_t) size > r->len)
            return kiwi_error_make (err, 0, "truncated archive: entry `%s` at offset %zu declares %" PRId64
                                            " bytes, the archive has %zu",
                                    kiwi__show (r->name).s, off, (int64_t) size, r->len);
        if (read_data (r, r->name, off, (uint64_t) size, e, err) < 0)
            return -1;
    } else if (archive_read_data_skip (r->a) != ARCHIVE_OK) {
        return kiwi_error_make (err, 0, "truncated archive: entry `%s` at offset %zu: %s", kiwi__show (r->name).s,
                                off, archive_error_string (r->a));
    }
    r->pos = reader_offset (r);
    return 1;
}

int
kiwi_tar_reader_next (kiwi_tar_reader *r, kiwi_tar_entry *e, kiwi_error_t *err)
{
    if (r->done) {
        if (r->failed)
            return kiwi_error_make (err, 0, "archive reader already failed");
        return 0;
    }
    if (r->tar == NULL || r->len == 0) {
        kiwi_error_make (err, 0, "empty archive: no end-of-archive marker");
        return reader_fail (r);
    }
    if (r->a == NULL && reader_open (r, err) < 0)
        return reader_fail (r);
    int rc = read_entry (r, e, err);
    if (rc < 0)
        return reader_fail (r);
    if (rc == 0)
        r->done = true;
    return rc;
}

int
kiwi_archive_list (const void *tar, size_t len, kiwi_archive_list_fn fn, void *userdata, kiwi_error_t *err)
{
    kiwi_tar_reader r;
    kiwi_tar_reader_init (&r, tar, len);
    kiwi_tar_entry e;
    int rc;
    while ((rc = kiwi_tar_reader_next (&r, &e, err)) > 0) {
        if (fn (&e, userdata, err) < 0) {
            rc = -1;
            break;
        }
    }
    kiwi_tar_reader_clear (&r);
    return rc < 0 ? -1 : 0;
}
