/*
 * archive.c: tar in memory, written and read without a library (see
 * archive.h for the contract and the safety model).
 *
 * The file has five parts: the byte buffer; the writer (headers, pax
 * records, the directory walk); the reader (headers, checksums, numeric
 * fields, pax and GNU long-name records); extraction, which first turns the
 * archive into a plan of checked operations and then executes it with
 * descriptor-relative calls only; the meter, which sizes a stream as it
 * arrives.
 */
#include "archive.h"
#include "archive-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"

#define BLOCK KIWI__TAR_BLOCK

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

#define PAX_HEADER_NAME "././@PaxHeader"
#define GNU_LONG_NAME "././@LongLink"

/* -------------------------------------------------------------------------
 * Names in messages: archive names are hostile, so control bytes are escaped
 * and long names shortened. The struct is returned by value; its storage
 * lives until the end of the full expression using it.
 */
typedef struct shown {
    char s[400];
} shown;

static shown
show (const char *name)
{
    shown out;
    size_t o = 0;
    const size_t cap = sizeof out.s;
    if (name == NULL)
        name = "";
    for (const unsigned char *p = (const unsigned char *) name; *p; p++) {
        if (o + 8 >= cap) {
            memcpy (out.s + o, "...", 4);
            return out;
        }
        if (*p < 0x20 || *p == 0x7f || *p == '\\')
            o += (size_t) snprintf (out.s + o, cap - o, "\\x%02x", *p);
        else
            out.s[o++] = (char) *p;
    }
    out.s[o] = '\0';
    return out;
}

/* A name from a fixed-width header field (not necessarily NUL-terminated). */
static shown
show_field (const unsigned char *f, size_t w)
{
    char tmp[W_PREFIX + 1];
    size_t n = strnlen ((const char *) f, w);
    memcpy (tmp, f, n);
    tmp[n] = '\0';
    return show (tmp);
}

/* -------------------------------------------------------------------------
 * kiwi_buf
 */
int
kiwi_buf_reserve (kiwi_buf *b, size_t more, kiwi_error_t *err)
{
    if (more <= b->cap - b->len)
        return 0;
    if (more > SIZE_MAX - b->len)
        return kiwi_error_make (err, EOVERFLOW, "buffer of %zu bytes cannot grow by %zu", b->len, more);
    size_t need = b->len + more;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc (b->data, cap);
    if (p == NULL)
        return kiwi_error_make (err, ENOMEM, "growing a buffer to %zu bytes", cap);
    b->data = p;
    b->cap = cap;
    return 0;
}

int
kiwi_buf_append (kiwi_buf *b, const void *data, size_t n, kiwi_error_t *err)
{
    if (n == 0)
        return 0;
    if (kiwi_buf_reserve (b, n, err) < 0)
        return -1;
    memcpy (b->data + b->len, data, n);
    b->len += n;
    return 0;
}

