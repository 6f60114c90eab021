/*
 * archive-read.c: the reader (kiwi_tar_reader, kiwi_archive_list).
 */
#include "archive.h"
#include "archive-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"

#define BLOCK KIWI__TAR_BLOCK



/* -------------------------------------------------------------------------
 * Reader.
 */
static bool
is_zero_block (const unsigned char *b)
{
    for (size_t i = 0; i < BLOCK; i++)
        if (b[i])
            return false;
    return true;
}

/* A numeric header field: octal (leading spaces, terminated by space or NUL;
 * all blank = 0) or GNU base-256 (first byte 0x80 positive, 0xff negative). */
static int
parse_number (const unsigned char *f, size_t w, bool allow_negative, int64_t *out)
{
    if (f[0] == 0x80 || f[0] == 0xff) {
        bool neg = f[0] == 0xff;
        if (neg && !allow_negative)
            return -1;
        uint64_t v = neg ? UINT64_MAX : 0;
        for (size_t i = 1; i < w; i++) {
            if (!neg && (v >> 55) != 0)
                return -1;
            if (neg && (v >> 55) != 0x1ff)
                return -1;
            v = (v << 8) | f[i];
        }
        if (!neg && v > INT64_MAX)
            return -1;
        *out = (int64_t) v;
        return 0;
    }
    size_t i = 0;
    while (i < w && f[i] == ' ')
        i++;
    uint64_t v = 0;
    bool digits = false;
    for (; i < w && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v > (uint64_t) INT64_MAX >> 3)
            return -1;
        v = (v << 3) | (uint64_t) (f[i] - '0');
        digits = true;
    }
    for (; i < w; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return -1;
    *out = digits ? (int64_t) v : 0;
    return 0;
}

static bool
checksum_ok (const unsigned char *h)
{
    int64_t want;
    if (parse_number (h + H_CHKSUM, W_CHKSUM, false, &want) < 0)
        return false;
    uint64_t usum = 0;
    int64_t ssum = 0;
    for (size_t i = 0; i < BLOCK; i++) {
        unsigned char c = (i >= H_CHKSUM && i < H_CHKSUM + W_CHKSUM) ? ' ' : h[i];
        usum += c;
        ssum += (signed char) c;
    }
    return (int64_t) usum == want || ssum == want;
}

/* A strict decimal; `allow_frac` accepts and drops ".digits" (pax mtime). */
static int
parse_decimal (const char *s, size_t n, bool allow_sign, bool allow_frac, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (allow_sign && i < n && (s[i] == '-' || s[i] == '+')) {
        neg = s[i] == '-';
        i++;
    }
    if (i == n)
        return -1;
    uint64_t v = 0;
    size_t d = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, d++) {
        if (v > ((uint64_t) INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t) (s[i] - '0');
    }
    if (d == 0)
        return -1;
    if (i < n && allow_frac && s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            ;
    }
    if (i != n)
        return -1;
    *out = neg ? -(int64_t) v : (int64_t) v;
    return 0;
}

/* What pax or GNU records say about the next entry. */
typedef struct pending {
    char *path;
    char *link;
    bool has_size, has_uid, has_gid, has_mtime;
    int64_t size, uid, gid, mtime;
} pending;

static void
pending_clear (pending *p)
{
    free (p->path);
    free (p->link);
    memset (p, 0, sizeof *p);
}

static int
set_string (char **dst, const char *s, size_t n, const char *what, size_t off, kiwi_error_t *err)
{
    if (memchr (s, '\0', n))
        return kiwi_error_make (err, 0, "archive %s at offset %zu contains a NUL byte", what, off);
    if (n > KIWI_ARCHIVE_MAX_PATH)
        return kiwi_error_make (err, 0, "archive %s at offset %zu is longer than %d bytes", what, off,
                                KIWI_ARCHIVE_MAX_PATH);
    char *c = strndup (s, n);
    if (c == NULL)
        return kiwi_error_make (err, ENOMEM, "archive %s at offset %zu", what, off);
    free (*dst);
    *dst = n ? c : NULL; /* an empty value removes the override */
    if (n == 0)
        free (c);
    return 0;
}

