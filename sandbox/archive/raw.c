/*
 * raw.c: one tar entry written exactly as described, header field by
 * header field (kiwi__archive_write_raw(), archive-internal.h).
 *
 * The tests build hostile archives with it: absolute names, `..`,
 * hardlinks, devices, GNU long-name records, made-up types and pax records
 * that lie. libarchive's writer (write.c) refuses to make most of
 * these, which is why this small writer exists; it is linked into the
 * tests only (tests/CMakeLists.txt), not into kiwi_archive.
 */
#include "sandbox/archive/archive.h"
#include "sandbox/archive/archive-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

#define BLOCK KIWI__TAR_BLOCK


#define PAX_HEADER_NAME "././@PaxHeader"
#define GNU_LONG_NAME "././@LongLink"

/* The largest value an octal field of width w (with its terminating NUL) holds. */
static uint64_t
octal_max (size_t w)
{
    return ((uint64_t) 1 << (3 * (w - 1))) - 1;
}

static void
put_octal (unsigned char *h, size_t off, size_t w, uint64_t v)
{
    char tmp[32];
    snprintf (tmp, sizeof tmp, "%0*" PRIo64, (int) (w - 1), v);
    memcpy (h + off, tmp, w - 1);
    h[off + w - 1] = '\0';
}

static void
put_str (unsigned char *h, size_t off, size_t w, const char *s, size_t n)
{
    memcpy (h + off, s, n < w ? n : w);
}

static void
set_checksum (unsigned char *h)
{
    memset (h + H_CHKSUM, ' ', W_CHKSUM);
    unsigned sum = 0;
    for (size_t i = 0; i < BLOCK; i++)
        sum += h[i];
    char tmp[16];
    snprintf (tmp, sizeof tmp, "%06o", sum);
    memcpy (h + H_CHKSUM, tmp, 6);
    h[H_CHKSUM + 6] = '\0';
    h[H_CHKSUM + 7] = ' ';
}

/* Where to split `name` into ustar prefix and name fields: 0 when it fits
 * the name field alone, the index of the separating '/' when it fits split,
 * (size_t) -1 when it does not fit ustar at all. */
static size_t
ustar_split (const char *name, size_t n)
{
    if (n <= W_NAME)
        return 0;
    if (n > W_PREFIX + 1 + W_NAME)
        return (size_t) -1;
    size_t start = n - 1 < W_PREFIX ? n - 1 : W_PREFIX;
    for (size_t i = start; i > 0; i--) {
        if (name[i] != '/')
            continue;
        if (n - i - 1 > W_NAME)
            return (size_t) -1;
        return n - i - 1 > 0 ? i : (size_t) -1;
    }
    return (size_t) -1;
}