void
kiwi_buf_free (kiwi_buf *b)
{
    free (b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *
kiwi_buf_steal (kiwi_buf *b, size_t *len)
{
    if (len)
        *len = b->len;
    char *d = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

static int
buf_append_str (kiwi_buf *b, const char *s, kiwi_error_t *err)
{
    return kiwi_buf_append (b, s, strlen (s), err);
}

/* Keeps the content NUL-terminated without counting the NUL in len. */
static int
buf_terminate (kiwi_buf *b, kiwi_error_t *err)
{
    if (kiwi_buf_reserve (b, 1, err) < 0)
        return -1;
    b->data[b->len] = '\0';
    return 0;
}

/* -------------------------------------------------------------------------
 * Writer: headers.
 */
const char *
kiwi_tar_type_str (kiwi_tar_type t)
{
    switch (t) {
#define KIWI__TAR_STR(name, str)                                                                             \
    case name:                                                                                               \
        return str;
        KIWI_TAR_TYPES (KIWI__TAR_STR)
#undef KIWI__TAR_STR
    }
    return "unknown";
}

void
kiwi_archive_opts_init (kiwi_archive_opts *opts)
{
    memset (opts, 0, sizeof *opts);
    opts->uid = 1000;
    opts->gid = 1000;
    opts->max_bytes = KIWI_ARCHIVE_DEFAULT_MAX_BYTES;
    opts->mtime_mode = KIWI_ARCHIVE_MTIME_REAL;
}

static const kiwi_archive_opts *
opts_or_default (const kiwi_archive_opts *opts, kiwi_archive_opts *storage)
{
    if (opts)
        return opts;
    kiwi_archive_opts_init (storage);
    return storage;
}

static size_t
padded (size_t n)
{
    return (n + BLOCK - 1) / BLOCK * BLOCK;
}

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
    if (buf_append_str (pax, lenbuf, err) < 0 || buf_append_str (pax, key, err) < 0
        || kiwi_buf_append (pax, "=", 1, err) < 0 || buf_append_str (pax, val, err) < 0
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
        size_t pad = padded (len) - len;
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
            if (kiwi_buf_reserve (dst, BLOCK + padded (n), err) < 0)
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

    size_t total = gnu_name.len + gnu_link.len + (pax.len ? BLOCK + padded (pax.len) : 0) + BLOCK + padded (e->len);
    if (total < e->len || (max_bytes && (out->len > max_bytes || total > max_bytes - out->len)))
        return kiwi_error_make (err, 0, "archive would exceed the ceiling of %zu bytes at `%s` (%zu bytes more)",
                                max_bytes, show (name).s, total);
    if (kiwi_buf_reserve (out, total, err) < 0)
        return kiwi_error_wrap (err, "archive entry `%s`", show (name).s);

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

int
kiwi_archive_finish (kiwi_buf *out, kiwi_error_t *err)
{
    if (kiwi_buf_reserve (out, 2 * BLOCK, err) < 0)
        return -1;
    memset (out->data + out->len, 0, 2 * BLOCK);
    out->len += 2 * BLOCK;
    return 0;
}

/* -------------------------------------------------------------------------
 * Names.
 */
int
kiwi__archive_clean_path (const char *name, unsigned strip, char **out, kiwi_error_t *err)
{
    *out = NULL;
    if (name == NULL || name[0] == '\0')
        return kiwi_error_make (err, 0, "archive entry with an empty name");
    if (name[0] == '/')
        return kiwi_error_make (err, 0, "archive entry `%s`: absolute path", show (name).s);
    size_t n = strlen (name);
    cleanup_free char *res = malloc (n + 1);
    if (res == NULL)
        return kiwi_error_make (err, ENOMEM, "archive entry `%s`", show (name).s);
    size_t o = 0;
    unsigned skipped = 0;
    const char *p = name;
    while (*p) {
        const char *end = strchr (p, '/');
        size_t len = end ? (size_t) (end - p) : strlen (p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return kiwi_error_make (err, 0, "archive entry `%s`: path contains a `..` component", show (name).s);
        if (len > 0 && !(len == 1 && p[0] == '.')) {
            if (skipped < strip) {
                skipped++;
            } else {
                if (o > 0)
                    res[o++] = '/';
                memcpy (res + o, p, len);
                o += len;
            }
        }
        p += len;
        if (*p == '/')
            p++;
    }
    if (o == 0)
        return 0;
    res[o] = '\0';
    *out = steal_pointer (&res);
    return 0;
}

/* Normalises a builder's path: relative, no `..`, not empty. */
static int
builder_path (const char *path, char **out, kiwi_error_t *err)
{
    if (kiwi__archive_clean_path (path, 0, out, err) < 0)
        return -1;
    if (*out == NULL)
        return kiwi_error_make (err, 0, "archive entry `%s`: names no file", show (path).s);
    if (strlen (*out) > KIWI_ARCHIVE_MAX_PATH) {
        free (*out);
        *out = NULL;
        return kiwi_error_make (err, 0, "archive entry `%s`: longer than %d bytes", show (path).s,
                                KIWI_ARCHIVE_MAX_PATH);
    }
    return 0;
}

static int64_t
builder_mtime (const kiwi_archive_opts *o)
{
    return o->mtime_mode == KIWI_ARCHIVE_MTIME_FIXED ? o->mtime : (int64_t) time (NULL);
}

int
kiwi_archive_add_file (kiwi_buf *out, const char *path, const void *data, size_t len, int mode,
                       const kiwi_archive_opts *opts, kiwi_error_t *err)
{
    kiwi_archive_opts def;
    const kiwi_archive_opts *o = opts_or_default (opts, &def);
    cleanup_free char *name = NULL;
    if (builder_path (path, &name, err) < 0)
        return -1;
    kiwi__tar_raw e = { .typeflag = '0', .name = name, .mode = (uint32_t) mode & 0777, .uid = o->uid,
                        .gid = o->gid, .mtime = builder_mtime (o), .data = data, .len = len };
    return kiwi__archive_write_raw (out, &e, o->max_bytes, err);
}

int
kiwi_archive_add_dir (kiwi_buf *out, const char *path, int mode, const kiwi_archive_opts *opts, kiwi_error_t *err)
{
    kiwi_archive_opts def;
    const kiwi_archive_opts *o = opts_or_default (opts, &def);
    cleanup_free char *clean = NULL;
    if (builder_path (path, &clean, err) < 0)
        return -1;
    cleanup_free char *name = NULL;
    if (asprintf (&name, "%s/", clean) < 0)
        return kiwi_error_make (err, ENOMEM, "archive entry `%s`", show (path).s);
    kiwi__tar_raw e = { .typeflag = '5', .name = name, .mode = (uint32_t) mode & 0777, .uid = o->uid,
                        .gid = o->gid, .mtime = builder_mtime (o) };
    return kiwi__archive_write_raw (out, &e, o->max_bytes, err);
}

int
kiwi_archive_add_symlink (kiwi_buf *out, const char *path, const char *target, const kiwi_archive_opts *opts,
                          kiwi_error_t *err)
{
    kiwi_archive_opts def;
    const kiwi_archive_opts *o = opts_or_default (opts, &def);
    cleanup_free char *name = NULL;
    if (builder_path (path, &name, err) < 0)
        return -1;
    if (target == NULL || target[0] == '\0' || strlen (target) > KIWI_ARCHIVE_MAX_PATH)
        return kiwi_error_make (err, 0, "archive entry `%s`: symlink target empty or longer than %d bytes",
                                show (path).s, KIWI_ARCHIVE_MAX_PATH);
    kiwi__tar_raw e = { .typeflag = '2', .name = name, .linkname = target, .mode = 0777, .uid = o->uid,
                        .gid = o->gid, .mtime = builder_mtime (o) };
    return kiwi__archive_write_raw (out, &e, o->max_bytes, err);
}

/* -------------------------------------------------------------------------
 * Writer: the directory walk.
 */
typedef struct walk {
    const kiwi_archive_opts *o;
    kiwi_buf *out;
    kiwi_archive_stats *st;
    const char *root;     /* for messages */
    kiwi_buf name;        /* "prefix/" + relative path, NUL-terminated */
    size_t rel_off;       /* where the relative path starts in name */
    kiwi_buf scratch;     /* file content */
} walk;

static int
name_cmp (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

static int64_t
entry_mtime (const walk *w, const struct stat *st)
{
    return w->o->mtime_mode == KIWI_ARCHIVE_MTIME_FIXED ? w->o->mtime : (int64_t) st->st_mtim.tv_sec;
}

static size_t
allowance (const walk *w)
{
    if (w->o->max_bytes == 0)
        return SIZE_MAX;
    return w->out->len < w->o->max_bytes ? w->o->max_bytes - w->out->len : 0;
}

/* Reads the regular file `name` (in dfd) into w->scratch, refusing anything
 * that is not (any more) the regular file lstat saw. */
static int
read_file (walk *w, int dfd, const char *name, const struct stat *lst, kiwi_error_t *err)
{
    const char *rel = w->name.data + w->rel_off;
    cleanup_close int fd = openat (dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make (err, errno, "opening `%s` in `%s`", show (rel).s, w->root);
    struct stat st;
    if (fstat (fd, &st) < 0)
        return kiwi_error_make (err, errno, "stat `%s` in `%s`", show (rel).s, w->root);
    if (!S_ISREG (st.st_mode) || st.st_ino != lst->st_ino || st.st_dev != lst->st_dev)
        return kiwi_error_make (err, 0, "`%s` in `%s` changed while archiving", show (rel).s, w->root);
    w->scratch.len = 0;
    size_t limit = allowance (w);
    if ((uint64_t) st.st_size > limit)
        return kiwi_error_make (err, 0, "archive of `%s` exceeds the ceiling of %zu bytes at `%s`", w->root,
                                w->o->max_bytes, show (rel).s);
    size_t expect = (size_t) st.st_size;
    for (;;) {
        /* room for the whole file and one byte more, to see EOF (or growth) */
        size_t want = expect >= w->scratch.len ? expect - w->scratch.len + 1 : 65536;
        if (want < 4096)
            want = 4096;
        if (kiwi_buf_reserve (&w->scratch, want, err) < 0)
            return kiwi_error_wrap (err, "reading `%s`", show (rel).s);
        ssize_t n = read (fd, w->scratch.data + w->scratch.len, w->scratch.cap - w->scratch.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return kiwi_error_make (err, errno, "reading `%s` in `%s`", show (rel).s, w->root);
        if (n == 0)
            break;
        w->scratch.len += (size_t) n;
        if (w->scratch.len > limit)
            return kiwi_error_make (err, 0, "archive of `%s` exceeds the ceiling of %zu bytes at `%s`", w->root,
                                    w->o->max_bytes, show (rel).s);
    }
    return 0;
}

static int
add_walk_entry (walk *w, char type, const char *link, const struct stat *st, const void *data, size_t len,
                kiwi_error_t *err)
{
    if (strlen (w->name.data) > KIWI_ARCHIVE_MAX_PATH)
        return kiwi_error_make (err, 0, "archiving `%s`: `%s` is longer than %d bytes", w->root,
                                show (w->name.data).s, KIWI_ARCHIVE_MAX_PATH);
    kiwi__tar_raw e = { .typeflag = type, .name = w->name.data, .linkname = link,
                        .mode = type == '2' ? 0777 : (uint32_t) st->st_mode & 0777, .uid = w->o->uid,
                        .gid = w->o->gid, .mtime = entry_mtime (w, st), .data = data, .len = len };
    if (kiwi__archive_write_raw (w->out, &e, w->o->max_bytes, err) < 0)
        return kiwi_error_wrap (err, "archiving `%s`", w->root);
    return 0;
}

static bool
excluded (walk *w, size_t depth, const char *name, const struct stat *st)
{
    if (depth == 0 && w->o->exclude) {
        for (const char *const *x = w->o->exclude; *x; x++)
            if (strcmp (*x, name) == 0)
                return true;
    }
    return w->o->exclude_fn && w->o->exclude_fn (w->name.data + w->rel_off, st, w->o->exclude_userdata);
}

static int walk_dir (walk *w, int fd, size_t depth, kiwi_error_t *err);

/* One directory entry `name` of dfd, whose relative path is in w->name. */
static int
walk_entry (walk *w, int dfd, const char *name, size_t depth, kiwi_error_t *err)
{
    const char *rel = w->name.data + w->rel_off;
    struct stat st;
    if (fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return 0; /* removed while we walk: it is not part of the tree */
        return kiwi_error_make (err, errno, "stat `%s` in `%s`", show (rel).s, w->root);
    }
    if (excluded (w, depth, name, &st)) {
        w->st->excluded++;
        return 0;
    }
    if (S_ISREG (st.st_mode)) {
        if (read_file (w, dfd, name, &st, err) < 0)
            return -1;
        if (add_walk_entry (w, '0', NULL, &st, w->scratch.data, w->scratch.len, err) < 0)
            return -1;
        w->st->files++;
        w->st->bytes += w->scratch.len;
        return 0;
    }
    if (S_ISLNK (st.st_mode)) {
        char target[KIWI_ARCHIVE_MAX_PATH + 2];
        ssize_t n = readlinkat (dfd, name, target, sizeof target);
        if (n < 0)
            return kiwi_error_make (err, errno, "reading symlink `%s` in `%s`", show (rel).s, w->root);
        if ((size_t) n > KIWI_ARCHIVE_MAX_PATH)
            return kiwi_error_make (err, 0, "symlink `%s` in `%s`: target longer than %d bytes", show (rel).s,
                                    w->root, KIWI_ARCHIVE_MAX_PATH);
        if (n == 0)
            return kiwi_error_make (err, 0, "symlink `%s` in `%s`: empty target", show (rel).s, w->root);
        target[n] = '\0';
        if (add_walk_entry (w, '2', target, &st, NULL, 0, err) < 0)
            return -1;
        w->st->symlinks++;
        return 0;
    }
    if (S_ISDIR (st.st_mode)) {
        if (depth + 1 >= KIWI_ARCHIVE_MAX_DEPTH)
            return kiwi_error_make (err, 0, "`%s` in `%s`: deeper than %d levels", show (rel).s, w->root,
                                    KIWI_ARCHIVE_MAX_DEPTH);
        int sub = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            return kiwi_error_make (err, errno, "opening directory `%s` in `%s`", show (rel).s, w->root);
        struct stat sst;
        if (fstat (sub, &sst) < 0 || sst.st_ino != st.st_ino || sst.st_dev != st.st_dev) {
            close (sub);
            return kiwi_error_make (err, 0, "`%s` in `%s` changed while archiving", show (rel).s, w->root);
        }
        /* the entry name of a directory ends with '/' */
        if (kiwi_buf_append (&w->name, "/", 1, err) < 0 || buf_terminate (&w->name, err) < 0) {
            close (sub);
            return -1;
        }
        int rc = add_walk_entry (w, '5', NULL, &st, NULL, 0, err);
        if (rc == 0)
            w->st->dirs++;
        if (rc == 0)
            rc = walk_dir (w, sub, depth + 1, err); /* sub now owned by walk_dir */
        else
            close (sub);
        return rc;
    }
    w->st->skipped++;
    return 0;
}

/* Walks the directory open at `fd` (owned: closed here), whose relative path
 * with a trailing '/' (or nothing, at the top) is in w->name. */
static int
walk_dir (walk *w, int fd, size_t depth, kiwi_error_t *err)
{
    DIR *d = fdopendir (fd);
    if (d == NULL) {
        int e = errno;
        close (fd);
        return kiwi_error_make (err, e, "reading directory `%s` in `%s`", show (w->name.data + w->rel_off).s,
                                w->root);
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir (d)) != NULL) {
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 32;
            char **p = realloc (names, ncap * sizeof *p);
            if (p == NULL) {
                rc = kiwi_error_make (err, ENOMEM, "listing `%s`", show (w->name.data + w->rel_off).s);
                goto out;
            }
            names = p;
            cap = ncap;
        }
        names[n] = strdup (de->d_name);
        if (names[n] == NULL) {
            rc = kiwi_error_make (err, ENOMEM, "listing `%s`", show (w->name.data + w->rel_off).s);
            goto out;
        }
        n++;
        errno = 0;
    }
    if (errno != 0) {
        rc = kiwi_error_make (err, errno, "reading directory `%s` in `%s`", show (w->name.data + w->rel_off).s,
                              w->root);
        goto out;
    }
    if (n > 1)
        qsort (names, n, sizeof *names, name_cmp);
    size_t base = w->name.len;
    for (size_t i = 0; i < n && rc == 0; i++) {
        w->name.len = base;
        if (buf_append_str (&w->name, names[i], err) < 0 || buf_terminate (&w->name, err) < 0) {
            rc = -1;
            break;
        }
        rc = walk_entry (w, dirfd (d), names[i], depth, err);
    }
    w->name.len = base;
    if (w->name.data)
        w->name.data[base] = '\0';
out:
    for (size_t i = 0; i < n; i++)
        free (names[i]);
    free (names);
    closedir (d);
    return rc;
}

int
kiwi_archive_from_dir (const char *dir, const kiwi_archive_opts *opts, kiwi_buf *out, kiwi_archive_stats *stats,
                       kiwi_error_t *err)
{
    kiwi_archive_opts def;
    kiwi_archive_stats local;
    memset (&local, 0, sizeof local);
    walk w = { .o = opts_or_default (opts, &def), .out = out, .st = stats ? stats : &local, .root = dir };
    memset (w.st, 0, sizeof *w.st);
    size_t start = out->len;

    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make (err, errno, "opening directory `%s` to archive", dir);
    int rc = buf_terminate (&w.name, err);
    if (rc == 0 && w.o->prefix && w.o->prefix[0]) {
        cleanup_free char *prefix = NULL;
        struct stat st;
        if (builder_path (w.o->prefix, &prefix, err) < 0 || fstat (fd, &st) < 0
            || buf_append_str (&w.name, prefix, err) < 0 || kiwi_buf_append (&w.name, "/", 1, err) < 0
            || buf_terminate (&w.name, err) < 0)
            rc = kiwi_error_wrap (err, "archive prefix `%s`", show (w.o->prefix).s);
        w.rel_off = w.name.len;
        if (rc == 0)
            rc = add_walk_entry (&w, '5', NULL, &st, NULL, 0, err);
    }
    if (rc == 0)
        rc = walk_dir (&w, fd, 0, err); /* fd owned by walk_dir */
    else
        close (fd);
    if (rc == 0 && w.o->max_bytes && (out->len > w.o->max_bytes || 2 * BLOCK > w.o->max_bytes - out->len))
        rc = kiwi_error_make (err, 0, "archive of `%s` exceeds the ceiling of %zu bytes", dir, w.o->max_bytes);
    if (rc == 0)
        rc = kiwi_archive_finish (out, err);
    kiwi_buf_free (&w.name);
    kiwi_buf_free (&w.scratch);
    if (rc < 0)
        out->len = start;
    return rc;
}

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
                             show_field (h + H_NAME, W_NAME).s);
            return reader_fail (r);
        }
        char type = (char) h[H_TYPE];
        bool posix = memcmp (h + H_MAGIC, "ustar\0", 6) == 0;
        shown raw = show_field (h + H_NAME, W_NAME);
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
                             pd->path ? show (pd->path).s : raw.s, off, size, r->len - data_off);
            return reader_fail (r);
        }
        if (padded (dsize) > r->len - data_off) {
            kiwi_error_make (err, 0, "truncated archive: the data of entry `%s` at offset %zu is not padded",
                             pd->path ? show (pd->path).s : raw.s, off);
            return reader_fail (r);
        }
        const char *data = (const char *) r->tar + data_off;
        r->pos = data_off + padded (dsize);

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
                             pd->path ? show (pd->path).s : raw.s, off,
                             show ((char[]){ type, '\0' }).s);
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
                             show (r->name).s, off, KIWI_ARCHIVE_MAX_PATH);
            return reader_fail (r);
        }
        /* pre-POSIX archives mark directories with a trailing slash only */
        if (type == '\0' && r->name[strlen (r->name) - 1] == '/')
            t = KIWI_TAR_DIR;
        if ((t == KIWI_TAR_SYMLINK || t == KIWI_TAR_HARDLINK) && r->linkname[0] == '\0') {
            kiwi_error_make (err, 0, "archive entry `%s` at offset %zu: %s without a target", show (r->name).s, off,
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

/* -------------------------------------------------------------------------
 * Extraction, part one: the plan. Every entry is read, its name cleaned,
 * hardlinks resolved to earlier files' content, and the archive's own view
 * of each path kept in a table, so that names passing through an earlier
 * symlink or file are rejected before anything is written.
 */
typedef enum { OP_FILE, OP_DIR, OP_SYMLINK } op_kind;

typedef struct op {
    op_kind kind;
    char *path;          /* cleaned, relative, owned */
    char *raw;           /* the name as the archive gives it, owned (for messages) */
    char *target;        /* symlink text, owned */
    const void *data;    /* file content, inside the archive */
    size_t len;
    uint32_t mode;
    int64_t mtime;
    bool hardlink;
} op;

typedef struct plan {
    op *ops;
    size_t n, cap;
    size_t *slots;       /* hash table: index + 1 into ops of the latest op per path; 0 = empty */
    size_t nslots;       /* power of two */
    size_t used;
} plan;

static void
plan_clear (plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free (p->ops[i].path);
        free (p->ops[i].raw);
        free (p->ops[i].target);
    }
    free (p->ops);
    free (p->slots);
    memset (p, 0, sizeof *p);
}

static uint64_t
hash_str (const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char) s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* The slot for path[0..n): the one holding it, or the empty one where it goes. */
static size_t *
plan_slot (plan *p, const char *path, size_t n)
{
    size_t mask = p->nslots - 1;
    for (size_t i = (size_t) hash_str (path, n) & mask;; i = (i + 1) & mask) {
        size_t *s = &p->slots[i];
        if (*s == 0)
            return s;
        const char *k = p->ops[*s - 1].path;
        if (strncmp (k, path, n) == 0 && k[n] == '\0')
            return s;
    }
}

/* The latest op for path[0..n), or NULL. */
static op *
plan_find (plan *p, const char *path, size_t n)
{
    if (p->nslots == 0)
        return NULL;
    size_t *s = plan_slot (p, path, n);
    return *s ? &p->ops[*s - 1] : NULL;
}

static int
plan_index (plan *p, size_t idx, kiwi_error_t *err)
{
    if ((p->used + 1) * 2 > p->nslots) {
        size_t nn = p->nslots ? p->nslots * 2 : 256;
        size_t *old = p->slots;
        size_t on = p->nslots;
        p->slots = calloc (nn, sizeof *p->slots);
        if (p->slots == NULL) {
            p->slots = old;
            return kiwi_error_make (err, ENOMEM, "planning extraction");
        }
        p->nslots = nn;
        for (size_t i = 0; i < on; i++)
            if (old[i])
                *plan_slot (p, p->ops[old[i] - 1].path, strlen (p->ops[old[i] - 1].path)) = old[i];
        free (old);
    }
    const char *path = p->ops[idx].path;
    size_t *s = plan_slot (p, path, strlen (path));
    if (*s == 0)
        p->used++;
    *s = idx + 1;
    return 0;
}

static int
plan_push (plan *p, op *o, kiwi_error_t *err)
{
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 64;
        op *n = realloc (p->ops, nc * sizeof *n);
        if (n == NULL)
            return kiwi_error_make (err, ENOMEM, "planning extraction");
        p->ops = n;
        p->cap = nc;
    }
    p->ops[p->n] = *o;
    memset (o, 0, sizeof *o); /* now owned by the plan */
    p->n++;
    return plan_index (p, p->n - 1, err);
}