/* Parses pax records "<len> <key>=<value>\n" into *p (global headers are
 * parsed for validity but not applied). */
static int
parse_pax (const char *d, size_t n, bool global, size_t off, pending *p, kiwi_error_t *err)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        size_t reclen = 0;
        while (j < n && d[j] >= '0' && d[j] <= '9') {
            if (reclen > n)
                break;
            reclen = reclen * 10 + (size_t) (d[j] - '0');
            j++;
        }
        if (j == i || j >= n || d[j] != ' ' || reclen > n - i || reclen < (j - i) + 4 || d[i + reclen - 1] != '\n'
            || (d[i] == '0'))
            return kiwi_error_make (err, 0, "malformed pax record at offset %zu", off + BLOCK + i);
        const char *key = d + j + 1;
        const char *end = d + i + reclen - 1; /* the '\n' */
        const char *eq = memchr (key, '=', (size_t) (end - key));
        if (eq == NULL || eq == key || memchr (key, '\0', (size_t) (eq - key)))
            return kiwi_error_make (err, 0, "malformed pax record at offset %zu", off + BLOCK + i);
        size_t klen = (size_t) (eq - key);
        const char *val = eq + 1;
        size_t vlen = (size_t) (end - val);
        i += reclen;
#define KEY_IS(k) (klen == sizeof (k) - 1 && memcmp (key, k, klen) == 0)
        if (klen >= 11 && memcmp (key, "GNU.sparse.", 11) == 0)
            return kiwi_error_make (err, 0, "pax header at offset %zu: sparse files are not supported", off);
        if (global)
            continue;
        int64_t v;
        if (KEY_IS ("path")) {
            if (set_string (&p->path, val, vlen, "pax path", off, err) < 0)
                return -1;
        } else if (KEY_IS ("linkpath")) {
            if (set_string (&p->link, val, vlen, "pax linkpath", off, err) < 0)
                return -1;
        } else if (KEY_IS ("size") || KEY_IS ("uid") || KEY_IS ("gid")) {
            if (parse_decimal (val, vlen, false, false, &v) < 0)
                return kiwi_error_make (err, 0, "pax header at offset %zu: bad %.*s", off, (int) klen, key);
            if (KEY_IS ("size")) {
                p->has_size = true;
                p->size = v;
            } else if (KEY_IS ("uid")) {
                p->has_uid = true;
                p->uid = v;
            } else {
                p->has_gid = true;
                p->gid = v;
            }
        } else if (KEY_IS ("mtime")) {
            if (parse_decimal (val, vlen, true, true, &v) < 0)
                return kiwi_error_make (err, 0, "pax header at offset %zu: bad mtime", off);
            p->has_mtime = true;
            p->mtime = v;
        }
#undef KEY_IS
    }
    return 0;
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
    free (r->name);
    free (r->linkname);
    r->name = r->linkname = NULL;
}

static int
reader_fail (kiwi_tar_reader *r)
{
    r->done = true;
    r->pos = SIZE_MAX; /* marks failure for later calls */
    return -1;
}