static size_t
decimal_digits (size_t n)
{
    size_t d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

/* Appends one pax record "<len> key=value\n". */
static int
pax_add (kiwi_buf *pax, const char *key, const char *val, kiwi_error_t *err)
{
    size_t body = 1 + strlen (key) + 1 + strlen (val) + 1;
    size_t n = body + decimal_digits (body);
    while (n != body + decimal_digits (n))
        n = body + decimal_digits (n);
    char lenbuf[32];
    snprintf (lenbuf, sizeof lenbuf, "%zu ", n);
    if (kiwi_buf_append_str (pax, lenbuf, err) < 0 || kiwi_buf_append_str (pax, key, err) < 0
        || kiwi_buf_append (pax, "=", 1, err) < 0 || kiwi_buf_append_str (pax, val, err) < 0
        || kiwi_buf_append (pax, "\n", 1, err) < 0)
        return -1;
    return 0;
}

/* Fills a header block. The name and linkname must already fit. */
static void
fill_header (unsigned char *h, char typeflag, const char *name, size_t name_len, const char *link, size_t link_len,
             uint32_t mode, uint64_t uid, uint64_t gid, uint64_t size, int64_t mtime, uint32_t devmajor,
             uint32_t devminor)
{
    memset (h, 0, BLOCK);
    size_t split = ustar_split (name, name_len);
    if (split == 0 || split == (size_t) -1) {
        put_str (h, H_NAME, W_NAME, name, name_len);
    } else {
        put_str (h, H_PREFIX, W_PREFIX, name, split);
        put_str (h, H_NAME, W_NAME, name + split + 1, name_len - split - 1);
    }
    put_octal (h, H_MODE, W_MODE, mode & 07777);
    put_octal (h, H_UID, W_UID, uid <= octal_max (W_UID) ? uid : 0);
    put_octal (h, H_GID, W_GID, gid <= octal_max (W_GID) ? gid : 0);
    put_octal (h, H_SIZE, W_SIZE, size <= octal_max (W_SIZE) ? size : 0);
    put_octal (h, H_MTIME, W_MTIME,
               mtime >= 0 && (uint64_t) mtime <= octal_max (W_MTIME) ? (uint64_t) mtime : 0);
    h[H_TYPE] = (unsigned char) typeflag;
    if (link)
        put_str (h, H_LINK, W_LINK, link, link_len);
    memcpy (h + H_MAGIC, "ustar", W_MAGIC); /* "ustar\0" */
    memcpy (h + H_VERSION, "00", 2);
    put_octal (h, H_DEVMAJOR, W_DEVMAJOR, devmajor);
    put_octal (h, H_DEVMINOR, W_DEVMINOR, devminor);
    set_checksum (h);
}

/* Appends header + data + padding. Space must be reserved. */
static void
emit_entry (kiwi_buf *out, const unsigned char *hdr, const void *data, size_t len)
{
    memcpy (out->data + out->len, hdr, BLOCK);
    out->len += BLOCK;
    if (len) {
        memcpy (out->data + out->len, data, len);
        out->len += len;
        size_t pad = kiwi__tar_padded (len) - len;
        memset (out->data + out->len, 0, pad);
        out->len += pad;
    }
}

int
kiwi__archive_write_raw (kiwi_buf *out, const kiwi__tar_raw *e, size_t max_bytes, kiwi_error_t *err)
{
    const char *name = e->name ? e->name : "";
    const char *link = e->linkname;
    size_t name_len = strlen (name);
    size_t link_len = link ? strlen (link) : 0;
    bool long_name = ustar_split (name, name_len) == (size_t) -1;
    bool long_link = link_len > W_LINK;

    cleanup_buf kiwi_buf pax = KIWI_BUF_INIT;
    cleanup_buf kiwi_buf gnu_name = KIWI_BUF_INIT; /* whole 'L' entry: header + data */
    cleanup_buf kiwi_buf gnu_link = KIWI_BUF_INIT;
    char num[32];

    if (e->gnu_long) {
        for (int which = 0; which < 2; which++) {
            bool need = which == 0 ? long_name : long_link;
            if (!need)
                continue;
            const char *s = which == 0 ? name : link;
            size_t n = (which == 0 ? name_len : link_len) + 1; /* with its NUL */
            kiwi_buf *dst = which == 0 ? &gnu_name : &gnu_link;
            if (kiwi_buf_reserve (dst, BLOCK + kiwi__tar_padded (n), err) < 0)
                return -1;
            unsigned char h[BLOCK];
            fill_header (h, which == 0 ? 'L' : 'K', GNU_LONG_NAME, strlen (GNU_LONG_NAME), NULL, 0, 0644, 0, 0, n,
                         0, 0, 0);
            emit_entry (dst, h, s, n);
        }
        long_name = long_link = false;
    }
    if (long_name && pax_add (&pax, "path", name, err) < 0)
        return -1;
    if (long_link && pax_add (&pax, "linkpath", link, err) < 0)
        return -1;
    if ((uint64_t) e->len > octal_max (W_SIZE)) {
        snprintf (num, sizeof num, "%zu", e->len);
        if (pax_add (&pax, "size", num, err) < 0)
            return -1;
    }
    if (e->uid > octal_max (W_UID)) {
        snprintf (num, sizeof num, "%" PRIu32, e->uid);
        if (pax_add (&pax, "uid", num, err) < 0)
            return -1;
    }
    if (e->gid > octal_max (W_GID)) {
        snprintf (num, sizeof num, "%" PRIu32, e->gid);
        if (pax_add (&pax, "gid", num, err) < 0)
            return -1;
    }
    if (e->mtime < 0 || (uint64_t) e->mtime > octal_max (W_MTIME)) {
        snprintf (num, sizeof num, "%" PRId64, e->mtime);
        if (pax_add (&pax, "mtime", num, err) < 0)
            return -1;
    }

    size_t total = gnu_name.len + gnu_link.len + (pax.len ? BLOCK + kiwi__tar_padded (pax.len) : 0) + BLOCK + kiwi__tar_padded (e->len);
    if (total < e->len || (max_bytes && (out->len > max_bytes || total > max_bytes - out->len)))
        return kiwi_error_make (err, 0, "archive would exceed the ceiling of %zu bytes at `%s` (%zu bytes more)",
                                max_bytes, kiwi__show (name).s, total);
    if (kiwi_buf_reserve (out, total, err) < 0)
        return kiwi_error_wrap (err, "archive entry `%s`", kiwi__show (name).s);

    unsigned char h[BLOCK];
    kiwi_buf_append (out, gnu_name.data, gnu_name.len, NULL);
    kiwi_buf_append (out, gnu_link.data, gnu_link.len, NULL);
    if (pax.len) {
        fill_header (h, 'x', PAX_HEADER_NAME, strlen (PAX_HEADER_NAME), NULL, 0, 0644, e->uid, e->gid, pax.len,
                     e->mtime, 0, 0);
        emit_entry (out, h, pax.data, pax.len);
    }
    /* Fields that did not fit are carried by the records above; the header
     * keeps a truncated name, as GNU tar and Go do. */
    fill_header (h, e->typeflag, name, long_name ? (name_len < W_NAME ? name_len : W_NAME) : name_len, link,
                 link_len > W_LINK ? W_LINK : link_len, e->mode, e->uid, e->gid, e->len, e->mtime, e->devmajor,
                 e->devminor);
    emit_entry (out, h, e->data, e->len);
    return 0;
}