static void
op_clear (op *o)
{
    free (o->path);
    free (o->raw);
    free (o->target);
    memset (o, 0, sizeof *o);
}

/* Checks the archive's own view of the directories above `path`. */
static int
check_parents (plan *p, const char *path, const char *raw, kiwi_error_t *err)
{
    size_t depth = 0;
    for (const char *s = strchr (path, '/'); s; s = strchr (s + 1, '/')) {
        if (++depth >= KIWI_ARCHIVE_MAX_DEPTH)
            return kiwi_error_make (err, 0, "archive entry `%s`: deeper than %d levels", show (raw).s,
                                    KIWI_ARCHIVE_MAX_DEPTH);
        op *o = plan_find (p, path, (size_t) (s - path));
        if (o == NULL || o->kind == OP_DIR)
            continue;
        char *prefix = strndup (path, (size_t) (s - path));
        kiwi_error_make (err, 0, "archive entry `%s`: path passes through %s `%s` made by an earlier entry",
                         show (raw).s, o->kind == OP_SYMLINK ? "the symlink" : "the file",
                         show (prefix ? prefix : "?").s);
        free (prefix);
        return -1;
    }
    return 0;
}

typedef struct plan_ctx {
    plan *p;
    const kiwi_extract_opts *o;
    kiwi_archive_stats *st;
    size_t entries;
    uint64_t bytes;
} plan_ctx;