static int
read_header (kiwi_tar_reader *r, pending *pd, kiwi_tar_entry *e, kiwi_error_t *err)
{
    for (;;) {
        size_t off = r->pos;
        if (off == r->len) {
            kiwi_error_make (err, 0, "truncated archive: it ends at offset %zu without the end-of-archive marker",
                             off);
            return reader_fail (r);
        }
        if (r->len - off < BLOCK) {
            kiwi_error_make (err, 0, "truncated archive: partial header at offset %zu (%zu bytes)", off,
                             r->len - off);
            return reader_fail (r);
        }
        const unsigned char *h = r->tar + off;
        if (is_zero_block (h)) {
            if (r->len - off < 2 * BLOCK) {
                kiwi_error_make (err, 0, "truncated archive: end-of-archive marker incomplete at offset %zu", off);
                return reader_fail (r);
            }
            if (!is_zero_block (h + BLOCK)) {
                kiwi_error_make (err, 0, "malformed archive: a zero block followed by data at offset %zu", off);
                return reader_fail (r);
            }
            if (pd->path || pd->link || pd->has_size) {
                kiwi_error_make (err, 0, "malformed archive: a pax or long-name record is followed by the end "
                                         "marker at offset %zu",
                                 off);
                return reader_fail (r);
            }
            r->done = true;
            r->pos = r->len;
            return 0;
        }
        if (!checksum_ok (h)) {
            kiwi_error_make (err, 0, "bad header checksum at offset %zu (entry `%s`)", off,
                             kiwi__show_field (h + H_NAME, W_NAME).s);
            return reader_fail (r);
        }
        char type = (char) h[H_TYPE];
        bool posix = memcmp (h + H_MAGIC, "ustar\0", 6) == 0;
        kiwi__shown raw = kiwi__show_field (h + H_NAME, W_NAME);
        int64_t size, mode, uid, gid, mtime, devmajor, devminor;
        if (parse_number (h + H_SIZE, W_SIZE, false, &size) < 0 || parse_number (h + H_MODE, W_MODE, false, &mode) < 0
            || parse_number (h + H_UID, W_UID, false, &uid) < 0 || parse_number (h + H_GID, W_GID, false, &gid) < 0
            || parse_number (h + H_MTIME, W_MTIME, true, &mtime) < 0) {
            kiwi_error_make (err, 0, "malformed numeric field in the header of `%s` at offset %zu", raw.s, off);
            return reader_fail (r);
        }
        if (type == '3' || type == '4') {
            if (parse_number (h + H_DEVMAJOR, W_DEVMAJOR, false, &devmajor) < 0
                || parse_number (h + H_DEVMINOR, W_DEVMINOR, false, &devminor) < 0) {
                kiwi_error_make (err, 0, "malformed device number in the header of `%s` at offset %zu", raw.s, off);
                return reader_fail (r);
            }
        } else {
            devmajor = devminor = 0;
        }
        bool meta = type == 'x' || type == 'g' || type == 'L' || type == 'K';
        if (!meta && pd->has_size)
            size = pd->size;
        /* Types whose size field describes no data (as Go's archive/tar). */
        bool header_only = type == '1' || type == '2' || type == '3' || type == '4' || type == '5' || type == '6';
        size_t data_off = off + BLOCK;
        size_t dsize = header_only ? 0 : (size_t) size;
        if (!header_only && (uint64_t) size > r->len - data_off) {
            kiwi_error_make (err, 0, "truncated archive: entry `%s` at offset %zu declares %" PRId64
                                     " bytes, %zu remain",
                             pd->path ? kiwi__show (pd->path).s : raw.s, off, size, r->len - data_off);
            return reader_fail (r);
        }
        if (kiwi__tar_padded (dsize) > r->len - data_off) {
            kiwi_error_make (err, 0, "truncated archive: the data of entry `%s` at offset %zu is not padded",
                             pd->path ? kiwi__show (pd->path).s : raw.s, off);
            return reader_fail (r);
        }
        const char *data = (const char *) r->tar + data_off;
        r->pos = data_off + kiwi__tar_padded (dsize);

        if (meta) {
            if (dsize > KIWI_ARCHIVE_MAX_META) {
                kiwi_error_make (err, 0, "archive record `%c` at offset %zu is larger than %zu bytes", type, off,
                                 KIWI_ARCHIVE_MAX_META);
                return reader_fail (r);
            }
            int rc = 0;
            if (type == 'x' || type == 'g')
                rc = parse_pax (data, dsize, type == 'g', off, pd, err);
            else
                rc = set_string (type == 'L' ? &pd->path : &pd->link, data, strnlen (data, dsize),
                                 type == 'L' ? "GNU long name" : "GNU long link", off, err);
            if (rc < 0)
                return reader_fail (r);
            continue;
        }
        if (type == 'V')
            continue; /* a volume label: no entry */

        /* The entry itself. */
        kiwi_tar_type t;
        switch (type) {
        case '0':
        case '\0':
        case '7':
            t = KIWI_TAR_FILE;
            break;
        case '1':
            t = KIWI_TAR_HARDLINK;
            break;
        case '2':
            t = KIWI_TAR_SYMLINK;
            break;
        case '3':
            t = KIWI_TAR_CHAR;
            break;
        case '4':
            t = KIWI_TAR_BLOCK;
            break;
        case '5':
        case 'D': /* GNU dumpdir: a directory with a listing as data */
            t = KIWI_TAR_DIR;
            break;
        case '6':
            t = KIWI_TAR_FIFO;
            break;
        default:
            kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: unsupported type '%s'",
                             pd->path ? kiwi__show (pd->path).s : raw.s, off,
                             kiwi__show ((char[]){ type, '\0' }).s);
            return reader_fail (r);
        }

        free (r->name);
        free (r->linkname);
        r->name = r->linkname = NULL;
        if (pd->path) {
            r->name = steal_pointer (&pd->path);
        } else {
            char full[W_PREFIX + 1 + W_NAME + 1];
            size_t pl = posix ? strnlen ((const char *) h + H_PREFIX, W_PREFIX) : 0;
            size_t nl = strnlen ((const char *) h + H_NAME, W_NAME);
            size_t o = 0;
            if (pl) {
                memcpy (full, h + H_PREFIX, pl);
                full[pl] = '/';
                o = pl + 1;
            }
            memcpy (full + o, h + H_NAME, nl);
            full[o + nl] = '\0';
            r->name = strdup (full);
        }
        if (pd->link) {
            r->linkname = steal_pointer (&pd->link);
        } else {
            size_t ll = strnlen ((const char *) h + H_LINK, W_LINK);
            r->linkname = strndup ((const char *) h + H_LINK, ll);
        }
        if (r->name == NULL || r->linkname == NULL) {
            kiwi_error_make (err, ENOMEM, "reading archive entry at offset %zu", off);
            return reader_fail (r);
        }
        if (r->name[0] == '\0') {
            kiwi_error_make (err, 0, "archive entry at offset %zu has an empty name", off);
            return reader_fail (r);
        }
        if (strlen (r->name) > KIWI_ARCHIVE_MAX_PATH) {
            kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: name longer than %d bytes",
                             kiwi__show (r->name).s, off, KIWI_ARCHIVE_MAX_PATH);
            return reader_fail (r);
        }
        /* pre-POSIX archives mark directories with a trailing slash only */
        if (type == '\0' && r->name[strlen (r->name) - 1] == '/')
            t = KIWI_TAR_DIR;
        if ((t == KIWI_TAR_SYMLINK || t == KIWI_TAR_HARDLINK) && r->linkname[0] == '\0') {
            kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: %s without a target", kiwi__show (r->name).s, off,
                             kiwi_tar_type_str (t));
            return reader_fail (r);
        }

        memset (e, 0, sizeof *e);
        e->name = r->name;
        e->linkname = r->linkname;
        e->type = t;
        e->mode = (uint32_t) mode & 07777;
        e->uid = (uint64_t) (pd->has_uid ? pd->uid : uid);
        e->gid = (uint64_t) (pd->has_gid ? pd->gid : gid);
        e->mtime = pd->has_mtime ? pd->mtime : mtime;
        e->devmajor = (uint64_t) devmajor;
        e->devminor = (uint64_t) devminor;
        e->size = t == KIWI_TAR_FILE ? dsize : 0;
        e->data = t == KIWI_TAR_FILE ? data : NULL;
        e->offset = off;
        return 1;
    }
}

int
kiwi_tar_reader_next (kiwi_tar_reader *r, kiwi_tar_entry *e, kiwi_error_t *err)
{
    if (r->done) {
        if (r->pos == SIZE_MAX)
            return kiwi_error_make (err, 0, "archive reader already failed");
        return 0;
    }
    if (r->tar == NULL || r->len == 0) {
        kiwi_error_make (err, 0, "empty archive: no end-of-archive marker");
        return reader_fail (r);
    }
    /* records (pax, long names) apply to the one entry that follows them and
     * are always consumed within this call */
    pending pd;
    memset (&pd, 0, sizeof pd);
    int rc = read_header (r, &pd, e, err);
    pending_clear (&pd);
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