static int
plan_entry (const kiwi_tar_entry *e, void *userdata, kiwi_error_t *err)
{
    plan_ctx *c = userdata;
    if (++c->entries > c->o->max_entries)
        return kiwi_error_make (err, 0, "archive has more than %zu entries (the ceiling), at `%s`", c->o->max_entries,
                                show (e->name).s);
    op o;
    memset (&o, 0, sizeof o);
    if (kiwi__archive_clean_path (e->name, c->o->strip_components, &o.path, err) < 0)
        return -1;
    if (e->type == KIWI_TAR_CHAR || e->type == KIWI_TAR_BLOCK || e->type == KIWI_TAR_FIFO) {
        free (o.path);
        c->st->skipped++;
        return 0;
    }
    if (o.path == NULL) {
        /* the destination itself, or stripped away */
        c->st->ignored++;
        return 0;
    }
    int rc = -1;
    o.raw = strdup (e->name);
    if (o.raw == NULL) {
        kiwi_error_make (err, ENOMEM, "archive entry `%s`", show (e->name).s);
        goto out;
    }
    if (check_parents (c->p, o.path, e->name, err) < 0)
        goto out;
    op *prev = plan_find (c->p, o.path, strlen (o.path));
    o.mode = e->mode & 0777;
    o.mtime = e->mtime;
    switch (e->type) {
    case KIWI_TAR_FILE:
        o.kind = OP_FILE;
        o.data = e->data;
        o.len = e->size;
        break;
    case KIWI_TAR_DIR:
        o.kind = OP_DIR;
        break;
    case KIWI_TAR_SYMLINK:
        o.kind = OP_SYMLINK;
        o.target = strdup (e->linkname);
        if (o.target == NULL) {
            kiwi_error_make (err, ENOMEM, "archive entry `%s`", show (e->name).s);
            goto out;
        }
        break;
    case KIWI_TAR_HARDLINK: {
        cleanup_free char *target = NULL;
        if (kiwi__archive_clean_path (e->linkname, c->o->strip_components, &target, err) < 0) {
            kiwi_error_wrap (err, "hardlink `%s`", show (e->name).s);
            goto out;
        }
        op *t = target ? plan_find (c->p, target, strlen (target)) : NULL;
        if (t == NULL || t->kind != OP_FILE) {
            kiwi_error_make (err, 0,
                             "archive entry `%s`: hardlink to `%s`, which is not a regular file extracted earlier "
                             "from this archive",
                             show (e->name).s, show (e->linkname).s);
            goto out;
        }
        o.kind = OP_FILE;
        o.hardlink = true;
        o.data = t->data;
        o.len = t->len;
        o.mode = t->mode;
        break;
    }
    default:
        kiwi_error_make (err, 0, "archive entry `%s`: unexpected type", show (e->name).s);
        goto out;
    }
    if (prev && (prev->kind == OP_DIR) != (o.kind == OP_DIR)) {
        kiwi_error_make (err, 0, "archive entry `%s`: a %s replaces the %s an earlier entry made",
                         show (e->name).s, o.kind == OP_DIR ? "directory" : "non-directory",
                         prev->kind == OP_DIR ? "directory" : "non-directory");
        goto out;
    }
    if (o.kind == OP_FILE) {
        if (o.len > c->o->max_bytes || c->bytes > c->o->max_bytes - o.len) {
            kiwi_error_make (err, 0, "archive content exceeds the ceiling of %zu bytes at `%s`", c->o->max_bytes,
                             show (e->name).s);
            goto out;
        }
        c->bytes += o.len;
    }
    rc = plan_push (c->p, &o, err);
out:
    op_clear (&o);
    return rc;
}

/* -------------------------------------------------------------------------
 * Extraction, part two: executing the plan with descriptor-relative calls.
 */

/* Explains why component `comp` of `path` could not be opened as a directory. */
static int
not_a_dir_error (int dfd, const char *comp, const char *path, size_t plen, const char *raw, int e, kiwi_error_t *err)
{
    struct stat st;
    char *prefix = strndup (path, plen);
    const char *pp = prefix ? prefix : comp;
    if (fstatat (dfd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (st.st_mode))
        kiwi_error_make (err, 0, "archive entry `%s`: path passes through the symlink `%s`", show (raw).s,
                         show (pp).s);
    else if (e == ENOTDIR || e == ELOOP)
        kiwi_error_make (err, 0, "archive entry `%s`: `%s` is not a directory", show (raw).s, show (pp).s);
    else
        kiwi_error_make (err, e, "archive entry `%s`: opening `%s`", show (raw).s, show (pp).s);
    free (prefix);
    return -1;
}

/* Opens the directory that will hold the last component of `path`, walking
 * from `root` one component at a time with O_NOFOLLOW | O_DIRECTORY and
 * making missing directories (0755). Returns the descriptor (which may be
 * `root` itself: compare before closing) and sets *leaf into `path`. With
 * `whole`, the last component is opened too (for directories). */
static int
open_walk (int root, const char *path, bool whole, const char *raw, const char **leaf, kiwi_error_t *err)
{
    int cur = root;
    const char *p = path;
    for (;;) {
        const char *slash = strchr (p, '/');
        if (slash == NULL && !whole) {
            *leaf = p;
            return cur;
        }
        size_t n = slash ? (size_t) (slash - p) : strlen (p);
        char comp[NAME_MAX + 1];
        if (n > NAME_MAX) {
            if (cur != root)
                close (cur);
            return kiwi_error_make (err, ENAMETOOLONG, "archive entry `%s`", show (raw).s);
        }
        memcpy (comp, p, n);
        comp[n] = '\0';
        int next = -1;
        for (int attempt = 0; attempt < 2 && next < 0; attempt++) {
            next = openat (cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (next >= 0 || errno != ENOENT || attempt == 1)
                break;
            if (mkdirat (cur, comp, 0755) < 0 && errno != EEXIST)
                break;
        }
        if (next < 0) {
            int e = errno;
            not_a_dir_error (cur, comp, path, (size_t) (p - path) + n, raw, e, err);
            if (cur != root)
                close (cur);
            return -1;
        }
        if (cur != root)
            close (cur);
        cur = next;
        if (slash == NULL) {
            *leaf = p + n;
            return cur;
        }
        p = slash + 1;
    }
}

static void
close_walk (int fd, int root)
{
    if (fd >= 0 && fd != root)
        close (fd);
}

static int
write_all (int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write (fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        data += n;
        len -= (size_t) n;
    }
    return 0;
}

/* Removes a non-directory at leaf so a new entry can take its name. */
static int
replace_leaf (int dfd, const char *leaf, const op *o, kiwi_error_t *err)
{
    struct stat st;
    if (fstatat (dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : kiwi_error_make (err, errno, "archive entry `%s`", show (o->raw).s);
    if (S_ISDIR (st.st_mode))
        return kiwi_error_make (err, 0, "archive entry `%s`: a directory already exists at this path",
                                show (o->raw).s);
    if (unlinkat (dfd, leaf, 0) < 0 && errno != ENOENT)
        return kiwi_error_make (err, errno, "archive entry `%s`: removing the existing file", show (o->raw).s);
    return 0;
}

static int
do_file (int dfd, const char *leaf, const op *o, const kiwi_extract_opts *opts, kiwi_error_t *err)
{
    cleanup_close int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
        fd = openat (dfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST || attempt == 1)
            break;
        if (replace_leaf (dfd, leaf, o, err) < 0)
            return -1;
    }
    if (fd < 0)
        return kiwi_error_make (err, errno, "archive entry `%s`: creating the file", show (o->raw).s);
    if (write_all (fd, o->data, o->len) < 0)
        return kiwi_error_make (err, errno, "archive entry `%s`: writing", show (o->raw).s);
    if (fchmod (fd, o->mode & 0777) < 0)
        return kiwi_error_make (err, errno, "archive entry `%s`: setting the mode", show (o->raw).s);
    if (opts->preserve_mtime) {
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t) o->mtime } };
        if (futimens (fd, ts) < 0)
            return kiwi_error_make (err, errno, "archive entry `%s`: setting the mtime", show (o->raw).s);
    }
    if (close (get_and_reset (&fd)) < 0)
        return kiwi_error_make (err, errno, "archive entry `%s`: closing", show (o->raw).s);
    return 0;
}

static int
do_symlink (int dfd, const char *leaf, const op *o, const kiwi_extract_opts *opts, kiwi_error_t *err)
{
    int rc = -1;
    for (int attempt = 0; attempt < 2 && rc < 0; attempt++) {
        rc = symlinkat (o->target, dfd, leaf);
        if (rc == 0 || errno != EEXIST || attempt == 1)
            break;
        if (replace_leaf (dfd, leaf, o, err) < 0)
            return -1;
    }
    if (rc < 0)
        return kiwi_error_make (err, errno, "archive entry `%s`: creating the symlink", show (o->raw).s);
    if (opts->preserve_mtime) {
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t) o->mtime } };
        if (utimensat (dfd, leaf, ts, AT_SYMLINK_NOFOLLOW) < 0)
            return kiwi_error_make (err, errno, "archive entry `%s`: setting the mtime", show (o->raw).s);
    }
    return 0;
}

static int
do_dir (int dfd, const char *leaf, const op *o, kiwi_error_t *err)
{
    if (mkdirat (dfd, leaf, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "archive entry `%s`: making the directory", show (o->raw).s);
    int fd = openat (dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        if (fstatat (dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (st.st_mode))
            return kiwi_error_make (err, 0, "archive entry `%s`: a symlink already exists at this path",
                                    show (o->raw).s);
        if (e == ENOTDIR || e == ELOOP)
            return kiwi_error_make (err, 0, "archive entry `%s`: a non-directory already exists at this path",
                                    show (o->raw).s);
        return kiwi_error_make (err, e, "archive entry `%s`: opening the directory", show (o->raw).s);
    }
    /* writable while extracting; the final mode comes at the end */
    struct stat st;
    int rc = 0;
    if (fstat (fd, &st) < 0 || ((st.st_mode & 0700) != 0700 && fchmod (fd, (st.st_mode & 0777) | 0700) < 0))
        rc = kiwi_error_make (err, errno, "archive entry `%s`: making the directory writable", show (o->raw).s);
    close (fd);
    return rc;
}

typedef struct dir_fix {
    size_t depth;
    size_t idx;
} dir_fix;

static int
dir_fix_cmp (const void *a, const void *b)
{
    const dir_fix *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth > y->depth ? -1 : 1;
    return x->idx > y->idx ? -1 : x->idx < y->idx;
}

/* Gives each directory of the plan its final mode (and mtime), deepest
 * first so that a parent without search permission comes last, using only
 * the op that is the archive's last word on that path. */
static int
finish_dirs (plan *p, int root, const kiwi_extract_opts *opts, kiwi_error_t *err)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        n += p->ops[i].kind == OP_DIR;
    if (n == 0)
        return 0;
    cleanup_free dir_fix *fix = calloc (n, sizeof *fix);
    if (fix == NULL)
        return kiwi_error_make (err, ENOMEM, "setting directory modes");
    n = 0;
    for (size_t i = 0; i < p->n; i++) {
        op *o = &p->ops[i];
        if (o->kind != OP_DIR || plan_find (p, o->path, strlen (o->path)) != o)
            continue;
        size_t depth = 0;
        for (const char *c = o->path; *c; c++)
            depth += *c == '/';
        fix[n++] = (dir_fix){ depth, i };
    }
    qsort (fix, n, sizeof *fix, dir_fix_cmp);
    for (size_t k = 0; k < n; k++) {
        op *o = &p->ops[fix[k].idx];
        const char *leaf;
        int fd = open_walk (root, o->path, true, o->raw, &leaf, err);
        if (fd < 0)
            return -1;
        int rc = 0;
        if (fchmod (fd, o->mode & 0777) < 0)
            rc = kiwi_error_make (err, errno, "archive entry `%s`: setting the mode", show (o->raw).s);
        if (rc == 0 && opts->preserve_mtime) {
            struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t) o->mtime } };
            if (futimens (fd, ts) < 0)
                rc = kiwi_error_make (err, errno, "archive entry `%s`: setting the mtime", show (o->raw).s);
        }
        close_walk (fd, root);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int
kiwi_archive_extract (const void *tar, size_t len, const char *dest_dir, const kiwi_extract_opts *opts,
                      kiwi_extract_stats *stats, kiwi_error_t *err)
{
    kiwi_extract_opts o;
    memset (&o, 0, sizeof o);
    if (opts)
        o = *opts;
    if (o.max_bytes == 0)
        o.max_bytes = KIWI_ARCHIVE_DEFAULT_MAX_BYTES;
    if (o.max_entries == 0)
        o.max_entries = KIWI_ARCHIVE_DEFAULT_MAX_ENTRIES;
    kiwi_archive_stats local;
    kiwi_archive_stats *st = stats ? stats : &local;
    memset (st, 0, sizeof *st);

    plan p;
    memset (&p, 0, sizeof p);
    plan_ctx c = { .p = &p, .o = &o, .st = st };
    if (kiwi_archive_list (tar, len, plan_entry, &c, err) < 0) {
        plan_clear (&p);
        return kiwi_error_wrap (err, "extracting into `%s`", dest_dir);
    }

    int root = open (dest_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        plan_clear (&p);
        return kiwi_error_make (err, errno, "opening the extraction directory `%s`", dest_dir);
    }
    int rc = 0;
    for (size_t i = 0; i < p.n && rc == 0; i++) {
        op *op_ = &p.ops[i];
        const char *leaf;
        int dfd = open_walk (root, op_->path, false, op_->raw, &leaf, err);
        if (dfd < 0) {
            rc = -1;
            break;
        }
        switch (op_->kind) {
        case OP_FILE:
            rc = do_file (dfd, leaf, op_, &o, err);
            if (rc == 0) {
                if (op_->hardlink)
                    st->hardlinks++;
                else
                    st->files++;
                st->bytes += op_->len;
            }
            break;
        case OP_DIR:
            rc = do_dir (dfd, leaf, op_, err);
            if (rc == 0)
                st->dirs++;
            break;
        case OP_SYMLINK:
            rc = do_symlink (dfd, leaf, op_, &o, err);
            if (rc == 0)
                st->symlinks++;
            break;
        }
        close_walk (dfd, root);
    }
    if (rc == 0)
        rc = finish_dirs (&p, root, &o, err);
    close (root);
    plan_clear (&p);
    if (rc < 0)
        return kiwi_error_wrap (err, "extracting into `%s`", dest_dir);
    return 0;
}

/* ----- the meter: a tar stream's size as it arrives ----- */


#define METER_SIZE_MAX (UINT64_C (1) << 50)

static uint64_t
meter_size_field (const unsigned char *f, size_t n)
{
    uint64_t v = 0;
    if (f[0] & 0x80) { /* base-256 */
        for (size_t i = 1; i < n; i++) {
            if (v >> 50)
                return METER_SIZE_MAX;
            v = (v << 8) | f[i];
        }
        return v;
    }
    size_t i = 0;
    while (i < n && f[i] == ' ')
        i++;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++)
        v = v * 8 + (uint64_t) (f[i] - '0');
    return v;
}

/* The `size=` record of a pax header's first bytes, if there is one. */
static bool
pax_find_size (const char *p, size_t n, uint64_t *out)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        uint64_t len = 0;
        while (j < n && p[j] >= '0' && p[j] <= '9')
            len = len * 10 + (uint64_t) (p[j++] - '0');
        if (j >= n || p[j] != ' ' || len == 0 || len > n - i)
            return false;
        const char *kv = p + j + 1, *end = p + i + len;
        if ((size_t) (end - kv) > 5 && memcmp (kv, "size=", 5) == 0) {
            uint64_t v = 0;
            for (const char *q = kv + 5; q < end && *q >= '0' && *q <= '9'; q++)
                v = v > METER_SIZE_MAX ? METER_SIZE_MAX : v * 10 + (uint64_t) (*q - '0');
            *out = v;
            return true;
        }
        i += len;
    }
    return false;
}

static void
meter_header (kiwi_tar_meter *m)
{
    bool zero = true;
    for (size_t i = 0; i < 512 && zero; i++)
        zero = m->hdr[i] == 0;
    if (zero) { /* an end-of-archive block */
        m->next_header += 512;
        m->body_end = m->next_header;
        return;
    }
    char type = (char) m->hdr[156];
    uint64_t size = meter_size_field (m->hdr + 124, 12);
    bool meta = type == 'x' || type == 'g' || type == 'L' || type == 'K';
    if (!meta && m->pax_size_set && m->pax_size > size)
        size = m->pax_size;
    if (!meta)
        m->pax_size_set = false;
    m->in_pax = type == 'x';
    m->pax_fill = 0;
    if (size > METER_SIZE_MAX) /* more than any ceiling: the count says so, the stream stops */
        size = METER_SIZE_MAX;
    m->announced += size;
    m->body_end = m->next_header + 512 + size;
    m->next_header = m->next_header + 512 + (size + 511) / 512 * 512;
}

void
kiwi_tar_meter_feed (kiwi_tar_meter *m, const void *bytes, size_t len)
{
    const char *data = bytes;
    while (len > 0) {
        if (m->pos >= m->next_header && m->pos < m->next_header + 512) {
            size_t want = 512 - m->hdr_fill, take = len < want ? len : want;
            memcpy (m->hdr + m->hdr_fill, data, take);
            m->hdr_fill += take;
            m->pos += take;
            data += take;
            len -= take;
            if (m->hdr_fill == 512) {
                m->hdr_fill = 0;
                meter_header (m);
            }
            continue;
        }
        uint64_t until = m->next_header - m->pos;
        size_t take = until < len ? (size_t) until : len;
        if (m->in_pax && m->pos < m->body_end) {
            uint64_t body_left = m->body_end - m->pos;
            size_t room = sizeof m->pax - m->pax_fill;
            size_t copy = take < body_left ? take : (size_t) body_left;
            copy = copy < room ? copy : room;
            memcpy (m->pax + m->pax_fill, data, copy);
            m->pax_fill += copy;
            if (m->pos + take >= m->body_end || m->pax_fill == sizeof m->pax) {
                uint64_t v;
                if (pax_find_size (m->pax, m->pax_fill, &v)) {
                    m->pax_size_set = true;
                    m->pax_size = v;
                }
                m->in_pax = false;
            }
        }
        m->pos += take;
        data += take;
        len -= take;
    }
}

void
kiwi_tar_meter_init (kiwi_tar_meter *m)
{
    memset (m, 0, sizeof *m);
}

uint64_t
kiwi_tar_meter_size (const kiwi_tar_meter *m)
{
    return m->pos > m->announced ? m->pos : m->announced;
}
